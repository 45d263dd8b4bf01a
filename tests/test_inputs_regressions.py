"""The failures of issue 16's newcomer run, one test each: clear one-line errors (exit 2), nothing written,
no silent acceptance, rejections reported, quirks counted."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from cli_helpers import assert_clear, run

from horus.cli import main
from horus.errors import HorusInputError
from horus.sources.gavel import load_gavel

REPO = Path(__file__).resolve().parents[1]
TRACE = "job_id,submit_time,num_gpus,model,batch_size,iterations\nj1,0,1,resnet50,64,100\nj2,5,{gpus},,,200\n"
SIM = ["simulate", "--no-progress", "--policy", "fifo-exclusive"]


def trace(tmp_path: Path, gpus: object = 2, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(TRACE.format(gpus=gpus))
    return path


def gavel_doc() -> dict:
    types = ["ResNet-50 (batch size 64)", "LM (batch size 20)", "A3C"]
    solo = {"ResNet-50 (batch size 64)": 4.0, "LM (batch size 20)": 10.0, "A3C": 8.0}
    table = {str((t, 1)): {"null": solo[t], **{str((o, 1)): [solo[t] * 0.7, solo[o] * 0.6] for o in types}}
             for t in types}
    return {"v100": table}


def write_gavel(tmp_path: Path, doc: object | bytes) -> Path:
    path = tmp_path / "g.json"
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return path


# --- Gavel ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda d: d["v100"].__setitem__("('A3C', 1)", [1, 2]), "expected a mapping with the isolated throughput"),
    (lambda d: d.__setitem__("v100", [1, 2]), "v100: expected a mapping of job keys"),
    (lambda d: d["v100"]["('A3C', 1)"].__setitem__("null", True), "expected a throughput"),
    (lambda d: d["v100"]["('A3C', 1)"].__setitem__("null", -1.0), "expected a throughput"),
    (lambda d: d["v100"].__setitem__("('A3C', 1.5)", {"null": 1.0}), "GPU count as an integer"),
    (lambda d: d["v100"].__setitem__("('A3C', True)", {"null": 1.0}), "GPU count as an integer"),
    (lambda d: d["v100"].__setitem__("('ResNet-50', 1)", {"null": 1.0}), "expected 'ResNet-50 (batch size N)'"),
    (lambda d: d["v100"]["('A3C', 1)"].__setitem__("('VGG (batch size 8)', 1)", [1, 1]), "unknown Gavel job type"),
    (lambda d: d["v100"]["('A3C', 1)"].__setitem__("('A3C', 1)", [8000.0, 1.0]), "x the isolated ones"),
    (lambda d: d["v100"]["('A3C', 1)"].__setitem__("('A3C', 1)", [-1.0, 1.0]), "expected [this, other]"),
])
def test_gavel_bad_values_are_clear_errors(tmp_path: Path, mutate: object, expected: str) -> None:
    doc = gavel_doc()
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(HorusInputError, match=__import__("re").escape(expected)):
        load_gavel(write_gavel(tmp_path, doc))


@pytest.mark.parametrize(("data", "expected"), [
    (b'{"v100": {"x": 1}}'.replace(b"x", b"\xff"), "not UTF-8"),
    (b'{"v100": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    (b'{"v100": {}, "v100": {}}', "duplicate key 'v100'"),
    (b'{"v100": {"(\'A3C\', 1)": {"null": NaN}}}', "NaN is not a JSON number"),
    ("{}".encode("utf-16"), "UTF-16"),
])
def test_gavel_bad_files_are_clear_errors(tmp_path: Path, data: bytes, expected: str) -> None:
    with pytest.raises(HorusInputError, match=expected):
        load_gavel(write_gavel(tmp_path, data))


def test_gavel_zero_isolated_throughput_is_a_counted_quirk(tmp_path: Path) -> None:
    doc = gavel_doc()
    doc["v100"]["('A3C', 1)"]["null"] = 0
    gavel = load_gavel(write_gavel(tmp_path, doc))
    assert "a3c/b4" not in gavel.solo and gavel.quirks["zero_solo"] == 1
    assert gavel.quirks["pairs_with_unmeasured_solo"] == 5  # A3C's 3 pairs + 2 partners' pairs with A3C
    assert all(b != "a3c/b4" for _, b in gavel.pairs)


def test_gavel_bom_is_fine(tmp_path: Path) -> None:
    assert load_gavel(write_gavel(tmp_path, b"\xef\xbb\xbf" + json.dumps(gavel_doc()).encode())).solo


@pytest.mark.parametrize("command", [["truth", "fit", "--gavel", "{g}"], ["colocation", "analyze", "--gavel", "{g}"],
                                     ["interference", "train", "--gavel", "{g}", "--out", "{o}", "--folds", "2"]])
def test_gavel_commands_share_the_error_format(tmp_path: Path, command: list[str]) -> None:
    gavel = write_gavel(tmp_path, b'{"v100": [1]}')
    rc, _, err = run([a.replace("{g}", str(gavel)).replace("{o}", str(tmp_path / "m")) for a in command])
    assert_clear(rc, err, "g.json", "v100")
    assert not (tmp_path / "m").exists()


def test_interference_folds_are_bounded_by_the_data(tmp_path: Path) -> None:
    gavel = write_gavel(tmp_path, gavel_doc())
    rc, _, err = run(["interference", "train", "--gavel", str(gavel), "--out", str(tmp_path / "m"),
                      "--folds", "50", "--model", "iapp"])  # within 2-100 (NumberArg), above the data's 6
    assert_clear(rc, err, "--folds", "6 measured co-located sets")
    assert not (tmp_path / "m").exists()


# --- YAML, CSV, openb ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("nodes: " + "[" * 10_000 + "]" * 10_000, "nested more than 32 levels"),
    ("nodes:\n- {name: a, gpu_type: V100, gpus: 10000000}\n", "nodes[0].gpus: expected an integer in [1, 256]"),
    ("nodes:\n- {name: a, gpu_type: V100, gpus: 8, gpus: 1}\n", "duplicate key 'gpus'"),
    ("x: &a [1]\nnodes: *a\n", "aliases"),
    ("nodes:\n- {name: a, count: 100000, gpu_type: V100, gpus: 8}\n", "200,000 GPUs"),
])
def test_cluster_yaml_is_validated_before_building(tmp_path: Path, text: str, expected: str) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text(text)
    rc, _, err = run([*SIM, "--cluster", str(spec), "--out", str(tmp_path / "out")])
    assert_clear(rc, err, expected)
    assert not (tmp_path / "out").exists()


def test_openb_node_with_a_billion_gpus_is_rejected_not_allocated(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,1e9,V100M16\n")
    pods = tmp_path / "pods.csv"
    pods.write_text("name,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\np,1,1000,0,10,0\n")
    tracemalloc.start()
    try:
        rc, _, err = run([*SIM, "--format", "openb", "--trace", str(pods), "--cluster", str(nodes)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_clear(rc, err, "line 2, column 'gpu'")
    # validated before anything is built: a node of 10^9 GPUs, allocated, would take gigabytes
    # (the speed target, < 5 s, is benchmarks/input_rejection.py)
    assert peak < 256 * 2**20, f"rejecting the node allocated {peak / 2**20:.0f} MiB"


@pytest.mark.parametrize(("nodes", "pods", "expected"), [
    ("n0,1,1,8,T4\nn0,1,1,8,T4\n", "p,1,1000,0,10,0\n", "'n0' already on line 2"),
    ("n0,1,1,8,T4\n", "p,1,1000,50,100,20\n", "a time >= creation_time"),
])
def test_openb_consistency(tmp_path: Path, nodes: str, pods: str, expected: str) -> None:
    (tmp_path / "n.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\n" + nodes)
    (tmp_path / "p.csv").write_text("name,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n" + pods)
    rc, _, err = run([*SIM, "--format", "openb", "--trace", str(tmp_path / "p.csv"),
                      "--cluster", str(tmp_path / "n.csv")])
    assert_clear(rc, err, expected)


@pytest.mark.parametrize(("body", "expected"), [
    ("job_id,submit_time,num_gpus,num_gpus,model,batch_size,iterations\n", "column 'num_gpus' appears twice"),
    ("job_id,submit_time,num_gpus,model,batch_size,iterations\nj,0,1,,," + "9" * 140_000 + "\n", "longer than"),
    ("job_id,submit_time,num_gpus,model,batch_size,iterations\nj,0,1e300,,,1\n", "'num_gpus': expected an integer"),
    ("job_id,submit_time,num_gpus,model,batch_size,duration_s\nj,0,1,,,1e300\n", "'duration_s': expected a number"),
    ("job_id,submit_time,num_gpus,model,batch_size,duration_s\nj,0,1,,,1e-300\n", "'duration_s': expected a number"),
])
def test_trace_csv_limits(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(body + ("j2,1,1,,,1\n" if body.count("\n") == 1 else ""))
    rc, _, err = run([*SIM, "--trace", str(path), "--out", str(tmp_path / "out")])
    assert_clear(rc, err, expected)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("stamp", ["0001-01-01 00:00:00", "1677-09-22 00:12:43"])
def test_philly_years_outside_the_domain(tmp_path: Path, stamp: str) -> None:
    path = tmp_path / "p.csv"
    path.write_text(f"timestamp,duration,num_gpus,gpu_time,cluster\n{stamp},60,1,60,c\n")
    rc, _, err = run([*SIM, "--format", "philly", "--trace", str(path)])
    assert_clear(rc, err, "a time between 1970 and 2100")


# --- simulate options and outputs ------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "expected"), [  # --seed -1: argparse (test_sim_cli_inputs)
    (["--format", "philly"], "--format"),
    (["--gavel", "x.json"], "--gavel"),
    (["--predictor-dir", "d"], "--predictor-dir"),
    (["--predictor", "learned"], "needs --predictor-dir"),
    (["--interference-model", "d"], "--interference-model"),
])
def test_contradicting_or_out_of_range_options(tmp_path: Path, options: list[str], expected: str) -> None:
    rc, _, err = run([*SIM, *options, "--out", str(tmp_path / "out")])
    assert_clear(rc, err, expected)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("out", ["file", "file/sub"])
def test_out_that_cannot_be_a_directory(tmp_path: Path, out: str) -> None:
    (tmp_path / "file").write_text("x")
    rc, _, err = run([*SIM, "--trace", str(trace(tmp_path)), "--out", str(tmp_path / out)])
    assert_clear(rc, err, "--out")
    assert (tmp_path / "file").read_text() == "x"


def test_jobs_larger_than_the_cluster_are_reported(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc, stdout, err = run([*SIM, "--trace", str(trace(tmp_path, gpus=65)), "--out", str(out)])
    assert rc == 0, err
    assert "horus: warning:" in err and "1 of 2 jobs" in err and "'j2' asks for 65 GPUs" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policies"]["fifo-exclusive"]["jobs_rejected"] == 1
    assert "rejected" in stdout.splitlines()[1]


def test_all_jobs_too_large_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time,num_gpus,model,batch_size,iterations\nj1,0,100,resnet50,64,100\n")
    rc, _, err = run([*SIM, "--trace", str(path), "--out", str(tmp_path / "out")])
    assert_clear(rc, err, "every job is larger than the cluster")
    assert not (tmp_path / "out").exists()


def test_unknown_gpu_type_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time,num_gpus,model,batch_size,iterations,gpu_type\nj1,0,1,resnet50,64,100,v100x\n")
    rc, _, err = run([*SIM, "--trace", str(path)])
    assert_clear(rc, err, "unknown GPU type 'v100x'")


def test_failed_run_removes_its_output_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from horus.sim import runner

    def broken(*args: object, **kwargs: object) -> None:
        raise HorusInputError("plots", "disk full")

    monkeypatch.setattr(runner, "plot_comparison", broken)
    out = tmp_path / "out"
    rc, _, err = run([*SIM, "--trace", str(trace(tmp_path)), "--out", str(out)])
    assert_clear(rc, err, "disk full")
    assert not out.exists()


def test_plots_are_titled_with_trace_cluster_and_truth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from horus.sim import plots

    titles: list[str | None] = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, ax, path, title=None: (titles.append(title), save(fig, ax, path,
                                                                                                       title))[1])
    rc, _, err = run([*SIM, "--trace", str(trace(tmp_path)), "--out", str(tmp_path / "out")])
    assert rc == 0, err
    assert len(titles) == 3 and all(t and "t.csv" in t and "64 GPUs" in t and "truth parametric" in t for t in titles)


def test_broken_pipe_ends_quietly(tmp_path: Path) -> None:
    cmd = (f"{sys.executable} -m horus.cli simulate --no-progress --policy fifo-exclusive --trace {trace(tmp_path)} "
           f"--out {tmp_path / 'out'} --json | head -c 10")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert "BrokenPipeError" not in done.stderr and "Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr


# --- features, help, truth fit, tables, profile -----------------------------------------------------------


@pytest.mark.parametrize("spec", ["os:getcwd", "json:loads", "subprocess:getoutput", "horus.cli:main"])
def test_features_refuses_non_model_callables(spec: str) -> None:
    rc, _, err = run(["features", spec, "--batch", "1"])
    assert_clear(rc, err, spec, "expected 'package.module:factory'")


def test_features_accepts_a_user_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(REPO / "tests"))
    from horus.zoo.custom import load_factory

    assert load_factory("graph_factory_fixture:make").__name__ == "make"


def test_onnx_without_inputs_is_an_error(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    const = helper.make_node("Constant", [], ["y"], value=helper.make_tensor("c", TensorProto.FLOAT, [1, 4], [0] * 4))
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(helper.make_graph([const], "g", [], [y])), str(path))
    rc, _, err = run(["features", str(path), "--batch", "1"])
    assert_clear(rc, err, "no inputs")


def test_help_says_what_horus_does() -> None:
    rc, out, _ = run(["--help"])
    assert rc == 0
    assert "simulate" in out and "GPU clusters" in out and "register" not in out


def test_truth_fit_errors_have_the_horus_prefix(tmp_path: Path) -> None:
    rc, _, err = run(["truth", "fit", "--gavel", str(tmp_path / "missing.json")])
    assert_clear(rc, err, "missing.json: file not found")


def test_colocation_table_domains(tmp_path: Path) -> None:
    src = (REPO / "tests" / "fixtures" / "coloc_synthetic" / "colocation.csv").read_text().splitlines()
    header = src[0].split(",")
    row = src[1].split(",")
    row[header.index("normalized_throughput")] = "-0.5"
    (tmp_path / "c.csv").write_text("\n".join([src[0], ",".join(row), *src[2:]]) + "\n")
    rc, _, err = run(["colocation", "analyze", str(tmp_path / "c.csv")])
    assert_clear(rc, err, "line 2, column 'normalized_throughput'")


def test_profile_campaign_where_nothing_succeeded_fails(tmp_path: Path) -> None:
    from horus.profiling.commands import _fail_if_nothing_succeeded
    from horus.profiling.runner import SOLO_FILE

    (tmp_path / SOLO_FILE).write_text(json.dumps({"status": "error", "error": "timeout after 60 s"}) + "\n")
    with pytest.raises(HorusInputError, match="no configuration succeeded.*timeout"):
        _fail_if_nothing_succeeded(tmp_path)
    (tmp_path / SOLO_FILE).write_text(json.dumps({"status": "ok", "error": ""}) + "\n")
    _fail_if_nothing_succeeded(tmp_path)


def test_measured_truth_from_the_cli_needs_its_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--truth measured` used to end in a TypeError traceback; now its tables are options, checked first."""

    fixture = Path(__file__).parent / "fixtures" / "coloc_synthetic"
    out = tmp_path / "out"
    assert main(["simulate", "--truth", "measured", "--no-progress", "--out", str(out)]) == 2
    assert "needs --profiles FILE" in capsys.readouterr().err
    assert main(["simulate", "--profiles", str(fixture / "solo.csv"), "--out", str(out)]) == 2
    assert "--profiles: is read only with --truth measured" in capsys.readouterr().err
    assert main(["simulate", "--truth", "measured", "--profiles", str(fixture / "solo.csv"), "--colocation",
                 str(fixture / "colocation.csv"), "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err  # the embedded workload's job types were not measured in the fixture
    assert err.startswith("horus: error:") and "unknown to truth model 'measured'" in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(("option", "value"), [("--gpu-fraction", "nan"), ("--gpu-fraction", "inf"),
                                               ("--iterations", "nan"), ("--iterations", "-inf")])
def test_submit_refuses_non_finite_numbers_before_contacting_a_server(option: str, value: str) -> None:
    rc, _, err = run(["submit", "--server", "http://127.0.0.1:9", f"{option}={value}", "--", "true"])
    assert_clear(rc, err, option, "expected a number in")


@pytest.mark.parametrize(("seeds", "needle"), [("0-100000", "at most 1000"), ("0-1000000000", "at most 1000"),
                                                ("1180591620717411303424", "each seed must be"),
                                                ("2**70", "expected integers")])
def test_sweep_seeds_are_bounded_before_anything_runs(seeds: str, needle: str) -> None:
    rc, _, err = run(["sweep", "--no-ray", "--seeds", seeds])
    assert_clear(rc, err, "--seeds", needle)


def test_sweep_out_over_an_existing_file_fails_before_simulating(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("keep me\n")
    rc, out, err = run(["sweep", "--no-ray", "--policy", "fifo-exclusive", "--out", str(taken)])
    assert_clear(rc, err, "--out", "not a directory")
    assert "sweep of" not in out and taken.read_text() == "keep me\n"


@pytest.mark.parametrize(("extra", "needle"), [
    (["--predictor-dir", "."], "--predictor-dir"),  # the analytic predictor would not read it (was a TypeError)
    (["--gavel", "x.json"], "--gavel"),  # the parametric truth would not read it (was silently ignored)
])
def test_sweep_refuses_world_options_its_truth_or_predictor_would_not_read(extra: list[str], needle: str) -> None:
    rc, out, err = run(["sweep", "--no-ray", "--policy", "fifo-exclusive", "--seeds", "0", *extra])
    assert_clear(rc, err, needle, "is read only with")
    assert "sweep of" not in out


def test_trace_generate_weights_that_overflow_are_a_clear_error(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    rc, _, err = run(["trace", "generate", "--gpu-counts", "1:1e308,2:1e308", "--out", str(out)])
    assert_clear(rc, err, "--gpu-counts")
    assert not out.exists()


@pytest.mark.parametrize(("extra", "needle"), [(["--write-params", "DIR"], "is a directory")])  # --seed -1: argparse
def test_truth_fit_checks_its_options_before_fitting(tmp_path: Path, extra: list[str], needle: str) -> None:
    gavel = write_gavel(tmp_path, gavel_doc())
    extra = [str(tmp_path) if a == "DIR" else a for a in extra]
    rc, out, err = run(["truth", "fit", "--gavel", str(gavel), *extra])
    assert_clear(rc, err, needle)
    assert out == ""  # no fit report: nothing ran


@pytest.mark.parametrize(("address", "needle"), [
    ("127.0.0.1:1", "nothing answers"), ("ray://127.0.0.1:1", "nothing answers"),
    ("no-port", "expected HOST:PORT"), ("host:99999", "expected HOST:PORT"),
])
def test_sweep_ray_address_is_probed_instead_of_hanging(address: str, needle: str) -> None:
    rc, out, err = run(["sweep", "--policy", "fifo-exclusive", "--seeds", "0", "--ray-address", address])
    assert_clear(rc, err, "--ray-address", needle)
    assert "sweep of" not in out


def test_predict_refuses_a_list_of_gpu_types() -> None:
    """'V100|A100-80GB' is a job's request (either type), not a GPU type: predicting for one of them silently
    answered a question nobody asked."""
    rc, out, err = run(["predict", "resnet50", "--batch", "32", "--gpu", "V100|A100-80GB"])
    assert_clear(rc, err, "--gpu", "several GPU types")
    assert out == ""


def test_a_cluster_gpu_type_named_with_the_request_separator_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text('gpu_types:\n  "A|B": {memory_mib: 16000}\nnodes:\n  - {name: n0, gpu_type: "A|B", gpus: 2}\n')
    rc, _, err = run([*SIM, "--cluster", str(spec), "--out", str(tmp_path / "out")])
    assert_clear(rc, err, "gpu_types", "'A|B'")
    assert not (tmp_path / "out").exists()


def _few_pairs_doc(kind: str) -> dict:
    if kind == "one-pair":
        return {"v100": {"('A3C', 1)": {"null": 8.0, "('A3C', 1)": [5.6, 5.6]}}}
    types = ["ResNet-50 (batch size 64)", "LM (batch size 20)", "A3C"]  # every pair measured at zero throughput
    return {"v100": {str((a, 1)): {"null": 4.0, **{str((o, 1)): [0.0, 0.0] for o in types}} for a in types}}


@pytest.mark.parametrize("kind", ["one-pair", "zero-pairs"])
@pytest.mark.parametrize("command", [["truth", "fit"], ["truth", "fit", "--inputs", "latent"],
                                     ["colocation", "analyze"]], ids=lambda c: " ".join(c))
def test_too_few_usable_gavel_pairs_are_a_clear_error(tmp_path: Path, kind: str, command: list[str]) -> None:
    rc, _, err = run([*command, "--gavel", str(write_gavel(tmp_path, _few_pairs_doc(kind)))])
    assert_clear(rc, err)
    assert "pair" in err.strip().splitlines()[-1]
