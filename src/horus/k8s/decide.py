"""Per-node feasibility and scores from the registered policy, and the decision itself.

Two ways to ask the policy, both its own logic (nothing re-implemented here):

* **placement path** (policies whose decision for one job is their ``FastPlacement``'s ``evaluate``:
  ``horus``, ``sjf-horus``, ``fifo-exclusive``, ``gandiva``, ``tiresias``...): one vectorised
  ``placement.cost_per_gpu`` over every GPU, then on each node the ``k`` cheapest feasible GPUs, which is
  what ``select_gpus`` picks on a cost restricted to that node. Cost: microseconds per node.
* **policy path** (any other policy, e.g. ``horus-iasp``, ``geng``): the policy's ``schedule`` on a
  one-node state per candidate node (feasibility), and once on the feasible nodes together (the node it
  picks scores 10, the others 5). Cost: one policy call per node (see benchmarks/k8s_extender.py).

The decision at bind time is always ``SchedulerCore(one-node state, policy, executor).schedule(now)``:
the same core every backend uses, on the node kube-scheduler chose, after the pods already bound there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from horus.core.scheduler import Executor, SchedulerCore
from horus.errors import HorusInputError
from horus.gpu_types import accepted_gpu_types
from horus.jobs import JobSpec
from horus.k8s.model import ClusterModel
from horus.k8s.protocol import MAX_SCORE, MIN_SCORE
from horus.plugins import load_all
from horus.policies._common import FastPlacement
from horus.policies.base import POLICIES, ComposedPolicy, Policy, Start
from horus.policies.horus import HorusPolicy
from horus.state import QueuedJob


@dataclass(frozen=True)
class NodeChoice:
    """The policy's answer for one node: local GPU indices (None = cannot place) and cost per worker."""

    gpus: tuple[int, ...] | None
    cost: float  # lower is better; inf when infeasible; 0.0 everywhere on the policy path
    reason: str = ""
    unresolvable: bool = False  # preempting pods on the node would not help (too few GPUs, wrong type)


class PreemptionUnsupported(RuntimeError):
    """The policy wanted to stop a running pod; the extender never evicts pods."""


class _Recorder:
    """An Executor that only records the start (used to ask the policy without acting)."""

    def __init__(self) -> None:
        self.started: tuple[int, ...] | None = None

    def start(self, spec: JobSpec, gpus: tuple[int, ...], now: float) -> None:
        self.started = gpus

    def preempt(self, job_id: str, now: float) -> None:
        raise PreemptionUnsupported(job_id)


def placement_of(policy: Policy) -> FastPlacement | None:
    """The policy's placement when one job's decision is exactly ``placement.evaluate``, else None."""
    if isinstance(policy, HorusPolicy):
        same = all(getattr(type(policy), hook) is getattr(HorusPolicy, hook)
                   for hook in ("choose", "job_load", "planning_load"))
        return policy.placement if same and isinstance(policy.placement, FastPlacement) else None
    if isinstance(policy, ComposedPolicy) and isinstance(policy.placement, FastPlacement):
        return policy.placement if type(policy.placement).place is FastPlacement.place else None
    return None


