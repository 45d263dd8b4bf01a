"""Bad command-line input of simulate, sweep, sweep-report, truth fit / fit-memory, trace generate and
interference (issue 28): every number through NumberArg with a documented domain, paths checked before any
work, nothing written on failure, never a traceback."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_clear, run

from horus.cli import build_parser
from horus.validation import NumberArg

GAVEL_KEY = "('ResNet-18 (batch size {b})', 1)"
SIM = ["simulate", "--no-progress", "--policy", "fifo-exclusive", "--max-jobs", "5"]
SWEEP = ["sweep", "--no-ray", "--policy", "fifo-exclusive", "--max-jobs", "5"]
OWN_COMMANDS = (("simulate",), ("sweep",), ("sweep-report",), ("trace", "generate"), ("interference", "train"),
                ("interference", "evaluate"), ("interference", "predict"))
unix_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc exists on Linux only")


def gavel(tmp_path: Path) -> Path:
    """A small Gavel file: three job types, every pair measured, enough for a fit with a held-out split."""
    types = [GAVEL_KEY.format(b=b) for b in (16, 32, 64)]
    solo = {t: 30.0 - 5 * i for i, t in enumerate(types)}
    doc: dict[str, dict[str, dict[str, object]]] = {"v100": {}}
    for i, a in enumerate(types):
        row: dict[str, object] = {"null": solo[a]}
        for j, b in enumerate(types):
            row[b] = [solo[a] * (0.5 + 0.05 * (i + j)), solo[b] * (0.55 + 0.04 * (i + j))]
        doc["v100"][a] = row
    path = tmp_path / "gavel.json"
    path.write_text(json.dumps(doc))
    return path


def subparser(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def numeric_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.type in (int, float) or isinstance(a.type, NumberArg)]


# --- every number has a documented domain ------------------------------------------------------------------


def test_every_numeric_option_is_a_number_arg() -> None:
    from horus.truth.fit import build_parser as fit_parser
    from horus.truth.memory_fit import build_parser as memory_parser

    parsers = {" ".join(names): subparser(build_parser(), *names) for names in OWN_COMMANDS}
    parsers |= {"truth fit": fit_parser(), "truth fit-memory": memory_parser()}
    found = 0
    for command, parser in parsers.items():
        for action in numeric_actions(parser):
            assert isinstance(action.type, NumberArg), f"{command} {action.option_strings}: type {action.type}"
            domain = action.type.domain
            assert domain.low <= domain.high and domain.low > -1e300 and domain.high < 1e300
            found += 1
    assert found >= 20  # simulate alone has 7


@pytest.mark.parametrize(("argv", "option"), [
    ([*SIM, "--max-jobs", str(2**70)], "--max-jobs"),  # was accepted (silently all jobs)
    ([*SWEEP, "--max-jobs", str(2**70)], "--max-jobs"),
    ([*SIM, "--telemetry-period-s", "1e308"], "--telemetry-period-s"),  # was accepted: no report ever
    ([*SIM, "--telemetry-warmup", "1e308"], "--telemetry-warmup"),
    ([*SIM, "--seed", "nan"], "--seed"), ([*SIM, "--interference-scale", "inf"], "--interference-scale"),
    ([*SIM, "--losing-pairs", "-1"], "--losing-pairs"), ([*SIM, "--telemetry-sigma", "1e308"], "--telemetry-sigma"),
    (["trace", "generate", "--seed", str(2**70), "--out", "t.csv"], "--seed"),  # was accepted
    (["interference", "train", "--gavel", "g.json", "--out", "m", "--folds", "-1"], "--folds"),
    (["interference", "evaluate", "--gavel", "g.json", "--folds", "1e308"], "--folds"),
    (["truth", "fit", "--gavel", "g.json", "--seed", "-1"], "--seed"),
])
def test_numbers_outside_their_domain_are_refused_by_argparse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              argv: list[str], option: str) -> None:
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(argv)
    assert_clear(rc, err, f"argument {option}: expected")
    assert out == "" and list(tmp_path.iterdir()) == []


# --- paths ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    [*SIM, "--out", ""], [*SWEEP, "--out", ""], ["trace", "generate", "--out", ""],
    ["interference", "train", "--gavel", "g.json", "--out", ""], [*SIM, "--trace", ""],
    ["truth", "fit", "--gavel", "g.json", "--write-params", ""],
])
def test_empty_paths_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    """``Path('')`` is the current directory: outputs went there (simulate, sweep, interference train), and an
    empty ``--write-params`` meant the package's own parameter file."""
    monkeypatch.chdir(tmp_path)
    rc, _, err = run(argv)
    assert_clear(rc, err, "expected a path, got an empty string")
    assert list(tmp_path.iterdir()) == []


