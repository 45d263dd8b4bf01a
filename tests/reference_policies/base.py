"""Policy interface. A policy reads a SchedulerState and returns actions; backends carry them out.

Most policies are a queue order composed with a placement (``ComposedPolicy``); a policy with its
own look-ahead (Horus) overrides ``schedule``. Policies never receive a truth model unless they
set ``is_oracle = True`` (then the backend passes it as ``truth``; such policies are upper bounds).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from horus.registry import Registry
from horus.state import GPULoad, QueuedJob, SchedulerState, gpu_share


@dataclass(frozen=True)
class Start:
    job_id: str
    gpus: tuple[int, ...]  # one global GPU index per worker; repeats not allowed


@dataclass(frozen=True)
class Preempt:
    job_id: str


Action = Start | Preempt


class Policy(ABC):
    name: str = "policy"
    is_oracle: bool = False
    # If set, backends also call ``schedule`` every ``tick_s`` seconds while jobs wait (e.g. for
    # preemptive policies whose priorities change with attained service).
    tick_s: float | None = None

    @abstractmethod
    def schedule(self, state: SchedulerState) -> list[Action]:
        """Decide what to start (and preempt) now. Called after every batch of simultaneous events."""

    def bind_truth(self, truth: object) -> None:
        """Called by the backend only for ``is_oracle`` policies, before the first ``schedule``."""
        raise TypeError(f"policy {self.name!r} is not an oracle and must not receive the truth")

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "oracle": self.is_oracle}


class QueueOrder(ABC):
    """Orders the queue; smaller key first."""

    name: str = "order"

    @abstractmethod
    def order(self, queue: Sequence[QueuedJob], state: SchedulerState) -> list[QueuedJob]: ...


class Placement(ABC):
    """Chooses GPUs for one job given the planned load, or None if it cannot be placed now."""

    name: str = "placement"

    @abstractmethod
    def place(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> tuple[int, ...] | None: ...


class ComposedPolicy(Policy):
    """Queue order x placement. Walks the ordered queue and places what fits.

    ``backfill=False`` stops at the first job that cannot be placed (strict order); otherwise up to
    ``max_scan`` queued jobs are tried per call.
    """

    def __init__(self, order: QueueOrder, placement: Placement, *, backfill: bool = True, max_scan: int = 64,
                 name: str | None = None) -> None:
        self.order_rule = order
        self.placement = placement
        self.backfill = backfill
        self.max_scan = max_scan
        self.name = name or f"{order.name}-{placement.name}"

    def schedule(self, state: SchedulerState) -> list[Action]:
        if not state.queue:
            return []
        jobs = self.order_rule.order(list(state.queue.values()), state)[: self.max_scan]
        return self.place_in_order(jobs, state.tentative(), state)

    def place_in_order(self, jobs: Sequence[QueuedJob], load: GPULoad, state: SchedulerState) -> list[Action]:
        """Place ``jobs`` in order on ``load`` (updated as jobs are placed); skip or stop at misfits."""
        actions: list[Action] = []
        for job in jobs:
            gpus = self.placement.place(job, load, state)
            if gpus is None:
                if not self.backfill:
                    break
                continue
            pred = state.predict(job.spec, state.cluster.gpus[gpus[0]].gpu_type)
            load.add(gpus, pred, gpu_share(job.spec))
            actions.append(Start(job.spec.job_id, gpus))
            if not self.room_left(load, state):
                break
        return actions

    def room_left(self, load: GPULoad, state: SchedulerState) -> bool:
        """Called after each planned start; False stops the walk early (subclasses may know)."""
        return True

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "oracle": self.is_oracle, "order": self.order_rule.name,
                "placement": self.placement.name, "backfill": self.backfill, "max_scan": self.max_scan}


POLICIES: Registry[Policy] = Registry("policy")
