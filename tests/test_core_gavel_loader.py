"""Gavel throughput loader: real file (when present) and malformed inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from horus.errors import HorusInputError
from horus.sources.gavel import gavel_to_job_type, load_gavel


def test_loads_real_file(gavel_path: Path) -> None:
    g = load_gavel(gavel_path, "v100")
    assert len(g.solo) == 26
    assert "resnet50/b64" in g.solo and "a3c/b4" in g.solo
    # every kept pair is measured (non-zero) and normalised values are positive
    for (a, b) in g.pairs:
        na, nb = g.normalized_pair(a, b)
        assert na > 0 and nb > 0
    assert g.quirks["zero_pairs"] > 0  # the file has unmeasured (zero) pairs; they are excluded
    assert all(v[0] > 0 and v[1] > 0 for v in g.pairs.values())
    assert ("resnet50/b64", 2) in g.multi


def test_job_type_names() -> None:
    assert gavel_to_job_type("ResNet-50 (batch size 64)") == "resnet50/b64"
    assert gavel_to_job_type("LM (batch size 5)") == "lstm_lm/b5"
    assert gavel_to_job_type("CycleGAN") == "cyclegan/b1"
    with pytest.raises(ValueError):
        gavel_to_job_type("Unknown (batch size 3)")


def _write(tmp_path: Path, data: object) -> Path:
    p = tmp_path / "thr.json"
    p.write_text(json.dumps(data))
    return p


def test_missing_gpu_type(tmp_path: Path) -> None:
    p = _write(tmp_path, {"k80": {}})
    with pytest.raises(HorusInputError, match="no GPU type 'v100'"):
        load_gavel(p, "v100")


def test_bad_pair_value(tmp_path: Path) -> None:
    key = "('ResNet-18 (batch size 16)', 1)"
    p = _write(tmp_path, {"v100": {key: {"null": 10.0, key: "fast"}}})
    with pytest.raises(HorusInputError, match=r"expected \[this, other\]"):
        load_gavel(p, "v100")


def test_not_json(tmp_path: Path) -> None:
    p = tmp_path / "thr.json"
    p.write_text("{not json")
    with pytest.raises(HorusInputError, match="line 1, column 2: not valid JSON"):
        load_gavel(p, "v100")


def test_zero_pair_is_unmeasured(tmp_path: Path) -> None:
    a, b = "('ResNet-18 (batch size 16)', 1)", "('LM (batch size 5)', 1)"
    p = _write(tmp_path, {"v100": {a: {"null": 10.0, b: [0.0, 0.0]}, b: {"null": 5.0, a: [4.0, 8.0]}}})
    g = load_gavel(p, "v100")
    assert ("resnet18_cifar/b16", "lstm_lm/b5") not in g.pairs
    assert g.normalized_pair("lstm_lm/b5", "resnet18_cifar/b16") == (0.8, 0.8)
    assert g.quirks["zero_pairs"] == 1
