"""Tiresias' preemption by priority queue, shared by ``tiresias`` and ``horus-las``.

For each of the first ``max_for`` blocked jobs (highest priority first), running jobs of a strictly
lower-priority queue are taken as victims, lowest priority and most attained service first, until the GPUs
left idle by the plan plus the GPUs the victims free cover the job's GPUs; if they never do, nothing is
preempted for that job. A GPU counts as freed only when every worker the plan leaves on it belongs to a victim
(under exclusive placement: each victim frees its own GPUs, Tiresias' count); a victim that frees none of its
GPUs in the end is dropped. Fractional jobs and ``exclude`` (e.g. jobs stopped earlier in the call, or sharing a
GPU with a job started in it) are never victims. What a job's GPUs are used for is left to the next call.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from horus.policies.orders.tiresias import queue_index
from horus.state import QueuedJob, RunningJob, SchedulerState, gpu_share


def las_victims(blocked: Sequence[QueuedJob], state: SchedulerState, n_residents: np.ndarray,
                thresholds: Sequence[float], max_for: int, exclude: Collection[str] = ()) -> list[str]:
    """Ids of the running jobs to preempt, in order; ``n_residents``: the planned workers per GPU."""
    blocked = blocked[:max_for]
    if not blocked:
        return []
    # a victim's queue is strictly lower than its blocked job's: running jobs in the highest blocked job's queue
    # or above are never looked at (each job's walk below stops at them), so they are not listed at all
    lowest = min(queue_index(job.attained_gpu_s, thresholds) for job in blocked)
    if lowest >= len(thresholds):
        return []  # every blocked job is in the lowest queue: nobody is below it
    running: list[tuple[int, float, RunningJob]] = []
    now = state.now
    for run in state.running.values():
        attained = run.attained(now)
        level = queue_index(attained, thresholds)
        if level > lowest:
            running.append((level, attained, run))
    running.sort(key=lambda item: (-item[0], -item[1]))  # lowest priority, most service first (a stable sort)
    vacated = np.zeros(len(n_residents), dtype=np.int64)  # workers of chosen victims per GPU
    chosen: set[str] = set()
    out: list[str] = []
    n_idle = int((n_residents == 0).sum())
    for job in blocked:
        level = queue_index(job.attained_gpu_s, thresholds)
        need = job.spec.num_gpus
        victims: list[RunningJob] = []
        trial = vacated.copy()
        freed = n_idle
        for victim_level, _, run in running:
            if freed >= need or victim_level <= level:
                break
            jid = run.spec.job_id
            if jid in chosen or jid in exclude or gpu_share(run.spec) < 1.0:
                continue
            victims.append(run)
            gpus = list(run.gpus)
            trial[gpus] += 1
            freed += int((trial[gpus] == n_residents[gpus]).sum())
        if freed < need:
            continue
        for run in victims:
            if (trial[list(run.gpus)] == n_residents[list(run.gpus)]).any():
                chosen.add(run.spec.job_id)
                out.append(run.spec.job_id)
                vacated[list(run.gpus)] += 1
        n_idle = freed - need  # GPUs left over for the next blocked job
    return out
