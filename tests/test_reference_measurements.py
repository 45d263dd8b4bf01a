"""Loaders of the public measurements, calibration and the held-out evaluation (synthetic data + real when present)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from horus.errors import HorusInputError
from horus.gpu_types import gpu_spec
from horus.predict.calibrate import calibrate
from horus.predict.evaluate import evaluate
from horus.predict.measurements import Measurement, load_measurements
from horus.predict.physical import GPUParams, PhysicalParams, estimate
from horus.predict.workload import catalog_workload, mlp_workload
from horus.sources.gpumemnet import load_gpumemnet
from horus.sources.pollux import load_pollux
from horus.sources.zeus import load_zeus


def test_zeus_loader_keeps_default_power_limit_and_known_datasets(tmp_path: Path) -> None:
    (tmp_path / "summary_power_v100.csv").write_text(
        "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
        "cifar100,shufflenetv2,128,adam,250,39.1,200\ncifar100,shufflenetv2,128,adam,150,50.0,140\n"
        "librispeech,deepspeech2,32,adamw,250,900,230\n")
    rows = load_zeus(tmp_path, "V100")
    assert len(rows) == 1 and rows[0].iter_time_s == pytest.approx(39.1 / 391)


def test_loaders_name_the_bad_field(tmp_path: Path) -> None:
    (tmp_path / "summary_power_p100.csv").write_text("dataset,network\ncifar100,x\n")
    with pytest.raises(HorusInputError, match="missing column .batch_size"):
        load_zeus(tmp_path, "P100")
    (tmp_path / "ncf").mkdir()
    (tmp_path / "ncf" / "placements.csv").write_text("placement,local_bsz,step_time,sync_time\n1,abc,0.1,0\n")
    with pytest.raises(HorusInputError, match="line 2"):
        load_pollux(tmp_path, "ncf")
    with pytest.raises(HorusInputError, match="mlp_data_step1.csv"):
        load_gpumemnet(tmp_path)


def _synthetic(truth: PhysicalParams) -> list[Measurement]:
    rows = []
    for gpu in ("V100", "T4", "P100"):
        for model, family in (("resnet50", "cnn"), ("transformer", "transformer"), ("lstm_lm", "recurrent"),
                              ("ncf_ml1m", "recommendation")):
            w = catalog_workload(model)
            for batch in (8, 32, 128):
                e = estimate(w, batch, gpu_spec(gpu), truth, "adam")
                rows.append(Measurement("synthetic", w, family, batch, gpu, "adam", iter_time_s=e.iter_time_s))
    for i, width in enumerate((256, 1024, 4096)):
        w = mlp_workload(f"mlp{i}", 512, [("linear", width, 512 * width + width), ("ReLU", width, 0),
                                          ("linear", 10, width * 10 + 10)])
        for batch in (16, 256):
            e = estimate(w, batch, gpu_spec("A100-40GB"), truth, "adam")
            rows.append(Measurement("synthetic-mlp", w, "mlp-a", batch, "A100-40GB", "adam", util=e.util,
                                    mem_mib=e.mem_mib))
    return rows


def test_calibration_recovers_a_synthetic_world() -> None:
    truth = PhysicalParams(per_gpu={g: GPUParams(compute_eff=0.4, bw_eff=0.5, dispatch_s=3e-5, step_s=1e-3,
                                                 context_mib=1400.0) for g in ("V100", "T4", "P100", "A100-40GB")})
    truth = replace(truth, default=truth.per_gpu["V100"])
    rows = _synthetic(truth)
    fitted = calibrate(rows)
    it = np.array([estimate(m.workload, m.batch, gpu_spec(m.gpu), fitted, "adam").iter_time_s / m.iter_time_s
                   for m in rows if m.iter_time_s])
    assert np.mean(np.abs(it - 1)) < 0.05
    mem = [estimate(m.workload, m.batch, gpu_spec(m.gpu), fitted, "adam").mem_mib / m.mem_mib
           for m in rows if m.mem_mib]
    assert np.mean(np.abs(np.array(mem) - 1)) < 0.02
    # the uncalibrated prior is clearly worse on this world, so the fit is what helps
    prior = np.array([estimate(m.workload, m.batch, gpu_spec(m.gpu), PhysicalParams(), "adam").iter_time_s
                      / m.iter_time_s for m in rows if m.iter_time_s])
    assert np.mean(np.abs(prior - 1)) > 2 * np.mean(np.abs(it - 1))


def test_evaluation_scores_every_protocol_and_baseline() -> None:
    truth = PhysicalParams(per_gpu={g: GPUParams(compute_eff=0.4, bw_eff=0.5) for g in ("V100", "T4", "P100")})
    scores = evaluate(_synthetic(truth), candidates=("physical", "mean", "log-flops", "horus-formula"))
    got = {(s.protocol, s.target, s.candidate) for s in scores if s.dataset == "synthetic"}
    assert ("family-out", "iter_time", "physical") in got and ("gpu-out", "iter_time", "log-flops") in got
    phys = [s for s in scores if s.dataset == "synthetic" and s.candidate == "physical" and s.protocol == "gpu-out"]
    mean = [s for s in scores if s.dataset == "synthetic" and s.candidate == "mean" and s.protocol == "gpu-out"]
    assert phys[0].error < mean[0].error


def test_cli_evaluate_needs_data_or_reference() -> None:
    out = subprocess.run([sys.executable, "-m", "horus.cli", "predictor", "evaluate"], capture_output=True, text=True)
    assert out.returncode == 2 and "--reference" in out.stderr


def test_real_measurements_load(shared_data: Path) -> None:
    rows = load_measurements(shared_data)
    datasets = {m.dataset for m in rows}
    assert datasets == {"gavel", "zeus", "pollux", "gpumemnet"}
    assert {m.gpu for m in rows} >= {"K80", "P100", "V100", "T4", "A40", "RTX6000", "A100-40GB"}
    assert all((m.iter_time_s or 1) > 0 for m in rows)


def test_shipped_constants_record_their_provenance() -> None:
    from importlib import resources

    data = json.loads(resources.files("horus.data").joinpath("physical_params.json").read_text())
    assert data["provenance"]["calibrated"] is True and "horus predictor calibrate" in data["provenance"]["command"]
    assert set(data["per_gpu"]) >= {"V100", "T4"}


def _stated_rows(truth: PhysicalParams) -> list[Measurement]:
    """Synthetic catalog rows that state model, input size, precision and optimizer (two datasets)."""
    from horus.catalog import load_catalog

    rows = []
    for ds, gpus in (("d1", ("V100", "T4")), ("d2", ("P100", "V100"))):
        for gpu in gpus:
            for model, prec, opt in (("resnet50", "amp-fp16", "momentum"), ("transformer", "tf32", "adam"),
                                     ("ncf_ml1m", "tf32", "adam")):
                w = catalog_workload(model)
                for batch in (16, 64):
                    e = estimate(w, batch, gpu_spec(gpu), truth, opt, precision=prec)
                    rows.append(Measurement(ds, w, w.family, batch, gpu, opt, iter_time_s=e.iter_time_s,
                                            precision=prec, model=model, input_size=load_catalog()[model].input_size))
    return rows


def test_cli_path_agrees_with_the_api_when_the_job_states_itself() -> None:
    rows = _stated_rows(PhysicalParams())
    scores = evaluate(rows, protocols=("dataset-out", "gpu-out"),
                      candidates=("physical", "physical-cli", "physical-cli-bare"))
    got = {(s.protocol, s.dataset, s.candidate): s.error for s in scores if s.target == "iter_time"}
    assert ("dataset-out", "d1", "physical") in got and ("gpu-out", "all", "physical") in got
    for protocol in ("dataset-out", "gpu-out"):
        assert got[(protocol, "all", "physical-cli")] == pytest.approx(got[(protocol, "all", "physical")])
        # a job that states nothing is predicted as tf32 + adam: the amp / momentum rows come out differently
        assert got[(protocol, "all", "physical-cli-bare")] != pytest.approx(got[(protocol, "all", "physical")])


def test_targets_without_training_rows_are_undefined_not_scored() -> None:
    from horus.predict.evaluate import undefined

    truth = PhysicalParams()
    rows = _stated_rows(truth) + [m for m in _synthetic(truth) if m.mem_mib is not None]
    rows = [replace(m, dataset="mlp") if m.mem_mib is not None else m for m in rows]
    assert ("mlp", "mem") in undefined(rows, "dataset-out") and ("mlp", "util") in undefined(rows, "dataset-out")
    scores = evaluate(rows, protocols=("dataset-out",), candidates=("physical", "physical-prior"))
    mem = {s.candidate for s in scores if s.target == "mem"}
    assert mem == {"physical-prior"}  # the fitted candidate has nothing to fit memory on when mlp is held out
