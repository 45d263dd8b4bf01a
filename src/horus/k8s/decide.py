"""Per-node feasibility and scores from the registered policy, and the decision itself.

Two ways to ask the policy, both its own logic (nothing re-implemented here):

* **placement path** (policies whose decision for one job is their ``Placement``'s ``evaluate``:
  ``horus-paper``, ``sjf-horus``, ``fifo-exclusive``, ``gandiva-greedy``, ``tiresias``...): one vectorised
  ``placement.cost_per_gpu`` over every GPU, then on each node the ``k`` cheapest feasible GPUs, which is
  what ``select_gpus`` picks on a cost restricted to that node. Cost: microseconds per node.
* **policy path** (any other policy, e.g. the adaptive ``horus``, ``horus-iasp``, ``geng``, ``gandiva``): the
  policy's ``schedule`` on a one-node state per candidate node (feasibility), and once on the feasible nodes
  together (the node it picks scores 10, the others 5). Cost: one policy call per node (see benchmarks/k8s_extender.py).

The decision at bind time is always ``SchedulerCore(one-node state, policy, executor).schedule(now)``:
the same core every backend uses, on the node kube-scheduler chose, after the pods already bound there.
A failed node's message starts with its code in the shared vocabulary of why a job waits (``horus.reasons``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import compress, repeat
from typing import Any

import numpy as np

from horus.core.scheduler import Executor, SchedulerCore, create_policy
from horus.gpu_types import accepted_gpu_types
from horus.jobs import JobSpec
from horus.k8s.model import ClusterModel
from horus.k8s.protocol import MAX_SCORE, MIN_SCORE, host_prefix, host_priority_json
from horus.policies.base import POLICIES, Policy, Start
from horus.reasons import (
    COLOCATION_WOULD_NOT_PAY,
    GANG_TOO_LARGE,
    NO_GPU_OF_TYPE,
    NODE_PROBLEM,
    NODE_UNKNOWN,
    WAITING_FOR_GPUS,
)
from horus.state import QueuedJob


@dataclass(frozen=True)
class NodeChoice:
    """The policy's answer for one node: local GPU indices (None = cannot place) and cost per worker."""

    gpus: tuple[int, ...] | None
    cost: float  # lower is better; inf when infeasible; 0.0 everywhere on the policy path
    reason: str = ""
    unresolvable: bool = False  # preempting pods on the node would not help (too few GPUs, wrong type)


OK, UNKNOWN, PROBLEM, TOO_FEW, WRONG_TYPE, NO_FIT = range(6)  # per-node verdict codes
# each failed verdict's code in the shared vocabulary of why a job waits (horus.reasons)
REASON_CODE = {UNKNOWN: NODE_UNKNOWN, PROBLEM: NODE_PROBLEM, TOO_FEW: GANG_TOO_LARGE, WRONG_TYPE: NO_GPU_OF_TYPE}
UNRESOLVABLE = (PROBLEM, TOO_FEW, WRONG_TYPE)  # preempting pods on the node would not help
COST_PER_POINT = 0.1  # one score point per 0.1 of cost per worker (about 10 % predicted utilization)


