"""``horus interference`` on Gavel's measured pairs (skips without the shared data)."""

from __future__ import annotations

import json

import numpy as np

from horus.cli import main
from horus.interference.data import default_features, gavel_observations
from horus.interference.evaluation import random_splits
from horus.interference.factorization import IASP
from horus.sources.gavel import load_gavel


def test_iasp_held_out_gavel_pairs_beat_the_mean(gavel_path) -> None:
    obs = gavel_observations(load_gavel(gavel_path, "v100"))
    split = random_splits(obs, folds=5, seed=0)[0]
    model = IASP(default_features(), seed=0).fit(split.train)
    truth = np.array([o.value for o in split.test])
    mae = float(np.mean(np.abs(model.predict_observations(split.test) - truth)))
    flat = float(np.mean(np.abs(truth - np.mean([o.value for o in split.train]))))
    assert mae < 0.1
    assert mae < 0.5 * flat


def test_train_then_predict(gavel_path, tmp_path, capsys) -> None:
    out = tmp_path / "iasp"
    assert main(["interference", "train", "--gavel", str(gavel_path), "--gpu", "v100", "--folds", "0",
                 "--out", str(out)]) == 0
    sidecar = json.loads((out / "model.json").read_text())
    assert sidecar["model"] == "iasp" and len(sidecar["data_sha256"]) == 64
    assert sidecar["data"]["quirks"]["both_at_solo_handling"] == "kept"
    capsys.readouterr()
    assert main(["interference", "predict", "--model-dir", str(out), "resnet50/b64", "lstm_lm/b20", "a3c/b4"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["resnet50/b64", "lstm_lm/b20", "a3c/b4"]
    assert all(0.0 < float(line.split("\t")[1]) <= 1.0 for line in lines)


def test_bad_job_type_is_one_line_error(gavel_path, tmp_path, capsys) -> None:
    out = tmp_path / "m"
    assert main(["interference", "train", "--gavel", str(gavel_path), "--model", "lowrank-mc", "--folds", "0",
                 "--out", str(out)]) == 0
    assert main(["interference", "predict", "--model-dir", str(out), "resnet50"]) == 2
    assert "expected '<model>/b<batch>" in capsys.readouterr().err


def test_missing_model_dir_is_one_line_error(tmp_path, capsys) -> None:
    assert main(["interference", "predict", "--model-dir", str(tmp_path), "a3c/b4"]) == 2
    assert "model.json" in capsys.readouterr().err
