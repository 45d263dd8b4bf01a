"""``horus predict`` takes the job's input size, precision and optimizer, and says which GPU spec it used."""

from __future__ import annotations

import json
from typing import Any

import pytest

from horus.cli import main
from horus.gpu_types import PRESETS, SPECS, gpu_spec
from horus.k8s.nodes import preset_for_product
from horus.learn.gpus import resolve_gpu


def predict(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["predict", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    try:
        rc = main(["predict", *argv])
    except SystemExit as exc:  # argparse's usage error
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    return err.splitlines()[-1]  # ours: one line; argparse's: its usage, then one error line


def test_input_size_reaches_the_physical_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    full = predict(capsys, "resnet18", "--batch", "128", "--gpu", "V100")
    cifar = predict(capsys, "resnet18", "--batch", "128", "--gpu", "V100", "--input-size", "32")
    assert full["input_size"] is None and full["job_type"] == "resnet18/b128"
    assert cifar["input_size"] == 32 and cifar["job_type"] == "resnet18/b128/s32"
    assert cifar["mem_mib"] < full["mem_mib"] and cifar["iter_time_s"] < full["iter_time_s"]
    same = predict(capsys, "resnet18", "--batch", "128", "--gpu", "V100", "--input-size", "224")
    assert same["mem_mib"] == pytest.approx(full["mem_mib"])  # 224 is the catalog's own size


def test_precision_and_optimizer_reach_the_physical_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    base = predict(capsys, "resnet50", "--batch", "64", "--gpu", "V100")
    amp = predict(capsys, "resnet50", "--batch", "64", "--gpu", "V100", "--precision", "amp")
    bf16 = predict(capsys, "resnet50", "--batch", "64", "--gpu", "A100-80GB", "--precision", "bfloat16")
    assert (amp["precision"], bf16["precision"], base["precision"]) == ("amp-fp16", "bf16", None)
    assert amp["job_type"] == "resnet50/b64/amp-fp16"
    assert amp["iter_time_s"] < base["iter_time_s"]  # V100: 125 TFLOPS FP16 tensor vs 15.7 FP32
    sgd = predict(capsys, "resnet50", "--batch", "64", "--gpu", "V100", "--optimizer", "sgd")
    assert sgd["optimizer"] == "sgd" and sgd["job_type"] == "resnet50/b64/sgd"
    assert sgd["mem_mib"] < base["mem_mib"]  # no Adam moments
    text_rc = main(["predict", "resnet18", "--batch", "32", "--gpu", "V100", "--input-size", "32", "--precision",
                    "tf32", "--optimizer", "adamw"])
    assert text_rc == 0 and "resnet18/b32/s32/tf32/adamw on V100 (spec V100;" in capsys.readouterr().out


@pytest.mark.parametrize("argv, names", [
    (["resnet18", "--input-size", "16"], ("--input-size", "at least 32")),
    (["inception_v3", "--input-size", "224"], ("--input-size", "299")),
    (["resnet18", "--input-size", "0"], ("--input-size",)),
    (["resnet18", "--input-size", "65537"], ("--input-size",)),
    (["resnet18", "--precision", "int8"], ("--precision",)),
    (["resnet18", "--optimizer", "lamb"], ("--optimizer",)),
    (["resnet18", "--predictor", "analytic", "--input-size", "64"], ("--input-size", "analytic")),
    (["resnet18", "--predictor", "analytic", "--precision", "amp"], ("--precision", "analytic")),
    (["resnet18", "--predictor", "analytic", "--optimizer", "sgd"], ("--optimizer", "analytic")),
    (["resnet18", "--gpu", "Voodoo5"], ("--gpu", "unknown GPU type")),
])
def test_bad_job_descriptions_are_one_line_errors(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                  names: tuple[str, ...]) -> None:
    gpu = [] if "--gpu" in argv else ["--gpu", "V100"]
    err = one_line_error(capsys, *argv, "--batch", "8", *gpu)
    assert all(name in err for name in names), err


def test_sequence_models_take_any_input_size(capsys: pytest.CaptureFixture[str]) -> None:
    short = predict(capsys, "bert_base", "--batch", "16", "--gpu", "A100-80GB", "--input-size", "64")
    long = predict(capsys, "bert_base", "--batch", "16", "--gpu", "A100-80GB", "--input-size", "512")
    assert short["mem_mib"] < long["mem_mib"] and short["iter_time_s"] < long["iter_time_s"]


def test_recommender_batches_above_a_million_are_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    big = predict(capsys, "ncf", "--batch", "4000000", "--gpu", "A100-80GB")
    assert big["batch_size"] == 4_000_000 and big["iter_time_s"] > 0
    assert "--batch" in one_line_error(capsys, "ncf", "--batch", str(2**26 + 1), "--gpu", "A100-80GB")


@pytest.mark.parametrize("name, spec, match", [
    ("H100-PCIe", "H100-PCIe", "exact"), ("NVIDIA H100 PCIe", "H100-PCIe", "exact"), ("H100", "H100", "exact"),
    ("NVIDIA H100 80GB HBM3", "H100", "rule"), ("RTX 6000 Ada", "RTX6000-Ada", "exact"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX6000-Ada", "rule"), ("Quadro RTX 6000", "RTX6000", "exact"),
    ("NVIDIA RTX A6000", "RTX-A6000", "exact"), ("NVIDIA A100-SXM4-80GB", "A100-80GB", "rule"),
])
def test_predict_uses_and_reports_the_named_cards_spec(capsys: pytest.CaptureFixture[str], name: str, spec: str,
                                                       match: str) -> None:
    out = predict(capsys, "resnet50", "--batch", "32", "--gpu", name)
    assert (out["gpu_spec"], out["gpu_spec_match"], out["gpu"], out["gpu_requested"]) == (spec, match, spec, name)


def test_h100_pcie_and_rtx6000_ada_are_not_their_namesakes(capsys: pytest.CaptureFixture[str]) -> None:
    sxm = predict(capsys, "resnet50", "--batch", "64", "--gpu", "H100", "--precision", "amp")
    pcie = predict(capsys, "resnet50", "--batch", "64", "--gpu", "H100-PCIe", "--precision", "amp")
    assert pcie["iter_time_s"] > sxm["iter_time_s"]  # 756 vs 989 TFLOPS, 2.0 vs 3.35 TB/s
    turing = predict(capsys, "resnet50", "--batch", "64", "--gpu", "Quadro RTX 6000")
    ada = predict(capsys, "resnet50", "--batch", "64", "--gpu", "NVIDIA RTX 6000 Ada Generation")
    assert ada["iter_time_s"] < turing["iter_time_s"]
    spec = SPECS["RTX6000-Ada"]
    assert (spec.fp32_tflops, spec.tf32_tflops, spec.fp16_tflops, spec.mem_bw_gbs, spec.memory_gib, spec.sms,
            spec.architecture) == (91.1, 182.1, 364.2, 960, 48, 142, "ada")
    for name in ("H100-PCIe", "RTX6000-Ada"):  # presets too: cluster specs and agents can name them
        assert PRESETS[name].memory_mib == SPECS[name].memory_gib * 1024 and gpu_spec(name).name == name
    assert resolve_gpu("NVIDIA H100 PCIe").name == "H100-PCIe" and resolve_gpu("NVIDIA H100 80GB HBM3").name == "H100"
    assert resolve_gpu("NVIDIA RTX 6000 Ada Generation").name == "RTX6000-Ada"
    assert preset_for_product("NVIDIA-H100-PCIe", None).name == "H100-PCIe"
    assert preset_for_product("NVIDIA-H100-80GB-HBM3", None).name == "H100"
    assert preset_for_product("NVIDIA-RTX-6000-Ada-Generation", None).name == "RTX6000-Ada"


def test_a_family_guess_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(UserWarning, match="RTX 3060"):
        out = predict(capsys, "resnet50", "--batch", "32", "--gpu", "NVIDIA GeForce RTX 3060")
    assert (out["gpu_spec"], out["gpu_spec_match"]) == ("RTX3090", "family")
    assert main(["predict", "resnet50", "--batch", "32", "--gpu", "NVIDIA GeForce RTX 3060"]) == 0
    assert "a family guess for 'NVIDIA GeForce RTX 3060'" in capsys.readouterr().out
