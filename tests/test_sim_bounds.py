"""Lower bounds valid under co-location (``horus.sim.bounds``, docs/metrics.md "Lower bounds"): checked
against every schedule of a brute-force family on tiny instances, against every registered policy, and
shown to be needed (the exclusive bound is beaten by co-locating)."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from typing import ClassVar

import pytest
from sim_fakes import ConstPredictor, ScriptedPolicy, cluster, job

from horus.cluster import GPUType
from horus.jobs import JobSpec
from horus.policies.base import Start
from horus.sim.bounds import type_capacities
from horus.sim.engine import simulate
from horus.sim.metrics import below_bounds
from horus.state import SchedulerState
from horus.truth.base import SoloTruth, TruthModel
from horus.truth.fit import SlowdownParams, normalized_throughputs

TOL = 1 - 1e-9


class TinyTruth(TruthModel):
    """Two or three types on 16 GB; co-location by the fitted law with alpha = beta = 1, gamma = 0
    (``x_i = 1 / (1 + sum of the others' utils)``: pairs sum above 1). With ``boost``, a ``c`` job runs
    at 1.25 x its solo speed next to an ``a`` job (a truth where sharing speeds a job up)."""

    name = "tiny"
    TABLE: ClassVar[dict[str, SoloTruth]] = {"a/b1": SoloTruth(0.3, 5000.0, 1.0), "b/b1": SoloTruth(0.6, 5000.0, 2.0),
             "c/b1": SoloTruth(0.2, 7000.0, 1.0)}

    def __init__(self, boost: bool = False) -> None:
        self.boost = boost

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        return self.TABLE[job_type]

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        xs = normalized_throughputs([self.TABLE[t].util for t in job_types], SlowdownParams(1.0, 1.0, 0.0))
        if self.boost and "a/b1" in job_types:
            xs = [1.25 if t == "c/b1" else x for t, x in zip(job_types, xs)]
        return xs


def wave_policy(plan: dict[str, tuple[int, int]]) -> ScriptedPolicy:
    """Job -> (GPU, wave): a job starts on its GPU once every job of an earlier wave on that GPU finished and
    it has arrived; a wave's jobs run together (co-located when more than one)."""
    def script(state: SchedulerState) -> list[Start]:
        busy = set(state.queue) | set(state.running)
        return [Start(j, (plan[j][0],)) for j in list(state.queue)
                if not any(o in busy and plan[o][0] == plan[j][0] and plan[o][1] < plan[j][1] for o in plan)]
    return ScriptedPolicy(script)


def brute_force(jobs: list[JobSpec], n_gpus: int, truth: TruthModel) -> list[dict[str, float | int]]:
    """Summaries of every (GPU, wave) plan of ``jobs``: all orders, groupings and GPU choices."""
    out = []
    choices = list(itertools.product(range(n_gpus), range(len(jobs))))
    for plan in itertools.product(choices, repeat=len(jobs)):
        policy = wave_policy({s.job_id: p for s, p in zip(jobs, plan)})
        out.append(simulate(jobs, cluster(1, n_gpus), policy, truth, ConstPredictor()).summary)
    return out


INSTANCES = [
    ([job("A", 0, 100, "a"), job("B", 0, 60, "b")], 1),
    ([job("A", 0, 100, "a"), job("B", 0, 60, "b"), job("A2", 20, 80, "a")], 1),
    ([job("A", 0, 100, "a"), job("B", 10, 60, "b"), job("B2", 0, 30, "b")], 2),
    ([job("A", 0, 50, "a"), job("B", 0, 40, "b"), job("A2", 0, 70, "a"), job("B2", 30, 20, "b")], 1),
    ([job("A", 0, 100, "a"), job("C", 0, 90, "c"), job("B", 5, 30, "b")], 1),
]


@pytest.mark.parametrize("boost", [False, True])
@pytest.mark.parametrize(("jobs", "n_gpus"), INSTANCES)
def test_no_enumerated_schedule_beats_the_valid_bounds(jobs: list[JobSpec], n_gpus: int, boost: bool) -> None:
    runs = [s for s in brute_force(jobs, n_gpus, TinyTruth(boost)) if s["jobs_completed"] == len(jobs)]
    assert runs  # plans that overfill memory fail out of memory and are left out
    for s in runs:
        assert s["makespan_s"] >= s["makespan_lower_bound_s"] * TOL
        assert s["mean_jct_s"] >= s["mean_jct_lower_bound_s"] * TOL
        assert below_bounds(s) == []
        assert s["makespan_lower_bound_s"] <= s["makespan_exclusive_bound_s"]
        assert s["mean_jct_lower_bound_s"] <= s["mean_jct_exclusive_bound_s"]


def test_the_exclusive_bounds_are_beaten_by_co_locating_so_the_check_can_fail() -> None:
    """Two jobs at time 0 on one GPU: together they deliver 1/1.6 + 1/1.3 > 1 solo throughput."""
    jobs = INSTANCES[0][0]
    runs = brute_force(jobs, 1, TinyTruth())
    assert min(s["makespan_s"] / s["makespan_exclusive_bound_s"] for s in runs) < 0.9
    shared = [s for s in runs if s["colocated_share"] > 0]
    assert shared and all(s["makespan_s"] >= s["makespan_lower_bound_s"] * TOL for s in shared)


def test_a_truth_where_sharing_speeds_a_job_up_lowers_the_mean_jct_bound() -> None:
    """``c`` next to ``a`` runs at 1.25 x solo: the exclusive mean-JCT bound is beaten, the valid one is not."""
    jobs = [job("A", 0, 100, "a"), job("C", 0, 90, "c")]
    runs = brute_force(jobs, 1, TinyTruth(boost=True))
    caps = type_capacities(TinyTruth(boost=True), cluster().gpus[0].gpu_type, {"a/b1": 1, "c/b1": 1})
    assert caps["c/b1"].best_rate == pytest.approx(1.25) and caps["c/b1"].exact
    best = min(runs, key=lambda s: s["mean_jct_s"])
    assert best["mean_jct_s"] < best["mean_jct_exclusive_bound_s"]
    assert best["mean_jct_s"] >= best["mean_jct_lower_bound_s"] * TOL


def test_capacities_match_hand_computed_sets_and_fall_back_to_set_size() -> None:
    truth, gpu = TinyTruth(), cluster().gpus[0].gpu_type
    caps = type_capacities(truth, gpu, {"a/b1": 3, "b/b1": 1})
    # 16 GB holds three 5 GB jobs: {a, a, a} gives 3 / 1.6, {a, a, b} 2 / 1.9 + 1 / 1.6
    assert caps["a/b1"].best_combined == pytest.approx(max(3 / 1.6, 2 / 1.9 + 1 / 1.6))
    assert caps["b/b1"].best_combined == pytest.approx(2 / 1.9 + 1 / 1.6)
    assert all(c.exact and c.best_rate == 1.0 for c in caps.values())
    small = type_capacities(truth, gpu, {"a/b1": 3, "b/b1": 1}, budget=1)
    assert not small["a/b1"].exact and small["a/b1"].best_combined == 3.0  # contract: each member <= 1


def test_every_registered_policy_respects_the_valid_bounds_on_tiny_instances() -> None:
    from horus.core import create_policy
    from horus.plugins import load_all
    from horus.policies.base import POLICIES

    load_all("horus.policies")
    ran = 0
    for jobs, n_gpus in INSTANCES:
        for name in POLICIES.names():
            policy = create_policy(name, {}, has_truth=True)
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)  # the engine's own below-bound check
                s = simulate(jobs, cluster(1, n_gpus), policy, TinyTruth(), ConstPredictor()).summary
            if s["jobs_completed"] == len(jobs):
                assert s["makespan_s"] >= s["makespan_lower_bound_s"] * TOL, name
                assert s["mean_jct_s"] >= s["mean_jct_lower_bound_s"] * TOL, name
                ran += 1
    assert ran >= len(POLICIES.names()) * len(INSTANCES) // 2


def test_default_small_workload_under_every_policy_stays_above_the_valid_bounds() -> None:
    from horus.cli import main  # noqa: F401  (registers commands)
    from horus.clusterspec import load_cluster
    from horus.core import create_policy
    from horus.plugins import load_all
    from horus.policies.base import POLICIES
    from horus.predict.analytic import AnalyticPredictor
    from horus.sim.world import embedded
    from horus.traces import load_trace, materialize
    from horus.traces.sampler import SAMPLERS
    from horus.truth.parametric import ParametricTruth

    load_all("horus.policies")
    truth = ParametricTruth()
    clus = load_cluster(embedded("default_cluster.yaml"))
    trace = load_trace(embedded("default_trace.csv"), "horus")
    jobs = materialize(trace, truth, SAMPLERS.create("by-size-duration", seed=0), clus.gpus[0].gpu_type, seed=0)[:120]
    ran = []
    for name in POLICIES.names():
        policy = create_policy(name, {}, has_truth=True)
        s = simulate(jobs, clus, policy, truth, AnalyticPredictor()).summary
        assert s["makespan_s"] >= s["makespan_lower_bound_s"] * TOL, name
        if s["jobs_completed"] == s["num_jobs"] - s["jobs_rejected"]:
            assert s["mean_jct_s"] >= s["mean_jct_lower_bound_s"] * TOL, name
        ran.append(name)
    assert {"fifo-exclusive", "horus", "oracle-truth"} <= set(ran) and len(ran) == len(POLICIES.names())
