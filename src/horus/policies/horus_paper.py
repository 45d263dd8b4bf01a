"""``horus-paper``: the original Horus rule -- look-ahead over the first K queued jobs with the placement cost
from predicted utilization, memory and co-runners (summed predicted utilization under a cap). Kept for
reference; ``horus`` (``horus_adaptive``) co-locates only where predicted gain and avoided wait pay. Under a tenancy,
a fractional pod within its queue's guarantee that the rule refuses is placed by its request, as in ``horus``
(``parts/by_request.py``)."""

from __future__ import annotations

import math
from itertools import compress, islice
from typing import Any

import numpy as np

from horus.policies.base import POLICIES, Action, Policy, Start
from horus.policies.parts.by_request import place_by_request
from horus.policies.parts.cluster_index import cluster_index
from horus.policies.parts.fit_counts import FitCounts
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
    rules out (fewer than k GPUs could take them) are not evaluated. Those GPU counts are kept across calls
    (``FitCounts``, redone for the GPUs whose load changed): a call whose window jobs are all ruled out
    returns before building the window.
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
        self.max_residents = self.placement.max_residents  # what the core reads (wait reasons, a tenancy's slots)
        self.bypassed: dict[str, int] = {}
        self._blocked: PlanMemo[frozenset[str]] = PlanMemo(frozenset())  # jobs unplaceable under the planned load
        self._fit_counts: FitCounts | None = None  # ``_admitted``: per window job, the GPUs that could take it

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
        started, load = self._by_rule(state)
        started += self._by_request(state, load, {job.spec.job_id for job, _ in started})
        return [Start(job.spec.job_id, gpus) for job, gpus in started]

    def _by_request(self, state: SchedulerState, load: GPULoad,
                    started: set[str]) -> list[tuple[QueuedJob, tuple[int, ...]]]:
        """Under a tenancy, the first ``lookahead`` waiting jobs that are one-GPU pods requesting a fraction within
        their queue's guarantee (``QueuedJob.within_guarantee``) and that the rule left waiting, in queue order, each
        placed by its request on ``load`` (the rule's plan; ``parts.by_request.place_by_request``, the placement's
        ``mem_margin`` and ``max_residents``), as the adaptive ``horus`` does: refused for predicted utilization, such
        pods kept ``BE`` at 0.735 of its guarantee on openb's 1 % cell (docs/tenancy.md). Without a tenancy no job is
        marked and nothing changes."""
        out: list[tuple[QueuedJob, tuple[int, ...]]] = []
        placement = self.placement
        for job in islice(state.queue.values(), self.lookahead):
            if not job.within_guarantee or job.spec.job_id in started:
                continue
            gpus = place_by_request(job, load, state, cluster_index(state.cluster),
                                    max_residents=placement.max_residents, mem_margin=placement.mem_margin)
            if gpus is None:
                continue
            out.append((job, gpus))
            self.note_start(job, gpus, state)
            self.bypassed.pop(job.spec.job_id, None)
            if load is state.load:
                load = load.copy()
            load.add(gpus, self.job_load(job, gpus[0], state), gpu_share(job.spec))
        return out

    def _by_rule(self, state: SchedulerState) -> tuple[list[tuple[QueuedJob, tuple[int, ...]]], GPULoad]:
        """The paper's rule over the look-ahead window: the planned starts and the load they leave (``state.load``
        itself where none; without the last start when it emptied the window, as then no queued job of the first
        ``lookahead`` is left for ``_by_request`` to place)."""
        blocked = self._blocked.recall(state)
        if blocked and blocked.issuperset(islice(state.queue, self.lookahead)):  # the queue is keyed by job id
            self._blocked.renew(state)
            return [], state.load
        queue_iter = iter(state.queue.values())
        window = list(islice(queue_iter, self.lookahead))
        load = self.planning_load(state)
        placement = self.placement
        admitted = self._admitted(window, load, state)
        if admitted is not None and not admitted.any():  # every job refused: the window would start none
            self._remember(state, window)
            return [], state.load
        placement.begin(load, state)
        if not placement.any_room():
            self._remember(state, window)
            return [], state.load
        plan = _Window(self, load, state, window, blocked, admitted)
        started: list[tuple[QueuedJob, tuple[int, ...]]] = []
        while plan.waiting:
            head = plan.head()
            if self.bypassed.get(head.spec.job_id, 0) > self.max_bypass:
                at = plan.head_seq if plan.alive[plan.head_seq] else -1  # aging: only the head may start
            else:
                at = plan.best()
            if at < 0:
                break
            best, gpus = plan.start(at)
            started.append((best, gpus))
            self.note_start(best, gpus, state)
            self.bypassed.pop(best.spec.job_id, None)
            if best is not head:
                self.bypassed[head.spec.job_id] = self.bypassed.get(head.spec.job_id, 0) + 1
            refill = next(queue_iter, None)
            if refill is not None:
                plan.append(refill)
            if not plan.waiting:
                break  # nothing left to plan: the planned load is not needed
            if load is state.load:
                load = plan.load = load.copy()  # copy on first write
            load.add(gpus, self.job_load(best, gpus[0], state), gpu_share(best.spec))
            placement.update_added(load, state, gpus)
            if not placement.any_room():
                break
            # Only choices that used the GPUs just loaded can have changed (a job that did not fit
            # still does not: load only grew), plus the job that refilled the window.
            plan.choose(plan.stale(gpus, refill is not None))
        self._remember_ids(state, plan.waiting_ids())
        return started, load

    def _admitted(self, window: list[QueuedJob], load: GPULoad, state: SchedulerState) -> np.ndarray | None:
        """The placement's ``possible_rows`` of the ``window`` jobs on ``load`` (the window's first ``choose`` asks
        the same), counted only over the GPUs whose load changed since the last look (``FitCounts``); None where not
        counted: a placement other than ``HorusPlacement``'s own ``possible``, one not begun on this state, or no
        room at all (``any_room`` false: the call returns before the window asks for the rows)."""
        placement = self.placement
        if self._fit_counts is None:
            self._fit_counts = placement.fit_counts()
            if self._fit_counts is None:
                return None
        if not placement.begun_on(state):
            return None
        capacity = state.mem_capacity_mib
        rows = placement.table.last(window)  # the window the last call looked at: its rows, as ``requests`` gives
        if rows is None:
            if not self._fit_counts.room(load, capacity):
                return None
            rows = placement.requests(window, state)  # the call the window makes next
        return self._fit_counts.admitted(window, rows, load, capacity)

    def _choose_into(self, live: dict[str, tuple[QueuedJob, tuple[tuple[int, ...], float]]],
                     jobs: list[QueuedJob], load: GPULoad, state: SchedulerState) -> None:
        """(Re-)evaluate ``jobs`` on ``load``; keep those that fit in ``live`` (in place), drop the rest."""
        rows = self.placement.requests(jobs, state)
        for i, choice in enumerate(self._choices(jobs, rows, load, state)):
            if choice is None:
                live.pop(jobs[i].spec.job_id, None)
            else:
                live[jobs[i].spec.job_id] = (jobs[i], choice)

    def _choices(self, jobs: list[QueuedJob], rows: np.ndarray, load: GPULoad, state: SchedulerState,
                 admitted: list[bool] | None = None,
                 kind_memo: dict[str, tuple[object, ...]] | None = None) -> list[Choice]:
        """``choose`` of each of ``jobs`` (their ``requests`` rows given) on ``load``, None where it does not fit:
        jobs ``possible`` rules out are not evaluated, those the idle fast path decides are decided at once, and
        jobs alike (``_kind``) are evaluated once where ``choose`` allows. ``admitted``: ``possible`` of the jobs
        where the caller has it and has decided the fast path's jobs itself (none of ``jobs`` takes it). ``kind_memo``:
        job id -> ``_kind``, kept by a caller that evaluates the same jobs on the same state again (one call's window:
        a job's kind reads only the job and the state's predictions, which do not change within a call)."""
        placement = self.placement
        if admitted is not None:
            fast: dict[int, tuple[tuple[int, ...], float]] = {}
        else:
            if type(placement).possible is Placement.possible:
                admitted = placement.possible_rows(rows, load, state).tolist()
            else:
                admitted = placement.possible(jobs, load, state).tolist()
            fast = self._fast_choices(jobs, rows, admitted, load, state)
        kinds: dict[tuple[object, ...], Choice] | None = {} if self._choice_by_kind() else None
        if kinds is None or type(self)._choose_kinds is HorusPolicy._choose_kinds:
            out: list[Choice] = []
            for i, (job, ok) in enumerate(zip(jobs, admitted)):
                if i in fast:
                    choice = fast[i]
                elif not ok:
                    choice = None
                elif kinds is None:
                    choice = self.choose(job, load, state)
                else:  # jobs alike get the same choice on the same load: one evaluation per kind
                    if kind_memo is None:
                        kind = self._kind(job, state)
                    else:
                        kind = kind_memo.get(job.spec.job_id)
                        if kind is None:
                            kind = kind_memo[job.spec.job_id] = self._kind(job, state)
                    choice = kinds[kind] if kind in kinds else kinds.setdefault(kind, self.choose(job, load, state))
                out.append(choice)
            return out
        # a subclass decides some kinds together (``_choose_kinds``): every job's kind first
        of_job: list[tuple[object, ...] | None] = []
        for i, (job, ok) in enumerate(zip(jobs, admitted)):
            if i in fast or not ok:
                of_job.append(None)
            elif kind_memo is None:
                of_job.append(self._kind(job, state))
            else:
                kind = kind_memo.get(job.spec.job_id)
                if kind is None:
                    kind = kind_memo[job.spec.job_id] = self._kind(job, state)
                of_job.append(kind)
        firsts: dict[tuple[object, ...], QueuedJob] = {}
        for job, kind in zip(jobs, of_job):
            if kind is not None and kind not in firsts:
                firsts[kind] = job
        if len(firsts) > 1:
            kinds.update(self._choose_kinds(firsts, load, state))
        out = []
        for i, (job, kind) in enumerate(zip(jobs, of_job)):
            if i in fast:
                choice = fast[i]
            elif kind is None:
                choice = None
            else:  # jobs alike get the same choice on the same load: one evaluation per kind
                choice = kinds[kind] if kind in kinds else kinds.setdefault(kind, self.choose(job, load, state))
            out.append(choice)
        return out

    def _choose_kinds(self, firsts: dict[tuple[object, ...], QueuedJob], load: GPULoad,
                      state: SchedulerState) -> dict[tuple[object, ...], Choice]:
        """``choose`` of some of the jobs ``firsts`` (one per kind), decided together where a subclass can do so more
        cheaply, with the same choices as one by one; kinds left out are chosen one by one (here: all of them)."""
        return {}

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

    def _fast_path(self) -> bool:
        """Whether ``choose`` is this class's and the placement's ``evaluate`` ``HorusPlacement``'s (then the idle
        fast path may decide jobs at once)."""
        placement = self.placement
        return not (type(self).choose is not HorusPolicy.choose or type(placement).evaluate is not HorusPlacement.evaluate
                    or type(placement)._idle_fast_path is not HorusPlacement._idle_fast_path)

    def _fast_choices(self, jobs: list[QueuedJob], rows: np.ndarray, admitted: list[bool], load: GPULoad,
                      state: SchedulerState) -> dict[int, tuple[tuple[int, ...], float]]:
        """``choose`` of the admitted jobs the placement's idle fast path decides, at once (position -> choice);
        only where ``_fast_path``."""
        placement = self.placement
        if not self._fast_path():
            return {}
        return placement.idle_fast_choices(jobs, admitted, load, state, rows=rows)

    def _remember(self, state: SchedulerState, waiting: list[QueuedJob]) -> None:
        """The jobs that could not start under the planned load (trusted while the load stays as planned)."""
        self._remember_ids(state, frozenset(job.spec.job_id for job in waiting))

    def _remember_ids(self, state: SchedulerState, waiting: frozenset[str]) -> None:
        """``_remember`` given the waiting jobs' ids."""
        self._blocked.remember(state, waiting)
        if len(self.bypassed) > 4 * len(state.queue) + 1024:
            self.bypassed = {jid: n for jid, n in self.bypassed.items() if jid in state.queue}


