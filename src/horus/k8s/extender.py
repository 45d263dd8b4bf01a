"""The three extender verbs over a ``ClusterStore`` and a ``Decider``; binds serialised per node.

* filter: the candidate nodes on which the policy can place the pod now (others with the reason); a pod
  asking for more GPUs than the largest node has is turned away at once (``impossible``: O(1), no lock,
  every node unresolvable with the reason), whatever number it asks for;
* prioritize: 0..10 per candidate from the policy's cost there (the policy's own choice scores 10);
* bind: on the node kube-scheduler chose, ``SchedulerCore`` runs the policy on that node's state with
  the pod queued; its ``Executor`` (``_BindExecutor``) patches the decision annotations, posts the
  ``v1.Binding`` and counts the pod. One lock per node: two binds to one node never interleave, so the
  second sees the first's GPUs.

With a tenancy (``store.queues``, ``horus.k8s.queues``), filter refuses nodes where the pod's queue is over its
quota (code ``queue-over-quota``, in ``FailedAndUnresolvableNodes``: preempting pods there would not lower the
queue's charge), and bind checks again under one lock per queue, so two binds of one queue cannot both take its
last GPU.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from horus.core.tenancy import spec_need
from horus.errors import HorusInputError
from horus.jobs import JobSpec
from horus.k8s.api import KubeAPI, KubeAPIError
from horus.k8s.decide import Decider, PreemptionUnsupported
from horus.k8s.model import ClusterModel
from horus.k8s.protocol import (
    BindingArgs,
    ExtenderArgs,
    binding_result,
    encode_json,
    filter_result,
    host_priority_list,
)
from horus.k8s.queues import Tenant
from horus.k8s.resources import PodError, PodJobSpec, decision_annotations, memory_limit, pod_job_spec
from horus.reasons import GANG_TOO_LARGE

log = logging.getLogger("horus.k8s")
DEFAULT_MEMORY_MARGIN = 0.25


class _BindExecutor:
    """Carries out the core's Start for one pod: annotate, bind, count."""

    def __init__(self, extender: Extender, pod: dict[str, Any], args: BindingArgs, model: ClusterModel) -> None:
        self.extender = extender
        self.pod = pod
        self.args = args
        self.model = model
        self.annotations: dict[str, str] = {}

    def start(self, spec: JobSpec, gpus: tuple[int, ...], now: float) -> None:
        assert isinstance(spec, PodJobSpec)
        ext, args, node = self.extender, self.args, self.args.node
        info = self.model.nodes[node]
        assert info.gpu_type is not None and ext.api is not None
        local = self.model.local_gpus(node, gpus)
        card = info.gpu_type.memory_mib
        predicted = (self.model.state.predict(spec, info.gpu_type).mem_mib
                     if ext.memory_margin is not None and spec.gpumem_mib is None else None)
        self.annotations = decision_annotations(spec, node, local, list(info.uuids) if info.uuids else None,
                                                card, ext.clock(),
                                                memory_limit(spec, card, predicted, ext.memory_margin))
        uid = args.pod_uid or str(self.pod["metadata"].get("uid") or "")
        patched = ext.api.annotate_pod(args.pod_namespace, args.pod_name, self.annotations)
        ext.api.bind(args.pod_namespace, args.pod_name, uid, node)
        self.model.state.start(spec.job_id, gpus, now)
        placed = dict(patched or self.pod)
        placed["metadata"] = {**(placed.get("metadata") or {}),
                              "annotations": {**((placed.get("metadata") or {}).get("annotations") or {}),
                                              **self.annotations}}
        placed["spec"] = {**(placed.get("spec") or {}), "nodeName": node}
        ext.store.assume(placed)

    def preempt(self, job_id: str, now: float) -> None:
        raise PreemptionUnsupported(job_id)


