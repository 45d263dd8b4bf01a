"""`horus simulate` end to end (in-process) and its one-line errors on bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from horus.cli import main


def test_default_run_json_and_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "res"
    rc = main(["simulate", "--max-jobs", "60", "--policy", "horus", "--policy", "fifo-exclusive",
               "--out", str(out), "--json"])
    assert rc == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert set(summary["policies"]) == {"horus", "fifo-exclusive"}
    for metrics in summary["policies"].values():
        for key in ("makespan_s", "mean_jct_s", "p95_jct_s", "mean_wait_s", "gpu_util_mean", "colocated_share"):
            assert key in metrics
        assert metrics["jobs_completed"] == 60
        assert 0.0 <= metrics["gpu_util_mean"] <= 1.0
    # exclusive placement never co-locates; the table went to stderr because --json owns stdout
    assert summary["policies"]["fifo-exclusive"]["colocated_share"] == 0.0
    assert "makespan" in captured.err
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["trace"]["sha256"]) == 64
    assert manifest["truth"]["name"] == "parametric" and manifest["predictor"]["name"] == "physical"
    assert manifest["predictor"]["params"]["provenance"]["calibrated"] is True
    # the realistic world by default: stated job sizes, noisy telemetry seeded by --seed, deviated memory
    assert manifest["config"]["telemetry"] == "noisy" and manifest["config"]["telemetry_options"]["seed"] == 0
    assert manifest["config"]["sizes"] == "estimate" and manifest["memory_truth"] == "deviated"
    for name in ("util_over_time.png", "jct_cdf.png", "queue_length.png", "summary.json"):
        assert (out / name).is_file()


def test_same_seed_same_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = []
    for run in ("a", "b"):
        assert main(["simulate", "--max-jobs", "40", "--policy", "horus", "--out", str(tmp_path / run), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)["policies"]["horus"]
        summary.pop("wall_s", None)
        results.append(summary)
    assert results[0] == results[1]


def test_noisy_telemetry_is_recorded_in_the_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--max-jobs", "30", "--policy", "horus", "--telemetry", "noisy", "--telemetry-sigma",
                 "0.1", "--seed", "3", "--out", str(tmp_path / "n"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["policies"]["horus"]["jobs_completed"] == 30
    config = json.loads((tmp_path / "n" / "manifest.json").read_text())["config"]
    assert config["telemetry"] == "noisy"
    assert config["telemetry_options"] == {"period_s": 60.0, "sigma": 0.1, "warmup_iterations": 50.0, "seed": 3}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--truth", "nope"], "unknown truth model 'nope'"),
        (["--truth", "gavel"], "needs --gavel PATH"),
        (["--telemetry", "nope"], "unknown telemetry model 'nope'"),
        (["--telemetry", "exact", "--telemetry-sigma", "0.1"], "--telemetry-sigma: applies to --telemetry noisy"),
        (["--trace", "/nonexistent/trace.csv"], "/nonexistent/trace.csv"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], expected: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--out", str(tmp_path / "r"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(("args", "expected"), [
    (["--max-jobs", "0"], "argument --max-jobs: expected an integer in [1, 20,000,000] jobs"),
    (["--telemetry", "noisy", "--telemetry-period-s", "0"], "argument --telemetry-period-s: expected a number in [1, "),
    (["--telemetry", "noisy", "--telemetry-warmup", "-5"], "argument --telemetry-warmup: expected a number in [0, "),
])
def test_numbers_outside_their_domain_are_usage_errors(args: list[str], expected: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["simulate", "--out", str(tmp_path / "r"), *args])
    assert info.value.code == 2
    assert expected in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "r").exists()


def test_malformed_trace_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,num_gpus,model,batch_size,duration_s\na,0,1,resnet50,32,60\nb,5,-1,resnet50,32,60\n")
    assert main(["simulate", "--trace", str(trace), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert str(trace) in err and "line 3" in err and "num_gpus" in err
    assert not (tmp_path / "r").exists()  # nothing written on bad input


def test_bad_cluster_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text("nodes:\n  - {name: a, count: 1, gpu_type: V100, gpus: -2}\n")
    assert main(["simulate", "--cluster", str(spec), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert str(spec) in err and "gpus" in err


def test_gavel_truth_run(gavel_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--truth", "gavel", "--gavel", str(gavel_path), "--max-jobs", "40",
                 "--policy", "horus", "--policy", "oracle", "--out", str(tmp_path / "g"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["policies"]["oracle"]["jobs_completed"] == 40
    manifest = json.loads((tmp_path / "g" / "manifest.json").read_text())
    assert manifest["truth"]["name"] == "gavel"


def test_results_do_not_depend_on_string_hashing(tmp_path: Path) -> None:
    """Two processes with different PYTHONHASHSEED give the same summary (no set-order dependence)."""
    import os
    import subprocess
    import sys

    summaries = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-m", "horus.cli", "simulate", "--policy", "oracle", "--policy", "geng",
                               "--json", "--no-progress", "--out", str(tmp_path / seed)],
                              capture_output=True, text=True, env=env, timeout=300, check=True)
        policies = json.loads(proc.stdout)["policies"]
        summaries.append({name: {k: v for k, v in m.items() if k != "wall_s"} for name, m in policies.items()})
    assert summaries[0] == summaries[1]


def test_only_the_horus_script_freezes_the_heap_before_exit(monkeypatch) -> None:
    """``main()`` without ``argv`` (the ``horus`` script, about to exit) moves the heap out of the collector's reach
    so interpreter shutdown does not walk it; an in-process call (``main(argv)``) leaves the collector alone."""
    import argparse

    import horus.cli as cli

    frozen: list[bool] = []
    monkeypatch.setattr(cli, "_exit_without_collecting", lambda: frozen.append(True))

    def parser() -> argparse.ArgumentParser:
        built = argparse.ArgumentParser(prog="horus")
        built.add_subparsers(dest="command").add_parser("noop").set_defaults(func=lambda args: 0)
        return built

    monkeypatch.setattr(cli, "build_parser", parser)
    assert cli.main(["noop"]) == 0 and frozen == []
    monkeypatch.setattr(sys, "argv", ["horus", "noop"])
    assert cli.main() == 0 and frozen == [True]


def test_simulate_collects_young_objects_less_often_and_restores_the_collector(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """While simulating, the youngest generation waits for ``GEN0_THRESHOLD`` new containers (``settle_heap``);
    an in-process caller gets its thresholds and collector state back."""
    import gc

    import horus.sim.runner as runner
    from horus.sim.commands import GEN0_THRESHOLD

    seen: list[int] = []
    real = runner.run_comparison

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.get_threshold()[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "run_comparison", spy)
    before = gc.get_threshold(), gc.isenabled()
    assert main(["simulate", "--max-jobs", "20", "--policy", "fifo-exclusive", "--out", str(tmp_path / "r"),
                 "--json", "--no-progress"]) == 0
    capsys.readouterr()
    assert (gc.get_threshold(), gc.isenabled()) == before
    assert seen == [max(GEN0_THRESHOLD, before[0][0])]
