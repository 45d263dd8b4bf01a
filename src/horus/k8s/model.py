"""Horus's cluster model and ``SchedulerState`` rebuilt from Kubernetes nodes and pods.

The cluster is the nodes with usable GPUs (``horus.k8s.nodes``), in name order. The per-GPU load is
the sum over *placed* pods (``spec.nodeName`` set, phase neither Succeeded nor Failed) of their
predicted load on the GPUs their decision annotations name: the same pods and annotations always give
the same load, so a restarted extender rebuilds exactly what it had (there is no private state).
GPU pods without a readable decision (placed by someone else) are listed in ``unknown`` and not counted.
With a tenancy, each counted pod's spec carries its queue and priority class (``tenant``, ``horus.k8s.queues``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from itertools import count
from typing import Any

import numpy as np

from horus.cluster import Cluster, Node
from horus.k8s.nodes import NodeGPUs, node_gpus
from horus.k8s.resources import PodError, decided_gpus, pod_job_id, pod_job_spec, pod_key
from horus.cluster import GPUType
from horus.jobs import JobSpec
from horus.predict.base import Prediction, Predictor
from horus.state import SchedulerState

DONE_PHASES = frozenset({"Succeeded", "Failed"})
_GENERATIONS = count()


def is_placed(pod: dict[str, Any]) -> bool:
    """The pod holds its node's resources: bound (or assumed) and not finished."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    return bool(isinstance(spec, dict) and spec.get("nodeName")) and (status or {}).get("phase") not in DONE_PHASES


class PodState(SchedulerState):
    """``SchedulerState`` whose prediction cache also keys on a pod's declared limits (``belief_key``)."""

    def predict(self, spec: JobSpec, gpu_type: GPUType) -> Prediction:
        key = (getattr(spec, "belief_key", spec.job_type), gpu_type.name)
        pred = self._pred_cache.get(key)
        if pred is None:
            pred = self._pred_cache[key] = self.predictor.predict(spec, gpu_type)
        return pred


