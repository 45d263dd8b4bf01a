"""Per-cluster arrays every policy indexes GPUs by (``ClusterIndex``), cached per Cluster object.

``cluster_index(cluster)`` returns the cached index of that exact object: a rebuilt cluster (machines
joined or left) gets a fresh index, so nothing computed for the old layout is reused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from horus.cluster import Cluster, GPUType
from horus.gpu_types import accepted_gpu_types
from horus.jobs import JobSpec
from horus.predict.base import Prediction
from horus.state import SchedulerState


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


def job_mem_per_gpu(spec: JobSpec, state: SchedulerState, idx: ClusterIndex) -> np.ndarray | float:
    """One worker's predicted memory (MiB) on each GPU (a scalar on single-type clusters, as ``per_gpu``)."""
    return idx.per_gpu([p.mem_mib for p in job_predictions(spec, state, idx)])
