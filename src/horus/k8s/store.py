"""The cluster as last listed from the API server, plus the pods this extender just bound.

``sync(nodes, pods)`` takes a full listing: it rebuilds the model when any node's GPUs changed and
otherwise applies only the pods that changed (by ``resourceVersion``). ``assume(pod)`` counts a pod the
extender has just bound before the next listing shows it (kept ``assume_ttl_s`` at most), as
kube-scheduler's own cache does. Everything is derived from API objects: a restart loses nothing.
``sync_failed(error)`` records a listing that could not be made; ``health(stale_after_s)`` says whether the
last attempt succeeded and how long ago the last success was (what ``/healthz`` answers, without the lock).
With a tenancy (``queues``, ``horus.k8s.queues``), the model's pods carry their queues; ``stamp`` moves with each
listing (pending requests per queue are recounted then; a bind takes its pod off them at once).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from horus.k8s.model import ClusterModel, is_placed
from horus.k8s.nodes import node_gpus
from horus.k8s.resources import pod_job_id
from horus.predict.base import Predictor

if TYPE_CHECKING:
    from horus.k8s.queues import QueueGate


def _version(obj: dict[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


class ClusterStore:
    def __init__(self, predictor: Predictor, *, clock: Callable[[], float] = time.time,
                 assume_ttl_s: float = 30.0, onnx: Callable[[str, str], str] | None = None,
                 queues: QueueGate | None = None) -> None:
        self.lock = threading.RLock()
        self.queues = queues
        self._tenant = queues.placed_fields if queues is not None else None
        self.stamp = 0  # moves with each listing or rebuild
        self.predictor = predictor
        self.onnx = onnx  # resolves horus.io/onnx-configmap annotations (horus.k8s.onnx_models)
        self.clock = clock
        self.assume_ttl_s = assume_ttl_s
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.assumed: dict[str, tuple[float, dict[str, Any]]] = {}
        self.model = ClusterModel([], [], predictor, onnx=onnx, tenant=self._tenant)
        self.synced = False  # a listing was applied at least once
        self.rebuilds = 0
        self.last_sync_s = 0.0  # how long the last applied listing took
        self.last_success: float | None = None  # time.monotonic() when the last listing was applied
        self.last_error = ""  # why the last attempt failed; "" when it succeeded
        self.failures = 0  # attempts failed in a row

    # ---- full listings -------------------------------------------------------------------------------
    def sync(self, nodes: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> None:
        began = time.perf_counter()
        with self.lock:
            now = self.clock()
            listed = {pod_job_id(p): p for p in pods}
            for job_id, (when, pod) in list(self.assumed.items()):
                current = listed.get(job_id)
                if (current is not None and is_placed(current)) or now - when > self.assume_ttl_s:
                    del self.assumed[job_id]  # the API caught up (or never will)
                else:
                    listed[job_id] = pod
            new_nodes = {str((n.get("metadata") or {}).get("name")): n for n in nodes}
            if not self.synced or self._gpus_changed(new_nodes, replace=True):
                self.nodes = new_nodes
                self._rebuild(listed, now)
            else:
                self.nodes = new_nodes
                self._apply(listed, now)
            self.synced = True
            self.stamp += 1
            if self.queues is not None:  # charges and pending requests: here, in the re-listing thread, not a request
                self.queues.observe(self.model.state)
                self.queues.pending(self.pods, self.stamp)
        self.last_sync_s = time.perf_counter() - began
        self.last_success, self.last_error, self.failures = time.monotonic(), "", 0

    def sync_failed(self, error: str) -> None:
        """A listing could not be made (or applied): the last good state stays, ``/healthz`` turns 503."""
        self.last_error, self.failures = error[:500], self.failures + 1

    def health(self, stale_after_s: float | None = None) -> dict[str, Any]:
        """``synced`` when a listing was applied, the last attempt succeeded and the last success is at most
        ``stale_after_s`` old (None: any age). Reads a few attributes only: never waits for the store's lock."""
        last, error, failures = self.last_success, self.last_error, self.failures
        age = None if last is None else time.monotonic() - last
        fresh = age is not None and (stale_after_s is None or age <= stale_after_s)
        healthy = self.synced and not error and fresh
        return {"synced": healthy, "listed": self.synced, "last_error": error or None, "consecutive_failures": failures,
                "last_success_age_s": None if age is None else round(age, 3), "stale_after_s": stale_after_s}

    def upsert_nodes(self, nodes: Iterable[dict[str, Any]]) -> None:
        """Nodes as sent in ``ExtenderArgs.Nodes`` (a subset: nodes not sent are kept). Only nodes whose
        ``resourceVersion`` moved are looked at; the model is rebuilt only if one's GPUs changed."""
        with self.lock:
            changed = {}
            for node in nodes:
                name = node["metadata"]["name"]
                old = self.nodes.get(name)
                if old is None or _version(old) != _version(node) or _version(node) is None:
                    changed[name] = node
            if not changed:
                return
            self.nodes = {**self.nodes, **changed}
            if self._gpus_changed(changed, replace=False):
                self._rebuild(dict(self.pods), self.clock())
                self.stamp += 1

    def _gpus_changed(self, nodes: dict[str, dict[str, Any]], *, replace: bool) -> bool:
        old = self.model.nodes
        if replace and set(nodes) != set(old):
            return True
        return any(name not in old or node_gpus(node).signature != old[name].signature
                   for name, node in nodes.items())

    def _rebuild(self, pods: dict[str, dict[str, Any]], now: float) -> None:
        self.model = ClusterModel(self.nodes.values(), pods.values(), self.predictor, now, self.onnx,
                                  tenant=self._tenant)
        self.pods = pods
        self.rebuilds += 1
        # The listing is hundreds of thousands of long-lived objects: keep them out of the cyclic garbage
        # collector's full passes, which otherwise stall a request for ~10 ms now and then.
        gc.collect()
        gc.freeze()

    def _apply(self, pods: dict[str, dict[str, Any]], now: float) -> None:
        model = self.model
        model.now = now
        for job_id, old in self.pods.items():
            new = pods.get(job_id)
            if new is None or new is not old and (_version(new) != _version(old) or _version(new) is None):
                model.remove_pod(job_id)
        for job_id, pod in pods.items():
            if job_id not in model.pods:
                model.add_pod(pod)
        self.pods = pods

    # ---- our own binds ---------------------------------------------------------------------------------
    def assume(self, pod: dict[str, Any]) -> None:
        """Count ``pod`` (bound by us, annotations and ``spec.nodeName`` set) until a listing shows it."""
        with self.lock:
            job_id = pod_job_id(pod)
            self.assumed[job_id] = (self.clock(), pod)
            self.pods[job_id] = pod
            if self.queues is not None:
                self.queues.bound(job_id)
            self.model.remove_pod(job_id)
            self.model.add_pod(pod)