def test_truth_fit_empty_write_params_leaves_the_package_file_alone(tmp_path: Path) -> None:
    from horus.truth.fit import package_params_path

    shipped = package_params_path()
    before = hashlib.sha256(shipped.read_bytes()).hexdigest()
    rc, out, err = run(["truth", "fit", "--gavel", str(gavel(tmp_path)), "--write-params", ""])
    assert_clear(rc, err, "--write-params")
    assert out == "" and hashlib.sha256(shipped.read_bytes()).hexdigest() == before


@unix_only
@pytest.mark.parametrize("argv", [
    [*SIM, "--out", "/proc/x"], [*SWEEP, "--out", "/proc/x"], ["trace", "generate", "--out", "/proc/x"],
    ["interference", "train", "--gavel", "{g}", "--folds", "0", "--out", "/proc/x"],
    ["truth", "fit", "--gavel", "{g}", "--write-params", "/proc/x"],
    ["truth", "fit", "--gavel", "{g}", "--inputs", "latent", "--write-params", "/proc/x/y.json"],
])
def test_unwritable_outputs_fail_before_any_work(tmp_path: Path, argv: list[str]) -> None:
    """/proc passes ``os.access(W_OK)`` for root: these were a FileNotFoundError traceback after the run
    (simulate, sweep, interference train) or an error after the whole fit (truth fit)."""
    g = str(gavel(tmp_path))
    rc, out, err = run([a.replace("{g}", g) for a in argv])
    assert_clear(rc, err, "/proc", "cannot write")
    assert out == "" and "jobs from" not in err and "sweep of" not in err


@unix_only
def test_sweep_report_unwritable_default_target(tmp_path: Path) -> None:
    assert run([*SWEEP, "--out", str(tmp_path / "s")])[0] == 0
    rc, _, err = run(["sweep-report", str(tmp_path / "s" / "sweep.json"), "--out", "/proc/x.html"])
    assert_clear(rc, err, "--out", "cannot write")


