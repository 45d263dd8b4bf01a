"""Tenants in the Kubernetes extender: a pod's queue and priority class, what each queue is charged, and the
quota rules filter and bind apply (docs/backends/kubernetes.md, "Queues (tenants)").

A pod's queue is its ``horus.io/queue`` label; without one, the queue named like its namespace, else the
tenancy's ``default_queue``. Its priority class is its ``horus.io/priority`` label, else the default. A label
naming no queue (class) of the tenancy makes the pod unreadable (``PodError``: filter answers ``Error``).

Charges are the scheduler core's: ``horus.core.tenancy.Admission`` observes the ``SchedulerState`` rebuilt from
the placed pods (a co-located pod is charged its share of a GPU, by the tenancy's ``charge`` rule). A placed pod
whose label names no queue still uses GPUs; it is charged to ``UNLISTED``, which has no quota.

A pod is refused (code ``queue-over-quota``) on nodes of a GPU type where

1. **limit**: its queue's charged GPUs plus its request would exceed the queue's limit (guarantee plus
   ``borrow_limit``); or
2. **guarantees**: it takes its queue beyond its guarantee (it borrows) and the GPUs left free afterwards would not
   cover what other queues with pending pods are still owed (the lesser of their pending requests and their
   unmet guarantee). The extender cannot reclaim lent GPUs (it never evicts), so it does not lend owed ones.

Queues with per-type quotas are checked on the node's GPU type (as the core admits them under a type), others
over all GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from horus.core.tenancy import EPS, Admission, job_need
from horus.k8s.model import ClusterModel, is_placed
from horus.k8s.resources import PRIORITY_LABEL, QUEUE_LABEL, PodError, pod_gpu_request, pod_key
from horus.reasons import QUEUE_OVER_QUOTA
from horus.state import SchedulerState
from horus.tenancy import ANY_TYPE, Queue, Tenancy

UNLISTED = "<unlisted>"  # placed pods whose label names no queue (no valid queue name has '<')


@dataclass(frozen=True)
class Tenant:
    """A pod's queue and priority class; ``origin``: what named the queue, in words (for reasons)."""

    queue: str
    priority: str
    origin: str


def _gpus(x: float) -> str:
    return f"{round(x, 3):g}"