class _Names:
    """One requested name list: each name's row, and per (GPUs asked, GPU types accepted) the verdicts that do not
    depend on the load (unknown, problem, too few GPUs, wrong type) with the candidates' rows among usable nodes."""

    __slots__ = ("_static", "rows")

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows
        self._static: dict[tuple[int, str | None], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def static(self, table: _NodeTable, k: int, request: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(code, candidates, their usable index): read-only arrays, computed once per (k, request)."""
        key = (k, request)
        found = self._static.get(key)
        if found is None:
            rows = self.rows
            known = rows >= 0
            safe = np.where(known, rows, 0)
            usable = np.where(known, table.usable[safe], -1)
            code = np.where(~known, UNKNOWN, np.where(usable < 0, PROBLEM, OK))
            code = np.where((code == OK) & (table.num_gpus[safe] < k), TOO_FEW, code)
            accepted = accepted_gpu_types(request)
            if accepted is not None:
                code = np.where((code == OK) & ~np.isin(table.type_name[safe], sorted(accepted)), WRONG_TYPE, code)
            candidates = np.flatnonzero(code == OK)
            found = (code, candidates, usable[candidates])
            for array in found:
                array.flags.writeable = False
            if len(self._static) >= 16:
                self._static.clear()
            self._static[key] = found
        return found


class _NodeTable:
    """Per-model arrays over all its nodes (usable or not), rebuilt only when the node set changes."""

    RECENT = 8  # name lists kept (kube-scheduler resends the same list to filter; prioritize gets what passed)

    def __init__(self, model: ClusterModel) -> None:
        names = list(model.nodes)
        self.names = names
        self.row_of = {name: i for i, name in enumerate(names)}
        self.usable = np.array([model.node_index.get(n, -1) for n in names], dtype=np.int64)
        self.num_gpus = np.array([model.nodes[n].num_gpus for n in names], dtype=np.int64)
        self.type_name = np.array([(model.nodes[n].gpu_type.name if model.nodes[n].gpu_type else "") for n in names],
                                  dtype=object)
        self.problem = [model.nodes[n].problem for n in names]
        self._rows: dict[tuple[str, ...], _Names] = {}
        self._prefixes: np.ndarray | None = None

    def entry(self, names: list[str]) -> _Names:
        """The rows of ``names`` (-1: unknown) and what depends on them only; the most recent lists are kept."""
        key = tuple(names)
        found = self._rows.pop(key, None)
        if found is None:
            if len(self._rows) >= self.RECENT:  # forget the least recently used list
                del self._rows[next(iter(self._rows))]
            found = _Names(np.fromiter(map(self.row_of.get, names, repeat(-1)), dtype=np.int64, count=len(names)))
        self._rows[key] = found
        return found

    def rows(self, names: list[str]) -> np.ndarray:
        """Row of each name (-1: unknown); kube-scheduler resends the same lists, so recent ones are kept."""
        return self.entry(names).rows

    def remember(self, names: list[str], rows: np.ndarray) -> None:
        """Keep ``names`` (e.g. the nodes that passed filter, which prioritize gets next) with their known rows."""
        key = tuple(names)
        if key not in self._rows:
            if len(self._rows) >= self.RECENT:
                del self._rows[next(iter(self._rows))]
            self._rows[key] = _Names(rows)

    def host_prefixes(self) -> np.ndarray:
        """Each node's ``protocol.host_prefix`` (an object array by row), encoded once per table."""
        if self._prefixes is None:
            self._prefixes = np.array([host_prefix(n) for n in self.names], dtype=object)
        return self._prefixes


class Verdicts:
    """The policy's answer for each requested node, as arrays aligned with ``names``."""

    def __init__(self, names: list[str], code: np.ndarray, cost: np.ndarray, gpus: np.ndarray, rows: np.ndarray,
                 table: _NodeTable, spec: JobSpec, policy: str, colocates: bool = True) -> None:
        self.names, self.code, self.cost, self.gpus = names, code, cost, gpus
        self._rows, self._table, self._spec, self._policy = rows, table, spec, policy
        self._no_fit = COLOCATION_WOULD_NOT_PAY if colocates else WAITING_FOR_GPUS
        self.ok = code == OK

    def passed(self) -> list[str]:
        """The nodes the pod can go to now (the table keeps their rows: prioritize gets this list next)."""
        passed = list(compress(self.names, self.ok.tolist()))
        self._table.remember(passed, self._rows[self.ok])
        return passed

    def reason_code(self, i: int) -> str:
        """Node ``i``'s failed verdict as a code of the shared vocabulary (``horus.reasons``)."""
        return REASON_CODE.get(int(self.code[i]), self._no_fit)

    def reason(self, i: int) -> str:
        """``[code] message`` for a failed node (kube-scheduler shows it in the pod's events)."""
        return f"[{self.reason_code(i)}] {self._message(i)}"

    def _message(self, i: int) -> str:
        code, spec = int(self.code[i]), self._spec
        if code == UNKNOWN:
            return "node not (yet) known to the Horus extender"
        if code == PROBLEM:
            return f"Horus: {self._table.problem[int(self._rows[i])]}"
        if code == TOO_FEW:
            have = self._table.num_gpus[int(self._rows[i])]
            return f"Horus: node has {have} GPUs, pod needs {spec.num_gpus} on one node"
        if code == WRONG_TYPE:
            return (f"Horus: GPU type {self._table.type_name[int(self._rows[i])]} not in the pod's request "
                    f"{spec.gpu_type_request!r}")
        return f"Horus policy {self._policy!r}: no {spec.num_gpus} GPU(s) here fit the pod's predicted load"

    def failed(self) -> tuple[dict[str, str], dict[str, str]]:
        """(FailedNodes, FailedAndUnresolvableNodes) with a message per node."""
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        bad_mask = ~self.ok
        bad = np.flatnonzero(bad_mask).tolist()
        codes = self.code[bad].tolist()
        names = self.names
        if codes and codes.count(NO_FIT) == len(codes):  # the common case: one message for all, at C speed
            return dict.fromkeys(compress(names, bad_mask.tolist()), self.reason(bad[0])), unresolvable
        no_fit = None
        for i, code in zip(bad, codes):
            if code == NO_FIT:  # the common case: one message for all
                if no_fit is None:
                    no_fit = self.reason(i)
                failed[names[i]] = no_fit
            else:
                (unresolvable if code in UNRESOLVABLE else failed)[names[i]] = self.reason(i)
        return failed, unresolvable

    def priority_json(self) -> bytes:
        """``scores`` as kube-scheduler's ``HostPriorityList`` in JSON (each known node's entry encoded once)."""
        rows = self._rows
        if len(rows) and int(rows.min()) < 0:  # a name Horus does not know: encode each name here
            prefixes = np.array([host_prefix(n) for n in self.names], dtype=object)
        else:
            prefixes = self._table.host_prefixes()[rows]
        return host_priority_json(prefixes, self.scores())

    def __getitem__(self, name: str) -> NodeChoice:
        i = self.names.index(name)
        if not self.ok[i]:
            return NodeChoice(None, math.inf, self.reason(i), int(self.code[i]) in UNRESOLVABLE)
        return NodeChoice(tuple(int(g) for g in self.gpus[i][: self._spec.num_gpus]), float(self.cost[i]))

    def values(self) -> list[NodeChoice]:
        return [self[name] for name in self.names]

    def scores(self) -> np.ndarray:
        """0..10 per node: the policy's own choice (the cheapest feasible node) 10; every other feasible node
        loses one point per ``COST_PER_POINT`` of extra cost per worker (at least one, so 10 marks the
        policy's choice); infeasible nodes 0. Near-equal nodes stay near-equal for kube-scheduler."""
        out = np.full(len(self.names), MIN_SCORE, dtype=np.int64)
        if not self.ok.any():
            return out
        cost = self.cost[self.ok]
        lo = cost.min()
        lost = np.maximum(1, np.rint((cost - lo) / COST_PER_POINT)).astype(np.int64)
        out[self.ok] = np.where(cost <= lo, MAX_SCORE, np.maximum(MIN_SCORE, MAX_SCORE - lost))
        return out


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


class Decider:
    """A registered policy (default ``horus``) asked about one pending pod at a time."""

    def __init__(self, policy: str = "horus-paper", policy_args: dict[str, Any] | None = None) -> None:
        probe = create_policy(policy, policy_args)  # unknown names and oracles are refused here
        self.policy_name = policy
        self.policy_args = dict(policy_args or {})
        self.placement = probe.node_placement()  # the policy declares whether it has a per-node score
        self.colocates = probe.colocates
        self.path = "placement" if self.placement is not None else "policy"
        self._cache_key: tuple[Any, ...] | None = None
        self._cache: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros((0, 1), dtype=np.int64))
        self._table_of: int | None = None
        self._node_table: _NodeTable | None = None
        self._begun: tuple[int, int] | None = None  # (generation, version) the placement's summary is of

    def new_policy(self) -> Policy:
        return POLICIES.create(self.policy_name, **self.policy_args)

    def describe(self) -> dict[str, Any]:
        return {"policy": self.new_policy().describe(), "path": self.path}

    # ---- filter / prioritize ----------------------------------------------------------------------
    def evaluate(self, model: ClusterModel, spec: JobSpec, names: list[str]) -> Verdicts:
        """The policy's answer on each of ``names`` (nodes Horus cannot use are answered too), as arrays."""
        table = self._table(model)
        entry = table.entry(names)
        k = spec.num_gpus
        static, candidates, usable = entry.static(table, k, spec.gpu_type_request)
        code = static.copy()
        cost = np.full(len(names), np.inf)
        # no node has more than max_node_gpus GPUs: a larger k fails everywhere (TOO_FEW) and needs no room
        gpus = np.full((len(names), max(min(k, model.max_node_gpus), 1)), -1, dtype=np.int64)
        if len(candidates):
            if self.placement is not None:
                per_worker, order = self._all_nodes(model, spec)
                sel = usable
            else:
                per_worker, order = self._policy_path(model, spec, [names[i] for i in candidates])
                sel = np.arange(len(candidates))
            chosen = per_worker[sel]
            cost[candidates] = chosen
            gpus[candidates] = order[sel]
            code[candidates[~np.isfinite(chosen)]] = NO_FIT
        return Verdicts(names, code, cost, gpus, entry.rows, table, spec, self.policy_name, self.colocates)

    def _table(self, model: ClusterModel) -> _NodeTable:
        if self._table_of != model.generation or self._node_table is None:
            self._node_table, self._table_of = _NodeTable(model), model.generation
        return self._node_table

    def _all_nodes(self, model: ClusterModel, spec: JobSpec) -> tuple[np.ndarray, np.ndarray]:
        """Placement path over every usable node at once: cost per worker (inf = cannot) and the chosen
        GPUs on each node (indices on the node), cached per belief and model version."""
        key = (model.generation, model.version, getattr(spec, "belief_key", spec.job_type), spec.num_gpus,
               spec.gpu_type_request, spec.gpu_fraction)
        if key == self._cache_key:
            return self._cache
        placement = self.placement
        assert placement is not None
        state = model.state
        k = spec.num_gpus
        n_nodes = len(model.node_index)
        cost = None
        if n_nodes:
            if self._begun != (model.generation, model.version):  # the load changed: summarise it once
                placement.begin(state.load, state)
                self._begun = (model.generation, model.version)
            if placement.any_room():
                cost = placement.cost_per_gpu(QueuedJob(spec, queued_since=model.now), state.load, state)
        if cost is None or n_nodes == 0:
            found = (np.full(n_nodes, np.inf), np.full((n_nodes, k), -1, dtype=np.int64))
        else:
            idx = placement.idx
            padded = np.where(idx.node_pad, np.inf, cost[idx.node_gpus])
            if k > padded.shape[1]:
                found = (np.full(n_nodes, np.inf), np.full((n_nodes, k), -1, dtype=np.int64))
            else:
                # select_gpus on a cost restricted to one node: its k cheapest feasible GPUs, stable order
                if k == 1:
                    order = np.argmin(padded, axis=1)[:, None]
                else:
                    order = np.argsort(padded, axis=1, kind="stable")[:, :k]
                per_worker = np.take_along_axis(padded, order, axis=1).sum(axis=1) / k
                found = (per_worker, order)
        self._cache_key, self._cache = key, found
        return found

    def _policy_path(self, model: ClusterModel, spec: JobSpec, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        k = spec.num_gpus
        per_worker = np.full(len(names), np.inf)
        order = np.full((len(names), k), -1, dtype=np.int64)
        for i, name in enumerate(names):
            gpus = self.ask(model.restricted([name]), spec)
            if gpus is not None:
                per_worker[i], order[i] = 0.0, gpus
        feasible = [names[i] for i in np.flatnonzero(np.isfinite(per_worker))]
        if len(feasible) > 1:  # the policy's preference among them: the node it picks scores 10, others 5
            together = model.restricted(feasible)
            gpus = self.ask(together, spec)
            picked = together.cluster.nodes[together.cluster.gpus[gpus[0]].node].name if gpus is not None else None
            for i, name in enumerate(names):
                if np.isfinite(per_worker[i]) and name != picked:
                    per_worker[i] = 5 * COST_PER_POINT
        return per_worker, order

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
            if spec.job_id in state.queue:  # not started: the probe leaves the state as it was
                state.withdraw(spec.job_id)
        started = [a for a in actions if isinstance(a, Start) and a.job_id == spec.job_id]
        return tuple(started[0].gpus) if started else None


def scores(verdicts: Verdicts) -> dict[str, int]:
    """0..10 per node (see ``Verdicts.scores``)."""
    return dict(zip(verdicts.names, verdicts.scores().tolist()))
