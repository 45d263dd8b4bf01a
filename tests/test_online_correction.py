"""Online correction (docs/predictors.md, "Online correction"): the shrinkage of ``Corrections``, exact type before the
same-GPU and global fallbacks, ``CorrectedPredictor``, the observer's solo rule, the state's refreshed load, the
store's migration and the simulator's path (``SimConfig(online_correction=True)``)."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest
from sim_fakes import ConstPredictor, PackingPolicy, ToyTruth, cluster, job, toy_catalog_rows

import horus.catalog
from horus.cluster import GPUType
from horus.core.online import OnlineObserver
from horus.jobs import JobSpec
from horus.predict.base import Prediction
from horus.predict.corrected import (
    K_GLOBAL,
    K_GPU,
    K_TYPE,
    MAX_LOG_RATIO,
    CorrectedPredictor,
    Corrections,
    Observation,
)
from horus.sim.engine import SimConfig, simulate
from horus.state import SchedulerState
from horus.truth.base import SoloTruth

V100 = GPUType("v100", 16_000, 1.0)
A100 = GPUType("a100", 40_000, 2.0)


def obs(key: str, job_type: str, ratio: float, predicted: float = 1000.0, gpu: str = "v100",
        quantity: str = "mem_mib") -> Observation:
    """An observation of ``ratio`` times the prediction."""
    return Observation(key, job_type, gpu, quantity, predicted, ratio * predicted)


def test_one_observation_of_a_type_corrects_it_by_the_documented_shrinkage() -> None:
    c = Corrections()
    c.observe(obs("1", "a/b1", 2.0))
    r = math.log(2.0)
    b0 = r / (1 + K_GLOBAL)
    bg = (r + K_GPU * b0) / (1 + K_GPU)
    found = c.correction("a/b1", "v100", "mem_mib")
    assert found.source == "type" and found.observations == 1
    assert found.factor == pytest.approx(math.exp((r + K_TYPE * bg) / (1 + K_TYPE)))
    # the second job of the type is predicted within half the first one's error
    assert abs(1000.0 * found.factor - 2000.0) <= 0.5 * abs(1000.0 - 2000.0)
    # other quantities, and the same type's utilization, are untouched
    assert c.correction("a/b1", "v100", "util").source == "none"
    assert c.correction("a/b1", "v100", "util").factor == 1.0


def test_other_types_fall_back_to_the_same_gpu_then_to_other_gpus_shrunk_harder() -> None:
    c = Corrections()
    c.observe(obs("1", "a/b1", 2.0))
    r = math.log(2.0)
    b0 = r / (1 + K_GLOBAL)
    same_gpu = c.correction("b/b1", "v100", "mem_mib")
    other_gpu = c.correction("b/b1", "a100", "mem_mib")
    assert (same_gpu.source, other_gpu.source) == ("gpu", "global")
    assert same_gpu.factor == pytest.approx(math.exp((r + K_GPU * b0) / (1 + K_GPU)))
    assert other_gpu.factor == pytest.approx(math.exp(b0))
    assert 1.0 < other_gpu.factor < same_gpu.factor < c.correction("a/b1", "v100", "mem_mib").factor < 2.0


def test_more_types_with_the_same_bias_move_a_new_type_further() -> None:
    one, four = Corrections(), Corrections()
    one.observe(obs("1", "a/b1", 2.0))
    for i, t in enumerate(("a/b1", "b/b1", "c/b1", "d/b1")):
        four.observe(obs(str(i), t, 2.0))
    assert one.correction("new/b1", "v100", "mem_mib").factor < four.correction("new/b1", "v100", "mem_mib").factor < 2


def test_types_count_once_however_often_they_ran() -> None:
    """The GPU-level bias averages per-type means: a type run ten times does not outweigh another run once."""
    c = Corrections()
    for i in range(10):
        c.observe(obs(f"a{i}", "a/b1", 4.0))
    c.observe(obs("b", "b/b1", 0.25))
    assert c.correction("new/b1", "v100", "mem_mib").factor == pytest.approx(1.0)
    assert c.correction("a/b1", "v100", "mem_mib").observations == 10


def test_a_job_refines_its_own_observation_and_the_window_keeps_the_latest() -> None:
    c = Corrections(window=3)
    c.observe(obs("1", "a/b1", 2.0))
    c.observe(obs("1", "a/b1", 3.0))  # the same job, observed longer: replaces
    assert len(c) == 1
    single = Corrections(window=3)
    single.observe(obs("1", "a/b1", 3.0))
    assert c.correction("a/b1", "v100", "mem_mib") == single.correction("a/b1", "v100", "mem_mib")
    for i in range(2, 8):
        c.observe(obs(str(i), "a/b1", 0.5))
    assert c.correction("a/b1", "v100", "mem_mib").observations == 3
    assert c.correction("a/b1", "v100", "mem_mib").factor < 1.0  # the old observation left the window


def test_residuals_are_floored_and_clipped() -> None:
    c = Corrections(k_type=0.0)
    c.observe(obs("1", "a/b1", 0.0, 1e9))  # a zero reading (floored at 1 MiB): a factor of 1/100 at most
    assert c.correction("a/b1", "v100", "mem_mib").factor == pytest.approx(math.exp(-MAX_LOG_RATIO))


def test_corrected_predictor_gives_both_and_leaves_jobs_without_a_model_alone() -> None:
    c = Corrections(k_type=0.0)
    predictor = CorrectedPredictor(ConstPredictor(util=0.5, mem_mib=1000.0, iter_time_s=1.0), c)
    spec = JobSpec("1", 0.0, 1, "toya", 1, 10.0)
    assert predictor.predict(spec, V100) == Prediction(0.5, 1000.0, 1.0)
    c.observe(Observation("1", spec.job_type, "v100", "util", 0.5, 0.9))
    c.observe(Observation("1", spec.job_type, "v100", "iter_time_s", 1.0, 3.0))
    c.observe(Observation("2", "toyb/b1", "v100", "util", 0.5, 1.0))  # would push util over 1: capped
    corrected, raw, factors = predictor.explain(spec, V100)
    assert raw == Prediction(0.5, 1000.0, 1.0)
    assert corrected.util == pytest.approx(0.9) and corrected.iter_time_s == pytest.approx(3.0)
    assert corrected.mem_mib == 1000.0 and factors["mem_mib"].source == "none"
    assert predictor.predict(JobSpec("2", 0.0, 1, "toyb", 1, 1.0), V100).util == 1.0
    blank = JobSpec("3", 0.0, 1, "", 0, 1.0)
    assert predictor.predict(blank, V100) == Prediction(0.5, 1000.0, 1.0)


@pytest.fixture
def toy_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(horus.catalog, "load_catalog", lambda: toy_catalog_rows({"toya": 25_000_000,
                                                                                  "toyb": 1_000_000}))


def _state(predictor: CorrectedPredictor) -> SchedulerState:
    state = SchedulerState(cluster(1, 2), predictor)
    for j, model in (("a", "toya"), ("b", "toyb"), ("c", "toya")):
        state.submit(JobSpec(j, 0.0, 1, model, 1, 100.0), 0.0)
    return state


def test_colocated_jobs_feed_no_solo_utilization_or_iteration_time_but_their_own_memory() -> None:
    predictor = CorrectedPredictor(ConstPredictor(), Corrections())
    state = _state(predictor)
    observer = OnlineObserver(predictor)
    state.start("a", (0,), 0.0)
    state.start("b", (0,), 0.0)  # shares GPU 0 with a
    state.start("c", (1,), 0.0)  # alone on GPU 1
    for j in "abc":
        observer.start(state, j, 1)
    for t in range(1, 6):
        for j, gpu in (("a", 0), ("b", 0), ("c", 1)):
            state.running[j].iterations_done = 10.0 * t
            observer.sample_gpu(state, j, util=0.9, gpu_mem_mib=5000.0, job_mem_mib=2000.0 if j == "a" else None)
            observer.sample_progress(state, j, float(t), state.running[j].iterations_done)
    seen = {j: {o.observation.quantity: o.observation.observed for o in observer.observations(j)} for j in "abc"}
    assert seen["a"] == {"mem_mib": 2000.0}  # its own memory counts while it shares; the GPU's does not
    assert seen["b"] == {}
    assert seen["c"] == {"util": 0.9, "mem_mib": 5000.0, "iter_time_s": pytest.approx(0.1)}
    # a co-runner leaving does not make the interval that spanned it solo
    state.finish("b")
    state.running["a"].iterations_done = 60.0
    observer.sample_progress(state, "a", 6.0, 60.0)
    assert "iter_time_s" not in {o.observation.quantity for o in observer.observations("a")}


def test_refreshed_predictions_rebuild_the_load_so_that_stopping_a_job_leaves_none() -> None:
    corrections = Corrections(k_type=0.0)
    predictor = CorrectedPredictor(ConstPredictor(util=0.5, mem_mib=1000.0), corrections)
    state = _state(predictor)
    observer = OnlineObserver(predictor)
    state.start("a", (0,), 0.0)
    observer.start(state, "a", 1)
    assert state.load.pred_mem_mib[0] == 1000.0
    version, state_version = state.load_version, state.version
    changed = observer.commit(state, [])
    assert not changed and state.load_version == version
    from horus.core.online import Observed

    found = Observed(Observation("x", "toya/b1", "v100", "mem_mib", 1000.0, 3000.0), 1000.0, 1, 1)
    assert observer.commit(state, [found])
    assert state.load.pred_mem_mib[0] == pytest.approx(3000.0) and state.load_version > version
    assert state.version > state_version  # what policies key their per-state caches on: the belief changed
    state.finish("a")
    assert state.load.pred_mem_mib[0] == pytest.approx(0.0) and state.load.n_residents[0] == 0


def test_a_version_4_store_gains_the_observations_table(tmp_path: Path) -> None:
    from horus.service.store import SCHEMA_VERSION, Store

    Store(tmp_path / "h.db").close()
    db = sqlite3.connect(tmp_path / "h.db")
    db.execute("DROP TABLE observations")
    db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    store = Store(tmp_path / "h.db")
    store.put_observations([{"job_id": 1, "quantity": "util", "attempt": 1, "job_type": "a/b1", "gpu_type": "V100",
                             "predicted": 0.5, "believed": 0.5, "observed": 0.8, "samples": 2}], 1.0)
    assert [r["observed"] for r in store.observations(1)] == [0.8]
    store.close()
    db = sqlite3.connect(tmp_path / "h.db")
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    db.close()


@pytest.mark.parametrize("telemetry", ["exact", "noisy"])
def test_the_simulator_corrects_later_jobs_from_solo_telemetry(toy_catalog: None, telemetry: str) -> None:
    truth = ToyTruth({"toya/b1": SoloTruth(0.6, 4000.0, 1.0), "toyb/b1": SoloTruth(0.3, 2000.0, 0.5)})
    jobs = [job(str(i), 100.0 * i, 300.0, model="toya" if i % 2 else "toyb") for i in range(12)]
    options = {"period_s": 20.0, "warmup_iterations": 5.0} if telemetry == "noisy" else {}
    config = SimConfig(telemetry=telemetry, telemetry_options=options, online_correction=True)
    result = simulate(jobs, cluster(1, 2), PackingPolicy(), truth, ConstPredictor(0.9, 1000.0, 2.0), config)
    s = result.summary
    assert s["online_observations"] > 0
    for key in ("pred_util_mae", "pred_mem_mape", "pred_iter_mape"):
        assert s[key] < 0.5 * s[key + "_raw"], (key, s)
    plain = simulate(jobs, cluster(1, 2), PackingPolicy(), truth, ConstPredictor(0.9, 1000.0, 2.0),
                     SimConfig(telemetry=telemetry, telemetry_options=options))
    assert not any(k.startswith("pred_") for k in plain.summary)