class QueueGate:
    """One tenancy over the extender's model: resolves pods' queues, observes charges, applies the quota rules.
    Not thread-safe: used under the store's lock."""

    def __init__(self, tenancy: Tenancy) -> None:
        self.tenancy = tenancy
        self.admission = Admission(replace(tenancy, queues={**tenancy.queues, UNLISTED: Queue(UNLISTED)}))
        self._pending_of: tuple[int, int] | None = None
        self._pending: dict[str, float] = {}
        self._pending_pods: dict[str, tuple[str, float]] = {}  # job id -> (queue, GPUs requested)
        self._read: dict[str, tuple[Any, tuple[str, float] | None]] = {}  # job id -> (resourceVersion, as read)

    # ---- a pod's queue ------------------------------------------------------------------------------
    def tenant(self, pod: dict[str, Any]) -> Tenant:
        """The pod's queue and priority class; PodError for a label naming none of the tenancy."""
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            raise PodError(f"pod {pod_key(pod)}.metadata.labels: expected an object")
        tenancy = self.tenancy
        label = labels.get(QUEUE_LABEL)
        if label is not None:
            if not isinstance(label, str) or label not in tenancy.queues:
                raise PodError(f"pod {pod_key(pod)} label {QUEUE_LABEL}: unknown queue {label!r} (known: "
                               f"{', '.join(tenancy.queues)})"[:300])
            queue, origin = label, f"its label {QUEUE_LABEL}"
        else:
            namespace = meta.get("namespace") or "default"
            queue, origin = ((namespace, "its namespace") if namespace in tenancy.queues
                             else (tenancy.default_queue, f"the default queue: namespace {namespace!r} is no queue"))
        priority = labels.get(PRIORITY_LABEL, tenancy.default_priority)
        if not isinstance(priority, str) or priority not in tenancy.priority_classes:
            raise PodError(f"pod {pod_key(pod)} label {PRIORITY_LABEL}: unknown priority class {priority!r} "
                           f"(known: {', '.join(tenancy.priority_classes)})"[:300])
        return Tenant(queue, priority, origin)

    def placed_fields(self, pod: dict[str, Any]) -> tuple[str, str | None]:
        """(queue, priority class) a placed pod is counted under: ``UNLISTED`` for a label naming no queue."""
        try:
            tenant = self.tenant(pod)
        except PodError:
            return UNLISTED, None
        return tenant.queue, tenant.priority

    # ---- charges and pending requests -------------------------------------------------------------------
    def observe(self, state: SchedulerState) -> None:
        self.admission.observe(state)

    def pending(self, pods: Mapping[str, dict[str, Any]], stamp: int) -> dict[str, float]:
        """GPUs requested per queue by pending (unbound) pods of ``pods`` (job id -> pod); counted again when
        ``pods`` or ``stamp`` changes (a listing), kept up to date by ``bound`` in between."""
        key = (id(pods), stamp)
        if key != self._pending_of:
            self._pending_pods = self._pending_requests(pods.items())
            self._pending = {}
            for queue, need in self._pending_pods.values():
                self._pending[queue] = self._pending.get(queue, 0.0) + need
            self._pending_of = key
        return self._pending

    def bound(self, job_id: str) -> None:
        """A pending pod was just bound: it no longer counts as pending."""
        found = self._pending_pods.pop(job_id, None)
        if found is not None:
            self._pending[found[0]] -= found[1]

    def _pending_requests(self, pods: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, tuple[str, float]]:
        """(queue, GPUs) per pending pod; a pod whose ``resourceVersion`` did not move is not read again."""
        out: dict[str, tuple[str, float]] = {}
        seen, known = {}, self._read
        for job_id, pod in pods:
            status = pod.get("status") or {}
            meta = pod.get("metadata") or {}
            if (is_placed(pod) or not isinstance(status, dict) or status.get("phase") not in (None, "", "Pending")
                    or meta.get("deletionTimestamp")):
                continue
            version = meta.get("resourceVersion")
            cached = known.get(job_id)
            if cached is not None and version is not None and cached[0] == version:
                found = cached[1]
            else:
                try:
                    num_gpus, fraction = pod_gpu_request(pod)
                    found = (self.tenant(pod).queue, job_need(num_gpus, 1.0 if fraction is None else fraction))
                except PodError:  # a pod Horus cannot read is refused by filter: it is owed nothing
                    found = None
            seen[job_id] = (version, found)
            if found is not None and found[1] > 0:
                out[job_id] = found
        self._read = seen
        return out

    # ---- the rules -----------------------------------------------------------------------------------
    def refusal(self, tenant: Tenant, need: float, type_name: str, pending: Mapping[str, float]) -> str:
        """Why a pod of ``tenant`` asking for ``need`` GPUs may not go on a node of GPU type ``type_name``
        ("" if it may), from the charges last observed."""
        accounts = self.admission.accounts
        acc = accounts[tenant.queue]
        queue = acc.queue
        key = ANY_TYPE if ANY_TYPE in queue.guaranteed else type_name
        kind = "" if key == ANY_TYPE else f" {key}"
        used, limit, guaranteed = acc.used(key), queue.limit(key), queue.guaranteed.get(key, 0.0)
        if used + need > limit + EPS:
            return (f"[{QUEUE_OVER_QUOTA}] Horus: queue {queue.name!r} is charged {_gpus(used)}{kind} GPUs of its "
                    f"limit {_gpus(limit)}; the pod asks for {_gpus(need)} more (queue from {tenant.origin})")
        if used + need <= guaranteed + EPS:
            return ""
        capacity = self.admission.capacity
        for k in dict.fromkeys((ANY_TYPE, type_name)):
            owed = {}
            for name, other in accounts.items():
                if name == queue.name or pending.get(name, 0.0) <= EPS:
                    continue
                short = min(pending[name], (other.guarantee if k == ANY_TYPE else other.queue.guaranteed.get(k, 0.0))
                            - other.used(k))
                if short > EPS:
                    owed[name] = short
            free = capacity.get(k, 0.0) - math.fsum(a.used(k) for a in accounts.values())
            if owed and need + sum(owed.values()) > free + EPS:
                where = "" if k == ANY_TYPE else f" {k}"
                return (f"[{QUEUE_OVER_QUOTA}] Horus: queue {queue.name!r} would borrow beyond its guarantee of "
                        f"{_gpus(guaranteed)}{kind} GPUs, but {_gpus(sum(owed.values()))} of the {_gpus(max(free, 0))} "
                        f"free{where} GPUs are owed to queue(s) {', '.join(sorted(owed))} (pending pods below their "
                        f"guarantee)")
        return ""

    def refusals(self, model: ClusterModel, tenant: Tenant, need: float, names: Iterable[str],
                 pending: Mapping[str, float]) -> dict[str, str]:
        """Reason per node of ``names`` the pod may not go on. One verdict per GPU type of the cluster: when they all
        agree (a queue without per-type quotas), every name gets it; else each usable node its type's."""
        self.observe(model.state)
        verdicts = {t: self.refusal(tenant, need, t, pending) for t in self.admission.capacity if t != ANY_TYPE}
        distinct = set(verdicts.values())
        if distinct <= {""}:
            return {}
        if len(distinct) == 1:
            return dict.fromkeys(names, distinct.pop())
        out: dict[str, str] = {}
        for name in names:
            info = model.nodes.get(name)
            if info is not None and info.gpu_type is not None and name in model.node_index:
                why = verdicts.get(info.gpu_type.name, "")
                if why:
                    out[name] = why
        return out

    # ---- the per-queue view -----------------------------------------------------------------------------
    def view(self, model: ClusterModel, pending: Mapping[str, float]) -> dict[str, Any]:
        """Per queue: charged GPUs (in all and per GPU type), guarantee, limit and pending requests (JSON-able)."""
        self.observe(model.state)
        queues: dict[str, Any] = {}
        for name, acc in self.admission.accounts.items():
            if name == UNLISTED and acc.used() <= EPS:
                continue
            q = acc.queue
            queues[name] = {
                "charged_gpus": round(acc.used(), 6),
                "charged_by_type": {k: round(v, 6) for k, v in sorted(acc.usage.items())
                                    if k != ANY_TYPE and abs(v) > EPS},
                "guaranteed": {} if name == UNLISTED else dict(q.guaranteed),
                "limit": {k: (None if math.isinf(q.limit(k)) else q.limit(k)) for k in q.guaranteed},
                "borrow_limit": q.borrow_limit, "weight": q.weight,
                "pending_gpus": round(pending.get(name, 0.0), 6)}
        return {"default_queue": self.tenancy.default_queue, "charge": self.tenancy.charge, "queues": queues}
