"""The Horus policy: look-ahead over the first K queued jobs with the interference-aware placement."""

from __future__ import annotations

from itertools import islice
from typing import Any


from reference_policies.base import POLICIES, Action, Policy, Start
from reference_policies.horus_placement import HorusPlacement
from horus.predict.base import Prediction
from horus.state import GPULoad, QueuedJob, SchedulerState, gpu_share

Choice = tuple[tuple[int, ...], float] | None


@POLICIES.register("horus")
class HorusPolicy(Policy):
    """Look at the first ``lookahead`` queued jobs (FIFO order); repeatedly start the (job, GPUs) pair
    of lowest cost per worker among them, refilling the window from the queue, until none fits.

    Aging: each time a job is started ahead of the current head (oldest waiting job), the head's
    bypass count grows; past ``max_bypass`` only the head may start (the window blocks until it fits),
    so no job starves. A call may start many jobs. Calls are cheap when nothing changed: jobs found
    unplaceable are remembered until the cluster load changes.
    """

    name = "horus"

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
        self._expected: GPULoad | None = None  # state.load we expect at the next call
        self._blocked: set[str] = set()  # jobs unplaceable under _expected

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "oracle": self.is_oracle, "lookahead": self.lookahead,
                "max_bypass": self.max_bypass, **self.placement.describe()}

    # ---- hooks the oracle overrides ------------------------------------------------------------
    def planning_load(self, state: SchedulerState) -> GPULoad:
        """The load to plan on; ``state.load`` itself is returned and copied on first write."""
        return state.load

    def job_load(self, job: QueuedJob, gpu: int, state: SchedulerState) -> Prediction:
        return state.predict(job.spec, state.cluster.gpus[gpu].gpu_type)

    def choose(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> Choice:
        return self.placement.evaluate(job, load, state)

    def note_start(self, job: QueuedJob, gpus: tuple[int, ...], state: SchedulerState) -> None:
        """Called for each planned start (the oracle tracks co-runner types)."""

    # ---- scheduling ----------------------------------------------------------------------------
    def _unchanged(self, state: SchedulerState) -> bool:
        return state.load.equals(self._expected)

    def schedule(self, state: SchedulerState) -> list[Action]:
        if not state.queue:
            return []
        if self._blocked and not self._unchanged(state):
            self._blocked = set()
        queue_iter = iter(state.queue.values())
        window = [job for job in islice(queue_iter, self.lookahead)]
        if all(job.spec.job_id in self._blocked for job in window):
            return []
        load = self.planning_load(state)
        placement = self.placement
        placement.begin(load, state)
        if not placement.any_room():
            self._remember(state, [], window)
            return []
        choices: dict[str, Choice] = {}
        for job in window:
            jid = job.spec.job_id
            choices[jid] = None if jid in self._blocked else self.choose(job, load, state)
        started: list[tuple[QueuedJob, tuple[int, ...]]] = []
        while window:
            head = window[0]
            candidates = window[:1] if self.bypassed.get(head.spec.job_id, 0) > self.max_bypass else window
            best = min((job for job in candidates if choices[job.spec.job_id] is not None),
                       key=lambda job: choices[job.spec.job_id][1], default=None)  # type: ignore[index]
            if best is None:
                break
            gpus = choices.pop(best.spec.job_id)[0]  # type: ignore[index]
            started.append((best, gpus))
            self.note_start(best, gpus, state)
            window.remove(best)
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
            placement.update(load, state)
            if not placement.any_room():
                break
            touched = set(gpus)
            for job in window:  # only choices that used the GPUs just loaded can have changed
                choice = choices.get(job.spec.job_id)
                if job is refill or (choice is not None and touched.intersection(choice[0])):
                    choices[job.spec.job_id] = self.choose(job, load, state)
        self._remember(state, started, window)
        return [Start(job.spec.job_id, gpus) for job, gpus in started]

    def _remember(self, state: SchedulerState, started: list[tuple[QueuedJob, tuple[int, ...]]],
                  waiting: list[QueuedJob]) -> None:
        """Record the load expected at the next call and the jobs that could not start under it."""
        self._blocked = {job.spec.job_id for job in waiting}
        if not self._blocked:
            self._expected = None
            return
        expected = state.tentative()
        for job, gpus in started:
            expected.add(gpus, state.predict(job.spec, state.cluster.gpus[gpus[0]].gpu_type), gpu_share(job.spec))
        self._expected = expected
        if len(self.bypassed) > 4 * len(state.queue) + 1024:
            self.bypassed = {jid: n for jid, n in self.bypassed.items() if jid in state.queue}
