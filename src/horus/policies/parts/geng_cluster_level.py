"""geng's cluster level (CLWP): which node, by NLWP cost, op-mix similarity, idle and memory share.

Among nodes with ``k`` eligible GPUs, the lowest ``(NLWP cost) / k + similarity_weight x op-mix
similarity to the node's co-runners - free_weight x idle fraction + memory_weight x memory
fraction``; ties (within ``SCORE_TIE``) go to the lowest node index. Similarity = mean cosine of
op-kind histograms from the catalog (jobs built of the same ops contend for the same units),
memoised per (model, set of co-runner types); it is looked up only for nodes whose bound can still
reach the best score, lowest bound first (the best found so far tightens the bound).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from horus.catalog import OP_KINDS, load_catalog
from horus.policies.parts.cluster_index import ClusterIndex
from horus.policies.parts.geng_node_level import NodeLevel
from horus.policies.parts.resident_types import ResidentTypes
from horus.state import QueuedJob, SchedulerState

SCORE_TIE = 1e-12  # node scores closer than this are ties (lowest node index wins)
_add_reduce = np.add.reduce


@cache
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
    values = [_pair_similarity(model, t) for t in sorted(corunner_types)]
    return mean_as_numpy(values)


def mean_as_numpy(values: list[float]) -> float:
    """``float(np.mean(values))`` bit for bit, cheaper: numpy sums fewer than 8 float64s left to right
    (its pairwise sum starts at 8; tests/test_geng_reference.py checks this), so those are summed here."""
    n = len(values)
    if n >= 8:
        return float(_add_reduce(np.array(values, dtype=float))) / n
    total = 0.0
    for v in values:
        total += v
    return total / n


@cache
def _pair_similarity(model: str, job_type: str) -> float:
    """Cosine of ``model``'s op mix and that of ``job_type``'s model (cached)."""
    return float(op_mix(model) @ op_mix(job_type.rpartition("/b")[0]))


def _uniform(idx: ClusterIndex) -> bool:
    """Whether every node has the same number of GPUs, numbered node after node (then a per-GPU array reshaped
    is the per-node rows)."""
    flag = getattr(idx, "_geng_uniform", None)
    if flag is None:
        flag = idx._geng_uniform = bool(  # type: ignore[attr-defined]
            idx.num_nodes > 0 and not idx.node_pad.any() and idx.node_gpus.size == len(idx.node_of_gpu)
            and np.array_equal(idx.node_gpus.ravel(), np.arange(idx.node_gpus.size)))
    return flag


def _node_rows(loss: np.ndarray, idx: ClusterIndex) -> tuple[np.ndarray, np.ndarray]:
    """Per node, its GPUs' losses (inf past its last GPU; read-only) and how many are finite."""
    if not _uniform(idx):
        padded = np.where(idx.node_pad, np.inf, loss[idx.node_gpus])
        return padded, np.isfinite(padded).sum(axis=1)
    padded = loss.reshape(idx.node_gpus.shape)
    finite = np.isfinite(loss)
    if padded.shape[1] == 8 and hasattr(np, "bitwise_count"):  # eight one-byte booleans per node: set bits = count
        return padded, np.bitwise_count(finite.view(np.uint64)).astype(np.int64)
    return padded, finite.reshape(padded.shape).sum(axis=1)


class ClusterLevel:
    """CLWP: the node (and, through ``NodeLevel``, its GPUs) for a job given its per-GPU losses."""

    def __init__(self, *, similarity_weight: float = 0.2, free_weight: float = 0.1,
                 memory_weight: float = 0.05) -> None:
        self.similarity_weight = similarity_weight
        self.free_weight = free_weight
        self.memory_weight = memory_weight
        self._similarity: dict[str, np.ndarray] = {}  # model -> similarity per co-runner set id
        self._pairs: dict[str, dict[str, float]] = {}  # model -> co-runner type -> pair similarity

    def choose(self, job: QueuedJob, loss: np.ndarray, idx: ClusterIndex, types: ResidentTypes,
               idle_frac: np.ndarray, mem_frac: np.ndarray, node_level: NodeLevel,
               state: SchedulerState) -> tuple[int, tuple[int, ...]] | None:
        """(node, its NLWP GPUs) for ``job``, or None when no node has k eligible GPUs."""
        k = job.spec.num_gpus
        padded, count = _node_rows(loss, idx)
        nodes = np.flatnonzero((idx.node_size >= k) & (count >= k))
        if len(nodes) == 0:
            return None
        cost, local = node_level.choose_many(job, nodes, padded[nodes], state)
        # Score without the similarity term: exact on nodes without co-runners, a lower bound elsewhere
        # (similarity >= 0). Similarity is looked up only where that bound can still reach the ties.
        score = (cost / k - self.free_weight * idle_frac[nodes]) + self.memory_weight * mem_frac[nodes]
        busy = types.set_of_node[nodes] != 0
        if busy.any():
            bound = float(score[~busy].min()) if not busy.all() else np.inf
            need = np.flatnonzero(busy & (score <= bound + SCORE_TIE))
            lower = score[need]
            score[busy] = np.inf
            # Lowest bound first, in growing chunks, until the next bound cannot reach the best score found
            # (a node left out scores above every tie, so the choice is the one of looking all up).
            order = np.argsort(lower, kind="stable")
            need, lower = need[order], lower[order]
            start, chunk = 0, 16
            while start < len(need) and lower[start] <= bound + SCORE_TIE:
                part = need[start:start + chunk]
                similarity = self._similarity_of_sets(job.spec.model, types.set_of_node[nodes[part]], types)
                score[part] = (((cost[part] / k + self.similarity_weight * similarity)
                                - self.free_weight * idle_frac[nodes[part]]) + self.memory_weight * mem_frac[nodes[part]])
                bound = min(bound, float(score[part].min()))
                start, chunk = start + chunk, 2 * chunk
        best = int(np.argmax(score <= score.min() + SCORE_TIE))  # lowest node index among the ties
        first = int(idx.node_first[nodes[best]])
        return int(nodes[best]), tuple(first + int(i) for i in local[best])

    def _similarity_of_sets(self, model: str, set_ids: np.ndarray, types: ResidentTypes) -> np.ndarray:
        """Op-mix similarity of ``model`` to each co-runner set, from a per-model table (NaN = not yet known)."""
        table = self._similarity.get(model)
        size = len(types.sets)
        if table is None or len(table) < size:
            if sum(len(t) for t in self._similarity.values()) > 20_000_000:  # bound memory: start afresh
                self._similarity, self._pairs = {}, {}
                table = None
            grown = np.full(max(2 * size, 64), np.nan)
            if table is not None:
                grown[:len(table)] = table
            table = self._similarity[model] = grown
        values = table[set_ids]
        missing = np.isnan(values)
        if missing.any():
            pair = self._pairs.setdefault(model, {})  # op_mix_similarity's terms, per co-runner type
            for s in np.unique(set_ids[missing]).tolist():
                sims = []
                for t in types.sorted_sets[s]:  # in op_mix_similarity's order: the same mean
                    v = pair.get(t)
                    sims.append(pair.setdefault(t, _pair_similarity(model, t)) if v is None else v)
                table[s] = mean_as_numpy(sims) if sims else 0.0
            values = table[set_ids]
        return values
