"""Metric bookkeeping: integrals agree across views, timeline downsampling, statuses."""

from __future__ import annotations

import numpy as np
import pytest
from sim_fakes import ConstPredictor, PackingPolicy, ScriptedPolicy, ToyTruth, cluster, job

from horus.policies.base import Preempt
from horus.sim.engine import InvalidActionError, SimConfig, simulate
from horus.truth.base import SoloTruth

TRUTH = ToyTruth({"toya/b1": SoloTruth(0.7, 3000.0, 1.0)})


def test_per_gpu_integrals_match_the_cluster_mean_and_the_timeline_is_capped() -> None:
    rng = np.random.default_rng(11)
    jobs = [job(f"j{i}", float(rng.uniform(0, 300)), float(rng.integers(5, 80))) for i in range(200)]
    res = simulate(jobs, cluster(1, 3), PackingPolicy(max_share=2.0), TRUTH, ConstPredictor(),
                   SimConfig(timeline_points=50))
    span = res.summary["makespan_s"]
    assert res.gpus["util_integral"].sum() / (3 * span) == pytest.approx(res.summary["gpu_util_mean"])
    assert (res.gpus["allocated_s"] <= span + 1e-9).all()
    assert (res.gpus["mean_util"] <= 1.0 + 1e-12).all()
    assert 0 < len(res.timeline) <= 50
    assert res.timeline["time"].is_monotonic_increasing
    assert res.timeline["time"].iloc[-1] == pytest.approx(res.jobs["end"].max())  # last event kept
    # two 0.7-util jobs on one GPU: each at 1/1.4 speed, so the slowdown of a shared job is at most 1.4
    assert res.summary["p95_slowdown"] <= 1.4 + 1e-9 and res.summary["mean_slowdown"] > 1.0


def test_job_larger_than_cluster_is_rejected_and_others_complete() -> None:
    jobs = [job("big", 0.0, 10, gpus=8), job("ok", 0.0, 10)]
    res = simulate(jobs, cluster(1, 2), PackingPolicy(), TRUTH, ConstPredictor())
    status = res.jobs.set_index("job_id")["status"]
    assert status["big"] == "rejected" and status["ok"] == "completed"
    assert res.summary["jobs_rejected"] == 1 and res.summary["jobs_unfinished"] == 0
    assert np.isnan(res.jobs.set_index("job_id").loc["big", "wait"])


def test_preempting_a_job_that_is_not_running_is_a_policy_error() -> None:
    with pytest.raises(InvalidActionError, match="not running"):
        simulate([job("A", 0.0, 10)], cluster(), ScriptedPolicy(lambda state: [Preempt("A")]), TRUTH,
                 ConstPredictor())


def test_lower_bounds_and_goodput_hold_for_every_policy() -> None:
    """No schedule beats the lower bounds; goodput is work done per GPU-second, at most 1."""
    from horus.cli import main  # noqa: F401  (registers commands)
    from horus.clusterspec import load_cluster
    from horus.plugins import load_all
    from horus.policies.base import POLICIES
    from horus.predict.analytic import AnalyticPredictor
    from horus.sim.world import embedded
    from horus.traces import load_trace, materialize
    from horus.traces.sampler import SAMPLERS
    from horus.truth.parametric import ParametricTruth

    load_all("horus.policies")
    truth = ParametricTruth()
    cluster = load_cluster(embedded("default_cluster.yaml"))
    trace = load_trace(embedded("default_trace.csv"), "horus")
    jobs = materialize(trace, truth, SAMPLERS.create("by-size-duration", seed=0), cluster.gpus[0].gpu_type, seed=0)
    jobs = jobs[:120]
    for name in ("fifo-exclusive", "horus", "tiresias"):
        s = simulate(jobs, cluster, POLICIES.create(name), truth, AnalyticPredictor()).summary
        assert s["makespan_s"] >= s["makespan_lower_bound_s"] > 0
        assert s["mean_jct_s"] >= s["mean_jct_lower_bound_s"] > 0
        # the valid bounds are never above those of schedules that never co-locate
        assert s["makespan_lower_bound_s"] <= s["makespan_exclusive_bound_s"]
        assert s["mean_jct_lower_bound_s"] <= s["mean_jct_exclusive_bound_s"]
        assert 0 < s["gpu_allocated_share"] <= 1.0 and s["goodput"] > 0
        if s["colocated_share"] == 0:  # alone on its GPUs, a job's useful work never exceeds the time it holds them
            assert s["goodput"] <= s["gpu_allocated_share"] + 1e-9
        assert 1.0 - 1e-9 <= s["mean_stretch"] <= s["max_stretch"]
