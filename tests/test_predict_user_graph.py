"""``horus predict`` on the user's own graph: a ``module:factory`` is recorded into its own operator table (the
same prediction as the zoo model it builds), an ``.onnx`` path through the step derived from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from horus.cli import main

torch = pytest.importorskip("torch")


def _predict(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["predict", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_factory_is_predicted_like_the_zoo_model_it_builds(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    own = _predict(capsys, "predict_factory_fixture:make", "--batch", "128", "--gpu", "V100")
    zoo = _predict(capsys, "resnet18_cifar", "--batch", "128", "--gpu", "V100")
    assert own["model"].startswith("module-")
    for q in ("util", "mem_mib", "iter_time_s"):
        assert own[q] == pytest.approx(zoo[q], rel=0.02), q
    amp = _predict(capsys, "predict_factory_fixture:make", "--batch", "128", "--gpu", "V100", "--precision", "amp")
    assert amp["mem_mib"] < own["mem_mib"] and amp["model"] == own["model"]  # same graph, same name
    assert main(["predict", "predict_factory_fixture:make", "--batch", "8", "--gpu", "V100",
                 "--input-size", "64"]) == 2
    assert "input shape its graph has" in capsys.readouterr().err


def test_onnx_path_is_predicted_from_its_derived_step(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    from test_onnx_ops import mlp

    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp())
    out = _predict(capsys, str(path), "--batch", "256", "--gpu", "A100-40GB")
    assert out["model"].startswith("onnx-") and 0 < out["util"] <= 1 and out["mem_mib"] > 0
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"nope")
    assert main(["predict", str(bad), "--batch", "8", "--gpu", "V100"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and err.count("\n") == 1
