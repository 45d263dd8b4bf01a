"""Shared machinery of the policies: order/placement registries, cluster geometry, GPU selection.

* ``ORDERS`` / ``PLACEMENTS``: registries of queue orders and placements, so any combination can be
  built by name (``POLICIES.create("compose", order="sjf", placement="horus")``).
* ``ClusterIndex``: per-cluster arrays (GPU type id, node-padded GPU matrix) computed once.
* ``select_gpus``: given one cost per GPU (``inf`` = infeasible) and a worker count, choose the GPUs:
  fewest nodes first, then lowest total cost, all of one GPU type. Vectorised over nodes.
* ``FastPlacement`` / ``OrderedPolicy``: a placement with a per-call summary for O(1) rejection and a
  composed policy that bails out early when nothing can fit (needed for 82k-job traces).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from itertools import islice

import numpy as np

from horus.cluster import Cluster, GPUType
from horus.gpu_types import accepted_gpu_types
from horus.jobs import JobSpec
from reference_policies.base import Action, ComposedPolicy, Placement, QueueOrder
from horus.predict.base import Prediction
from horus.registry import Registry
from horus.state import GPULoad, QueuedJob, SchedulerState

ORDERS: Registry[QueueOrder] = Registry("queue order")
PLACEMENTS: Registry[Placement] = Registry("placement")

EPS = 1e-9


# ---- cluster geometry -------------------------------------------------------------------------
class ClusterIndex:
    """Arrays describing a cluster's layout, indexed like every per-GPU array."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.types: list[GPUType] = cluster.gpu_types()
        type_id = {t.name: i for i, t in enumerate(self.types)}
        self.type_of_gpu = np.array([type_id[g.gpu_type.name] for g in cluster.gpus], dtype=np.int64)
        self.node_of_gpu = np.array([g.node for g in cluster.gpus], dtype=np.int64)
        self.num_nodes = len(cluster.nodes)
        self.node_size = np.array([n.num_gpus for n in cluster.nodes], dtype=np.int64)
        width = int(self.node_size.max()) if self.num_nodes else 0
        first = np.concatenate(([0], np.cumsum(self.node_size)[:-1])) if self.num_nodes else np.zeros(0, np.int64)
        self.node_first = first.astype(np.int64)  # global index of each node's first GPU
        cols = np.arange(width)
        # node_gpus[n, j] = global index of node n's j-th GPU; padding points at GPU 0 and is masked.
        self.node_pad = cols[None, :] >= self.node_size[:, None]
        self.node_gpus = np.where(self.node_pad, 0, first[:, None] + cols[None, :])
        counts = np.bincount(self.type_of_gpu, minlength=len(self.types))
        self.main_type: GPUType = self.types[int(np.argmax(counts))]
        self.type_masks = {t.name: self.type_of_gpu == i for i, t in enumerate(self.types)}
        self._request_masks: dict[str, np.ndarray | None] = {}

    def request_mask(self, request: str | None) -> np.ndarray | None:
        """Boolean mask of GPUs whose type a ``gpu_type_request`` accepts (``"P100|T4"``: either), or
        None for any GPU. Names the cluster lacks match nothing. Cached per request string; read-only."""
        if request is None:
            return None
        mask = self._request_masks.get(request, False)
        if mask is False:
            accepted = accepted_gpu_types(request)
            if accepted is None:
                mask = None
            else:
                ids = [i for i, t in enumerate(self.types) if t.name in accepted]
                mask = np.isin(self.type_of_gpu, ids)
                mask.setflags(write=False)
            self._request_masks[request] = mask
        return mask

    def allowed(self, spec: JobSpec) -> np.ndarray | None:
        """Boolean mask of GPUs the job may use (``request_mask`` of its ``gpu_type_request``), None for all."""
        return self.request_mask(spec.gpu_type_request)

    def per_gpu(self, values: Sequence[float]) -> np.ndarray | float:
        """Broadcast one value per GPU type to all GPUs (a scalar on single-type clusters)."""
        if len(self.types) == 1:
            return float(values[0])
        return np.asarray(values, dtype=float)[self.type_of_gpu]


_INDEX_CACHE: dict[int, ClusterIndex] = {}


def cluster_index(cluster: Cluster) -> ClusterIndex:
    """The (cached) ClusterIndex of ``cluster``."""
    idx = _INDEX_CACHE.get(id(cluster))
    if idx is None or idx.cluster is not cluster:
        if len(_INDEX_CACHE) > 32:
            _INDEX_CACHE.clear()
        idx = _INDEX_CACHE[id(cluster)] = ClusterIndex(cluster)
    return idx


def job_predictions(spec: JobSpec, state: SchedulerState, idx: ClusterIndex) -> list[Prediction]:
    """The job's prediction on every GPU type of the cluster (cached by the state)."""
    return [state.predict(spec, t) for t in idx.types]


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


