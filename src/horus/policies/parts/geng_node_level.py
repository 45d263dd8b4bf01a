"""geng's node level (NLWP): which k GPUs inside one node, by predicted loss + communication cost.

The k-subset minimising summed per-GPU predicted loss plus ``comm_weight x`` ring all-reduce time
(4 bytes x params, ``horus.topology`` link classes) over the job's predicted iteration time;
exhaustive up to ``max_subsets`` subsets (first minimum in lexicographic order), greedy beyond.
Vectorised over all candidate nodes of one shape against a precomputed table of k-subsets and their
communication costs (per job type and node shape).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from horus.cluster import Cluster, Node
from horus.comm import gradient_bytes
from horus.jobs import JobSpec
from horus.state import QueuedJob, SchedulerState
from horus.topology import allreduce_time_s


class _Shape:
    """Precomputed k-subsets of one node shape and a job type's communication cost on each."""

    def __init__(self, subsets: np.ndarray, comm: np.ndarray) -> None:
        self.subsets = subsets  # (s, k) local GPU indices, lexicographic (itertools.combinations) order
        self.comm = comm  # (s,) comm_cost of each subset


def n_subsets(n: int, k: int) -> float:
    """Number of k-subsets of n, computed as the rule defines it (float product)."""
    value = 1.0
    for i in range(k):
        value *= (n - i) / (i + 1)
    return value


class NodeLevel:
    """NLWP: the GPUs of a job inside each candidate node, and their cost."""

    def __init__(self, *, comm_weight: float = 1.0, max_subsets: int = 512) -> None:
        self.comm_weight = comm_weight
        self.max_subsets = max_subsets
        self._shapes: dict[tuple[str, str, int, str, int], _Shape | None] = {}
        self._shapes_for: Cluster | None = None
        self._shape_of_node: tuple[np.ndarray, int] = (np.zeros(0, dtype=np.int64), 0)

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
            if n_subsets(node.num_gpus, k) > self.max_subsets:
                self._shapes[key] = None
            else:
                subsets = list(combinations(range(node.num_gpus), k))
                comm = np.array([self.comm_cost(spec, node, s, state) for s in subsets], dtype=float)
                self._shapes[key] = _Shape(np.array(subsets, dtype=np.int64).reshape(len(subsets), k), comm)
        return self._shapes[key]

    def choose_many(self, job: QueuedJob, nodes: np.ndarray, padded: np.ndarray,
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
        cluster_nodes = state.cluster.nodes
        shape_of_node, n_shapes = self._node_shapes(state.cluster)
        of_rows = shape_of_node[nodes]
        for s in range(n_shapes):  # rows of one node shape, in row order
            rows = np.flatnonzero(of_rows == s).tolist() if n_shapes > 1 else list(range(len(nodes)))
            if not rows:
                continue
            node = cluster_nodes[int(nodes[rows[0]])]
            shape = self._shape(job.spec, node, state)
            if shape is None:  # too many subsets: the per-node rule (greedy where it says so)
                for row in rows:
                    local, cost[row] = self.choose_one(job, node, padded[row, :node.num_gpus], state)
                    chosen[row] = local
                continue
            rows_a = np.array(rows)
            totals = padded[rows_a][:, shape.subsets].sum(axis=2) + self.comm_weight * shape.comm
            best = np.argmin(totals, axis=1)
            cost[rows_a] = totals[np.arange(len(rows)), best]
            chosen[rows_a] = shape.subsets[best]
        return cost, chosen

    def _node_shapes(self, cluster: Cluster) -> tuple[np.ndarray, int]:
        """Per node, the id of its shape (GPU type, GPU count, intra-node link), and how many shapes (cached per cluster)."""
        if self._shapes_for is not cluster:
            ids: dict[tuple[str, int, str], int] = {}
            of_node = [ids.setdefault((n.gpu_type.name, n.num_gpus, n.intra_link), len(ids)) for n in cluster.nodes]
            self._shapes_for, self._shape_of_node = cluster, (np.array(of_node, dtype=np.int64), len(ids))
        return self._shape_of_node

    def choose_one(self, job: QueuedJob, node: Node, local_loss: np.ndarray,
                   state: SchedulerState) -> tuple[tuple[int, ...], float]:
        """(local GPUs, cost) inside one node minimising predicted loss + comm_weight x communication cost."""
        k = job.spec.num_gpus
        candidates = [int(i) for i in np.flatnonzero(np.isfinite(local_loss))]

        def cost(subset: tuple[int, ...]) -> float:
            return float(local_loss[list(subset)].sum()) + self.comm_weight * self.comm_cost(
                job.spec, node, subset, state)

        if k == 1 or n_subsets(len(candidates), k) <= self.max_subsets:
            best = min(combinations(candidates, k), key=cost)
        else:  # greedy: cheapest GPU first, then the one adding least cost
            chosen = [min(candidates, key=lambda i: local_loss[i])]
            while len(chosen) < k:
                rest = [i for i in candidates if i not in chosen]
                chosen.append(min(rest, key=lambda i: cost((*chosen, i))))
            best = tuple(chosen)
        return tuple(sorted(best)), cost(best)