class Decider:
    """A registered policy (default ``horus``) asked about one pending pod at a time."""

    def __init__(self, policy: str = "horus", policy_args: dict[str, Any] | None = None) -> None:
        load_all("horus.policies")
        if policy not in POLICIES:
            raise HorusInputError("--policy", f"unknown policy {policy!r}; known: {', '.join(POLICIES.names())}")
        self.policy_name = policy
        self.policy_args = dict(policy_args or {})
        probe = self.new_policy()
        if probe.is_oracle:
            raise HorusInputError("--policy", f"policy {policy!r} is an oracle (it reads a simulated truth); "
                                  f"it cannot schedule real pods")
        self.placement = placement_of(probe)
        self.path = "placement" if self.placement is not None else "policy"
        self._cache_key: tuple[Any, ...] | None = None
        self._cache: dict[str, NodeChoice] = {}

    def new_policy(self) -> Policy:
        return POLICIES.create(self.policy_name, **self.policy_args)

    def describe(self) -> dict[str, Any]:
        return {"policy": self.new_policy().describe(), "path": self.path}

    # ---- filter / prioritize ----------------------------------------------------------------------
    def evaluate(self, model: ClusterModel, spec: JobSpec, names: list[str]) -> dict[str, NodeChoice]:
        """The policy's choice on each of ``names`` (nodes Horus cannot use are answered too)."""
        out: dict[str, NodeChoice] = {}
        known: list[str] = []
        accepted = accepted_gpu_types(spec.gpu_type_request)
        for name in names:
            info = model.nodes.get(name)
            if info is None:
                out[name] = NodeChoice(None, math.inf, "node not (yet) known to the Horus extender")
            elif info.problem is not None:
                out[name] = NodeChoice(None, math.inf, f"Horus: {info.problem}", unresolvable=True)
            elif info.num_gpus < spec.num_gpus:
                out[name] = NodeChoice(None, math.inf, f"Horus: node has {info.num_gpus} GPUs, pod needs "
                                       f"{spec.num_gpus} on one node", unresolvable=True)
            elif accepted is not None and info.gpu_type is not None and info.gpu_type.name not in accepted:
                out[name] = NodeChoice(None, math.inf, f"Horus: GPU type {info.gpu_type.name} not in the pod's "
                                       f"request {spec.gpu_type_request!r}", unresolvable=True)
            else:
                known.append(name)
        if known:
            found = self._all_nodes(model, spec) if self.placement is not None else self._policy_path(model, spec, known)
            out.update({name: found[name] for name in known})
        return out

    def _all_nodes(self, model: ClusterModel, spec: JobSpec) -> dict[str, NodeChoice]:
        """Placement path over every usable node at once (cached per pod job type and model version)."""
        key = (model.generation, model.version, getattr(spec, "belief_key", spec.job_type), spec.num_gpus,
               spec.gpu_type_request, spec.gpu_fraction)
        if key == self._cache_key:
            return self._cache
        placement = self.placement
        assert placement is not None
        state = model.state
        job = QueuedJob(spec, queued_since=model.now)
        names = list(model.node_index)
        choices: dict[str, NodeChoice] = {}
        cost = None
        if names:
            placement.begin(state.load, state)
            if placement.any_room():
                cost = placement.cost_per_gpu(job, state.load, state)
        k = spec.num_gpus
        full = f"Horus policy {self.policy_name!r}: no {k} GPU(s) here fit the pod's predicted load"
        if cost is None or not names:
            return self._remember(key, {name: NodeChoice(None, math.inf, full) for name in names})
        idx = placement.idx
        padded = np.where(idx.node_pad, np.inf, cost[idx.node_gpus])
        if k == 1:
            order = np.argmin(padded, axis=1)[:, None]
        else:
            order = np.argsort(padded, axis=1, kind="stable")[:, :k]
        picked = np.take_along_axis(padded, order, axis=1)
        per_worker = picked.sum(axis=1) / k if k > 1 else picked[:, 0]
        finite = np.isfinite(per_worker)
        for n, name in enumerate(names):
            if finite[n]:
                choices[name] = NodeChoice(tuple(int(g) for g in order[n]), float(per_worker[n]))
            else:
                choices[name] = NodeChoice(None, math.inf, full)
        return self._remember(key, choices)

    def _remember(self, key: tuple[Any, ...], choices: dict[str, NodeChoice]) -> dict[str, NodeChoice]:
        self._cache_key, self._cache = key, choices
        return choices

    def _policy_path(self, model: ClusterModel, spec: JobSpec, names: list[str]) -> dict[str, NodeChoice]:
        full = f"Horus policy {self.policy_name!r}: the pod does not fit here"
        choices: dict[str, NodeChoice] = {}
        for name in names:
            gpus = self.ask(model.restricted([name]), spec)
            choices[name] = NodeChoice(gpus, 0.0) if gpus is not None else NodeChoice(None, math.inf, full)
        feasible = [name for name in names if choices[name].gpus is not None]
        if len(feasible) > 1:
            together = model.restricted(feasible)
            gpus = self.ask(together, spec)
            for name in feasible:
                preferred = gpus is not None and together.cluster.gpus[gpus[0]].node == together.node_index[name]
                choices[name] = NodeChoice(choices[name].gpus, 0.0 if preferred else 0.5)
        return choices

    def ask(self, model: ClusterModel, spec: JobSpec, executor: Executor | None = None) -> tuple[int, ...] | None:
        """Run the policy through ``SchedulerCore`` on ``model`` with ``spec`` as the only queued job.

        Returns the global GPU indices it started the pod on (in ``model``), or None. ``executor`` (default:
        record only) carries the start out; a policy that preempts raises ``PreemptionUnsupported``.
        """
        state = model.state
        state.submit(spec, model.now)
        core = SchedulerCore(state, self.new_policy(), executor or _Recorder())
        try:
            actions = core.schedule(model.now)
        finally:
            state.queue.pop(spec.job_id, None)
        started = [a for a in actions if isinstance(a, Start) and a.job_id == spec.job_id]
        return tuple(started[0].gpus) if started else None


COST_PER_POINT = 0.1  # one score point per 0.1 of cost per worker (about 10 % predicted utilization)


def scores(choices: dict[str, NodeChoice]) -> dict[str, int]:
    """0..10 per node: the policy's own choice (the cheapest feasible node) 10; every other feasible node
    loses one point per ``COST_PER_POINT`` of extra cost per worker (at least one point, so 10 marks the
    policy's choice); infeasible nodes 0. Near-equal nodes stay near-equal for kube-scheduler's own scores."""
    costs = [c.cost for c in choices.values() if c.gpus is not None]
    if not costs:
        return {name: MIN_SCORE for name in choices}
    lo = min(costs)
    out: dict[str, int] = {}
    for name, choice in choices.items():
        if choice.gpus is None:
            out[name] = MIN_SCORE
        elif choice.cost <= lo:
            out[name] = MAX_SCORE
        else:
            lost = max(1, round((choice.cost - lo) / COST_PER_POINT))
            out[name] = max(MIN_SCORE, MAX_SCORE - lost)
    return out
