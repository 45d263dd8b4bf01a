"""``horus-iasp``: the Horus policy with an interference model's predicted slowdown in the GPU cost.

Reuses ``HorusPolicy`` (look-ahead, aging) and ``HorusPlacement`` (utilization/memory cost and
feasibility) unchanged and adds, on every GPU that already has residents,
``interference_weight x`` the total normalized throughput lost (the job's own drop plus the
residents' drop, ``SlowdownEstimator.added_loss``). A GPU where the job is predicted to run below
``min_throughput`` of its solo speed is ruled out. The interference model is a trained one
(``model_dir``: IASP or IAPP from ``horus interference train``) or, by default, the unfitted
summed-utilization rule (``horus.interference.slowdown``; ``describe`` says which).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from horus.interference.base import InterferenceModel
from horus.interference.slowdown import SlowdownEstimator, estimator_for
from horus.policies.base import POLICIES
from horus.policies.horus_paper import Choice, HorusPolicy
from horus.policies.parts.gpu_selection import select_gpus
from horus.policies.parts.resident_types import ResidentTypes
from horus.policies.placements.horus import HorusPlacement
from horus.state import GPULoad, QueuedJob, SchedulerState


@POLICIES.register("horus-iasp")
class HorusIASPPolicy(HorusPolicy):
    name = "horus-iasp"

    def __init__(self, *, model_dir: str | Path | None = None, model: InterferenceModel | None = None,
                 interference_weight: float = 1.0,
                 min_throughput: float = 0.4, util_cap: float = 1.5, **kwargs: Any) -> None:
        super().__init__(util_cap=util_cap, **kwargs)
        self.model_dir = model_dir
        self.model = model
        self.interference_weight = interference_weight
        self.min_throughput = min_throughput
        self.estimator: SlowdownEstimator | None = None
        self.types = ResidentTypes()  # residents' job types per GPU, planned starts included

    def describe(self) -> dict[str, Any]:
        source = self.estimator.describe() if self.estimator else {
            "interference_source": str(self.model_dir) if self.model_dir else "fallback: unfitted summed-utilization"}
        return {**super().describe(), "interference_weight": self.interference_weight,
                "min_throughput": self.min_throughput, **source}

    def node_placement(self) -> None:
        """Its choice adds predicted pair slowdown to the placement's cost: no per-node placement score."""
        return

    def planning_load(self, state: SchedulerState) -> GPULoad:
        if self.estimator is None:
            self.estimator = estimator_for(self.model_dir, state.predictor, self.model)
        self.types.sync(state)
        return super().planning_load(state)

    def note_start(self, job: QueuedJob, gpus: tuple[int, ...], state: SchedulerState) -> None:
        pred = self.job_load(job, gpus[0], state)
        self.types.add(gpus, job.spec.job_type, pred.mem_mib)

    def residents(self, gpu: int, state: SchedulerState) -> list[str]:
        """Job types on ``gpu``: running ones, then those planned in this call (arrival order)."""
        return list(self.types.sigs[self.types.sig_of_gpu[gpu]])

    def choose(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> Choice:
        placement = self.placement
        if not hasattr(placement, "idx") or placement.idx.cluster is not state.cluster:
            placement.begin(load, state)
        if self._losses_never_negative() and len(placement.idx.types) == 1 and job.spec.gpu_type_request is None:
            found = placement.bounded_choice(job, load, state, adjust=partial(self._add_interference, job, load))
            if found is not None:
                return found or None
        cost = placement.cost_per_gpu(job, load, state)
        if cost is None:
            return None
        assert self.estimator is not None
        shared = np.flatnonzero(np.isfinite(cost) & (load.n_residents > 0))
        if len(shared):
            lost, own = self.types.added_losses(self.estimator, job.spec.job_type, shared, placement.idx)
            cost = np.array(cost, dtype=float)
            cost[shared] = np.where(own < self.min_throughput, np.inf,
                                    cost[shared] + self.interference_weight * lost)
        return select_gpus(cost, job.spec.num_gpus, placement.idx)

    kind_choose = choose  # reads the job through its type, GPUs, request, OOM failures and predicted load only

    def _choose_kinds(self, firsts: dict[tuple[object, ...], QueuedJob], load: GPULoad,
                      state: SchedulerState) -> dict[tuple[object, ...], Choice]:
        """``choose`` of the jobs ``bounded_choice`` decides, searched together (``HorusPlacement.bounded_many``, with
        the interference term added row by row as ``_add_interference`` adds it); the others are chosen alone."""
        placement = self.placement
        if type(self).choose is not HorusIASPPolicy.choose or type(placement).bounded_choice is not \
                HorusPlacement.bounded_choice:
            return {}
        if not hasattr(placement, "idx") or placement.idx.cluster is not state.cluster:
            placement.begin(load, state)
        if not (self._losses_never_negative() and len(placement.idx.types) == 1):
            return {}
        pick = {kind: job for kind, job in firsts.items() if job.spec.gpu_type_request is None}
        if len(pick) < 2:
            return {}
        jobs = list(pick.values())
        types = [job.spec.job_type for job in jobs]

        def adjust(rows: list[int], cost: np.ndarray, gpus: np.ndarray) -> None:
            assert self.estimator is not None
            shared = np.isfinite(cost) & (load.n_residents[gpus] > 0)
            if not shared.any():
                return
            lost, own = self.types.added_losses_rows(self.estimator, [types[i] for i in rows], gpus, shared,
                                                     placement.idx)
            cost[shared] = np.where(own < self.min_throughput, np.inf, cost[shared] + self.interference_weight * lost)

        out: dict[tuple[object, ...], Choice] = {}
        for kind, found in zip(pick, placement.bounded_many(jobs, load, state, adjust)):
            if found is not False and found is not None:  # None: the general path decides (``choose`` alone)
                out[kind] = found or None
        return out

    def _add_interference(self, job: QueuedJob, load: GPULoad, cost: np.ndarray, gpus: np.ndarray) -> None:
        """``choose``'s interference term on the feasible shared GPUs among ``gpus`` (rows of nodes), in place."""
        assert self.estimator is not None
        shared = np.isfinite(cost) & (load.n_residents[gpus] > 0)
        if shared.any():
            lost, own = self.types.added_losses(self.estimator, job.spec.job_type, gpus[shared], self.placement.idx)
            cost[shared] = np.where(own < self.min_throughput, np.inf, cost[shared] + self.interference_weight * lost)

    def _losses_never_negative(self) -> bool:
        """Whether the interference term can only raise a GPU's cost (what ``HorusPlacement.bounded_choice``
        needs): a non-negative weight and the summed-utilization rule with theta, gamma >= 0, whose throughputs
        never rise when a job joins (the added loss is then >= 0, in floating point too)."""
        model = getattr(self.estimator, "model", None)
        key = (id(model), self.interference_weight, getattr(model, "theta", None), getattr(model, "gamma", None))
        if getattr(self, "_never_negative_for", None) != key:
            from horus.interference.summed_util import SummedUtilization  # loaded with the fallback estimator

            self._never_negative_for = key
            self._never_negative = (self.interference_weight >= 0.0 and type(model) is SummedUtilization
                                    and model.theta >= 0.0 and model.gamma >= 0.0)
        return self._never_negative