class Extender:
    def __init__(self, store: Any, decider: Decider, api: KubeAPI | None, *,
                 clock: Callable[[], float] = time.time, memory_margin: float | None = DEFAULT_MEMORY_MARGIN) -> None:
        """``memory_margin``: a pod declaring no ``nvidia.com/gpumem`` is held to its predicted peak memory x
        (1 + margin) (``resources.memory_limit``); None: to the whole card."""
        self.store = store
        self.memory_margin = memory_margin
        self.decider = decider
        self.api = api
        self.clock = clock
        self._node_locks: dict[str, threading.Lock] = {}
        self._queue_locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.counts = {"filter": 0, "prioritize": 0, "bind": 0, "bind_errors": 0}

    def _count(self, verb: str) -> None:
        with self._guard:
            self.counts[verb] += 1

    def impossible(self, spec: JobSpec) -> str:
        """Why no node can ever take ``spec`` ("" if one might): more GPUs than the largest node Horus knows
        has. Reads the current model's ``max_node_gpus`` only: O(1), without the store's lock."""
        model = self.store.model
        if spec.num_gpus > model.max_node_gpus:
            return (f"[{GANG_TOO_LARGE}] Horus: pod needs {spec.num_gpus} GPUs on one node; the largest node has "
                    f"{model.max_node_gpus} ({model.cluster.num_gpus} GPUs on {len(model.node_index)} GPU nodes)")
        return ""

    def node_lock(self, node: str) -> threading.Lock:
        return self._lock(self._node_locks, node)

    def _lock(self, locks: dict[str, threading.Lock], key: str) -> threading.Lock:
        with self._guard:
            lock = locks.get(key)
            if lock is None:
                lock = locks[key] = threading.Lock()
            return lock

    def tenant(self, pod: dict[str, Any]) -> Tenant | None:
        """The pod's queue and priority class (None without a tenancy); PodError for an unknown one."""
        return self.store.queues.tenant(pod) if self.store.queues is not None else None

    def over_quota(self, tenant: Tenant, spec: JobSpec, names: list[str]) -> dict[str, str]:
        """Nodes of ``names`` the pod's queue may not take it on, with the reason (under the store's lock)."""
        store = self.store
        gate = store.queues
        return gate.refusals(store.model, tenant, spec_need(spec), names,
                             gate.pending(store.pods, store.stamp))

    # ---- filter / prioritize --------------------------------------------------------------------------
    def filter(self, args: ExtenderArgs) -> dict[str, Any]:
        self._count("filter")
        try:
            spec = pod_job_spec(args.pod, self.clock(), self.store.onnx)
        except PodError as exc:
            return filter_result(args, [], {}, {}, error=str(exc))
        if spec.num_gpus == 0:  # not a GPU pod: nothing for Horus to decide
            return filter_result(args, args.node_names, {}, {})
        try:
            tenant = self.tenant(args.pod)
        except PodError as exc:
            return filter_result(args, [], {}, {}, error=str(exc))
        if args.nodes is not None:
            self.store.upsert_nodes(args.nodes)
        impossible = self.impossible(spec)
        if impossible:
            return filter_result(args, [], {}, dict.fromkeys(args.node_names, impossible))
        names, refused = args.node_names, {}
        try:
            with self.store.lock:
                if tenant is not None:
                    refused = self.over_quota(tenant, spec, names)
                    names = [n for n in names if n not in refused] if refused else names
                if not names:
                    return filter_result(args, [], {}, refused)
                choices = self.decider.evaluate(self.store.model, spec, names)
                failed, unresolvable = choices.failed()
                passed = choices.passed()  # (under the lock: the decider keeps the passing list for prioritize)
        except HorusInputError as exc:  # e.g. a policy whose interference model does not know the pod's model
            return filter_result(args, [], {}, {}, error=f"Horus policy {self.decider.policy_name!r}: {exc}")
        return filter_result(args, passed, failed, {**unresolvable, **refused} if refused else unresolvable)

    def prioritize(self, args: ExtenderArgs) -> bytes:
        """The ``HostPriorityList``, encoded as JSON. Raises PodError / HorusInputError for a pod Horus cannot
        read or decide on (the server answers 400)."""
        self._count("prioritize")
        spec = pod_job_spec(args.pod, self.clock(), self.store.onnx)
        if spec.num_gpus == 0:
            return encode_json(host_priority_list((n, 0) for n in args.node_names))
        self.tenant(args.pod)  # the same refusal as filter's for a label naming no queue
        if args.nodes is not None:
            self.store.upsert_nodes(args.nodes)
        if self.impossible(spec):
            return encode_json(host_priority_list((n, 0) for n in args.node_names))
        with self.store.lock:
            choices = self.decider.evaluate(self.store.model, spec, args.node_names)
            return choices.priority_json()

    # ---- bind --------------------------------------------------------------------------------------------
    def bind(self, args: BindingArgs) -> dict[str, str]:
        self._count("bind")
        error = self._bind(args)
        if error:
            self._count("bind_errors")
            log.warning("bind %s/%s -> %s failed: %s", args.pod_namespace, args.pod_name, args.node, error)
        return binding_result(error)

    def _bind(self, args: BindingArgs) -> str:
        if self.api is None:
            return "this Horus extender has no Kubernetes API access; it cannot bind"
        try:
            pod = self.api.get_pod(args.pod_namespace, args.pod_name)
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            if args.pod_uid and uid and uid != args.pod_uid:
                return (f"pod {args.pod_namespace}/{args.pod_name} has UID {uid}, not {args.pod_uid} "
                        f"(it was recreated)")
            if (pod.get("spec") or {}).get("nodeName"):
                return f"pod {args.pod_namespace}/{args.pod_name} is already bound to {pod['spec']['nodeName']}"
            spec = pod_job_spec(pod, self.clock(), self.store.onnx)
            if spec.num_gpus == 0:
                self.api.bind(args.pod_namespace, args.pod_name, args.pod_uid or uid, args.node)
                return ""
            tenant = self.tenant(pod)
            impossible = self.impossible(spec)
            if impossible:
                return impossible
            # a queue's binds are serialised (queue lock, then node lock): each sees the previous one's charge
            with self._lock(self._queue_locks, tenant.queue) if tenant else nullcontext(), self.node_lock(args.node):
                with self.store.lock:
                    model = self.store.model
                    info = model.nodes.get(args.node)
                    if info is None or args.node not in model.node_index:
                        why = info.problem if info is not None else "node not (yet) known"
                        return f"Horus cannot place GPUs on node {args.node}: {why}"
                    if info.num_gpus < spec.num_gpus:
                        return (f"[{GANG_TOO_LARGE}] Horus: node {args.node} has {info.num_gpus} GPUs, pod needs "
                                f"{spec.num_gpus} on one node")
                    refused = self.over_quota(tenant, spec, [args.node]) if tenant else {}
                    if refused:
                        return refused[args.node]
                    model = model.restricted([args.node])
                model.now = self.clock()
                executor = _BindExecutor(self, pod, args, model)
                gpus = self.decider.ask(model, spec, executor)
                if gpus is None:
                    return (f"Horus policy {self.decider.policy_name!r}: pod {args.pod_namespace}/{args.pod_name} "
                            f"does not fit on {args.node} now (e.g. another pod was bound there since filter)")
            return ""
        except (KubeAPIError, PodError, HorusInputError) as exc:
            return str(exc)
        except PreemptionUnsupported:
            return (f"Horus policy {self.decider.policy_name!r} wanted to preempt a running pod on {args.node}; "
                    f"the extender never evicts pods")
