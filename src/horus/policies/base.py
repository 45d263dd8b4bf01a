"""The policy interface: a policy reads a ``SchedulerState`` and returns actions; backends carry them out.

Write a policy by subclassing ``Policy`` and registering it in ``POLICIES``. Most policies are a
queue order x a placement: subclass nothing, register ``make_composed(order, placement)`` instead
(``horus.policies.parts.ordered``: ``QueueOrder``, ``Placement``, ``OrderedPolicy``). Policies never
receive a truth model unless they set ``is_oracle = True`` (then the backend passes it through
``bind_truth``; such policies read the truth and say so in their name and docs; they are references, not bounds).

Speed contract: ``schedule`` is called after every batch of simultaneous events, so its cost should
follow what changed since the last call, not the queue length x the number of GPUs. Policies may keep
state between calls but must not assume the same ``SchedulerState`` or ``Cluster`` object each time
(the live service rebuilds the cluster when machines join or leave).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from horus.reasons import WaitReason
from horus.registry import Registry
from horus.state import QueuedJob, SchedulerState

if TYPE_CHECKING:
    from horus.policies.parts.ordered import Placement


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
    # If True, backends ask ``schedule`` even when nothing is queued (policies that move running jobs:
    # unpacking a bad co-location, migrating to a GPU that became idle).
    acts_on_running: bool = False
    # Whether it may share a GPU between jobs (a wait is then explained as "co-location would not pay"),
    # and at most how many jobs it puts on one GPU (None: no fixed cap).
    colocates: bool = False
    max_residents: int | None = None
    # Whether it preempts running jobs its queue order (a ``KeyedOrder``, e.g. Tiresias' LAS) ranks strictly behind
    # a waiting job by the order key's leading part; under a tenancy the core then lets a held job take the place
    # of its own queue's jobs ranked behind it (horus.core.tenancy, ``Admission._preempt_own``).
    preempts_by_order: bool = False

    @abstractmethod
    def schedule(self, state: SchedulerState) -> list[Action]:
        """Decide what to start (and preempt) now. Called after every batch of simultaneous events."""

    def bind_truth(self, truth: object) -> None:
        """Called by the backend only for ``is_oracle`` policies, before the first ``schedule``."""
        raise TypeError(f"policy {self.name!r} is not an oracle and must not receive the truth")

    def bind_true_sizes(self, iterations: Mapping[str, float]) -> None:
        """Called by the simulator only for ``is_oracle`` policies: every job's true length (policies that are not
        oracles read only what the world announces in ``JobSpec.iterations``, ``horus.sim.sizes``)."""

    def orders_by_size(self) -> bool:
        """Whether the queue order ranks jobs by their announced length (refused where none is announced)."""
        return bool(getattr(getattr(self, "order_rule", None), "reads_sizes", False))

    def node_placement(self) -> Placement | None:
        """The ``Placement`` whose ``evaluate`` is exactly this policy's decision for one job, if it has one: then
        a per-node score exists (the Kubernetes extender's filter and prioritize use it for every node at once).
        None: ask ``schedule`` itself (default)."""
        return None

    def may_share(self, job: QueuedJob) -> bool:
        """Whether this job may join a GPU that has residents (default: ``colocates``)."""
        return self.colocates

    def wait_reason(self, job: QueuedJob, state: SchedulerState) -> WaitReason | None:
        """Why ``job`` was not started on ``state``, where the policy can say better than the generic
        ``horus.reasons.explain`` (None: use that)."""
        return None

    def queue_position(self, job_id: str, state: SchedulerState) -> int:
        """How many queued jobs come before ``job_id`` in this policy's order (default: queue order)."""
        for i, queued in enumerate(state.queue):
            if queued == job_id:
                return i
        return len(state.queue)

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "oracle": self.is_oracle}


POLICIES: Registry[Policy] = Registry("policy")
