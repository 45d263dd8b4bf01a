"""Property-based fuzzing of every parser and file-reading CLI command (bounded: a few seconds each).

Property: any input ends either in a valid result whose values lie in their documented domain
(``horus.validation.LIMITS``) or in a one-line ``HorusInputError`` / exit code 2 with nothing written;
never another exception, a hang or an out-of-domain value. benchmarks/fuzz_inputs.py runs the same
idea at scale (>= 10,000 inputs) and reports counts.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horus.cli import main
from horus.clusterspec import parse_cluster
from horus.errors import HorusInputError
from horus.sources.gavel import load_gavel
from horus.traces import load_openb_cluster, load_trace
from horus.validation import LIMITS, load_json, load_yaml_text

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CLI = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# cells: numbers of every magnitude and sign, special spellings, text, empties
numbers = st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0, 1, -1, 1e300, 1e-300, 2**63, 1.5]))
cells = st.one_of(numbers.map(str), st.sampled_from(["", "nan", "inf", "-inf", "x", "True", "1e9", "0x10", " 1 "]),
                  st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r,\"\x00"),
                          max_size=8))


def _write(data: bytes | str, name: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="horus-fuzz-test-"))
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _csv(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(",".join(r) for r in [header, *rows]) + "\n"


def _in(domain: str, value: float) -> bool:
    return LIMITS[domain].low <= value <= LIMITS[domain].high


# --- trace loaders -----------------------------------------------------------------------------------

HORUS = ["job_id", "submit_time", "num_gpus", "model", "batch_size", "iterations"]


@FAST
@given(st.lists(st.tuples(cells, cells, cells, cells), min_size=1, max_size=4))
def test_horus_trace_loader_never_crashes(rows: list[tuple[str, str, str, str]]) -> None:
    body = [[f"j{i}", submit, gpus, "resnet50" if batch else "", batch, iters]
            for i, (submit, gpus, batch, iters) in enumerate(rows)]
    try:
        trace = load_trace(_write(_csv(HORUS, body), "t.csv"), "horus")
    except HorusInputError as exc:
        assert "\n" not in str(exc)
        return
    for job in trace.jobs:
        assert _in("job_gpus", job.num_gpus) and job.num_gpus == int(job.num_gpus)
        assert job.iterations is not None and _in("iterations", job.iterations)
        assert _in("trace_span_s", job.submit_time)
        assert job.batch_size is None or _in("batch_size", job.batch_size)


@FAST
@given(st.lists(st.tuples(st.one_of(cells, st.sampled_from(["2017-10-09 07:01:55", "0001-01-01 00:00:00",
                                                             "1677-09-22 00:12:43", "2101-01-01 00:00:00"])),
                          cells, cells), min_size=1, max_size=4))
def test_philly_loader_never_crashes(rows: list[tuple[str, str, str]]) -> None:
    body = [[stamp, duration, gpus, "0", "c"] for stamp, duration, gpus in rows]
    path = _write(_csv(["timestamp", "duration", "num_gpus", "gpu_time", "cluster"], body), "p.csv")
    try:
        trace = load_trace(path, "philly")
    except HorusInputError:
        return
    assert 0 <= trace.time_offset_s < 4.2e9  # 1970..2100
    for job in trace.jobs:
        assert job.duration_s is not None and _in("duration_s", job.duration_s)
        assert _in("job_gpus", job.num_gpus)


POD = ["name", "num_gpu", "gpu_milli", "gpu_spec", "creation_time", "deletion_time", "scheduled_time"]


@FAST
@given(st.lists(st.tuples(cells, cells, cells, cells, cells), min_size=1, max_size=4))
def test_openb_pod_loader_never_crashes(rows: list[tuple[str, ...]]) -> None:
    body = [[f"p{i}", gpus, milli, "", created, deleted, scheduled]
            for i, (gpus, milli, created, deleted, scheduled) in enumerate(rows)]
    try:
        trace = load_trace(_write(_csv(POD, body), "pods.csv"), "openb")
    except HorusInputError:
        return
    for job in trace.jobs:
        assert job.duration_s is not None and 0 < job.duration_s <= LIMITS["duration_s"].high
        assert job.gpu_fraction is None or 0 < job.gpu_fraction < 1


@FAST
@given(st.lists(st.tuples(st.sampled_from(["n0", "n1", "", "n2"]), cells,
                          st.sampled_from(["V100M16", "T4", "", "H900", "G1"])), min_size=1, max_size=4))
def test_openb_node_loader_never_crashes_nor_allocates(rows: list[tuple[str, str, str]]) -> None:
    body = [[name, "1000", "1000", gpus, model] for name, gpus, model in rows]
    try:
        cluster = load_openb_cluster(_write(_csv(["sn", "cpu_milli", "memory_mib", "gpu", "model"], body), "n.csv"))
    except HorusInputError:
        return
    names = [node.name for node in cluster.nodes]
    assert len(names) == len(set(names))
    assert all(_in("gpus_per_node", node.num_gpus) for node in cluster.nodes)


# --- cluster spec, YAML and JSON -----------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=6), st.sampled_from(["V100", "pcie", "a"]))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["nodes", "name", "gpus", "gpu_type", "count", "intra_link", "gpu_types",
                                     "memory_mib", "speed", "inter_node_gbps", "x"]), inner, max_size=5)),
    max_leaves=20)
nodes = st.fixed_dictionaries({"name": st.one_of(st.just("a"), scalars), "gpu_type": st.sampled_from(["V100", "Z"]),
                               "gpus": st.one_of(numbers, scalars)},
                              optional={"count": numbers, "intra_link": st.sampled_from(["pcie", "nvlink", "x"])})


@FAST
@given(st.one_of(documents, st.fixed_dictionaries({"nodes": st.lists(nodes, min_size=1, max_size=3)},
                                                  optional={"inter_node_gbps": numbers})))
def test_cluster_spec_never_crashes(data: object) -> None:
    try:
        cluster = parse_cluster(data, "c.yaml")
    except HorusInputError:
        return
    assert _in("cluster_gpus", cluster.num_gpus)
    assert all(_in("gpus_per_node", n.num_gpus) for n in cluster.nodes)
    assert math.isfinite(cluster.inter_node_gbps) and cluster.inter_node_gbps > 0


@FAST
@given(st.text(max_size=200))
def test_yaml_reader_never_crashes(text: str) -> None:
    with contextlib.suppress(HorusInputError):
        load_yaml_text(text, "c.yaml")


@FAST
@given(st.binary(max_size=200))
def test_json_reader_never_crashes(data: bytes) -> None:
    with contextlib.suppress(HorusInputError):
        load_json(_write(data, "g.json"), "a JSON file")


# --- Gavel ---------------------------------------------------------------------------------------------

TYPES = ["ResNet-50 (batch size 64)", "LM (batch size 20)", "A3C"]
values = st.one_of(numbers, st.booleans(), st.none(), st.text(max_size=4), st.lists(numbers, max_size=3))
keys = st.one_of(st.sampled_from([str((t, 1)) for t in TYPES]), st.sampled_from(
    ["('ResNet-50', 1)", "('ResNet-50 (batch size 64)', 1.5)", "('ResNet-50 (batch size 64)', True)",
     "('VGG (batch size 8)', 1)", "x", "('LM (batch size 20)', 2)"]))


@FAST
@given(st.dictionaries(keys, st.one_of(st.dictionaries(st.one_of(st.just("null"), keys), values, max_size=4), values),
                       min_size=1, max_size=4))
def test_gavel_loader_never_crashes(table: dict) -> None:
    try:
        gavel = load_gavel(_write(json.dumps({"v100": table}), "g.json"), "v100")
    except HorusInputError:
        return
    assert all(v > 0 and math.isfinite(v) for v in gavel.solo.values())
    for a, b in gavel.pairs:
        na, nb = gavel.normalized_pair(a, b)
        assert 0 < na <= LIMITS["normalized_throughput"].high and 0 < nb <= LIMITS["normalized_throughput"].high


# --- tables --------------------------------------------------------------------------------------------


@FAST
@given(st.lists(st.tuples(cells, cells, st.sampled_from(["ok", "oom", "OK", ""])), min_size=1, max_size=4))
def test_measurement_table_reader_never_crashes(rows: list[tuple[str, str, str]]) -> None:
    from horus.profiling.store import read_table

    body = [["m", batch, util, status] for batch, util, status in rows]
    try:
        frame = read_table(_write(_csv(["model", "batch_size", "gpu_util_mean", "status"], body), "s.csv"))
    except HorusInputError:
        return
    util = frame["gpu_util_mean"].dropna()
    assert ((util >= 0) & (util <= 100)).all()
    assert set(frame["status"]) <= {"ok", "oom", "error", "partner_failed"}


# --- CLI commands ------------------------------------------------------------------------------------


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = int(exc.code or 0)
    return rc, err.getvalue()


def _assert_clear(rc: int, err: str, out: Path | None = None) -> None:
    assert rc == 2, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("horus: error:") or " error: " in last
    assert "Traceback" not in err
    if out is not None:
        assert not out.exists(), "a failed run left output behind"


SIM = ["simulate", "--no-progress", "--policy", "fifo-exclusive"]


@CLI
@given(st.sampled_from(["--seed", "--max-jobs"]), st.integers(-2**70, -1) | st.integers(2**32, 2**70))
def test_simulate_rejects_out_of_range_options(option: str, value: int) -> None:
    out = Path(tempfile.mkdtemp()) / "out"
    if option == "--max-jobs" and value > 0:
        value = -value
    rc, err = _run([*SIM, option, str(value), "--out", str(out)])
    _assert_clear(rc, err, out)


@CLI
@given(st.lists(st.tuples(cells, cells), min_size=1, max_size=3))
def test_simulate_on_fuzzed_traces_is_clear_or_valid(rows: list[tuple[str, str]]) -> None:
    trace = _write(_csv(HORUS, [[f"j{i}", "0", gpus, "", "", iters] for i, (gpus, iters) in enumerate(rows)]), "t.csv")
    out = trace.parent / "out"
    rc, err = _run([*SIM, "--trace", str(trace), "--out", str(out)])
    if rc == 0:
        assert (out / "summary.json").is_file()
    else:
        _assert_clear(rc, err, out)


@CLI
@given(st.sampled_from([("nodes", "[" * 5000 + "]" * 5000), ("gpus", "10000000"), ("gpus", "1e9"),
                        ("gpus", "8\n  gpus: 1"), ("gbps", ".nan"), ("alias", "*a")]))
def test_simulate_on_fuzzed_cluster_specs(case: tuple[str, str]) -> None:
    kind, value = case
    text = {"nodes": f"nodes: {value}\n", "gpus": f"nodes:\n- name: a\n  gpu_type: V100\n  gpus: {value}\n",
            "gbps": f"inter_node_gbps: {value}\nnodes: [{{name: a, gpu_type: V100, gpus: 8}}]\n",
            "alias": "x: &a [1]\nnodes: *a\n"}[kind]
    spec = _write(text, "c.yaml")
    rc, err = _run([*SIM, "--cluster", str(spec), "--out", str(spec.parent / "out")])
    _assert_clear(rc, err, spec.parent / "out")


GAVEL_COMMANDS = [["truth", "fit", "--gavel", "{g}"], ["colocation", "analyze", "--gavel", "{g}"],
                  ["interference", "train", "--gavel", "{g}", "--out", "{o}", "--folds", "2"],
                  ["interference", "evaluate", "--gavel", "{g}", "--protocol", "random", "--folds", "2"],
                  [*SIM, "--truth", "gavel", "--gavel", "{g}", "--out", "{o}"]]
bad_gavel = st.sampled_from([b"\xff\xfe{}", b'{"v100": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b'{"v100": [1, 2]}',
                             b'{"v100": {"(\'ResNet-50\', 1)": {"null": 1}}}',
                             b'{"v100": {"(\'A3C\', 1)": {"null": true}}}',
                             b'{"v100": {"(\'A3C\', 1.5)": {"null": 1}}}', b'{"v100": {}, "v100": {}}',
                             b'{"v100": {"(\'A3C\', 1)": {"null": 1, "(\'X (batch size 1)\', 1)": [1, 1]}}}',
                             b'{"v100": {"(\'A3C\', 1)": {"null": 1, "(\'A3C\', 1)": [1000, 1]}}}'])


@CLI
@given(st.sampled_from(GAVEL_COMMANDS), bad_gavel)
def test_gavel_commands_reject_bad_files_clearly(command: list[str], data: bytes) -> None:
    gavel = _write(data, "g.json")
    out = gavel.parent / "out"
    rc, err = _run([a.replace("{g}", str(gavel)).replace("{o}", str(out)) for a in command])
    _assert_clear(rc, err, out)


@CLI
@given(st.sampled_from(sorted({"os", "json", "subprocess", "shutil", "sys", "builtins", "pathlib", "horus.cli",
                               "importlib", "pickle", "code"})),
       st.sampled_from(["getcwd", "loads", "getoutput", "rmtree", "exit", "print", "main", "import_module", "load",
                        "interact"]))
def test_features_refuses_stdlib_callables(module: str, attr: str) -> None:
    from horus.zoo.custom import load_factory

    with pytest.raises(HorusInputError, match="expected 'package.module:factory'"):
        load_factory(f"{module}:{attr}")


@CLI
@given(st.sampled_from([["--batch", "99999999999999999999"], ["--batch", "0"], ["--batch", "2", "--input-size", "-1"],
                        ["--batch", "2", "--input-size", "10000000"]]))
def test_features_rejects_out_of_range_sizes(options: list[str]) -> None:
    rc, err = _run(["features", "resnet18_cifar", *options])
    _assert_clear(rc, err)
