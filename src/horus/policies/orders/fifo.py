"""FIFO queue order: by time of (re-)entering the queue, stable."""

from __future__ import annotations

from collections.abc import Sequence

from horus.policies.parts.ordered import ORDERS, QueueOrder, fifo_head
from horus.state import QueuedJob, SchedulerState


@ORDERS.register("fifo")
class FifoOrder(QueueOrder):
    """Oldest ``queued_since`` first; ties keep queue (insertion) order. ``head`` reads the queue's
    first entries (the state keeps them in that order), O(k)."""

    name = "fifo"

    def order(self, queue: Sequence[QueuedJob], state: SchedulerState) -> list[QueuedJob]:
        return sorted(queue, key=lambda job: job.queued_since)

    def head(self, state: SchedulerState, k: int) -> list[QueuedJob]:
        return fifo_head(state, k)
