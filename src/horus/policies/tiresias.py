"""Tiresias-style discretised 2D-LAS (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep
Learning", NSDI 2019): priority from attained GPU-service, FIFO within a priority queue, preemptive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from horus.policies.base import POLICIES, Action, Preempt, Start
from horus.policies.orders.tiresias import DEFAULT_THRESHOLDS_GPU_S, TiresiasOrder, queue_index
from horus.policies.parts.las_preemption import las_victims
from horus.policies.parts.ordered import PLACEMENTS, OrderedPolicy
from horus.state import GPULoad, QueuedJob, SchedulerState, gpu_share

__all__ = ["TiresiasPolicy", "queue_index"]  # queue_index: re-exported (it lived here)


@POLICIES.register("tiresias")
class TiresiasPolicy(OrderedPolicy):
    """Tiresias order + exclusive placement, preemptive.

    Each call first starts what fits in priority order (with backfill). Then, at most once per
    ``tick_s`` of simulated time, for the highest-priority waiting jobs that could not start it
    preempts running jobs of a strictly lower-priority queue (lowest priority, most service first)
    when that frees enough GPUs (``parts.las_preemption``, shared with ``horus-las``). Preempted GPUs are
    used at the next call, not in the same one (a call never starts a job on GPUs it preempts).
    Starvation promotion (the paper's PromoteKnob) is not modelled.
    """

    preempts_by_order = True  # a job of a strictly lower LAS queue (``parts.las_preemption``)

    def __init__(self, *, thresholds: Sequence[float] = DEFAULT_THRESHOLDS_GPU_S, tick_s: float = 300.0,
                 max_scan: int = 64, max_preempt_for: int = 4, placement: str = "exclusive") -> None:
        super().__init__(TiresiasOrder(thresholds), PLACEMENTS.create(placement), backfill=True,
                         max_scan=max_scan, name="tiresias")
        self.tick_s = tick_s
        self.max_preempt_for = max_preempt_for
        self._last_preempt_scan = float("-inf")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "thresholds_gpu_s": list(self.order_rule.thresholds), "tick_s": self.tick_s}

    def schedule(self, state: SchedulerState) -> list[Action]:
        if not state.queue:
            return []
        placement = self.placement
        scan_due = state.now >= self._last_preempt_scan + (self.tick_s or 0.0)
        jobs = self.order_rule.head(state, self.max_scan)
        if not scan_due and self._all_blocked(jobs, state):
            self._unplaced.renew(state)
            return []
        load = state.tentative()
        placement.begin(load, state)
        if not placement.any_room() and not scan_due:
            self._remember(state, jobs)
            return []
        actions: list[Action] = []
        started: set[int] = set()
        rows = placement.requests(jobs, state)
        todo = np.flatnonzero(placement.possible_rows(rows, load, state)).tolist() if placement.any_room() else []
        t = 0
        while t < len(todo):
            i = todo[t]
            t += 1
            job = jobs[i]
            gpus = placement.place(job, load, state)
            if gpus is None:
                continue
            load.add(gpus, state.predict(job.spec, state.cluster.gpus[gpus[0]].gpu_type), gpu_share(job.spec))
            actions.append(Start(job.spec.job_id, gpus))
            started.add(i)
            placement.update(load, state)
            if not placement.any_room():
                break
            todo = (np.flatnonzero(placement.possible_rows(rows[i + 1:], load, state)) + (i + 1)).tolist()
            t = 0
        blocked = [job for i, job in enumerate(jobs) if i not in started] if started else jobs
        preempts: list[Preempt] = []
        if blocked and scan_due:
            self._last_preempt_scan = state.now
            preempts = self._preemptions(blocked, state, load)
        self._remember(state, [] if preempts else blocked)  # a preemption frees GPUs: nothing is known blocked
        return actions + preempts

    def _preemptions(self, blocked: list[QueuedJob], state: SchedulerState, load: GPULoad) -> list[Preempt]:
        victims = las_victims(blocked, state, load.n_residents, self.order_rule.thresholds, self.max_preempt_for)
        return [Preempt(jid) for jid in victims]
