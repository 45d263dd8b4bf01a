"""Placing a fractional pod by its request: where device sharing (HAMi, Kubernetes' GPU sharing) would put it."""

from __future__ import annotations

import numpy as np

from horus.policies.parts.cluster_index import ClusterIndex, job_mem_per_gpu
from horus.policies.parts.ordered import EPS, needs_empty_gpu
from horus.state import GPULoad, QueuedJob, SchedulerState, gpu_share


def place_by_request(job: QueuedJob, load: GPULoad, state: SchedulerState, idx: ClusterIndex, *,
                     max_residents: int, mem_margin: float, barred: np.ndarray | None = None) -> tuple[int, ...] | None:
    """A one-GPU pod requesting a fraction, within its queue's guarantee (a tenancy's ``within_guarantee``), that a
    policy's own rule refused: the GPU where its requested share fits (requests summed with the residents' at most 1),
    its predicted memory fits (``mem_margin`` of the card spare), fewer than ``max_residents`` reside and ``barred``
    (e.g. GPUs holding a type that failed out of memory) is false; the least predicted utilization first (ties: lowest
    index). A requested fraction is what device sharing grants and enforces, so it is placed by request, as those do,
    and not refused for predicted utilization: under a tenancy the refusal kept a pod within its queue's guarantee
    waiting on GPUs whose requests had room (openb, 1 % of its nodes: most of ``BE``'s guarantee gap under ``horus``
    and ``horus-paper``, docs/tenancy.md). None for other jobs (several GPUs, a whole GPU, one that failed out of
    memory: an empty GPU only) and where no GPU fits."""
    spec = job.spec
    share = gpu_share(spec)
    if spec.num_gpus != 1 or share >= 1.0 - EPS or needs_empty_gpu(job):
        return None
    mem = job_mem_per_gpu(spec, state, idx)
    fits = ((load.alloc_share + share <= 1.0 + EPS) & (load.n_residents < max_residents)
            & (load.pred_mem_mib + mem <= (1.0 - mem_margin) * state.mem_capacity_mib))
    if barred is not None:
        fits &= ~barred
    allowed = idx.allowed(spec)
    if allowed is not None:
        fits &= allowed
    where = np.flatnonzero(fits)
    if not len(where):
        return None
    return (int(where[np.argmin(load.pred_util[where])]),)
