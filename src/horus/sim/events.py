"""Simulator events and the event queue (one binary heap).

Events at the same timestamp are applied in a fixed order: completions first (they free GPUs),
then out-of-memory restarts, then arrivals, then ticks; ties within a kind keep insertion order.
Completion events carry the job's rate version and are ignored when stale (lazy invalidation).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from horus.jobs import JobSpec


@dataclass(frozen=True, slots=True)
class Completion:
    job_id: str
    version: int  # valid only while the job's rate version is still this one
    priority = 0


@dataclass(frozen=True, slots=True)
class OOMRestart:
    """A job that failed with out-of-memory re-enters the queue."""

    job_id: str
    priority = 1


@dataclass(frozen=True, slots=True)
class Arrival:
    spec: JobSpec
    priority = 2


@dataclass(frozen=True, slots=True)
class Tick:
    """Wakes the policy up while jobs wait (``Policy.tick_s``)."""

    priority = 3


Event = Completion | OOMRestart | Arrival | Tick


class EventQueue:
    """Min-heap of ``(time, priority, seq, event)``; ``seq`` makes the order deterministic."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = 0

    def push(self, time: float, event: Event) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, event.priority, self._seq, event))

    def peek_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop(self) -> tuple[float, Event]:
        time, _, _, event = heapq.heappop(self._heap)
        return time, event

    def __len__(self) -> int:
        return len(self._heap)