class ClusterModel:
    """Cluster, state and the placed pods of a set of nodes. Mutated only through ``add_pod`` / ``remove_pod``."""

    def __init__(self, nodes: Iterable[dict[str, Any]] | Iterable[NodeGPUs], pods: Iterable[dict[str, Any]],
                 predictor: Predictor, now: float = 0.0, onnx: Callable[[str, str], str] | None = None,
                 specs: Mapping[str, tuple[dict[str, Any], JobSpec]] | None = None,
                 tenant: Callable[[dict[str, Any]], tuple[str, str | None]] | None = None) -> None:
        """``specs``: job id -> (pod, its spec) already read from those very pod objects (``restricted``).
        ``tenant(pod)``: (queue, priority class) a placed pod is counted under (None: no tenancy)."""
        infos = [n if isinstance(n, NodeGPUs) else node_gpus(n) for n in nodes]
        self.nodes: dict[str, NodeGPUs] = {info.name: info for info in sorted(infos, key=lambda i: i.name)}
        usable = [info for info in self.nodes.values() if info.problem is None]
        assert all(info.gpu_type is not None for info in usable)
        self.cluster = Cluster([Node(info.name, info.gpu_type, info.num_gpus)  # type: ignore[arg-type]
                                for info in usable])
        self.node_index: dict[str, int] = {info.name: i for i, info in enumerate(usable)}
        sizes = np.array([info.num_gpus for info in usable], dtype=np.int64)
        # the largest node: a pod asking for more can be turned away without asking the policy (O(1))
        self.max_node_gpus = int(sizes.max()) if len(usable) else 0
        self.first_gpu = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64) if len(usable) else sizes
        self.predictor = predictor
        self.onnx = onnx  # resolves horus.io/onnx-configmap annotations (horus.k8s.onnx_models)
        self.tenant = tenant
        self.state = PodState(self.cluster, predictor)
        self.now = now
        self.pods: dict[str, dict[str, Any]] = {}  # job id -> placed pod counted in the load
        self.by_node: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in self.node_index}
        self.unknown: dict[str, str] = {}  # job id -> why a placed GPU pod is not counted
        self.specs: dict[str, tuple[dict[str, Any], JobSpec]] = {}  # job id -> (counted pod, its spec)
        self._read = specs or {}
        self.generation = next(_GENERATIONS)  # with ``version``: identifies this model's current load
        self.version = 0
        for pod in pods:
            self.add_pod(pod)

    # ---- pods ------------------------------------------------------------------------------------
    def add_pod(self, pod: dict[str, Any]) -> bool:
        """Count a placed pod's load; False (and a note in ``unknown`` for GPU pods) when it is not counted."""
        job_id = pod_job_id(pod)
        if job_id in self.pods or not is_placed(pod):
            return False
        read = self._read.get(job_id)
        fresh = read is None or read[0] is not pod
        try:
            spec = pod_job_spec(pod, self.now, self.onnx) if fresh else replace(read[1], submit_time=self.now)
        except PodError as exc:
            self.unknown[job_id] = str(exc)
            return False
        if spec.num_gpus == 0:
            return False
        if fresh and self.tenant is not None:
            queue, priority = self.tenant(pod)
            spec = replace(spec, queue=queue, priority=priority)
        node = pod["spec"]["nodeName"]
        n = self.node_index.get(node)
        if n is None:
            self.unknown[job_id] = f"pod {pod_key(pod)}: node {node!r} has no GPUs Horus can use"
            return False
        info = self.nodes[node]
        local = decided_gpus(pod, list(info.uuids) if info.uuids else None, info.num_gpus)
        if local is None or len(local) != spec.num_gpus:
            self.unknown[job_id] = f"pod {pod_key(pod)} on {node}: no readable Horus/HAMi GPU decision"
            return False
        self.state.submit(spec, self.now)
        self.state.start(job_id, tuple(int(self.first_gpu[n]) + g for g in local), self.now)
        self.pods[job_id] = pod
        self.specs[job_id] = (pod, spec)
        self.by_node[node][job_id] = pod
        self.unknown.pop(job_id, None)
        self.version += 1
        return True

    def remove_pod(self, job_id: str) -> bool:
        self.unknown.pop(job_id, None)
        pod = self.pods.pop(job_id, None)
        if pod is None:
            return False
        self.by_node[pod["spec"]["nodeName"]].pop(job_id, None)
        self.specs.pop(job_id, None)
        self.state.finish(job_id)
        self.version += 1
        return True

    # ---- views -----------------------------------------------------------------------------------
    def local_gpus(self, node: str, gpus: Iterable[int]) -> list[int]:
        """Global GPU indices of ``node`` -> indices on the node."""
        first = int(self.first_gpu[self.node_index[node]])
        return [int(g) - first for g in gpus]

    def restricted(self, names: Iterable[str]) -> ClusterModel:
        """A model of only ``names`` (usable nodes) and the pods placed on them (a fresh, private copy; the pods'
        specs are not read again, only given this model's ``now``)."""
        keep = [self.nodes[n] for n in names if n in self.node_index]
        pods = [pod for info in keep for pod in self.by_node[info.name].values()]
        return ClusterModel(keep, pods, self.predictor, self.now, self.onnx, self.specs, self.tenant)

    def load_by_node(self) -> dict[str, dict[str, list[float]]]:
        """Per-node, per-GPU predicted load (JSON-able; used by tests and ``/state``)."""
        load = self.state.load
        out: dict[str, dict[str, list[float]]] = {}
        for name, n in self.node_index.items():
            sl = slice(int(self.first_gpu[n]), int(self.first_gpu[n]) + self.nodes[name].num_gpus)
            out[name] = {"pred_util": [round(float(x), 9) for x in load.pred_util[sl]],
                         "pred_mem_mib": [round(float(x), 6) for x in load.pred_mem_mib[sl]],
                         "residents": [int(x) for x in load.n_residents[sl]]}
        return out
