"""Shortest-job-first queue order by predicted remaining run time."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from reference_policies._common import ORDERS, FastOrder, predicted_remaining_s
from horus.state import QueuedJob, SchedulerState


@ORDERS.register("sjf")
class SjfOrder(FastOrder):
    """Smallest predicted remaining time first (remaining iterations x predicted iteration time on the
    GPU type with the most GPUs); ties by ``queued_since``. Keys are cached per queue entry (they do
    not change while a job waits), so each call costs one key lookup per queued job."""

    name = "sjf"

    def __init__(self) -> None:
        # job id -> (queued_since, attained_gpu_s, key); a requeue changes the first two.
        self._keys: dict[str, tuple[float, float, tuple[float, float]]] = {}

    def _key(self, job: QueuedJob, state: SchedulerState) -> tuple[float, float]:
        cached = self._keys.get(job.spec.job_id)
        if cached is None or cached[0] != job.queued_since or cached[1] != job.attained_gpu_s:
            key = (predicted_remaining_s(job, state), job.queued_since)
            cached = self._keys[job.spec.job_id] = (job.queued_since, job.attained_gpu_s, key)
        return cached[2]

    def order(self, queue: Sequence[QueuedJob], state: SchedulerState) -> list[QueuedJob]:
        if len(self._keys) > 4 * len(state.queue) + 1024:
            self._keys = {jid: key for jid, key in self._keys.items() if jid in state.queue}
        return sorted(queue, key=lambda job: self._key(job, state))

    def head(self, state: SchedulerState, k: int) -> list[QueuedJob]:
        if len(state.queue) <= k:
            return self.order(list(state.queue.values()), state)
        return heapq.nsmallest(k, state.queue.values(), key=lambda job: self._key(job, state))
