"""A policy's interference model may not be trained on the pairs the truth replays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from horus.errors import HorusInputError
from horus.sim.leakage import check_model_disjoint


def _sidecar(folder: Path, sha: str, gpu: str) -> Path:
    folder.mkdir()
    (folder / "model.json").write_text(json.dumps({"format_version": 1, "model": "iasp", "data_sha256": sha,
                                                   "data": {"gpu": gpu}}))
    return folder


def test_model_trained_on_the_replayed_pairs_is_refused(tmp_path: Path) -> None:
    truth = {"name": "gavel", "sha256": "f" * 64, "gpus": ["k80", "p100", "v100"]}
    with pytest.raises(HorusInputError, match="graded on its own training data"):
        check_model_disjoint(_sidecar(tmp_path / "v100", "f" * 64, "v100"), truth)
    check_model_disjoint(_sidecar(tmp_path / "other", "e" * 64, "v100"), truth)  # other data: fine
    check_model_disjoint(_sidecar(tmp_path / "p100", "f" * 64, "p100"), {**truth, "gpus": ["v100"]})  # other GPU
    check_model_disjoint(_sidecar(tmp_path / "param", "f" * 64, "v100"), {"name": "parametric"})  # no replay


def test_simulate_refuses_a_leaking_model(tmp_path: Path, gavel_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from horus.cli import main
    from horus.sources.gavel import load_gavel

    model = _sidecar(tmp_path / "m", load_gavel(gavel_path, "v100").sha256, "v100")
    out = tmp_path / "out"
    code = main(["simulate", "--truth", "gavel", "--gavel", str(gavel_path), "--interference-model", str(model),
                 "--policy", "geng", "--no-progress", "--out", str(out), "--max-jobs", "5"])
    assert code == 2 and "graded on its own training data" in capsys.readouterr().err
    assert not out.exists()
