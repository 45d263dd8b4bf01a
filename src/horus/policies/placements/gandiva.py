"""Placement ``gandiva``: the strawman memory-fit packing of policy ``gandiva-greedy`` (the faithful Gandiva is the
policy ``gandiva``)."""

from __future__ import annotations

import numpy as np

from horus.policies.parts.cluster_index import job_predictions
from horus.policies.parts.ordered import PLACEMENTS, Placement, count_at_least, needs_empty_gpu
from horus.state import GPULoad, QueuedJob, SchedulerState


@PLACEMENTS.register("gandiva")
class GandivaPlacement(Placement):
    """The **strawman** packing placement (policy ``gandiva-greedy``), kept for reference: pack jobs onto
    GPUs whose predicted memory still fits (sum of predicted memory + the new job's <= capacity, no
    margin), choosing the GPU with the fewest residents (ties: lowest index), with no per-GPU cap, gangs
    included, whether or not GPUs are idle, and never unpacking. Multi-GPU jobs: fewest nodes, then
    fewest residents in total. An empty GPU takes any job (even one predicted too big); a job that
    already failed out-of-memory goes only to an empty GPU. ``GandivaPolicy`` is the faithful model.
    """

    name = "gandiva"

    def update(self, load: GPULoad, state: SchedulerState) -> None:
        self.free_mib = state.mem_capacity_mib - load.pred_mem_mib
        self.max_free_mib = float(self.free_mib.max()) if len(self.free_mib) else 0.0
        self.n_empty = int((load.n_residents == 0).sum())

    def any_room(self) -> bool:
        return self.n_empty > 0 or self.max_free_mib > 0.0

    def possible_rows(self, r: np.ndarray, load: GPULoad, state: SchedulerState) -> np.ndarray:
        """False when fewer than k GPUs are empty or have room for the job's least predicted memory."""
        k, mem, empty = r[:, 0], r[:, 1], r[:, 4] > 0
        ok = k <= self.n_empty
        rest = ~ok & ~empty
        if rest.any():
            shared_free = self.free_mib[load.n_residents > 0]
            ok[rest] = self.n_empty + count_at_least(shared_free, mem[rest]) >= k[rest]
        return ok

    def cost_per_gpu(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> np.ndarray | None:
        spec = job.spec
        preds = job_predictions(spec, state, self.idx)
        if self.n_empty < spec.num_gpus and min(p.mem_mib for p in preds) > self.max_free_mib:
            return None
        if needs_empty_gpu(job):
            if spec.num_gpus > self.n_empty:
                return None
            feasible = load.n_residents == 0
        else:
            feasible = (self.free_mib >= self.idx.per_gpu([p.mem_mib for p in preds])) | (load.n_residents == 0)
        allowed = self.idx.allowed(spec)
        if allowed is not None:
            feasible = feasible & allowed
        return np.where(feasible, load.n_residents.astype(float), np.inf)
