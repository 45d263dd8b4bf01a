"""Issue 28: the options and readers of predict, predictor, features, profile, train and colocation analyze.

Every numeric option is a ``validation.NumberArg`` (its domain is what the fuzzer reads); options that would be
ignored, empty paths and unwritable outputs are one-line errors before any work; degenerate inputs of
``colocation analyze`` and Gavel's zero isolated throughputs are said so instead of fitted or dropped silently.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import assert_clear, run

from horus.cli import build_parser
from horus.validation import NumberArg

FIXTURE = Path(__file__).parent / "fixtures" / "coloc_synthetic"
PROFILES = Path(__file__).parent / "fixtures" / "synthetic_profiles" / "SYNTHETIC_profiles.csv"
HAS_TORCH = importlib.util.find_spec("torch") is not None
OWNED = (("predict",), ("predictor", "train"), ("predictor", "evaluate"), ("predictor", "calibrate"), ("features",),
         ("profile",), ("profile", "colocate"), ("profile", "plan-pairs"), ("train",), ("colocation", "analyze"))


def _subparser(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


@pytest.mark.parametrize("path", OWNED, ids=" ".join)
def test_every_numeric_option_is_a_number_arg(path: tuple[str, ...]) -> None:
    numeric = [a for a in _subparser(path)._actions if a.type in (int, float)]
    assert numeric == [], f"{' '.join(path)}: {[a.option_strings for a in numeric]} are plain int/float"


@pytest.mark.parametrize("path", OWNED, ids=" ".join)
def test_number_args_refuse_the_fuzzer_values(path: tuple[str, ...]) -> None:
    for action in _subparser(path)._actions:
        if isinstance(action.type, NumberArg):
            domain = action.type.domain
            for text in ("nan", "inf", "-inf", "1e308", str(2**70), "", "１２", "2**70"):
                if text in ("1e308",) and domain.high >= 1e308:
                    continue
                with pytest.raises(argparse.ArgumentTypeError):
                    action.type(text)
            for value in (domain.low - 1, domain.high + 1):
                with pytest.raises(argparse.ArgumentTypeError):
                    action.type(str(int(value) if domain.integer else value))
            assert action.type(str(int(domain.low) if domain.integer else domain.low)) == domain.low


@pytest.mark.parametrize("argv, option", [
    (["predict", "resnet50", "--batch", "nan", "--gpu", "V100"], "--batch"),
    (["predict", "resnet50", "--batch", "0", "--gpu", "V100"], "--batch"),
    (["predictor", "train", str(PROFILES), "--folds", "1"], "--folds"),
    (["predictor", "evaluate", str(PROFILES), "--seed", "-1"], "--seed"),
    (["features", "resnet50", "--batch", "2", "--input-size", "0"], "--input-size"),
    (["profile", "plan-pairs", "--solo", "x.csv", "--out", "p.json", "--pairs", "2**70"], "--pairs"),
    (["profile", "--out", "x", "--model", "resnet50", "--batch", "8", "--window-s", "0"], "--window-s"),
    (["profile", "--out", "x", "--model", "resnet50", "--batch", "8", "--time-budget-s", "inf"], "--time-budget-s"),
    (["train", "resnet50", "--iterations", "0"], "--iterations"),
    (["train", "resnet50", "--checkpoint-every", "-1"], "--checkpoint-every"),
    (["colocation", "analyze", "--gavel", "g.json", "--top", "1e308"], "--top"),
    (["profile", "--out", "", "--model", "resnet50", "--batch", "8"], "--out"),
    (["profile", "plan-pairs", "--solo", "", "--out", "p.json"], "--solo"),
])
def test_bad_option_values_are_usage_errors(argv: list[str], option: str) -> None:
    rc, _, err = run(argv)
    assert_clear(rc, err, option)


def test_predict_needs_one_gpu_type_and_an_existing_model_directory(tmp_path: Path) -> None:
    rc, _, err = run(["predict", "resnet50", "--batch", "8", "--gpu", "V100|A100-80GB"])
    assert_clear(rc, err, "--gpu", "several GPU types")
    for value in ("", str(tmp_path / "missing"), str(PROFILES)):
        rc, _, err = run(["predict", "resnet50", "--batch", "8", "--gpu", "V100", "--predictor-dir", value])
        assert_clear(rc, err, "--predictor-dir", "not a directory")


def test_predictor_options_that_would_be_ignored_are_errors(tmp_path: Path) -> None:
    rc, _, err = run(["predictor", "evaluate", str(PROFILES), "--out", str(tmp_path / "s.json")])
    assert_clear(rc, err, "--out", "only with --reference")
    rc, _, err = run(["predictor", "evaluate", str(PROFILES), "--datasets", "zeus"])
    assert_clear(rc, err, "--datasets", "only with --reference")
    rc, _, err = run(["predictor", "evaluate", str(PROFILES), "--reference", str(tmp_path)])
    assert_clear(rc, err, "DATA", "not read with --reference")
    rc, _, err = run(["predictor", "evaluate", "--reference", str(tmp_path), "--folds", "3"])
    assert_clear(rc, err, "--folds", "not read with --reference")
    rc, _, err = run(["predictor", "evaluate", "--reference", str(tmp_path / "missing")])
    assert_clear(rc, err, "--reference", "not a directory")
    rc, _, err = run(["predictor", "train", "", "--out", str(tmp_path / "m")])
    assert_clear(rc, err, "DATA")
    rc, _, err = run(["predictor", "train", str(PROFILES), "--out", ""])
    assert_clear(rc, err, "--out")
    assert not (tmp_path / "m").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_outputs_where_nothing_can_be_created_fail_before_work(tmp_path: Path) -> None:
    """access() says yes to root everywhere: /proc used to pass the check and fail in mkdir after the work."""
    rc, _, err = run(["predictor", "train", str(PROFILES), "--out", "/proc/horus-model"])
    assert_clear(rc, err, "--out", "cannot write in /proc")
    rc, _, err = run(["predictor", "calibrate", "--reference", str(tmp_path), "--out", "/proc/p.json"])
    assert_clear(rc, err, "--out", "cannot write in /proc")
    rc, _, err = run(["profile", "plan-pairs", "--solo", str(FIXTURE / "solo.csv"), "--capacity-mib", "16000",
                      "--out", "/proc/p.json"])
    assert_clear(rc, err, "--out", "cannot write in /proc")
    rc, _, err = run(["train", "resnet50", "--iterations", "1", "--checkpoint-dir", "/proc/ckpt"])
    assert_clear(rc, err, "--checkpoint-dir", "cannot write in /proc")


def test_plan_pairs_refuses_an_empty_plan_and_a_bad_manifest(tmp_path: Path) -> None:
    solo = tmp_path / "solo.csv"
    solo.write_bytes((FIXTURE / "solo.csv").read_bytes())
    out = tmp_path / "p.json"
    rc, _, err = run(["profile", "plan-pairs", "--solo", str(solo), "--capacity-mib", "16000", "--pairs", "0",
                      "--triples", "0", "--out", str(out)])
    assert_clear(rc, err, "--pairs", "plan nothing")
    (tmp_path / "manifest.json").write_text(json.dumps({"gpu_memory_mib": -5}))
    rc, _, err = run(["profile", "plan-pairs", "--solo", str(solo), "--out", str(out)])
    assert_clear(rc, err, "manifest.json", "gpu_memory_mib")
    (tmp_path / "manifest.json").write_text('{"gpu_memory_mib": NaN}')
    rc, _, err = run(["profile", "plan-pairs", "--solo", str(solo), "--out", str(out)])
    assert_clear(rc, err, "manifest.json")
    assert not out.exists()


def test_campaign_batch_with_non_ascii_digits_is_refused() -> None:
    rc, _, err = run(["profile", "colocate", "--out", "x", "--set", "resnet18_cifar:2,a3c:\uff11", "--device", "cpu",
                      "--no-nvml"])
    assert_clear(rc, err, "--set", "batch")


@pytest.mark.parametrize("argv", [["train", "resnet50", "--input-size", "1", "--iterations", "1"],
                                  ["profile", "--model", "resnet50", "--batch", "2", "--input-size", "1",
                                   "--device", "cpu", "--no-nvml", "--out", "{out}"]])
def test_image_models_below_their_minimum_input_are_refused_before_work(tmp_path: Path, argv: list[str]) -> None:
    out = tmp_path / "campaign"
    rc, _, err = run([a.replace("{out}", str(out)) for a in argv])
    assert_clear(rc, err, "--input-size", "resnet50", "at least 32")
    assert not out.exists()


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_features_refuses_an_input_below_the_model_minimum() -> None:
    """``--input-size 1`` at batch 2 used to give a ResNet-50 feature vector (1x1 maps kept only by padding)."""
    rc, _, err = run(["features", "resnet50", "--batch", "2", "--input-size", "1"])
    assert_clear(rc, err, "--input-size", "at least 32")
    rc, _, err = run(["features", "resnet18_cifar", "--batch", "2", "--input-size", "32", "--json"])
    assert rc == 0, err
    rc, _, err = run(["features", "inception_v3", "--batch", "2", "--input-size", "298"])  # its aux classifier
    assert_clear(rc, err, "--input-size", "at least 299")
    rc, out, err = run(["features", "lstm_lm", "--batch", "2", "--input-size", "1", "--json"])  # a sequence: fine
    assert rc == 0 and json.loads(out)["input_size"] == 1


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_failed_graph_export_prints_one_line_without_torch_tracebacks() -> None:
    """A batch-1 ResNet-50 at 32 px (final BatchNorm sees one value) fails in torch: one line, no logged traceback."""
    rc, _, err = run(["features", "resnet50", "--batch", "1", "--input-size", "32"])
    assert_clear(rc, err, "torch.export failed")
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_min_input_table_covers_the_image_zoo_and_matches_a_measurement() -> None:
    from horus.graph.input_sizes import IMAGE_FLOOR, MIN_INPUT_SIZE, image_models, measure_minimum
    from horus.zoo import ZOO

    images = set(image_models())
    assert set(MIN_INPUT_SIZE) == images and {"resnet50", "vit_b16", "ppo", "cyclegan"} <= images
    assert not images & {"lstm_lm", "bert_base", "ncf", "recoder"}
    for name in images:
        assert min(IMAGE_FLOOR, ZOO[name].default_input_size) <= MIN_INPUT_SIZE[name] <= ZOO[name].default_input_size
    for name in ("resnet18_cifar", "alexnet", "ppo", "cyclegan"):  # cheap ones
        assert measure_minimum(name) == MIN_INPUT_SIZE[name]


def _coloc(tmp_path: Path, **columns: object) -> Path:
    frame = pd.read_csv(FIXTURE / "colocation.csv")
    for name, value in columns.items():
        frame[name] = value
    path = tmp_path / "colocation.csv"
    frame.to_csv(path, index=False)
    return path


def test_analyze_refuses_a_fit_without_spread_in_x(tmp_path: Path) -> None:
    """One summed utilization for every set used to print a hinge 'fit' with made-up slopes and NaN ranks."""
    path = _coloc(tmp_path, solo_util_mean=50.0)
    rc, _, err = run(["colocation", "analyze", str(path)])
    assert_clear(rc, err, "distinct value", "at least 3")


def test_analyze_options_that_would_be_ignored_are_errors(tmp_path: Path) -> None:
    data = str(FIXTURE / "colocation.csv")
    for argv, option in ((["--gpu", "k80"], "--gpu"), (["--proxy", "mfu"], "--proxy"), ([""], "DATA"),
                         (["--solo", str(FIXTURE / "solo.csv"), "--gavel", "g.json"], "--solo")):
        args = argv if option in ("DATA", "--solo") else [data, *argv]
        rc, _, err = run(["colocation", "analyze", *args])
        assert_clear(rc, err, option)


def _gavel(tmp_path: Path, solo: dict[str, object]) -> Path:
    types = list(solo)
    table = {str((t, 1)): {"null": solo[t], **{str((o, 1)): [0.7, 0.6] for o in types}} for t in types}
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"v100": table}))
    return path


def test_gavel_zero_isolated_throughput_is_named_in_a_warning(tmp_path: Path) -> None:
    from horus.sources.gavel import load_gavel

    path = _gavel(tmp_path, {"ResNet-50 (batch size 64)": 1.0, "LM (batch size 20)": 2.0, "A3C": 0,
                             "Transformer (batch size 16)": 1.5})
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        gavel = load_gavel(path)
        load_gavel(path)  # once per file and GPU type
    assert gavel.quirks["zero_solo"] == 1 and "a3c/b4" not in gavel.solo
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"horus: warning: {path}: v100:") and "('A3C', 1)/null" in lines[0]
    rc, _, err_text = run(["colocation", "analyze", "--gavel", str(_gavel(tmp_path, {"A3C": None,
                                                                                      "LM (batch size 20)": 2.0}))])
    assert_clear(rc, err_text, "('A3C', 1)/null", "expected a throughput")
