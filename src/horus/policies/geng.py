"""``geng``: two-level interference-aware placement, CLWP (cluster level) + NLWP (node level).

After the two-level scheme of interference-aware scheduling (cluster-level then node-level
workload placement; here built on this project's IASP/IAPP predictors):

* Eligible GPU: idle, or sharing allowed (fewer than ``max_residents`` workers, predicted memory
  fits within ``1 - mem_margin`` of the card, the job never failed out-of-memory, its predicted
  normalized throughput next to the residents >= ``min_throughput``). Per-GPU loss = predicted
  throughput lost + ``share_penalty`` x residents (so an idle GPU wins ties with a harmless share).
* CLWP picks the node: among nodes with ``num_gpus`` eligible GPUs, the lowest
  ``(that node's NLWP cost) / k + similarity_weight x op-mix similarity to the node's co-runners
  - free_weight x idle fraction + memory_weight x memory fraction``; ties (within 1e-12) go to the
  lowest node index.
  Loss = throughput the job loses plus what its co-runners lose (``SlowdownEstimator.added_loss``).
  Similarity = cosine of op-kind histograms from the catalog (jobs built of the same ops contend for
  the same units).
* NLWP picks GPUs inside the node: the k-subset minimising summed predicted loss plus
  ``comm_weight x`` ring all-reduce time (4 bytes x params, ``horus.topology`` link classes) over
  the job's predicted iteration time; exhaustive up to ``max_subsets`` subsets (first minimum in
  lexicographic order), greedy beyond.

Jobs are taken in FIFO order with backfill (``max_scan``). A job larger than every node spans nodes
(lowest-loss eligible GPUs). Interference comes from a trained model (``model_dir``) or, by default,
the unfitted summed-utilization rule (see ``horus.interference.slowdown``; reported by ``describe``).

The two levels live in ``geng_cluster_level`` (CLWP) and ``geng_node_level`` (NLWP); this module
holds the scheduling loop and the per-GPU eligibility and loss both levels read.

Speed (the rule above is computed exactly, only faster): per-GPU eligibility and losses are numpy
masks; ``added_loss`` is evaluated once per distinct (resident job types, GPU type) and memoised;
resident types are tracked incrementally (``ResidentTypes``); NLWP is vectorised over all candidate
nodes of one shape; node similarity is memoised per (model, set of co-runner types). A job is only
evaluated when at least k GPUs could be eligible for it (idle, or open with room for its memory). With ``max_residents`` <= 2 (the
default), jobs found unplaceable are remembered until the load changes, and within a call for the
same job kind: adding load then only shrinks the eligible GPUs (a shared GPU becomes full), so this
is exact for any interference model; with more residents every job is re-evaluated.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from pathlib import Path

import numpy as np

from horus.interference.base import InterferenceModel
from horus.interference.slowdown import SlowdownEstimator, estimator_for
from horus.policies.base import POLICIES, Action, Policy, Start
from horus.policies.parts.cluster_index import cluster_index, job_mem_per_gpu
from horus.policies.parts.geng_cluster_level import ClusterLevel, op_mix, op_mix_similarity
from horus.policies.parts.geng_node_level import NodeLevel
from horus.policies.parts.resident_types import ResidentTypes
from horus.state import GPULoad, PlanMemo, QueuedJob, SchedulerState, gpu_share

__all__ = ["GengPolicy", "ResidentTypes", "op_mix", "op_mix_similarity"]
_FIRST = np.zeros(1, dtype=np.int64)  # reduceat over one whole segment


@POLICIES.register("geng")
class GengPolicy(Policy):
    name = "geng"
    colocates = True

    def __init__(self, *, model_dir: str | Path | None = None, model: InterferenceModel | None = None,
                 max_residents: int = 2, mem_margin: float = 0.05,
                 min_throughput: float = 0.5, similarity_weight: float = 0.2, free_weight: float = 0.1,
                 memory_weight: float = 0.05, comm_weight: float = 1.0, max_scan: int = 64,
                 max_subsets: int = 512, share_penalty: float = 0.02) -> None:
        self.model_dir = model_dir
        self.model = model
        self.max_residents = max_residents
        self.mem_margin = mem_margin
        self.min_throughput = min_throughput
        self.similarity_weight = similarity_weight
        self.free_weight = free_weight
        self.memory_weight = memory_weight
        self.comm_weight = comm_weight
        self.max_scan = max_scan
        self.max_subsets = max_subsets
        self.share_penalty = share_penalty
        self.estimator: SlowdownEstimator | None = None
        self.types = ResidentTypes()
        self.cluster_level = ClusterLevel(similarity_weight=similarity_weight, free_weight=free_weight,
                                          memory_weight=memory_weight)
        self.node_level = NodeLevel(comm_weight=comm_weight, max_subsets=max_subsets)
        self._blocked: PlanMemo[frozenset[str]] = PlanMemo(frozenset())  # jobs unplaceable under the planned load

    def describe(self) -> dict[str, object]:
        source = self.estimator.describe() if self.estimator else {
            "interference_source": str(self.model_dir) if self.model_dir else "fallback: unfitted summed-utilization"}
        return {"name": self.name, "oracle": False, "max_residents": self.max_residents,
                "min_throughput": self.min_throughput, "similarity_weight": self.similarity_weight,
                "free_weight": self.free_weight, "memory_weight": self.memory_weight,
                "comm_weight": self.comm_weight, "share_penalty": self.share_penalty, "max_scan": self.max_scan,
                **source}

    # ---- scheduling ------------------------------------------------------------------------
    def schedule(self, state: SchedulerState) -> list[Action]:
        if not state.queue:
            return []
        if self.estimator is None:
            self.estimator = estimator_for(self.model_dir, state.predictor, self.model)
        window = list(islice(state.queue.values(), self.max_scan))
        blocked = self._blocked.recall(state)
        if blocked and all(job.spec.job_id in blocked for job in window):
            self._blocked.renew(state)
            return []
        self.types.sync(state)
        self.idx = cluster_index(state.cluster)
        load = state.tentative()
        self._begin(load, state)
        actions: list[Action] = []
        waiting: set[str] = set()
        hopeless: set[tuple[object, ...]] = set()  # job kinds found unplaceable in this call
        possible = self.possible(window, load, state)
        for i, job in enumerate(window):
            spec = job.spec
            kind = (spec.job_type, spec.num_gpus, spec.gpu_fraction, spec.gpu_type_request, job.oom_failures > 0)
            skip = spec.job_id in blocked or kind in hopeless or not possible[i]
            gpus = None if skip else self.place(job, load, state)
            if gpus is None:
                waiting.add(spec.job_id)
                if self.max_residents <= 2:
                    hopeless.add(kind)
                continue
            pred = state.predict(spec, state.cluster.gpus[gpus[0]].gpu_type)
            load.add(gpus, pred, gpu_share(spec))
            self.types.add(gpus, spec.job_type, pred.mem_mib)
            self._begin_added(load, state, gpus)
            actions.append(Start(spec.job_id, gpus))
            possible[i + 1:] = self.possible(window[i + 1:], load, state)
        if self.max_residents <= 2:  # see the module docstring: only then is "unplaceable" kept until the load changes
            self._blocked.remember(state, frozenset(waiting))
        return actions

    def _begin(self, load: GPULoad, state: SchedulerState) -> None:
        """Job-independent per-GPU and per-node quantities of the planned load."""
        idx = self.idx
        self._idle = load.n_residents == 0
        self._shared_open = (load.n_residents > 0) & (load.n_residents < self.max_residents)
        self._any_shared = bool(self._shared_open.any())
        self._mem_limit = (1.0 - self.mem_margin) * state.mem_capacity_mib
        size = idx.node_size
        self._idle_frac = np.add.reduceat(self._idle, idx.node_first, dtype=np.int64) / size
        self._mem_frac = np.add.reduceat(load.pred_mem_mib / state.mem_capacity_mib, idx.node_first) / size

    def _begin_added(self, load: GPULoad, state: SchedulerState, gpus: tuple[int, ...]) -> None:
        """``_begin`` after one worker was added on each of ``gpus``: redone for those GPUs and their nodes (the
        same operations per element and per node segment)."""
        idx, n_res = self.idx, load.n_residents
        for g in gpus:
            self._idle[g] = n_res[g] == 0
            self._shared_open[g] = 0 < n_res[g] < self.max_residents
        self._any_shared = bool(self._shared_open.any())
        for node in sorted({int(idx.node_of_gpu[g]) for g in gpus}):
            first = int(idx.node_first[node])
            here, size = slice(first, first + int(idx.node_size[node])), idx.node_size[node]
            self._idle_frac[node] = np.add.reduceat(self._idle[here], _FIRST, dtype=np.int64)[0] / size
            self._mem_frac[node] = np.add.reduceat(load.pred_mem_mib[here] / state.mem_capacity_mib[here], _FIRST)[0] / size

    def possible(self, jobs: Sequence[QueuedJob], load: GPULoad, state: SchedulerState) -> np.ndarray:
        """Per job, False when fewer than k GPUs are idle or open with room for its least predicted
        memory (over GPU types): then fewer than k GPUs are eligible and ``place`` returns None."""
        n_idle = int(np.count_nonzero(self._idle))
        k = np.array([job.spec.num_gpus for job in jobs], dtype=np.int64)
        ok = k <= n_idle
        rest = np.flatnonzero(~ok)
        if len(rest) and self._any_shared:
            types = self.idx.types
            mem = np.array([min(state.predict(jobs[i].spec, t).mem_mib for t in types) for i in rest.tolist()])
            shared = self._shared_open
            fits = load.pred_mem_mib[shared][None, :] + mem[:, None] <= self._mem_limit[shared][None, :]
            empty = np.array([jobs[i].oom_failures > 0 for i in rest.tolist()], dtype=bool)
            ok[rest] = ~empty & (n_idle + np.count_nonzero(fits, axis=1) >= k[rest])
        return ok

    # ---- per-GPU loss ----------------------------------------------------------------------
    def gpu_losses(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> np.ndarray:
        """Predicted loss of placing one worker of ``job`` on each GPU; inf where not eligible."""
        assert self.estimator is not None
        spec, idx = job.spec, self.idx
        allowed = idx.allowed(spec)
        free = self._idle if allowed is None else self._idle & allowed
        loss = np.where(free, 0.0, np.inf)
        if job.oom_failures > 0 or not self._any_shared:
            return loss
        mem = job_mem_per_gpu(spec, state, idx)
        shareable = self._shared_open & ~(load.pred_mem_mib + mem > self._mem_limit)
        if spec.gpu_fraction is not None:
            shareable &= ~(load.alloc_share + gpu_share(spec) > 1.0)
        if allowed is not None:
            shareable &= allowed
        gpus = np.flatnonzero(shareable)
        if len(gpus):
            lost, own = self.types.added_losses(self.estimator, spec.job_type, gpus, idx)
            loss[gpus] = np.where(own >= self.min_throughput,
                                  lost + self.share_penalty * load.n_residents[gpus], np.inf)
        return loss

    def place(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> tuple[int, ...] | None:
        """GPUs for ``job`` on the planned ``load`` (called by ``schedule``, which prepares the caches)."""
        k = job.spec.num_gpus
        loss = self.gpu_losses(job, load, state)
        chosen = self.cluster_level.choose(job, loss, self.idx, self.types, self._idle_frac, self._mem_frac,
                                           self.node_level, state)
        if chosen is None:
            if k > int(self.idx.node_size.max()):  # must span nodes
                feasible = np.flatnonzero(np.isfinite(loss))
                if len(feasible) >= k:
                    return tuple(int(g) for g in feasible[np.argsort(loss[feasible], kind="stable")[:k]])
            return None
        return chosen[1]
