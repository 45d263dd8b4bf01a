"""``horus predictor train|evaluate`` and ``horus predict`` run in-process (SYNTHETIC fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from horus.cli import main

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "synthetic_profiles" / "SYNTHETIC_profiles.csv"
FAST = "mean,analytic_memory,ridge"


def test_evaluate_json_lists_every_candidate_and_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predictor", "evaluate", str(FIXTURE), "--folds", "3", "--candidates", FAST, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    combos = {(m["target"], m["candidate"], m["protocol"]) for m in out["metrics"]}
    assert len(combos) == (3 * 2 + 1) * 2  # mean and ridge on 3 targets, analytic on memory; 2 protocols


def test_train_then_predict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "model"
    assert main(["predictor", "train", str(FIXTURE), "--out", str(out_dir), "--folds", "3",
                 "--candidates", FAST, "--seed", "5"]) == 0
    assert (out_dir / "predictor.json").is_file()
    capsys.readouterr()
    assert main(["predict", "resnet50", "--batch", "32", "--gpu", "A100-80GB", "--predictor-dir", str(out_dir),
                 "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)
    assert pred["job_type"] == "resnet50/b32" and pred["gpu"] == "A100-80GB"
    assert 0 <= pred["util"] <= 1 and pred["mem_mib"] > 0 and pred["iter_time_s"] > 0
    assert pred["predictor"]["name"] == "learned"


@pytest.mark.parametrize(
    "argv",
    [
        ["predict", "resnet50", "--batch", "32", "--gpu", "Voodoo"],
        ["predict", "no_such_net", "--batch", "32", "--gpu", "V100"],
        ["predict", "resnet50", "--batch", "32", "--gpu", "V100|A100-80GB"],
        ["predictor", "evaluate", "missing.csv"],
        ["predictor", "evaluate", str(FIXTURE), "--candidates", "gpt5"],
    ],
)
def test_bad_input_exits_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("horus: error:") and "\n" not in err


def test_predict_without_dir_uses_the_physical_predictor(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", "resnet50", "--batch", "32", "--gpu", "V100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["predictor"]["name"] == "physical"
    assert main(["predict", "resnet50", "--batch", "32", "--gpu", "V100", "--predictor", "analytic", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["predictor"]["name"] == "analytic"


def test_predict_accepts_an_unknown_gpu_name_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(UserWarning, match="RTX 3070"):  # a name no other test uses (warned once per process)
        assert main(["predict", "resnet50", "--batch", "32", "--gpu", "NVIDIA GeForce RTX 3070 Ti", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["iter_time_s"] > 0
