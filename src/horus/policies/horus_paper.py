"""``horus-paper``: the original Horus rule -- look-ahead over the first K queued jobs with the placement cost
from predicted utilization, memory and co-runners (summed predicted utilization under a cap). Kept for
reference; ``horus`` (``horus_adaptive``) co-locates only where predicted gain and avoided wait pay."""

from __future__ import annotations

from itertools import islice
from typing import Any

from horus.policies.base import POLICIES, Action, Policy, Start
from horus.policies.parts.ordered import Placement
from horus.policies.placements.horus import HorusPlacement
from horus.predict.base import Prediction
from horus.state import GPULoad, PlanMemo, QueuedJob, SchedulerState, gpu_share

Choice = tuple[tuple[int, ...], float] | None


@POLICIES.register("horus-paper")
class HorusPolicy(Policy):
    """Look at the first ``lookahead`` queued jobs (FIFO order); repeatedly start the (job, GPUs) pair
    of lowest cost per worker among them, refilling the window from the queue, until none fits.

    Aging: each time a job is started ahead of the current head (oldest waiting job), the head's
    bypass count grows; past ``max_bypass`` only the head may start (the window blocks until it fits),
    so no job starves. A call may start many jobs. Calls are cheap when nothing changed: jobs found
    unplaceable are remembered until the cluster load changes, and jobs the placement's ``possible``
    rules out (fewer than k GPUs could take them) are not evaluated.
    """

    colocates = True

    name = "horus-paper"

    def __init__(self, *, lookahead: int = 64, max_bypass: int = 1024, util_cap: float = 1.0,
                 mem_margin: float = 0.05, max_residents: int = 4, weights: dict[str, float] | None = None,
                 placement: HorusPlacement | None = None) -> None:
        if lookahead < 1 or max_bypass < 0:
            raise ValueError("lookahead must be >= 1 and max_bypass >= 0")
        self.lookahead = lookahead
        self.max_bypass = max_bypass
        self.placement = placement or HorusPlacement(util_cap=util_cap, mem_margin=mem_margin,
                                                     max_residents=max_residents, weights=weights)
        self.bypassed: dict[str, int] = {}
        self._blocked: PlanMemo[frozenset[str]] = PlanMemo(frozenset())  # jobs unplaceable under the planned load

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "oracle": self.is_oracle, "lookahead": self.lookahead,
                "max_bypass": self.max_bypass, **self.placement.describe()}

    # ---- hooks the oracle overrides ------------------------------------------------------------
    def node_placement(self) -> Placement | None:
        """The paper's rule decides one job by ``placement.evaluate`` (subclasses that change how a job is
        chosen or loaded, such as ``horus-iasp``, return None)."""
        return self.placement

    def planning_load(self, state: SchedulerState) -> GPULoad:
        """The load to plan on; ``state.load`` itself is returned and copied on first write."""
        return state.load

    def job_load(self, job: QueuedJob, gpu: int, state: SchedulerState) -> Prediction:
        return state.predict(job.spec, state.cluster.gpus[gpu].gpu_type)

    def choose(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> Choice:
        return self.placement.evaluate(job, load, state)

    kind_choose = choose  # a ``choose`` that reads a job only through ``_kind`` (subclasses: their own, if so)

    def note_start(self, job: QueuedJob, gpus: tuple[int, ...], state: SchedulerState) -> None:
        """Called for each planned start (the oracle tracks co-runner types)."""

    # ---- scheduling ----------------------------------------------------------------------------
    def schedule(self, state: SchedulerState) -> list[Action]:
        if not state.queue:
            return []
        blocked = self._blocked.recall(state)
        queue_iter = iter(state.queue.values())
        window = list(islice(queue_iter, self.lookahead))
        if blocked and blocked.issuperset([job.spec.job_id for job in window]):
            self._blocked.renew(state)
            return []
        load = self.planning_load(state)
        placement = self.placement
        placement.begin(load, state)
        if not placement.any_room():
            self._remember(state, window)
            return []
        # The placeable jobs of the window with their choice, in window order (ties: first wins).
        live: dict[str, tuple[QueuedJob, tuple[tuple[int, ...], float]]] = {}
        fresh = [job for job in window if job.spec.job_id not in blocked] if blocked else window
        self._choose_into(live, fresh, load, state)
        started: list[tuple[QueuedJob, tuple[int, ...]]] = []
        while window:
            head = window[0]
            if self.bypassed.get(head.spec.job_id, 0) > self.max_bypass:
                pick = live.get(head.spec.job_id)  # aging: only the head may start
            else:
                pick = min(live.values(), key=lambda entry: entry[1][1], default=None)
            if pick is None:
                break
            best, (gpus, _) = pick
            del live[best.spec.job_id]
            started.append((best, gpus))
            self.note_start(best, gpus, state)
            del window[next(i for i, job in enumerate(window) if job is best)]  # by identity: no dataclass ==
            self.bypassed.pop(best.spec.job_id, None)
            if best is not head:
                self.bypassed[head.spec.job_id] = self.bypassed.get(head.spec.job_id, 0) + 1
            refill = next(queue_iter, None)
            if refill is not None:
                window.append(refill)
            if not window:
                break  # nothing left to plan: the planned load is not needed
            if load is state.load:
                load = load.copy()  # copy on first write
            load.add(gpus, self.job_load(best, gpus[0], state), gpu_share(best.spec))
            placement.update_added(load, state, gpus)
            if not placement.any_room():
                break
            # Only choices that used the GPUs just loaded can have changed (a job that did not fit
            # still does not: load only grew), plus the job that refilled the window.
            touched = set(gpus)
            stale = [job for job, choice in live.values() if not touched.isdisjoint(choice[0])]
            if refill is not None:
                stale.append(refill)
            if stale:
                self._choose_into(live, stale, load, state)
        self._remember(state, window)
        return [Start(job.spec.job_id, gpus) for job, gpus in started]

    def _choose_into(self, live: dict[str, tuple[QueuedJob, tuple[tuple[int, ...], float]]],
                     jobs: list[QueuedJob], load: GPULoad, state: SchedulerState) -> None:
        """(Re-)evaluate ``jobs`` on ``load``; keep those that fit in ``live`` (in place), drop the rest."""
        admitted = self.placement.possible(jobs, load, state).tolist()
        fast = self._fast_choices(jobs, admitted, load, state)
        kinds: dict[tuple[object, ...], Choice] | None = {} if self._choice_by_kind() else None
        for i, (job, ok) in enumerate(zip(jobs, admitted)):
            if i in fast:
                choice = fast[i]
            elif not ok:
                choice = None
            elif kinds is None:
                choice = self.choose(job, load, state)
            else:  # jobs alike get the same choice on the same load: one evaluation per kind
                kind = self._kind(job, state)
                choice = kinds[kind] if kind in kinds else kinds.setdefault(kind, self.choose(job, load, state))
            if choice is None:
                live.pop(job.spec.job_id, None)
            else:
                live[job.spec.job_id] = (job, choice)

    def _choice_by_kind(self) -> bool:
        """Whether ``choose`` depends on a job only through ``_kind``: true of this class's and of the classes that
        declare theirs so (``kind_choose``), with the placement's own scoring."""
        placement = self.placement
        return (type(self).choose is type(self).kind_choose and type(placement).evaluate is HorusPlacement.evaluate
                and type(placement).cost_per_gpu is HorusPlacement.cost_per_gpu)

    def _kind(self, job: QueuedJob, state: SchedulerState) -> tuple[object, ...]:
        """What the choice of ``job`` reads: type, GPUs, requested GPU type, an earlier out-of-memory failure and
        the placement's load of it on each GPU type."""
        spec = job.spec
        return (spec.job_type, spec.num_gpus, spec.gpu_type_request, job.oom_failures > 0,
                *((p.util, p.mem_mib) for p in self.placement.job_loads(job, state)))

    def _fast_choices(self, jobs: list[QueuedJob], admitted: list[bool], load: GPULoad,
                      state: SchedulerState) -> dict[int, tuple[tuple[int, ...], float]]:
        """``choose`` of the admitted jobs the placement's idle fast path decides, at once (position -> choice);
        only where ``choose`` is this class's and the placement's ``evaluate`` is ``HorusPlacement``'s."""
        placement = self.placement
        if type(self).choose is not HorusPolicy.choose or type(placement).evaluate is not HorusPlacement.evaluate \
                or type(placement)._idle_fast_path is not HorusPlacement._idle_fast_path:
            return {}
        return placement.idle_fast_choices(jobs, admitted, load, state)

    def _remember(self, state: SchedulerState, waiting: list[QueuedJob]) -> None:
        """The jobs that could not start under the planned load (trusted while the load stays as planned)."""
        self._blocked.remember(state, frozenset(job.spec.job_id for job in waiting))
        if len(self.bypassed) > 4 * len(state.queue) + 1024:
            self.bypassed = {jid: n for jid, n in self.bypassed.items() if jid in state.queue}