def test_trace_generate_out_is_checked_before_generating(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    rc, out, err = run(["trace", "generate", "--jobs", "10", "--out", str(tmp_path / "file" / "t.csv")])
    assert_clear(rc, err, "--out", "is a file")
    assert out == "" and (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize(("argv", "needle"), [
    (["truth", "fit-memory", "--gpumemnet", "{missing}"], "no such directory"),
    (["truth", "fit", "--gavel", "{missing}"], "file not found"),
    (["interference", "train", "--gavel", "{dir}", "--out", "{out}"], "is a directory"),
    ([*SIM, "--predictor", "learned", "--predictor-dir", "{missing}"], "no such directory"),
    ([*SIM, "--policy", "geng", "--interference-model", "{file}"], "not a directory"),
])
def test_input_paths_are_checked_up_front(tmp_path: Path, argv: list[str], needle: str) -> None:
    (tmp_path / "file").write_text("x")
    names = {"{missing}": str(tmp_path / "missing"), "{dir}": str(tmp_path), "{out}": str(tmp_path / "out"),
             "{file}": str(tmp_path / "file")}
    rc, out, err = run([names.get(a, a) for a in argv])
    assert_clear(rc, err, needle)
    assert out == "" and not (tmp_path / "out").exists()


# --- simulate ----------------------------------------------------------------------------------------------------


def test_damaged_interference_model_fails_before_the_world_is_built(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A model whose pickle does not match its sidecar was found only when the policy was created, after the
    truth and jobs were built; default output directory: nothing left under results/."""
    model = tmp_path / "model"
    model.mkdir()
    assert run(["interference", "train", "--gavel", str(gavel(tmp_path)), "--folds", "0", "--out", str(model)])[0] == 0
    (model / "model.pkl").write_bytes(b"damaged")
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(["simulate", "--no-progress", "--policy", "geng", "--max-jobs", "5",
                        "--interference-model", str(model)])
    assert_clear(rc, err, "model.pkl")
    assert "jobs from" not in out + err and not (tmp_path / "results").exists()


# --- sweep -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [SIM, SWEEP])
def test_a_policy_given_twice_is_refused(command: list[str]) -> None:
    """--policy x repeated N times ran N identical simulations (simulate kept one result per label)."""
    rc, out, err = run([*command, "--policy", "fifo-exclusive"])
    assert_clear(rc, err, "--policy", "more than once")
    assert "jobs from" not in out + err and "sweep of" not in out


def test_sweep_format_without_trace_is_refused() -> None:
    rc, out, err = run([*SWEEP, "--format", "philly"])  # was silently ignored (the embedded trace is horus)
    assert_clear(rc, err, "--format", "applies to --trace")
    assert "sweep of" not in out


def test_sweep_bad_second_trace_fails_before_the_first_cell(tmp_path: Path) -> None:
    good = tmp_path / "good.csv"
    good.write_text("job_id,submit_time,num_gpus,model,batch_size,iterations\nj1,0,1,resnet50,64,100\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submit_time,num_gpus,model,batch_size,iterations\nj1,0,-3,resnet50,64,100\n")
    rc, out, err = run([*SWEEP, "--trace", str(good), "--trace", str(bad), "--out", str(tmp_path / "s")])
    assert_clear(rc, err, str(bad), "num_gpus")
    assert "sweep of" not in out and not (tmp_path / "s").exists()


def test_sweep_unknown_format_is_refused_up_front(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,num_gpus,model,batch_size,iterations\nj1,0,1,resnet50,64,100\n")
    rc, out, err = run([*SWEEP, "--trace", str(trace), "--format", "nan"])
    assert_clear(rc, err, "--format", "unknown trace format 'nan'")
    assert "sweep of" not in out


def test_sweep_ray_address_with_no_ray_is_refused() -> None:
    rc, out, err = run([*SWEEP, "--ray-address", "127.0.0.1:6379"])  # was silently ignored
    assert_clear(rc, err, "--ray-address", "--no-ray")
    assert "sweep of" not in out


def test_sweep_empty_ray_address_is_refused() -> None:
    rc, _, err = run([*SWEEP[:1], "--policy", "fifo-exclusive", "--ray-address", ""])
    assert_clear(rc, err, "--ray-address", "empty")


# --- interference predict ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("model")
    assert run(["interference", "train", "--gavel", str(gavel(root)), "--folds", "0", "--out", str(root / "m")])[0] == 0
    return root / "m"


@pytest.mark.parametrize(("argv", "needle"), [
    (["--gpu", "nan", "resnet50/b64"], "--gpu: unknown GPU type 'nan'"),  # was predicted as a 16 GiB card
    (["resnet50/b64"] * 17, "JOB_TYPE"),
])
def test_predict_checks_gpu_and_set_size(trained: Path, argv: list[str], needle: str) -> None:
    rc, out, err = run(["interference", "predict", "--model-dir", str(trained), *argv])
    assert_clear(rc, err, needle)
    assert out == ""


def test_predict_accepts_gavel_keys_and_presets(trained: Path) -> None:
    for gpu in ("v100", "V100", "A100-80GB", "h100"):
        rc, out, err = run(["interference", "predict", "--model-dir", str(trained), "--gpu", gpu, "resnet50/b64",
                            "resnet50/b64"])
        assert rc == 0, err
        assert len(out.strip().splitlines()) == 2


@pytest.mark.parametrize(("model", "size", "needle"), [("gpt2", 4096, "has 1024 positions"),
                                                        ("resnet50", 16, "at least 32 pixels")])
@pytest.mark.parametrize("command", [SIM, SWEEP])
def test_a_trace_size_its_model_cannot_take_is_refused_before_any_run(tmp_path: Path, command: list[str], model: str,
                                                                     size: int, needle: str) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,num_gpus,duration_s,model,batch_size,input_size\n"
                     f"ok,0,1,600,{model},8,\nbad,10,1,600,{model},8,{size}\n")
    out = tmp_path / "out"
    rc, _, err = run([*command, "--trace", str(trace), "--out", str(out)])
    assert_clear(rc, err, str(trace), "line 3", "job 'bad'", needle)
    assert not out.exists()
