"""The memory truth off the formula (horus.truth.memory_deviation): seeded, calibrated, truth-only, and it causes OOM."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from golden_workload import Workload
from sim_fakes import ConstPredictor, PackingPolicy, ToyTruth, cluster, job

from horus.catalog import model_info
from horus.cli import main as cli_main
from horus.colocation.truth_measured import MeasuredTruth
from horus.errors import HorusInputError
from horus.gpu_types import preset
from horus.jobs import parse_job_type
from horus.policies.base import Action, Policy, Start
from horus.predict.analytic import AnalyticPredictor
from horus.sim.engine import SimConfig, simulate
from horus.sim.report import summary_table
from horus.sim.world import build_truth, check_world_options, memory_truth_for
from horus.state import SchedulerState, gpu_share
from horus.truth.base import SoloTruth
from horus.truth.memory import CUDA_CONTEXT_MIB, training_memory_mib
from horus.truth.memory_deviation import MemoryDeviation, load_deviation
from horus.truth.memory_fit import fit_memory_deviation, memory_rows, quantile_cdf
from horus.truth.parametric import DEFAULT_JOB_TYPES, ParametricTruth

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
GPUMEMNET = SHARED / "gpumemnet"
V100 = preset("V100")
needs_gpumemnet = pytest.mark.skipif(not (GPUMEMNET / "mlp_data_step1.csv").is_file(),
                                     reason=f"GPUMemNet data not found at {GPUMEMNET} (shared reference data)")


def _world(seed: int = 0) -> MemoryDeviation:
    return MemoryDeviation(ParametricTruth(seed=seed, memory_overhead=False), seed=seed)


def test_deviation_is_deterministic_by_seed() -> None:
    a, b, other = _world(0), _world(0), _world(1)
    assert [a.deviation(t) for t in DEFAULT_JOB_TYPES] == [b.deviation(t) for t in DEFAULT_JOB_TYPES]
    changed = sum(a.deviation(t) != other.deviation(t) for t in DEFAULT_JOB_TYPES)
    assert changed == len(DEFAULT_JOB_TYPES)
    assert a.solo("resnet50/b64", V100) == b.solo("resnet50/b64", V100)


def test_deviations_follow_the_fitted_distribution() -> None:
    dist = load_deviation()
    world = _world(0)
    logs = np.sort([math.log(world.deviation(f"type{i}/b1")) for i in range(6000)])
    probs, quantiles = np.array(dist.probs), np.array(dist.log_quantiles)
    n = len(logs)
    cdf = quantile_cdf(logs, probs, quantiles)
    ks = max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))
    assert ks < 0.03
    inner = (probs >= 0.05) & (probs <= 0.95)
    assert np.allclose(np.quantile(logs, probs[inner]), quantiles[inner], atol=0.01)
    assert abs(logs.mean() - dist.log_mean) < 0.015  # the quantile form's mean vs the fitted data's
    assert abs(logs.std() - dist.log_std) < 0.03  # linear tails spread the 1 % below p1 a little wider


def test_only_the_model_part_of_memory_deviates() -> None:
    world = _world(0)
    for job_type in DEFAULT_JOB_TYPES:
        model, batch = parse_job_type(job_type)
        formula = training_memory_mib(model_info(model), batch)
        true, inner = world.solo(job_type, V100), world.inner.solo(job_type, V100)
        assert inner.mem_mib == pytest.approx(formula)  # the synthetic overhead is off in a deviated world
        assert true.mem_mib == pytest.approx(CUDA_CONTEXT_MIB + (formula - CUDA_CONTEXT_MIB) * world.deviation(job_type))
        assert (true.util, true.iter_time_s) == (inner.util, inner.iter_time_s)
    pair = ["resnet50/b64", "transformer/b32"]
    assert world.colocated_throughput(pair, V100) == world.inner.colocated_throughput(pair, V100)
    assert world.job_types() == list(DEFAULT_JOB_TYPES)
    assert world.describe()["memory_truth"]["seed"] == 0


def test_predictors_never_read_the_deviation() -> None:
    spec = job("j", 0.0, 10, model="resnet50", batch=64)
    before = AnalyticPredictor().predict(spec, V100)
    _world(0).solo("resnet50/b64", V100)
    assert AnalyticPredictor().predict(spec, V100) == before
    assert before.mem_mib == pytest.approx(training_memory_mib(model_info("resnet50"), 64))
    belief = [p for pkg in ("predict", "learn", "interference", "policies", "core")
              for p in (ROOT / "src" / "horus" / pkg).rglob("*.py")]
    assert belief and not [p for p in belief if "memory_deviation" in p.read_text()]


def test_measured_memory_is_never_deviated() -> None:
    class Measured(ToyTruth):
        memory_measured = True

    with pytest.raises(HorusInputError, match="measured its memory"):
        MemoryDeviation(Measured({}))
    assert MeasuredTruth.memory_measured
    assert memory_truth_for("measured", None) == "formula" and memory_truth_for("gavel", None) == "deviated"
    for option in ("deviated", "formula"):
        with pytest.raises(HorusInputError, match="--memory-truth"):
            check_world_options("measured", None, "analytic", None, memory_truth=option)
    with pytest.raises(HorusInputError, match="--memory-truth"):
        check_world_options("parametric", None, "analytic", None, memory_truth="exact")


def test_build_truth_deviates_only_when_asked() -> None:
    c = cluster()
    plain = build_truth("parametric", None, c)
    assert isinstance(plain, ParametricTruth) and plain.memory_overhead  # library default: the world as before
    deviated = build_truth("parametric", None, c, memory="deviated")
    assert isinstance(deviated, MemoryDeviation) and not deviated.inner.memory_overhead
    with pytest.raises(HorusInputError, match="--memory-truth"):
        build_truth("parametric", None, c, memory="exact")


class MemoryFirstFit(Policy):
    """FIFO; each 1-GPU job onto the lowest GPU whose *predicted* memory still fits (no margin, no resident cap)."""

    name = "memory-first-fit"

    def schedule(self, state: SchedulerState) -> list[Action]:
        load = state.tentative()
        actions: list[Action] = []
        for queued in list(state.queue.values()):
            spec = queued.spec
            pred = state.predict(spec, state.cluster.gpus[0].gpu_type)
            fits = np.flatnonzero(load.pred_mem_mib + pred.mem_mib <= state.mem_capacity_mib)
            if spec.num_gpus != 1 or not len(fits):
                continue
            load.add((int(fits[0]),), pred, gpu_share(spec))
            actions.append(Start(spec.job_id, (int(fits[0]),)))
        return actions


def _memory_heavy_jobs() -> tuple[list, object]:
    """The golden stream workload (seed 3) on 4 GPUs, re-typed to the parametric types of 3-8 GB, 1 GPU each."""
    jobs, cluster_, _ = Workload("heavy", "stream", 2.5, 40, 1, 4, 3).build()
    heavy = [parse_job_type(t) for t in DEFAULT_JOB_TYPES
             if 3000 < training_memory_mib(model_info(parse_job_type(t)[0]), parse_job_type(t)[1]) < 8000]
    return [dataclasses.replace(j, num_gpus=1, model=heavy[i % len(heavy)][0], batch_size=heavy[i % len(heavy)][1])
            for i, j in enumerate(jobs)], cluster_


def test_a_deviated_world_makes_memory_packing_fail_out_of_memory() -> None:
    jobs, cluster_ = _memory_heavy_jobs()
    config = SimConfig()
    formula = simulate(jobs, cluster_, MemoryFirstFit(), ParametricTruth(seed=3, memory_overhead=False),
                       AnalyticPredictor(), config).summary
    deviated = simulate(jobs, cluster_, MemoryFirstFit(), _world(3), AnalyticPredictor(), config).summary
    assert formula["oom_failures"] == 0 and formula["oom_lost_job_h"] == 0  # the predictor is exact: OOM never seen
    assert deviated["oom_failures"] > 0 and deviated["oom_restarts"] > 0
    assert deviated["oom_lost_job_h"] == pytest.approx(deviated["oom_restarts"] * config.oom_restart_s / 3600)
    assert deviated["oom_restarts"] == deviated["oom_failures"] - deviated["jobs_failed"]


def test_oom_restarts_and_lost_hours_are_in_the_summary_and_the_report() -> None:
    jobs = [job(f"j{i}", 5.0 * i, 20 + 3 * i) for i in range(10)]
    truth = ToyTruth({"toya/b1": SoloTruth(0.4, 9000.0, 1.0)})  # two residents need 18,000 of 16,000 MiB
    config = SimConfig(oom_restart_s=60.0, max_oom_retries=1)
    res = simulate(jobs, cluster(1, 2), PackingPolicy(max_share=2.0), truth, ConstPredictor(), config)
    s, frame = res.summary, res.jobs
    failed = int(((frame["status"] == "failed") & (frame["oom_failures"] > 0)).sum())
    assert s["oom_failures"] > 0 and s["oom_restarts"] == s["oom_failures"] - failed
    assert s["oom_lost_job_h"] == pytest.approx(s["oom_restarts"] * 60.0 / 3600)
    page = summary_table({"pairs": s})
    assert "OOM restarts" in page and "job-h lost to OOM" in page and f"{s['oom_lost_job_h']:.2f}" in page


@needs_gpumemnet
def test_the_shipped_quantiles_are_refitted_from_the_shared_data(capsys: pytest.CaptureFixture[str]) -> None:
    fit = fit_memory_deviation(memory_rows(GPUMEMNET))
    shipped = load_deviation()
    assert np.allclose(fit.quantiles, shipped.log_quantiles, atol=1e-4)
    assert fit.mean == pytest.approx(shipped.log_mean, abs=1e-4) and fit.std == pytest.approx(shipped.log_std, abs=1e-4)
    assert fit.ks_quantiles < fit.ks_lognormal  # the log-normal fits worse (a heavy left tail)
    assert cli_main(["truth", "fit-memory", "--gpumemnet", str(GPUMEMNET), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fitted_runs"] == shipped.provenance["fitted_runs"]


def test_fit_memory_reports_a_missing_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["truth", "fit-memory", "--gpumemnet", str(tmp_path)]) == 2
    assert "cannot read GPUMemNet data" in capsys.readouterr().err