class _Window:
    """One call's look-ahead window as arrays by window sequence number (the order jobs entered the window): each
    waiting job's current choice and its cost (inf: none), so the cheapest is one ``argmin`` (ties: the earliest
    entered, as a dict of choices kept in window order would give) and the choices a start made stale are found
    without a pass over the jobs."""

    def __init__(self, policy: HorusPolicy, load: GPULoad, state: SchedulerState, window: list[QueuedJob],
                 blocked: frozenset[str], admitted: np.ndarray | None = None) -> None:
        self.policy, self.load, self.state = policy, load, state
        self.jobs: list[QueuedJob] = []
        self.ids: list[str] = []  # job id by seq
        self.size = max(2 * len(window), 64)
        self.cost = np.full(self.size, np.inf)
        self.alive = np.zeros(self.size, dtype=bool)  # has a choice
        self.gpu = np.full(self.size, -1, dtype=np.int64)  # the GPU of a one-GPU choice
        self.multi: dict[int, tuple[int, ...]] = {}  # seq -> the GPUs of a choice of several
        self.on_gpu: dict[int, set[int]] = {}  # GPU -> the seqs of ``multi`` whose choice uses it
        self.done = np.zeros(self.size, dtype=bool)  # started
        self.rows = np.zeros((self.size, 5))
        self.typed = np.zeros(self.size, dtype=bool)  # has a GPU-type request
        self.one = np.zeros(self.size, dtype=bool)  # one GPU, no GPU-type request (the idle fast path's jobs)
        self.fast = policy._fast_path() and isinstance(policy.placement, HorusPlacement)
        self.kinds: dict[str, tuple[object, ...]] = {}  # job id -> ``_kind`` (fixed within the call)
        self.fast_memo: dict[tuple[float, float, float, int, int], np.ndarray] = {}  # ``_fast_costs``: key -> by seq
        self.head_seq = 0
        self.waiting = 0
        n = len(window)  # the window enters at once (``_enter`` of each, as arrays; ``size`` holds it)
        if n:
            self.jobs = list(window)
            self.ids = [job.spec.job_id for job in window]
            self.rows[:n] = policy.placement.requests(window, state)
            self.typed[:n] = [job.spec.gpu_type_request is not None for job in window]
            self.one[:n] = (self.rows[:n, 0] == 1) & ~self.typed[:n]
            self.waiting = n
        fresh = [i for i, jid in enumerate(self.ids) if jid not in blocked] if blocked else list(range(n))
        self.choose(np.asarray(fresh, dtype=np.int64), admitted)

    def _enter(self, job: QueuedJob, row: np.ndarray) -> int:
        seq = len(self.jobs)
        if seq == self.size:
            self._grow()
        self.jobs.append(job)
        self.ids.append(job.spec.job_id)
        self.rows[seq] = row
        self.typed[seq] = typed = job.spec.gpu_type_request is not None
        self.one[seq] = row[0] == 1 and not typed
        self.waiting += 1
        return seq

    def _grow(self) -> None:
        n = self.size
        self.size = 2 * n
        self.cost = np.concatenate((self.cost, np.full(n, np.inf)))
        self.alive = np.concatenate((self.alive, np.zeros(n, dtype=bool)))
        self.gpu = np.concatenate((self.gpu, np.full(n, -1, dtype=np.int64)))
        self.done = np.concatenate((self.done, np.zeros(n, dtype=bool)))
        self.rows = np.concatenate((self.rows, np.zeros((n, 5))))
        self.typed = np.concatenate((self.typed, np.zeros(n, dtype=bool)))
        self.one = np.concatenate((self.one, np.zeros(n, dtype=bool)))

    def append(self, job: QueuedJob) -> None:
        """A job refills the window (evaluated by the next ``choose`` of ``stale``)."""
        self._enter(job, self.policy.placement.table.row(job, self.state))

    def head(self) -> QueuedJob:
        """The oldest waiting job of the window."""
        while self.done[self.head_seq]:
            self.head_seq += 1
        return self.jobs[self.head_seq]

    def best(self) -> int:
        """The waiting job of least cost (ties: entered first), -1 when none has a choice."""
        n = len(self.jobs)
        at = int(np.argmin(self.cost[:n]))
        if self.alive[at] and math.isfinite(self.cost[at]):
            return at
        live = np.flatnonzero(self.alive[:n])  # costs not finite: the first least by Python's comparisons
        if not len(live):
            return -1
        return min(live.tolist(), key=lambda i: float(self.cost[i]))

    def start(self, seq: int) -> tuple[QueuedJob, tuple[int, ...]]:
        gpus = self._unmulti(seq) or (int(self.gpu[seq]),)
        self.alive[seq], self.cost[seq], self.gpu[seq] = False, np.inf, -1
        self.done[seq] = True
        self.waiting -= 1
        return self.jobs[seq], gpus

    def _drop(self, seqs: np.ndarray) -> None:
        self.alive[seqs] = False
        self.cost[seqs] = np.inf
        self.gpu[seqs] = -1

    def _unmulti(self, seq: int) -> tuple[int, ...] | None:
        """Forget the choice of several GPUs of ``seq`` (returned; None if it has none)."""
        gpus = self.multi.pop(seq, None)
        if gpus is not None:
            for g in gpus:
                self.on_gpu[g].discard(seq)
        return gpus

    def _set_multi(self, seq: int, gpus: tuple[int, ...]) -> None:
        self.multi[seq] = gpus
        for g in gpus:
            self.on_gpu.setdefault(g, set()).add(seq)

    def stale(self, gpus: tuple[int, ...], refilled: bool) -> np.ndarray:
        """Window jobs whose choice used any of ``gpus`` (ascending), and the job that refilled it."""
        n, head = len(self.jobs), self.head_seq  # no choice before the head: all started
        one = self.gpu[head:n]
        if len(gpus) == 1:
            mask = one == gpus[0]
        elif max(gpus) - min(gpus) + 1 == len(gpus):  # a run of GPUs (distinct): one range test
            mask = (one >= min(gpus)) & (one <= max(gpus))
        else:
            mask = one == gpus[0]
            for g in gpus[1:]:
                mask |= one == g
        found = np.flatnonzero(mask)
        found += head
        several = [seq for g in gpus for seq in self.on_gpu.get(g, ())]
        # a seq holds a one-GPU choice or one of several GPUs, never both: the two sets are disjoint; the job that
        # refilled the window (the last seq, no choice yet) comes last
        if several:
            found = np.sort(np.concatenate((found, sorted(set(several)))))
        if refilled:
            found = np.concatenate((found, (n - 1,)))
        return found

    def choose(self, seqs: np.ndarray, known: np.ndarray | None = None) -> None:
        """(Re-)evaluate the window jobs ``seqs`` on the planned load; ``known``: the placement's ``possible_rows`` on
        it by seq, where the caller has it."""
        if not len(seqs):
            return
        policy, placement, load, state = self.policy, self.policy.placement, self.load, self.state
        if self.fast and type(placement).possible is Placement.possible and placement.idle_fast_applies(load, state):
            # as ``_choices``, with the jobs the idle fast path decides (all one-GPU ones) decided as one array;
            # ``possible`` admits every one-GPU job while a GPU is idle, so it is asked about the others only
            one = self.one[seqs]
            if one.all():
                self._fast_costs(seqs)
                return
            if one.any():
                self._fast_costs(seqs[one])
            seqs = seqs[~one]
            rows = self.rows[seqs]
            admitted = placement.possible_rows(rows, load, state) if known is None else known[seqs]
            if not admitted.all():
                out = seqs[~admitted]
                for seq in out.tolist():
                    self._unmulti(seq)
                self._drop(out)
                seqs, rows = seqs[admitted], rows[admitted]
                if not len(seqs):
                    return
            choices = policy._choices([self.jobs[i] for i in seqs.tolist()], rows, load, state, [True] * len(seqs),
                                      kind_memo=self.kinds)
        elif known is not None:  # no job takes the idle fast path here (``_choices``: none is given it)
            choices = policy._choices([self.jobs[i] for i in seqs.tolist()], self.rows[seqs], load, state,
                                      known[seqs].tolist(), kind_memo=self.kinds)
        else:
            choices = policy._choices([self.jobs[i] for i in seqs.tolist()], self.rows[seqs], load, state,
                                      kind_memo=self.kinds)
        multi = self.multi
        alive: list[bool] = []
        costs: list[float] = []
        one_gpu: list[int] = []
        for seq, choice in zip(seqs.tolist(), choices):
            if seq in multi:
                self._unmulti(seq)
            if choice is None:
                alive.append(False)
                costs.append(np.inf)
                one_gpu.append(-1)
                continue
            gpus, cost = choice
            alive.append(True)
            costs.append(cost)
            if len(gpus) == 1:
                one_gpu.append(gpus[0])
            else:
                one_gpu.append(-1)
                self._set_multi(seq, gpus)
        self.alive[seqs], self.cost[seqs], self.gpu[seqs] = alive, costs, one_gpu  # seqs: once each

    def _fast_costs(self, at: np.ndarray) -> None:
        """The idle fast path's choice of the one-GPU jobs ``at``. Its cost reads a job's row and
        only the fast GPU's predicted utilization, memory and capacity and its node's idle count and size, so costs
        are kept per such key and seq: a job costed under the same key before gets the same value again."""
        placement, load, state = self.policy.placement, self.load, self.state
        if len(at) <= 2:  # too few to pay for the memo: costed at once (the same values)
            g, cost = placement.idle_fast_costs(self.rows[at], load, state)  # type: ignore[attr-defined]
            self.alive[at], self.cost[at], self.gpu[at] = True, cost, g
            return
        g, node = placement.fast_gpu()  # type: ignore[attr-defined]
        key = (float(load.pred_util[g]), float(load.pred_mem_mib[g]), float(state.mem_capacity_mib[g]),
               int(placement.node_idle[node]), int(placement.idx.node_size[node]))  # type: ignore[attr-defined]
        kept = self.fast_memo.get(key)
        if kept is None or len(kept) < self.size:
            if len(self.fast_memo) >= 8:
                self.fast_memo.clear()
            grown = np.full(self.size, np.nan)
            if kept is not None:
                grown[:len(kept)] = kept
            kept = self.fast_memo[key] = grown
        cost = kept[at]
        new = np.isnan(cost)
        if new.any():
            _, fresh = placement.idle_fast_costs(self.rows[at[new]], load, state)  # type: ignore
            cost[new] = fresh
            kept[at[new]] = fresh
        self.alive[at], self.cost[at], self.gpu[at] = True, cost, g

    def waiting_ids(self) -> frozenset[str]:
        """The ids of the waiting jobs of the window."""
        return frozenset(compress(self.ids, (~self.done[:len(self.ids)]).tolist()))

    def window(self) -> list[QueuedJob]:
        """The waiting jobs of the window, in window order."""
        return [job for job, done in zip(self.jobs, self.done[:len(self.jobs)].tolist()) if not done]
