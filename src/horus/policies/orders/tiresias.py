"""Queue order ``tiresias``: discretised 2D-LAS (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed
Deep Learning", NSDI 2019): priority from attained GPU-service, FIFO within a priority queue."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from horus.policies.parts.ordered import ORDERS, KeyedOrder
from horus.state import QueuedJob, SchedulerState

# Queue boundaries in attained GPU-seconds (queue 0 below 1 GPU-hour, queue 1 below 10 GPU-hours,
# queue 2 above). Tiresias tunes K and the thresholds per trace; these are our defaults.
DEFAULT_THRESHOLDS_GPU_S: tuple[float, ...] = (3600.0, 36000.0)


def queue_index(attained_gpu_s: float, thresholds: Sequence[float]) -> int:
    """Priority queue of a job with this attained service (0 = highest priority)."""
    return bisect_right(thresholds, attained_gpu_s)


@ORDERS.register("tiresias")
class TiresiasOrder(KeyedOrder):
    """By (queue index of attained GPU-seconds, original submit time, queue entry time). A waiting
    job's attained service does not change, so its key is computed once per queue entry (a preempted
    job re-enters the queue as a new entry with its new service: ``KeyedOrder``)."""

    name = "tiresias"

    def __init__(self, thresholds: Sequence[float] = DEFAULT_THRESHOLDS_GPU_S) -> None:
        if list(thresholds) != sorted(thresholds) or any(t <= 0 for t in thresholds):
            raise ValueError(f"tiresias thresholds must be positive and ascending, got {list(thresholds)}")
        self.thresholds = tuple(float(t) for t in thresholds)
        super().__init__()

    def key(self, job: QueuedJob, state: SchedulerState | None = None) -> tuple[int, float, float]:
        return queue_index(job.attained_gpu_s, self.thresholds), job.spec.submit_time, job.queued_since
