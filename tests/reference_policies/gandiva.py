"""Gandiva-style packing placement: memory fit by prediction, least-loaded GPU, no utilization awareness."""

from __future__ import annotations

import numpy as np

from reference_policies._common import PLACEMENTS, FastPlacement, job_predictions, needs_empty_gpu
from horus.state import GPULoad, QueuedJob, SchedulerState


@PLACEMENTS.register("gandiva")
class GandivaPlacement(FastPlacement):
    """Pack jobs onto GPUs whose predicted memory still fits (sum of predicted memory + the new job's
    <= capacity), choosing the GPU with the fewest residents (ties: lowest index). Utilization is
    ignored on purpose: this is the packing baseline (Xiao et al., OSDI 2018, packs by memory and
    relies on later migration/profiling, which the simulator does not model). Multi-GPU jobs: fewest
    nodes, then fewest residents in total. An empty GPU takes any job (even one predicted too big); a
    job that already failed out-of-memory goes only to an empty GPU.
    """

    name = "gandiva"

    def update(self, load: GPULoad, state: SchedulerState) -> None:
        self.free_mib = state.mem_capacity_mib - load.pred_mem_mib
        self.max_free_mib = float(self.free_mib.max()) if len(self.free_mib) else 0.0
        self.n_empty = int((load.n_residents == 0).sum())

    def any_room(self) -> bool:
        return self.n_empty > 0 or self.max_free_mib > 0.0

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
