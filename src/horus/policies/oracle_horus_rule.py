"""``oracle-horus-rule``: Horus's rule fed the truth. READS THE SIMULATOR'S TRUTH; not a deployable policy.

Not an upper bound either (the issue-14 audit measured it behind ``horus``): it accepts any per-GPU
gain >= 0 and ignores gang coupling, remaining time and that a co-location cannot be undone. It
answers "what would perfect inputs buy the Horus rule?"; the honest reference for co-location is
``oracle-truth`` (``horus.policies.oracle_truth``), which the name ``oracle`` now points to.

It reads the simulator's truth (bound by the backend through ``bind_truth``): true solo utilization
and memory of every job type and true co-located throughput. Placement is Horus's cost with true
values instead of predictions and true memory as a hard limit (never an out-of-memory start); a
single-GPU job then goes to the candidate GPU (the ``shortlist`` cheapest feasible ones) that maximises
the gain in total normalized throughput of that GPU, and is not co-located when the gain is below
``min_gain`` (co-location would lower the GPU's total throughput).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from horus.errors import OracleAccessError
from horus.policies.base import POLICIES
from horus.policies.horus_paper import Choice, HorusPolicy
from horus.policies.placements.horus import HorusPlacement
from horus.predict.base import Prediction
from horus.state import GPULoad, QueuedJob, SchedulerState
from horus.truth.base import TruthModel


class TrueLoad:
    """Per-GPU true utilization and memory of the running jobs, updated incrementally."""

    def __init__(self, n_gpus: int) -> None:
        self.util = np.zeros(n_gpus)
        self.mem = np.zeros(n_gpus)
        self.jobs: dict[str, tuple[tuple[int, ...], float, float]] = {}

    def sync(self, state: SchedulerState, solo: Any) -> None:
        running = state.running
        # The jobs that left and came are found by set differences of the keys (no pass in Python over the running
        # jobs) but applied in dict order: float sums must not depend on string hashing. The changes go to the
        # arrays as one ``np.add.at`` (unbuffered: element by element in this order, as one call per job).
        at: list[int] = []
        utils: list[float] = []
        mems: list[float] = []
        gone = self.jobs.keys() - running.keys()
        for jid in ([jid for jid in self.jobs if jid in gone] if len(gone) > 1 else gone):
            gpus, util, mem = self.jobs.pop(jid)
            at += gpus
            utils += [-util] * len(gpus)
            mems += [-mem] * len(gpus)
        came = running.keys() - self.jobs.keys()
        for jid in ([jid for jid in running if jid in came] if len(came) > 1 else came):
            run = running[jid]
            truth = solo(run.spec.job_type, state.cluster.gpus[run.gpus[0]].gpu_type)
            self.jobs[jid] = (run.gpus, truth.util, truth.mem_mib)
            at += run.gpus
            utils += [truth.util] * len(run.gpus)
            mems += [truth.mem_mib] * len(run.gpus)
        if at:
            idx = np.asarray(at, dtype=np.int64)
            np.add.at(self.util, idx, np.asarray(utils, dtype=float))
            np.add.at(self.mem, idx, np.asarray(mems, dtype=float))


class OraclePlacement(HorusPlacement):
    """HorusPlacement fed with true solo values instead of predictions."""

    name = "oracle"

    def __init__(self, truth_source: OraclePolicy, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.owner = truth_source

    def job_loads(self, job: QueuedJob, state: SchedulerState) -> list[Prediction]:
        return [self.owner.true_load(job, t) for t in self.idx.types]


@POLICIES.register("oracle-horus-rule")
class OraclePolicy(HorusPolicy):
    name = "oracle-horus-rule"
    is_oracle = True

    def __init__(self, *, lookahead: int = 64, max_bypass: int = 1024, util_cap: float = 1.0,
                 mem_margin: float = 0.0, max_residents: int = 4, shortlist: int = 8, min_gain: float = 0.0,
                 weights: dict[str, float] | None = None) -> None:
        placement = OraclePlacement(self, util_cap=util_cap, mem_margin=mem_margin, max_residents=max_residents,
                                    weights=weights)
        super().__init__(lookahead=lookahead, max_bypass=max_bypass, placement=placement)
        self.shortlist = shortlist
        self.min_gain = min_gain
        self.truth: TruthModel | None = None
        self._true: TrueLoad | None = None
        self._planned_types: dict[int, list[str]] = {}

    def bind_truth(self, truth: object) -> None:
        if not isinstance(truth, TruthModel):
            raise TypeError(f"oracle needs a TruthModel, got {type(truth).__name__}")
        self.truth = truth

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "reads_truth": True, "upper_bound": False, "shortlist": self.shortlist,
                "min_gain": self.min_gain, "note": "reads the simulator's truth: the horus rule on true values; "
                                                   "not a bound (see oracle-truth)"}

    def _truth(self) -> TruthModel:
        if self.truth is None:
            raise OracleAccessError(f"{self.name} policy used before bind_truth(truth)")
        return self.truth

    def true_load(self, job: QueuedJob, gpu_type: Any) -> Prediction:
        solo = self._truth().solo(job.spec.job_type, gpu_type)
        return Prediction(solo.util, solo.mem_mib, solo.iter_time_s)

    # ---- HorusPolicy hooks ---------------------------------------------------------------------
    def node_placement(self) -> None:
        """Its choice reads true loads: no per-node placement score."""
        return

    def planning_load(self, state: SchedulerState) -> GPULoad:
        if self._true is None or len(self._true.util) != state.cluster.num_gpus:
            self._true = TrueLoad(state.cluster.num_gpus)
        self._true.sync(state, self._truth().solo)
        self._planned_types = {}
        load = state.tentative()
        load.pred_util = self._true.util.copy()
        load.pred_mem_mib = self._true.mem.copy()
        return load

    def job_load(self, job: QueuedJob, gpu: int, state: SchedulerState) -> Prediction:
        return self.true_load(job, state.cluster.gpus[gpu].gpu_type)

    def note_start(self, job: QueuedJob, gpus: tuple[int, ...], state: SchedulerState) -> None:
        for g in gpus:
            self._planned_types.setdefault(g, []).append(job.spec.job_type)

    def choose(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> Choice:
        if job.spec.num_gpus > 1:
            return self.placement.evaluate(job, load, state)
        cost = self.placement.cost_per_gpu_kept(job, load, state)  # read only
        if cost is None:
            return None
        finite = np.flatnonzero(np.isfinite(cost))
        if len(finite) == 0:
            return None
        if len(finite) > self.shortlist:
            finite = finite[np.argpartition(cost[finite], self.shortlist - 1)[: self.shortlist]]
        best: tuple[float, float, int] | None = None  # (-gain, cost, gpu)
        for g in finite:
            gain = self._gain(job, int(g), state)
            if gain < self.min_gain and load.n_residents[g] > 0:
                continue
            cand = (-gain, float(cost[g]), int(g))
            if best is None or cand < best:
                best = cand
        return None if best is None else ((best[2],), best[1])

    kind_choose = choose  # reads the job through its type, GPUs, request, OOM failures and true load only

    def _gain(self, job: QueuedJob, gpu: int, state: SchedulerState) -> float:
        """Change in the GPU's total normalized throughput if ``job`` joins it (alone: 1.0)."""
        running, planned = state.residents[gpu], self._planned_types.get(gpu)
        if not running and not planned:
            return 1.0
        residents = [state.running[jid].spec.job_type for jid in running]
        residents += planned or []
        gpu_type = state.cluster.gpus[gpu].gpu_type
        truth = self._truth()
        before = sum(truth.colocated_throughput(residents, gpu_type))
        after = sum(truth.colocated_throughput([*residents, job.spec.job_type], gpu_type))
        return after - before

