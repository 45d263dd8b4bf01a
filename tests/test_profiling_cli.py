"""``horus profile``: clear exit-2 errors, and one real CPU run through a worker process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from horus.cli import main
from horus.profiling.schema import PROFILE_COLUMNS

torch = pytest.importorskip("torch")

FAST = ["--warmup-iters", "1", "--warmup-s", "0", "--window-s", "0.3"]


def test_no_nvml_library_exits_2_with_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    pynvml = pytest.importorskip("pynvml")

    def missing() -> None:
        raise pynvml.NVMLError_LibraryNotFound()

    monkeypatch.setattr(pynvml, "nvmlInit", missing)
    assert main(["profile", "--model", "_test_mlp", "--batch", "2", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "NVML library not found" in err


def test_no_cuda_exits_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["profile", "--model", "_test_mlp", "--batch", "2", "--no-nvml", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "CUDA is not available" in err and "--device cpu --no-nvml" in err


def test_cpu_without_no_nvml_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--model", "_test_mlp", "--batch", "2", "--device", "cpu", "--out", str(tmp_path)]) == 2
    assert "--no-nvml" in capsys.readouterr().err


def test_cpu_run_writes_rows_and_manifest_then_resumes(tmp_path: Path) -> None:
    import pandas as pd

    out = tmp_path / "run"
    args = ["profile", "--model", "_test_mlp", "--batch", "3", "--device", "cpu", "--no-nvml", *FAST,
            "--out", str(out)]
    assert main(args) == 0
    frame = pd.read_csv(out / "profiles.csv")
    assert list(frame.columns) == list(PROFILE_COLUMNS)
    assert frame["status"].tolist() == ["ok"] and frame["batch_size"].tolist() == [3]
    assert frame["throughput_samples_s"].iloc[0] > 0 and frame["gpu_util_mean"].isna().all()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["nvml"] is False and "NaN" in manifest["nvml_note"]
    assert manifest["window_s"] == 0.3 and manifest["torch_version"] == torch.__version__
    assert "host" not in json.dumps(manifest).lower()
    lines = (out / "profiles.jsonl").read_text().splitlines()
    assert main(args) == 0  # rerun: the finished configuration is skipped, not measured again
    assert (out / "profiles.jsonl").read_text().splitlines() == lines


def test_time_budget_stops_early_with_exit_3(tmp_path: Path) -> None:
    out = tmp_path / "budget"
    args = ["profile", "--model", "_test_mlp", "--batch", "3", "--device", "cpu", "--no-nvml", *FAST,
            "--time-budget-s", "1", "--out", str(out)]
    assert main(args) == 3
    assert not (out / "profiles.jsonl").exists()
