"""Why a queued job waits: one vocabulary for every backend (like Slurm's Reason, kube-scheduler's events).

``explain(job, state, policy, ahead)`` reads only what policies read (the job's spec, predictions, the
per-GPU predicted load) and names the first of these that holds:

=============================  =========================================================  ==========
code                           meaning                                                    retryable
=============================  =========================================================  ==========
``gang-too-large``             more GPUs than the cluster has of an accepted type         yes (a machine may join)
``no-gpu-of-type``             no GPU of the requested type(s) at all                     yes
``memory-does-not-fit``        predicted memory per worker above every accepted GPU       no
``needs-empty-gpu``            failed out of memory before: only idle GPUs, too few idle  yes
``waiting-for-gpus``           fewer idle GPUs than it needs (an exclusive policy)        yes
``colocation-would-not-pay``   no idle GPUs; sharing a busy one is predicted not to pay   yes
``behind-jobs``                idle GPUs would fit it; the policy started others first    yes
``queue-over-quota``           (tenancy) its queue's quota or the cluster's room is taken  yes
``node-unknown``               (extender) a node Horus has not seen yet                   yes
``node-problem``               (extender) a node whose GPUs Horus cannot use              no
=============================  =========================================================  ==========

A policy may answer sharper with ``Policy.wait_reason`` (None: this generic answer); ``SchedulerCore``
keeps the latest reason per queued job. The Kubernetes
extender reports its per-node verdicts with the same codes (``horus.k8s.decide``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from weakref import WeakKeyDictionary

import numpy as np

from horus.gpu_types import accepted_gpu_types
from horus.jobs import JobSpec
from horus.state import QueuedJob, SchedulerState, gpu_share

GANG_TOO_LARGE = "gang-too-large"
NO_GPU_OF_TYPE = "no-gpu-of-type"
MEMORY_DOES_NOT_FIT = "memory-does-not-fit"
NEEDS_EMPTY_GPU = "needs-empty-gpu"
WAITING_FOR_GPUS = "waiting-for-gpus"
COLOCATION_WOULD_NOT_PAY = "colocation-would-not-pay"
BEHIND_JOBS = "behind-jobs"
QUEUE_OVER_QUOTA = "queue-over-quota"  # tenancy: held until its queue's quota admits it (horus.core.tenancy)
NODE_UNKNOWN = "node-unknown"  # the Kubernetes extender: a node it has not seen (yet)
NODE_PROBLEM = "node-problem"  # the Kubernetes extender: a node it cannot use (its GPUs are not described)
CODES = (GANG_TOO_LARGE, NO_GPU_OF_TYPE, MEMORY_DOES_NOT_FIT, NEEDS_EMPTY_GPU, WAITING_FOR_GPUS,
         COLOCATION_WOULD_NOT_PAY, BEHIND_JOBS, QUEUE_OVER_QUOTA, NODE_UNKNOWN, NODE_PROBLEM)


@dataclass(frozen=True)
class WaitReason:
    """Why a job is still queued: a code of ``CODES``, one line for people, and whether waiting can help."""

    code: str
    message: str
    retryable: bool = True

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


# per state: (type request, share, predicted MiB per accepted type) -> what ``_static_fit`` returns
_FITS: WeakKeyDictionary[SchedulerState, dict[tuple[object, ...], tuple[np.ndarray, np.ndarray, int, np.ndarray, int]]]
_FITS = WeakKeyDictionary()


def _static_fit(spec: JobSpec, state: SchedulerState) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, int]:
    """(eligible GPUs, predicted memory per worker on each, how many eligible, eligible GPUs whose memory fits it,
    how many fit): what ``explain`` reads of a job apart from the load. A state's GPUs and capacities do not change,
    so these depend only on the job's type request, GPU share and predicted memory per GPU type; kept per state
    and keyed by those (a changed prediction is a new key). Read-only arrays."""
    accepted = accepted_gpu_types(spec.gpu_type_request)
    share = min(1.0, gpu_share(spec))
    types = [(gpu_type, where) for gpu_type, where in state.gpus_of_type
             if accepted is None or gpu_type.name in accepted]
    mems = tuple(state.predict(spec, gpu_type).mem_mib for gpu_type, _ in types)
    key = (spec.gpu_type_request, share, mems)
    kept = _FITS.get(state)
    if kept is None:
        kept = _FITS[state] = {}
    found = kept.get(key)
    if found is None:
        eligible = np.zeros(state.cluster.num_gpus, dtype=bool)
        mem_need = np.zeros(state.cluster.num_gpus)  # predicted memory per worker on each accepted GPU
        for (_, where), mem in zip(types, mems):
            eligible[where] = True
            mem_need[where] = mem * share
        fits = eligible & (mem_need <= state.mem_capacity_mib)
        for array in (eligible, mem_need, fits):
            array.setflags(write=False)
        if len(kept) > 4096:
            kept.clear()
        found = kept[key] = (eligible, mem_need, int(eligible.sum()), fits, int(fits.sum()))
    return found


def explain(job: QueuedJob, state: SchedulerState, *, colocates: bool, ahead: Callable[[], int] | None = None,
            max_residents: int | None = None) -> WaitReason:
    """The generic reason ``job`` was not started on ``state`` (see the module docstring).

    ``colocates``: the policy may put this job on a busy GPU (with at most ``max_residents`` jobs per GPU);
    ``ahead()``: queued jobs before it in the policy's order (called only for ``behind-jobs``, costs O(queue);
    None leaves the count out of the message).
    """
    spec = job.spec
    k = spec.num_gpus
    wanted = spec.gpu_type_request or "any type"
    n_gpus = state.cluster.num_gpus
    if n_gpus == 0:
        return WaitReason(NO_GPU_OF_TYPE, "the cluster has no GPUs now (no machine is up)", True)
    eligible, mem_need, n_eligible, fits, n_fits = _static_fit(spec, state)
    if n_eligible == 0:
        return WaitReason(NO_GPU_OF_TYPE, f"no GPU of type {wanted} in the cluster", True)
    if n_eligible < k:
        return WaitReason(GANG_TOO_LARGE, f"needs {k} GPUs of {wanted}; the cluster has {n_eligible}", True)
    if n_fits < k:
        largest = int(state.mem_capacity_mib[eligible].max())
        return WaitReason(MEMORY_DOES_NOT_FIT, f"predicted {float(mem_need[eligible].min()):.0f} MiB per worker; "
                                               f"{n_fits} of the {k} GPUs it needs have room "
                                               f"(largest accepted: {largest} MiB)", False)
    idle = fits & (state.load.n_residents == 0)
    n_idle = int(idle.sum())
    if n_idle >= k:
        before = "" if ahead is None else f" ({ahead()} queued jobs before it in its order)"
        return WaitReason(BEHIND_JOBS, f"the policy did not start it although {n_idle} idle GPUs would fit it{before}",
                          True)
    if job.oom_failures > 0:
        return WaitReason(NEEDS_EMPTY_GPU, f"failed out of memory {job.oom_failures} time(s): only idle GPUs; "
                                           f"{n_idle} of {k} idle", True)
    if colocates:
        room = fits & (state.load.pred_mem_mib + mem_need <= state.mem_capacity_mib)
        if max_residents is not None:
            room &= state.load.n_residents < max_residents
        if int(room.sum()) >= k:
            return WaitReason(COLOCATION_WOULD_NOT_PAY, f"needs {k} GPU(s), {n_idle} idle; sharing busy GPUs with "
                                                        f"room ({int(room.sum())}) is predicted not to pay", True)
    return WaitReason(WAITING_FOR_GPUS, f"needs {k} idle GPU(s) of {wanted}; {n_idle} idle", True)
