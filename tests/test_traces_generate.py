"""`horus trace generate`: seeded streams at a target offered load and work-bound batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus.cli import main
from horus.errors import HorusInputError
from horus.traces import load_trace
from horus.traces.generate import WorkloadSpec, generate_workload, parse_gpu_counts


@pytest.mark.parametrize("load", [0.5, 1.0, 2.0])
def test_stream_reaches_its_target_offered_load(load: float) -> None:
    rows, summary = generate_workload(WorkloadSpec(num_jobs=3000, load=load, cluster_gpus=64, seed=3))
    assert summary["realized_offered_load"] == pytest.approx(load, rel=0.1)
    submits = [r["submit_time"] for r in rows]
    assert submits == sorted(submits) and submits[0] == 0


def test_batch_is_submitted_at_once_and_generation_is_deterministic(tmp_path: Path) -> None:
    rows, summary = generate_workload(WorkloadSpec(kind="batch", num_jobs=200, seed=1, mix="zoo"))
    assert {r["submit_time"] for r in rows} == {0.0} and summary["realized_offered_load"] is None
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for path in (a, b):
        assert main(["trace", "generate", "--jobs", "150", "--seed", "9", "--out", str(path)]) == 0
    assert a.read_bytes() == b.read_bytes()
    trace = load_trace(a, "horus")
    assert len(trace.jobs) == 150 and all(j.model and j.duration_s for j in trace.jobs)
    assert "# spec:" in a.read_text()


@pytest.mark.parametrize(("args", "option"), [
    (["--kind", "poisson"], "--kind"),
    (["--mix", "x"], "--mix"), (["--gpu-counts", "1:0.5,1:0.5"], "--gpu-counts"),
    (["--gpu-counts", "128:1"], "--gpu-counts"), (["--duration-min-s", "5000"], "--duration-*"),
])
def test_bad_options_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                         option: str) -> None:
    out = tmp_path / "t.csv"
    assert main(["trace", "generate", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"horus: error: {option}") and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(("args", "option"), [
    (["--load", "0"], "--load"), (["--jobs", "0"], "--jobs"), (["--seed", str(2**70)], "--seed"),
    (["--duration-sigma", "nan"], "--duration-sigma"), (["--duration-max-s", "1e308"], "--duration-max-s"),
])
def test_numbers_outside_their_domain_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        args: list[str], option: str) -> None:
    out = tmp_path / "t.csv"
    with pytest.raises(SystemExit) as info:
        main(["trace", "generate", *args, "--out", str(out)])
    assert info.value.code == 2
    assert f"error: argument {option}: expected" in capsys.readouterr().err.strip().splitlines()[-1]
    assert not out.exists()


def test_parse_gpu_counts() -> None:
    assert parse_gpu_counts("1:0.7, 8:0.3") == {"1": 0.7, "8": 0.3}
    with pytest.raises(HorusInputError):
        parse_gpu_counts("1:x")
    with pytest.raises(HorusInputError, match="--gpu-counts"):
        WorkloadSpec(gpu_counts=parse_gpu_counts("one:1")).check()
