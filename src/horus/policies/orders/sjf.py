"""Shortest-job-first queue order by predicted remaining run time."""

from __future__ import annotations

from horus.policies.parts.cluster_index import cluster_index
from horus.policies.parts.ordered import ORDERS, KeyedOrder
from horus.state import QueuedJob, SchedulerState


def predicted_remaining_s(job: QueuedJob, state: SchedulerState) -> float:
    """Predicted remaining run time: remaining iterations x predicted iteration time on the main GPU type.

    Progress of a preempted job is estimated from its attained GPU-seconds at the predicted speed
    (queued jobs carry no iteration count) unless the queue entry exposes ``iterations_done``.
    """
    spec = job.spec
    pred = state.predict(spec, cluster_index(state.cluster).main_type)
    done = getattr(job, "iterations_done", None)
    if done is None:
        done = job.attained_gpu_s / max(spec.num_gpus, 1) / pred.iter_time_s if pred.iter_time_s > 0 else 0.0
    return max(spec.iterations - done, 0.0) * pred.iter_time_s


@ORDERS.register("sjf")
class SjfOrder(KeyedOrder):
    """Smallest predicted remaining time first (remaining iterations x predicted iteration time on the
    GPU type with the most GPUs); ties by ``queued_since``, then queue order. The key of an entry is
    computed once, when it joins the queue (``KeyedOrder``)."""

    name = "sjf"
    reads_sizes = True

    def key(self, job: QueuedJob, state: SchedulerState) -> tuple[float, float]:
        return predicted_remaining_s(job, state), job.queued_since
