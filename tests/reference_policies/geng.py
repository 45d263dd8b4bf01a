"""``geng``: two-level interference-aware placement, CLWP (cluster level) + NLWP (node level).

After the two-level scheme of interference-aware scheduling (cluster-level then node-level
workload placement; here built on this project's IASP/IAPP predictors):

* Eligible GPU: idle, or sharing allowed (fewer than ``max_residents`` workers, predicted memory
  fits within ``1 - mem_margin`` of the card, the job never failed out-of-memory, its predicted
  normalized throughput next to the residents >= ``min_throughput``). Per-GPU loss = predicted
  throughput lost + ``share_penalty`` x residents (so an idle GPU wins ties with a harmless share).
* CLWP picks the node: among nodes with ``num_gpus`` eligible GPUs, the lowest
  ``(that node's NLWP cost) / k + similarity_weight x op-mix similarity to the node's co-runners
  - free_weight x idle fraction + memory_weight x memory fraction``; ties (within 1e-12) go to the
  lowest node index.
  Loss = throughput the job loses plus what its co-runners lose (``SlowdownEstimator.added_loss``).
  Similarity = cosine of op-kind histograms from the catalog (jobs built of the same ops contend for
  the same units).
* NLWP picks GPUs inside the node: the k-subset minimising summed predicted loss plus
  ``comm_weight x`` ring all-reduce time (4 bytes x params, ``horus.topology`` link classes) over
  the job's predicted iteration time; exhaustive up to ``max_subsets`` subsets (first minimum in
  lexicographic order), greedy beyond.

Jobs are taken in FIFO order with backfill (``max_scan``). A job larger than every node spans nodes
(lowest-loss eligible GPUs). Interference comes from a trained model (``model_dir``) or, by default,
the unfitted summed-utilization rule (see ``horus.interference.slowdown``; reported by ``describe``).

Speed (the rule above is computed exactly, only faster): per-GPU eligibility and losses are numpy
masks; ``added_loss`` is evaluated once per distinct (resident job types, GPU type) and memoised;
resident types are tracked incrementally (``ResidentTypes``); NLWP is vectorised over all candidate
nodes of one shape against a precomputed table of k-subsets and their communication costs; node
similarity is memoised per (model, set of co-runner types). With ``max_residents`` <= 2 (the
default), jobs found unplaceable are remembered until the load changes, and within a call for the
same job kind: adding load then only shrinks the eligible GPUs (a shared GPU becomes full), so this
is exact for any interference model; with more residents every job is re-evaluated.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations, islice
from pathlib import Path

import numpy as np

from horus.catalog import OP_KINDS, load_catalog
from horus.cluster import Cluster, Node
from horus.comm import gradient_bytes
from horus.interference.base import InterferenceModel
from horus.interference.slowdown import SlowdownEstimator, estimator_for
from horus.jobs import JobSpec
from reference_policies._common import ClusterIndex, cluster_index
from reference_policies.base import POLICIES, Action, Policy, Start
from horus.state import GPULoad, QueuedJob, SchedulerState, gpu_share
from horus.topology import allreduce_time_s

SCORE_TIE = 1e-12  # node scores closer than this are ties (lowest node index wins)


@lru_cache(maxsize=None)
def op_mix(model: str) -> np.ndarray:
    """Normalized op-kind histogram of a catalog model (zeros if unknown). Cached; do not modify."""
    info = load_catalog().get(model)
    if info is None:
        return np.zeros(len(OP_KINDS))
    v = np.array([info.op_counts.get(k, 0) for k in OP_KINDS], dtype=float)
    norm = np.linalg.norm(v)
    return v / norm if norm > 0 else v


def op_mix_similarity(model: str, corunner_types: frozenset[str]) -> float:
    """Mean cosine similarity of ``model``'s op mix to each co-runner job type's (0 with none)."""
    if not corunner_types:
        return 0.0
    mix = op_mix(model)
    return float(np.mean([mix @ op_mix(t.rpartition("/b")[0]) for t in sorted(corunner_types)]))


class ResidentTypes:
    """Job types resident on every GPU (interned tuples, in arrival order) and per-node co-runner sets.

    Kept in sync with a ``SchedulerState`` incrementally: ``sync`` re-reads only GPUs whose resident
    count or predicted memory differs from the snapshot taken after the last planned start (a
    backend changes residents only by finishing/requeueing jobs, which changes both, or by starting
    what the policy planned, which the snapshot already holds).
    """

    def __init__(self) -> None:
        self.sigs: list[tuple[str, ...]] = [()]
        self._sig_id: dict[tuple[str, ...], int] = {(): 0}
        self.sets: list[frozenset[str]] = [frozenset()]
        self._set_id: dict[frozenset[str], int] = {frozenset(): 0}
        self._state: SchedulerState | None = None
        self._cluster: Cluster | None = None
        self._tables: dict[str, np.ndarray] = {}  # job type -> [loss, own] per (signature, GPU type)
        self._tables_for: SlowdownEstimator | None = None
        self._tables_types = 0

    def _intern(self, types: tuple[str, ...]) -> int:
        sid = self._sig_id.get(types)
        if sid is None:
            sid = self._sig_id[types] = len(self.sigs)
            self.sigs.append(types)
        return sid

    def _intern_set(self, types: frozenset[str]) -> int:
        sid = self._set_id.get(types)
        if sid is None:
            sid = self._set_id[types] = len(self.sets)
            self.sets.append(types)
        return sid

    def sync(self, state: SchedulerState) -> None:
        """Bring the per-GPU types in line with ``state`` (residents + nothing planned)."""
        cur = state.load
        if state is not self._state or state.cluster is not self._cluster:
            self._state, self._cluster = state, state.cluster
            self.idx = cluster_index(state.cluster)
            self.sig_of_gpu = np.zeros(state.cluster.num_gpus, dtype=np.int64)
            self.set_of_node = np.zeros(self.idx.num_nodes, dtype=np.int64)
            changed = np.arange(state.cluster.num_gpus)
        else:
            changed = np.flatnonzero((cur.n_residents != self._n) | (cur.pred_mem_mib != self._mem))
        running, residents = state.running, state.residents
        for g in changed.tolist():
            self.sig_of_gpu[g] = self._intern(tuple(running[j].spec.job_type for j in residents[g]))
        self._n = cur.n_residents.copy()
        self._mem = cur.pred_mem_mib.copy()
        if len(changed):
            self._refresh_nodes(np.unique(self.idx.node_of_gpu[changed]))

    def add(self, gpus: tuple[int, ...], job_type: str, mem_mib: float) -> None:
        """Record one planned worker of ``job_type`` on each of ``gpus`` (as ``GPULoad.add`` does)."""
        for g in gpus:
            self.sig_of_gpu[g] = self._intern((*self.sigs[self.sig_of_gpu[g]], job_type))
        idx = list(gpus)
        self._n[idx] += 1
        self._mem[idx] += mem_mib
        self._refresh_nodes(np.unique(self.idx.node_of_gpu[idx]))

    def _refresh_nodes(self, nodes: np.ndarray) -> None:
        node_gpus, pad = self.idx.node_gpus, self.idx.node_pad
        for n in nodes.tolist():
            sigs = self.sig_of_gpu[node_gpus[n][~pad[n]]]
            self.set_of_node[n] = self._intern_set(frozenset(t for s in set(sigs.tolist()) for t in self.sigs[s]))

    def added_losses(self, estimator: SlowdownEstimator, job_type: str, gpus: np.ndarray,
                     idx: ClusterIndex) -> tuple[np.ndarray, np.ndarray]:
        """(loss, own throughput) of ``job_type`` joining the residents of each of ``gpus``.

        Looked up in a per-job-type table indexed by (resident signature, GPU type); only entries
        never needed before call ``estimator.added_loss``.
        """
        n_types = len(idx.types)
        if self._tables_for is not estimator or self._tables_types != n_types:
            self._tables_for, self._tables_types, self._tables = estimator, n_types, {}
        keys = self.sig_of_gpu[gpus] * n_types + idx.type_of_gpu[gpus]
        table = self._tables.get(job_type)
        size = len(self.sigs) * n_types
        if table is None or table.shape[1] < size:
            if sum(t.size for t in self._tables.values()) > 20_000_000:  # bound memory: start afresh
                self._tables = {}
                table = None
            grown = np.full((2, max(2 * size, 64)), np.nan)
            if table is not None:
                grown[:, :table.shape[1]] = table
            table = self._tables[job_type] = grown
        values = table[:, keys]
        missing = np.isnan(values[0])
        if missing.any():
            for key in np.unique(keys[missing]).tolist():
                sig, t = divmod(key, n_types)
                table[:, key] = estimator.added_loss(job_type, self.sigs[sig], idx.types[t])
            values = table[:, keys]
        return values[0], values[1]


class _Shape:
    """Precomputed k-subsets of one node shape and a job type's communication cost on each."""

    def __init__(self, subsets: np.ndarray, comm: np.ndarray) -> None:
        self.subsets = subsets  # (s, k) local GPU indices, lexicographic (itertools.combinations) order
        self.comm = comm  # (s,) comm_cost of each subset