# ---- GPU selection ----------------------------------------------------------------------------
def select_gpus(cost: np.ndarray, k: int, idx: ClusterIndex) -> tuple[tuple[int, ...], float] | None:
    """Choose ``k`` GPUs of one type: fewest nodes first, then the lowest summed cost.

    ``cost`` holds one value per GPU, ``inf`` where the job cannot go. Returns (gpus, summed cost) or
    None. For each node the ``k`` cheapest feasible GPUs are considered; if no node has ``k``, nodes
    with the most feasible GPUs are combined (ties: cheaper first).
    """
    if k == 1:
        g = int(np.argmin(cost))
        c = float(cost[g])
        return ((g,), c) if np.isfinite(c) else None
    best: tuple[tuple[int, float], tuple[int, ...]] | None = None
    for t in range(len(idx.types)):
        cost_t = cost if len(idx.types) == 1 else np.where(idx.type_of_gpu == t, cost, np.inf)
        found = _select_one_type(cost_t, k, idx)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    if best is None:
        return None
    return best[1], best[0][1]


def _select_one_type(cost: np.ndarray, k: int, idx: ClusterIndex) -> tuple[tuple[int, float], tuple[int, ...]] | None:
    padded = np.where(idx.node_pad, np.inf, cost[idx.node_gpus])
    order = np.argsort(padded, axis=1, kind="stable")
    sorted_cost = np.take_along_axis(padded, order, axis=1)
    finite = np.isfinite(sorted_cost)
    count = finite.sum(axis=1)
    if int(count.sum()) < k:
        return None
    if k <= sorted_cost.shape[1]:
        fits = count >= k
        if fits.any():
            sums = np.where(fits, sorted_cost[:, :k].sum(axis=1), np.inf)
            node = int(np.argmin(sums))
            gpus = idx.node_gpus[node, order[node, :k]]
            return (1, float(sums[node])), tuple(int(g) for g in gpus)
    # Span several nodes: most feasible GPUs first (fewest nodes), cheaper first on ties.
    feasible_sum = np.where(finite, sorted_cost, 0.0).sum(axis=1)
    nodes = np.lexsort((feasible_sum, -count))
    chosen: list[int] = []
    total = 0.0
    used = 0
    for node in nodes:
        take = min(int(count[node]), k - len(chosen))
        chosen.extend(int(g) for g in idx.node_gpus[node, order[node, :take]])
        total += float(sorted_cost[node, :take].sum())
        used += 1
        if len(chosen) == k:
            break
    return (used, total), tuple(chosen)


# ---- placements with cheap rejection ----------------------------------------------------------
class FastPlacement(Placement):
    """A placement that keeps a per-call summary of the planned load for O(1) rejection.

    Policies call ``begin(load, state)`` once per scheduling call and ``update(load, state)`` after
    each planned start; ``place`` then rejects hopeless jobs without touching per-GPU arrays.
    """

    def begin(self, load: GPULoad, state: SchedulerState) -> None:
        self.idx = cluster_index(state.cluster)
        self.update(load, state)

    @abstractmethod
    def update(self, load: GPULoad, state: SchedulerState) -> None:
        """Recompute the summary after ``load`` changed."""

    @abstractmethod
    def any_room(self) -> bool:
        """False when, per the summary, no job at all can be placed (the caller stops)."""

    @abstractmethod
    def cost_per_gpu(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> np.ndarray | None:
        """One cost per GPU (``inf`` = infeasible), or None when the summary already rules the job out."""

    def evaluate(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> tuple[tuple[int, ...], float] | None:
        """Best GPUs for the job and their mean cost per worker, or None."""
        if not hasattr(self, "idx") or self.idx.cluster is not state.cluster:
            self.begin(load, state)
        cost = self.cost_per_gpu(job, load, state)
        if cost is None:
            return None
        found = select_gpus(cost, job.spec.num_gpus, self.idx)
        if found is None:
            return None
        return found[0], found[1] / job.spec.num_gpus

    def place(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> tuple[int, ...] | None:
        found = self.evaluate(job, load, state)
        return None if found is None else found[0]


def needs_empty_gpu(job: QueuedJob) -> bool:
    """A job that already failed out-of-memory is only placed on GPUs with no residents."""
    return job.oom_failures > 0


# ---- queue orders -----------------------------------------------------------------------------
class FastOrder(QueueOrder):
    """A queue order that can also return just the first ``k`` jobs (default: sort and slice)."""

    def head(self, state: SchedulerState, k: int) -> list[QueuedJob]:
        return self.order(list(state.queue.values()), state)[:k]


class OrderedPolicy(ComposedPolicy):
    """ComposedPolicy that bails out early: nothing to do when the placement reports no room."""

    def schedule(self, state: SchedulerState) -> list[Action]:
        if not state.queue:
            return []
        load = state.tentative()
        if isinstance(self.placement, FastPlacement):
            self.placement.begin(load, state)
            if not self.placement.any_room():
                return []
        if isinstance(self.order_rule, FastOrder):
            jobs = self.order_rule.head(state, self.max_scan)
        else:
            jobs = self.order_rule.order(list(state.queue.values()), state)[: self.max_scan]
        return self.place_in_order(jobs, load, state)

    def room_left(self, load: GPULoad, state: SchedulerState) -> bool:
        if not isinstance(self.placement, FastPlacement):
            return True
        self.placement.update(load, state)
        return self.placement.any_room()


def fifo_head(state: SchedulerState, k: int) -> list[QueuedJob]:
    """First ``k`` queued jobs in FIFO order.

    ``SchedulerState.queue`` is kept in insertion order = arrival/requeue order, i.e. ascending
    ``queued_since`` (state.py contract), so no sort is needed.
    """
    return list(islice(state.queue.values(), k))
