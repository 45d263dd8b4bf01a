"""ONNX feature path (exported small model, malformed file) and the ``horus features`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from horus.cli import main  # noqa: E402
from horus.errors import HorusInputError  # noqa: E402
from horus.graph.onnx_features import extract_onnx_features  # noqa: E402


class SmallNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("onnx") / "small.onnx"
    torch.onnx.export(SmallNet(), (torch.randn(4, 3, 8, 8),), str(path), dynamo=True, verbose=False)
    return path


def test_onnx_features_from_exported_model(onnx_file: Path) -> None:
    features = extract_onnx_features(onnx_file)
    assert features["params"] == 3 * 8 * 9 + 8 + 512 * 10 + 10
    macs = 4 * (8 * 8 * 8 * 3 * 9 + 512 * 10)  # conv + linear, batch 4
    assert features["forward_flops"] == pytest.approx(2 * macs)
    assert features["n_conv"] == 1 and features["n_linear"] == 1 and features["n_activation"] == 1
    assert features["batch_size"] == 4 and features["depth"] == 2
    assert set(features["estimated"]) == {"train_flops", "activation_bytes"}


def test_malformed_onnx_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage, not a protobuf model")
    with pytest.raises(HorusInputError) as info:
        extract_onnx_features(bad)
    assert str(info.value).startswith(str(bad)) and "\n" not in str(info.value)


def test_cli_features_json(capsys: pytest.CaptureFixture[str], onnx_file: Path) -> None:
    assert main(["features", "squeezenet1_1", "--batch", "2", "--input-size", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"] == 1_235_496 and out["batch_size"] == 2 and out["forward_flops"] > 0
    assert main(["features", str(onnx_file), "--batch", "4"]) == 0
    assert "forward_flops" in capsys.readouterr().out


def test_cli_module_factory_and_unknown_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["features", "tests.graph_factory_fixture:make", "--batch", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["forward_flops"] == 2 * 3 * 16 * 4
    assert main(["features", "no_such_model", "--batch", "1"]) == 2
    assert "unknown zoo model" in capsys.readouterr().err
