"""``geng``: two-level interference-aware placement, CLWP (cluster level) + NLWP (node level).

After the two-level scheme of interference-aware scheduling (cluster-level then node-level
workload placement; here built on this project's IASP/IAPP predictors):

* Eligible GPU: idle, or sharing allowed (fewer than ``max_residents`` workers, predicted memory
  fits within ``1 - mem_margin`` of the card, the job never failed out-of-memory, its predicted
  normalized throughput next to the residents >= ``min_throughput``). Per-GPU loss = predicted
  throughput lost + ``share_penalty`` x residents (so an idle GPU wins ties with a harmless share).
* CLWP picks the node: among nodes with ``num_gpus`` eligible GPUs, the lowest
  ``(that node's NLWP cost) / k + similarity_weight x op-mix similarity to the node's co-runners
  - free_weight x idle fraction + memory_weight x memory fraction``.
  Loss = throughput the job loses plus what its co-runners lose (``SlowdownEstimator.added_loss``).
  Similarity = cosine of op-kind histograms from the catalog (jobs built of the same ops contend for
  the same units).
* NLWP picks GPUs inside the node: the k-subset minimising summed predicted loss plus
  ``comm_weight x`` ring all-reduce time (4 bytes x params, ``horus.topology`` link classes) over
  the job's predicted iteration time; exhaustive up to ``max_subsets`` subsets, greedy beyond.

Jobs are taken in FIFO order with backfill (``max_scan``). A job larger than every node spans nodes
(lowest-loss eligible GPUs). Interference comes from a trained model (``model_dir``) or, by default,
the unfitted summed-utilization rule (see ``horus.interference.slowdown``; reported by ``describe``).
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np

from horus.catalog import OP_KINDS, load_catalog
from horus.comm import gradient_bytes
from horus.interference.base import InterferenceModel
from horus.interference.slowdown import SlowdownEstimator, estimator_for
from horus.jobs import JobSpec
from horus.policies.base import POLICIES, Action, Policy, Start
from horus.state import GPULoad, QueuedJob, SchedulerState, gpu_share
from horus.topology import allreduce_time_s


def op_mix(model: str) -> np.ndarray:
    """Normalized op-kind histogram of a catalog model (zeros if unknown)."""
    info = load_catalog().get(model)
    if info is None:
        return np.zeros(len(OP_KINDS))
    v = np.array([info.op_counts.get(k, 0) for k in OP_KINDS], dtype=float)
    norm = np.linalg.norm(v)
    return v / norm if norm > 0 else v


@POLICIES.register("geng")
class GengPolicy(Policy):
    name = "geng"

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

    def describe(self) -> dict[str, object]:
        source = self.estimator.describe() if self.estimator else {
            "interference_source": str(self.model_dir) if self.model_dir else "fallback: unfitted summed-utilization"}
        return {"name": self.name, "oracle": False, "max_residents": self.max_residents,
                "min_throughput": self.min_throughput, "similarity_weight": self.similarity_weight,
                "free_weight": self.free_weight, "memory_weight": self.memory_weight,
                "comm_weight": self.comm_weight, "share_penalty": self.share_penalty, "max_scan": self.max_scan, **source}

    # ---- scheduling ------------------------------------------------------------------------
    def schedule(self, state: SchedulerState) -> list[Action]:
        if not state.queue:
            return []
        if self.estimator is None:
            self.estimator = estimator_for(self.model_dir, state.predictor, self.model)
        load = state.tentative()
        types_on = [[state.running[j].spec.job_type for j in jobs] for jobs in state.residents]
        actions: list[Action] = []
        for job in list(state.queue.values())[: self.max_scan]:
            gpus = self.place(job, load, types_on, state)
            if gpus is None:
                continue
            load.add(gpus, state.predict(job.spec, state.cluster.gpus[gpus[0]].gpu_type), gpu_share(job.spec))
            for g in gpus:
                types_on[g].append(job.spec.job_type)
            actions.append(Start(job.spec.job_id, gpus))
        return actions

    def gpu_losses(self, job: QueuedJob, load: GPULoad, types_on: list[list[str]],
                   state: SchedulerState) -> np.ndarray:
        """Predicted loss of placing one worker of ``job`` on each GPU; inf where not eligible."""
        assert self.estimator is not None
        spec = job.spec
        loss = np.full(state.cluster.num_gpus, np.inf)
        for gpu in state.cluster.gpus:
            g = gpu.index
            if spec.gpu_type_request is not None and gpu.gpu_type.name != spec.gpu_type_request:
                continue
            if load.n_residents[g] == 0:
                loss[g] = 0.0
                continue
            if load.n_residents[g] >= self.max_residents or job.oom_failures > 0:
                continue
            pred = state.predict(spec, gpu.gpu_type)
            if load.pred_mem_mib[g] + pred.mem_mib > (1.0 - self.mem_margin) * state.mem_capacity_mib[g]:
                continue
            if load.alloc_share[g] + gpu_share(spec) > 1.0 and spec.gpu_fraction is not None:
                continue
            lost, own = self.estimator.added_loss(spec.job_type, types_on[g], gpu.gpu_type)
            if own >= self.min_throughput:
                loss[g] = lost + self.share_penalty * load.n_residents[g]
        return loss

    def place(self, job: QueuedJob, load: GPULoad, types_on: list[list[str]],
              state: SchedulerState) -> tuple[int, ...] | None:
        k = job.spec.num_gpus
        loss = self.gpu_losses(job, load, types_on, state)
        chosen = self.clwp(job, loss, load, types_on, state)
        if chosen is None:
            if k > max(n.num_gpus for n in state.cluster.nodes):  # must span nodes
                feasible = np.flatnonzero(np.isfinite(loss))
                if len(feasible) >= k:
                    return tuple(int(g) for g in feasible[np.argsort(loss[feasible], kind="stable")[:k]])
            return None
        return chosen[1]

    # ---- cluster level ---------------------------------------------------------------------
    def clwp(self, job: QueuedJob, loss: np.ndarray, load: GPULoad, types_on: list[list[str]],
             state: SchedulerState) -> tuple[int, tuple[int, ...]] | None:
        """(node, its NLWP GPUs) for ``job``: lowest NLWP cost per GPU + similarity - idle + memory terms."""
        k = job.spec.num_gpus
        mix = op_mix(job.spec.model)
        best: tuple[float, int, tuple[int, ...]] | None = None
        for n, node in enumerate(state.cluster.nodes):
            gpus = np.array(state.cluster.gpus_of_node(n))
            if k > len(gpus) or np.count_nonzero(np.isfinite(loss[gpus])) < k:
                continue
            local, placement_cost = self.nlwp(job, n, loss, state)
            corunners = {t for g in gpus for t in types_on[g]}
            similarity = (float(np.mean([mix @ op_mix(t.rpartition("/b")[0]) for t in corunners]))
                          if corunners else 0.0)
            idle = float(np.mean(load.n_residents[gpus] == 0))
            mem = float(np.mean(load.pred_mem_mib[gpus] / state.mem_capacity_mib[gpus]))
            score = (placement_cost / k + self.similarity_weight * similarity
                     - self.free_weight * idle + self.memory_weight * mem)
            if best is None or score < best[0] - 1e-12:
                best = (score, n, local)
        return None if best is None else (best[1], best[2])

    # ---- node level ------------------------------------------------------------------------
    def comm_cost(self, spec: JobSpec, node_index: int, local: tuple[int, ...], state: SchedulerState) -> float:
        """All-reduce time over ``local`` GPUs as a fraction of the predicted iteration time."""
        if len(local) <= 1:
            return 0.0
        node = state.cluster.nodes[node_index]
        iter_s = max(state.predict(spec, node.gpu_type).iter_time_s, 1e-6)
        return allreduce_time_s(gradient_bytes(spec.model), node, local) / iter_s

    def nlwp(self, job: QueuedJob, node_index: int, loss: np.ndarray,
             state: SchedulerState) -> tuple[tuple[int, ...], float]:
        """(global GPUs, cost) inside the node minimising predicted loss + comm_weight x communication cost."""
        k = job.spec.num_gpus
        first = state.cluster.gpus_of_node(node_index)[0]
        local_loss = loss[first:first + state.cluster.nodes[node_index].num_gpus]
        candidates = [int(i) for i in np.flatnonzero(np.isfinite(local_loss))]

        def cost(subset: tuple[int, ...]) -> float:
            return float(local_loss[list(subset)].sum()) + self.comm_weight * self.comm_cost(
                job.spec, node_index, subset, state)

        n_subsets = 1.0
        for i in range(k):
            n_subsets *= (len(candidates) - i) / (i + 1)
        if k == 1 or n_subsets <= self.max_subsets:
            best = min(combinations(candidates, k), key=cost)
        else:  # greedy: cheapest GPU first, then the one adding least cost
            chosen = [min(candidates, key=lambda i: local_loss[i])]
            while len(chosen) < k:
                rest = [i for i in candidates if i not in chosen]
                chosen.append(min(rest, key=lambda i: cost((*chosen, i))))
            best = tuple(chosen)
        return tuple(first + i for i in sorted(best)), cost(best)