def _n_subsets(n: int, k: int) -> float:
    """Number of k-subsets of n, computed as the rule defines it (float product)."""
    value = 1.0
    for i in range(k):
        value *= (n - i) / (i + 1)
    return value


@POLICIES.register("geng")
class GengPolicy(Policy):
    name = "geng"

    def __init__(self, *, model_dir: str | Path | None = None, model: InterferenceModel | None = None,
                 max_residents: int = 2, mem_margin: float = 0.05,
                 min_throughput: float = 0.5, similarity_weight: float = 0.2, free_weight: float = 0.1,
                 memory_weight: float = 0.05, comm_weight: float = 1.0, max_scan: int = 64,
                 max_subsets: int = 512, share_penalty: float = 0.02) -> None:
        self.model_dir = model_dir
        self.model = model
        self.max_residents = max_residents
        self.mem_margin = mem_margin
        self.min_throughput = min_throughput
        self.similarity_weight = similarity_weight
        self.free_weight = free_weight
        self.memory_weight = memory_weight
        self.comm_weight = comm_weight
        self.max_scan = max_scan
        self.max_subsets = max_subsets
        self.share_penalty = share_penalty
        self.estimator: SlowdownEstimator | None = None
        self.types = ResidentTypes()
        self._shapes: dict[tuple[str, str, int, str, int], _Shape | None] = {}
        self._similarity: dict[str, np.ndarray] = {}  # model -> similarity per co-runner set id
        self._expected: GPULoad | None = None  # state.load expected at the next call
        self._blocked: set[str] = set()  # jobs unplaceable under _expected

    def describe(self) -> dict[str, object]:
        source = self.estimator.describe() if self.estimator else {
            "interference_source": str(self.model_dir) if self.model_dir else "fallback: unfitted summed-utilization"}
        return {"name": self.name, "oracle": False, "max_residents": self.max_residents,
                "min_throughput": self.min_throughput, "similarity_weight": self.similarity_weight,
                "free_weight": self.free_weight, "memory_weight": self.memory_weight,
                "comm_weight": self.comm_weight, "share_penalty": self.share_penalty, "max_scan": self.max_scan,
                **source}

    # ---- scheduling ------------------------------------------------------------------------
    def schedule(self, state: SchedulerState) -> list[Action]:
        if not state.queue:
            return []
        if self.estimator is None:
            self.estimator = estimator_for(self.model_dir, state.predictor, self.model)
        window = list(islice(state.queue.values(), self.max_scan))
        if self._blocked and not self._unchanged(state):
            self._blocked = set()
        if self._blocked and all(job.spec.job_id in self._blocked for job in window):
            return []
        self.types.sync(state)
        self.idx = cluster_index(state.cluster)
        load = state.tentative()
        self._begin(load, state)
        actions: list[Action] = []
        waiting: set[str] = set()
        hopeless: set[tuple[object, ...]] = set()  # job kinds found unplaceable in this call
        for job in window:
            spec = job.spec
            kind = (spec.job_type, spec.num_gpus, spec.gpu_fraction, spec.gpu_type_request, job.oom_failures > 0)
            gpus = None if spec.job_id in self._blocked or kind in hopeless else self.place(job, load, state)
            if gpus is None:
                waiting.add(spec.job_id)
                if self.max_residents <= 2:
                    hopeless.add(kind)
                continue
            pred = state.predict(spec, state.cluster.gpus[gpus[0]].gpu_type)
            load.add(gpus, pred, gpu_share(spec))
            self.types.add(gpus, spec.job_type, pred.mem_mib)
            self._begin(load, state)
            actions.append(Start(spec.job_id, gpus))
        if self.max_residents <= 2:  # see the module docstring: only then is "unplaceable" kept until the load changes
            self._blocked = waiting
            self._expected = load if waiting else None
        return actions

    def _unchanged(self, state: SchedulerState) -> bool:
        return state.load.equals(self._expected)

    def _begin(self, load: GPULoad, state: SchedulerState) -> None:
        """Job-independent per-GPU and per-node quantities of the planned load."""
        idx = self.idx
        self._idle = load.n_residents == 0
        self._shared_open = (load.n_residents > 0) & (load.n_residents < self.max_residents)
        self._any_shared = bool(self._shared_open.any())
        self._mem_limit = (1.0 - self.mem_margin) * state.mem_capacity_mib
        size = idx.node_size
        self._idle_frac = np.add.reduceat(self._idle, idx.node_first, dtype=np.int64) / size
        self._mem_frac = np.add.reduceat(load.pred_mem_mib / state.mem_capacity_mib, idx.node_first) / size

    # ---- per-GPU loss ----------------------------------------------------------------------
    def gpu_losses(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> np.ndarray:
        """Predicted loss of placing one worker of ``job`` on each GPU; inf where not eligible."""
        assert self.estimator is not None
        spec, idx = job.spec, self.idx
        allowed = idx.allowed(spec)
        free = self._idle if allowed is None else self._idle & allowed
        loss = np.where(free, 0.0, np.inf)
        if job.oom_failures > 0 or not self._any_shared:
            return loss
        mem = idx.per_gpu([state.predict(spec, t).mem_mib for t in idx.types])
        shareable = self._shared_open & ~(load.pred_mem_mib + mem > self._mem_limit)
        if spec.gpu_fraction is not None:
            shareable &= ~(load.alloc_share + gpu_share(spec) > 1.0)
        if allowed is not None:
            shareable &= allowed
        gpus = np.flatnonzero(shareable)
        if len(gpus):
            lost, own = self.types.added_losses(self.estimator, spec.job_type, gpus, idx)
            loss[gpus] = np.where(own >= self.min_throughput,
                                  lost + self.share_penalty * load.n_residents[gpus], np.inf)
        return loss

    def place(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> tuple[int, ...] | None:
        """GPUs for ``job`` on the planned ``load`` (called by ``schedule``, which prepares the caches)."""
        k = job.spec.num_gpus
        loss = self.gpu_losses(job, load, state)
        chosen = self.clwp(job, loss, state)
        if chosen is None:
            if k > int(self.idx.node_size.max()):  # must span nodes
                feasible = np.flatnonzero(np.isfinite(loss))
                if len(feasible) >= k:
                    return tuple(int(g) for g in feasible[np.argsort(loss[feasible], kind="stable")[:k]])
            return None
        return chosen[1]

    # ---- cluster level ---------------------------------------------------------------------
    def clwp(self, job: QueuedJob, loss: np.ndarray, state: SchedulerState) -> tuple[int, tuple[int, ...]] | None:
        """(node, its NLWP GPUs) for ``job``: lowest NLWP cost per GPU + similarity - idle + memory terms."""
        idx = self.idx
        k = job.spec.num_gpus
        padded = np.where(idx.node_pad, np.inf, loss[idx.node_gpus])
        count = np.isfinite(padded).sum(axis=1)
        nodes = np.flatnonzero((idx.node_size >= k) & (count >= k))
        if len(nodes) == 0:
            return None
        cost, local = self.nlwp_many(job, nodes, padded[nodes], state)
        # Score without the similarity term: exact on nodes without co-runners, a lower bound elsewhere
        # (similarity >= 0). Similarity is looked up only where that bound can still reach the ties.
        score = (cost / k - self.free_weight * self._idle_frac[nodes]) + self.memory_weight * self._mem_frac[nodes]
        busy = self.types.set_of_node[nodes] != 0
        if busy.any():
            bound = float(score[~busy].min()) if not busy.all() else np.inf
            need = np.flatnonzero(busy & (score <= bound + SCORE_TIE))
            score[busy] = np.inf
            if len(need):
                score[need] = self._scores_with_similarity(job, nodes[need], cost[need])
        best = int(np.argmax(score <= score.min() + SCORE_TIE))  # lowest node index among the ties
        first = int(idx.node_first[nodes[best]])
        return int(nodes[best]), tuple(first + int(i) for i in local[best])

    def _scores_with_similarity(self, job: QueuedJob, nodes: np.ndarray, cost: np.ndarray) -> np.ndarray:
        """CLWP scores of ``nodes`` (with co-runners) given their NLWP costs."""
        similarity = self._similarity_of_sets(job.spec.model, self.types.set_of_node[nodes])
        return (((cost / job.spec.num_gpus + self.similarity_weight * similarity)
                 - self.free_weight * self._idle_frac[nodes]) + self.memory_weight * self._mem_frac[nodes])

    def _similarity_of_sets(self, model: str, set_ids: np.ndarray) -> np.ndarray:
        """Op-mix similarity of ``model`` to each co-runner set, from a per-model table (NaN = not yet known)."""
        table = self._similarity.get(model)
        size = len(self.types.sets)
        if table is None or len(table) < size:
            if sum(len(t) for t in self._similarity.values()) > 20_000_000:  # bound memory: start afresh
                self._similarity = {}
                table = None
            grown = np.full(max(2 * size, 64), np.nan)
            if table is not None:
                grown[:len(table)] = table
            table = self._similarity[model] = grown
        values = table[set_ids]
        missing = np.isnan(values)
        if missing.any():
            for s in np.unique(set_ids[missing]).tolist():
                table[s] = op_mix_similarity(model, self.types.sets[s])
            values = table[set_ids]
        return values

    # ---- node level ------------------------------------------------------------------------
    def comm_cost(self, spec: JobSpec, node: Node, local: tuple[int, ...], state: SchedulerState) -> float:
        """All-reduce time over ``local`` GPUs as a fraction of the predicted iteration time."""
        if len(local) <= 1:
            return 0.0
        iter_s = max(state.predict(spec, node.gpu_type).iter_time_s, 1e-6)
        return allreduce_time_s(gradient_bytes(spec.model), node, local) / iter_s

    def _shape(self, spec: JobSpec, node: Node, state: SchedulerState) -> _Shape | None:
        """All k-subsets of a node shape with their comm costs, or None beyond ``max_subsets``."""
        k = spec.num_gpus
        key = (spec.job_type, node.gpu_type.name, node.num_gpus, node.intra_link, k)
        if key not in self._shapes:
            if _n_subsets(node.num_gpus, k) > self.max_subsets:
                self._shapes[key] = None
            else:
                subsets = list(combinations(range(node.num_gpus), k))
                comm = np.array([self.comm_cost(spec, node, s, state) for s in subsets], dtype=float)
                self._shapes[key] = _Shape(np.array(subsets, dtype=np.int64).reshape(len(subsets), k), comm)
        return self._shapes[key]

    def nlwp_many(self, job: QueuedJob, nodes: np.ndarray, padded: np.ndarray,
                  state: SchedulerState) -> tuple[np.ndarray, np.ndarray]:
        """NLWP cost and chosen local GPUs (one row of k per node) of every node in ``nodes``.

        Row i of ``padded`` holds node ``nodes[i]``'s per-GPU losses (inf past its last GPU).
        """
        k = job.spec.num_gpus
        if k == 1:
            local = np.argmin(padded, axis=1)
            return padded[np.arange(len(nodes)), local], local[:, None]
        cost = np.empty(len(nodes))
        chosen = np.zeros((len(nodes), k), dtype=np.int64)
        by_shape: dict[tuple[str, int, str], list[int]] = {}
        cluster_nodes = state.cluster.nodes
        for row, n in enumerate(nodes.tolist()):
            node = cluster_nodes[n]
            by_shape.setdefault((node.gpu_type.name, node.num_gpus, node.intra_link), []).append(row)
        for rows in by_shape.values():
            node = cluster_nodes[int(nodes[rows[0]])]
            shape = self._shape(job.spec, node, state)
            if shape is None:  # too many subsets: the per-node rule (greedy where it says so)
                for row in rows:
                    local, cost[row] = self.nlwp_node(job, node, padded[row, :node.num_gpus], state)
                    chosen[row] = local
                continue
            rows_a = np.array(rows)
            totals = padded[rows_a][:, shape.subsets].sum(axis=2) + self.comm_weight * shape.comm
            best = np.argmin(totals, axis=1)
            cost[rows_a] = totals[np.arange(len(rows)), best]
            chosen[rows_a] = shape.subsets[best]
        return cost, chosen

    def nlwp_node(self, job: QueuedJob, node: Node, local_loss: np.ndarray,
                  state: SchedulerState) -> tuple[tuple[int, ...], float]:
        """(local GPUs, cost) inside one node minimising predicted loss + comm_weight x communication cost."""
        k = job.spec.num_gpus
        candidates = [int(i) for i in np.flatnonzero(np.isfinite(local_loss))]

        def cost(subset: tuple[int, ...]) -> float:
            return float(local_loss[list(subset)].sum()) + self.comm_weight * self.comm_cost(
                job.spec, node, subset, state)

        if k == 1 or _n_subsets(len(candidates), k) <= self.max_subsets:
            best = min(combinations(candidates, k), key=cost)
        else:  # greedy: cheapest GPU first, then the one adding least cost
            chosen = [min(candidates, key=lambda i: local_loss[i])]
            while len(chosen) < k:
                rest = [i for i in candidates if i not in chosen]
                chosen.append(min(rest, key=lambda i: cost((*chosen, i))))
            best = tuple(chosen)
        return tuple(sorted(best)), cost(best)
