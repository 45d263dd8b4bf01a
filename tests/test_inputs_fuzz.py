"""Property-based fuzzing of every parser and file-reading CLI command (bounded: a few seconds each).

Property: any input ends either in a valid result whose values lie in their documented domain
(``horus.validation.LIMITS``) and are the values the input wrote (ids, times, GPU counts round-trip),
or in a one-line ``HorusInputError`` naming the file and the line/column or field / exit code 2 with
nothing written; never another exception, a hang or an out-of-domain value. benchmarks/fuzz_inputs.py
runs the same idea at scale (>= 10,000 inputs) and reports counts.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horus.cli import main
from horus.clusterspec import parse_cluster
from horus.errors import HorusInputError
from horus.sources.gavel import load_gavel
from horus.traces import load_openb_cluster, load_trace
from horus.validation import LIMITS, MAX_DEPTH, load_json, load_yaml_text

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CLI = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# cells: numbers of every magnitude and sign, special spellings, text, empties
numbers = st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0, 1, -1, 1e300, 1e-300, 2**63, 1.5]))
cells = st.one_of(numbers.map(str), st.sampled_from(["", "nan", "inf", "-inf", "x", "True", "1e9", "0x10", " 1 "]),
                  st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r,\"\x00"),
                          max_size=8))


@st.composite
def damaged(draw: st.DrawFn, row: st.SearchStrategy[list[str]], damage: st.SearchStrategy[str] = cells,
            max_rows: int = 4) -> list[list[str]]:
    """1..``max_rows`` valid rows, then 0..3 cells replaced by ``damage``: valid tables are common (their results
    are checked against what was written) and every kind of bad cell still shows up."""
    rows = draw(st.lists(row, min_size=1, max_size=max_rows))
    for _ in range(draw(st.integers(0, 3))):
        cell = draw(st.integers(0, len(rows) - 1)), draw(st.integers(0, len(rows[0]) - 1))
        rows[cell[0]][cell[1]] = draw(damage)
    return rows


def _write(data: bytes | str, name: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="horus-fuzz-test-"))
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _csv(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(",".join(r) for r in [header, *rows]) + "\n"


def _in(domain: str, value: float) -> bool:
    return LIMITS[domain].low <= value <= LIMITS[domain].high


def _number(cell: str) -> float:
    """What a numeric cell says (the loaders strip cells; Python's float reads every spelling they accept)."""
    return float(cell.strip())


def _assert_clear_error(exc: HorusInputError, path: Path | str, columns: list[str] | None = None,
                        rows: int | None = None) -> None:
    """One line that starts with the file; for a CSV (``columns``) it names a line of the file and a known column."""
    text = str(exc)
    assert "\n" not in text and exc.source == str(path) and text.startswith(f"{path}: "), text
    if columns is None:
        return
    where = re.match(r"line (\d+)(?:, column '([^']*)')?: \S", exc.message)
    if where is None:  # file-level: nothing usable left after the documented skips
        assert exc.message.startswith("no usable jobs"), text
        return
    assert rows is not None and 1 <= int(where.group(1)) <= rows + 1, text  # header on line 1, rows after it
    assert where.group(2) is None or where.group(2) in columns, text


# --- trace loaders -----------------------------------------------------------------------------------

HORUS = ["job_id", "submit_time", "num_gpus", "model", "batch_size", "iterations"]

positive = st.one_of(st.integers(1, 10**6).map(str), st.floats(1.0, 1e9).map(repr))
horus_rows = st.tuples(st.one_of(st.integers(0, 10**6).map(str), st.floats(0.0, 1e6).map(repr)),  # submit_time
                       st.integers(1, 64).map(str),  # num_gpus
                       st.one_of(st.just(""), st.integers(1, 512).map(str)),  # batch_size (model set with it)
                       positive).map(list)  # iterations


@FAST
@given(damaged(horus_rows))
def test_horus_trace_loader_keeps_the_rows_or_names_the_cell(rows: list[list[str]]) -> None:
    body = [[f"j{i}", submit, gpus, "resnet50" if batch else "", batch, iters]
            for i, (submit, gpus, batch, iters) in enumerate(rows)]
    path = _write(_csv(HORUS, body), "t.csv")
    try:
        trace = load_trace(path, "horus")
    except HorusInputError as exc:
        _assert_clear_error(exc, path, HORUS, len(body))
        return
    submits = [_number(row[1]) for row in body]
    assert trace.time_offset_s == pytest.approx(min(submits))
    assert [job.submit_time for job in trace.jobs] == sorted(job.submit_time for job in trace.jobs)
    assert sorted(job.job_id for job in trace.jobs) == sorted(row[0] for row in body)  # every row, once
    for job in trace.jobs:
        row = body[int(job.job_id[1:])]
        assert job.line == int(job.job_id[1:]) + 2
        assert job.submit_time == pytest.approx(_number(row[1]) - min(submits), rel=1e-12, abs=1e-6)
        assert job.num_gpus == _number(row[2]) and isinstance(job.num_gpus, int)
        assert job.iterations == pytest.approx(_number(row[5]), rel=1e-12) and job.duration_s is None
        assert (job.model, job.batch_size) == (("resnet50", _number(row[4])) if row[4].strip() else (None, None))
        assert _in("job_gpus", job.num_gpus) and _in("iterations", job.iterations) and job.iterations > 0
        assert _in("trace_span_s", job.submit_time) and math.isfinite(job.submit_time)
        assert job.batch_size is None or _in("batch_size", job.batch_size)


PHILLY = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]
STAMP = "%Y-%m-%d %H:%M:%S"
philly_rows = st.tuples(st.datetimes(datetime(1970, 1, 1), datetime(2100, 12, 31, 23, 59, 59)).map(
    lambda d: d.strftime(STAMP)), positive, st.integers(1, 64).map(str), st.just("0"), st.just("c")).map(list)
stamps = st.one_of(cells, st.sampled_from(["2017-10-09 07:01:55", "0001-01-01 00:00:00", "1677-09-22 00:12:43",
                                           "2101-01-01 00:00:00", "1969-12-31 23:59:59", "2017-02-30 00:00:00"]))


def _unix(stamp: str) -> float:
    return datetime.strptime(stamp.strip(), STAMP).replace(tzinfo=timezone.utc).timestamp()


@FAST
@given(damaged(philly_rows, stamps))
def test_philly_loader_keeps_the_rows_or_names_the_cell(body: list[list[str]]) -> None:
    path = _write(_csv(PHILLY, body), "p.csv")
    try:
        trace = load_trace(path, "philly")
    except HorusInputError as exc:
        _assert_clear_error(exc, path, PHILLY, len(body))
        return
    first = min(_unix(row[0]) for row in body)
    assert trace.time_offset_s == first and 0 <= first < 4.2e9  # Unix seconds, 1970..2100
    assert sorted(job.job_id for job in trace.jobs) == sorted(f"philly-{i + 2}" for i in range(len(body)))
    for job in trace.jobs:
        row = body[job.line - 2]
        assert job.duration_s is not None and _in("duration_s", job.duration_s) and job.iterations is None
        assert job.duration_s == pytest.approx(_number(row[1]), rel=1e-12)
        assert job.num_gpus == _number(row[2]) and _in("job_gpus", job.num_gpus)
        assert job.submit_time == _unix(row[0]) - first


POD = ["name", "num_gpu", "gpu_milli", "gpu_spec", "creation_time", "deletion_time", "scheduled_time"]


@st.composite
def pod_rows(draw: st.DrawFn) -> list[str]:
    """A valid pod: CPU-only, never scheduled, zero run time (all skipped) or a GPU pod that ran."""
    gpus = draw(st.integers(0, 8))
    milli = 1000 if gpus > 1 else draw(st.integers(0 if gpus == 0 else 1, 1000))
    created = draw(st.integers(0, 10**6))
    scheduled = draw(st.one_of(st.none(), st.integers(created, created + 1000)))
    deleted = (created if scheduled is None else scheduled) + draw(st.integers(0, 10**5))
    return [str(gpus), str(milli), str(created), str(deleted), "" if scheduled is None else str(scheduled)]


@FAST
@given(damaged(pod_rows()))
def test_openb_pod_loader_keeps_or_counts_every_pod(rows: list[list[str]]) -> None:
    body = [[f"p{i}", gpus, milli, "", created, deleted, scheduled]
            for i, (gpus, milli, created, deleted, scheduled) in enumerate(rows)]
    path = _write(_csv(POD, body), "pods.csv")
    try:
        trace = load_trace(path, "openb")
    except HorusInputError as exc:
        _assert_clear_error(exc, path, POD, len(body))
        return
    assert len(trace.jobs) + sum(trace.skipped.values()) == len(body)  # each pod kept or counted as skipped
    assert set(trace.skipped) <= {"cpu_only", "never_scheduled", "zero_duration"}
    assert trace.time_offset_s == pytest.approx(min(_number(body[int(j.job_id[1:])][4]) for j in trace.jobs))
    for job in trace.jobs:
        _, gpus, milli, _, created, deleted, scheduled = body[int(job.job_id[1:])]
        assert job.line == int(job.job_id[1:]) + 2 and job.num_gpus == _number(gpus) >= 1
        assert job.duration_s == pytest.approx(_number(deleted) - _number(scheduled), rel=1e-9, abs=1e-6)
        assert job.duration_s is not None and 0 < job.duration_s <= LIMITS["duration_s"].high
        assert job.submit_time == pytest.approx(_number(created) - trace.time_offset_s, rel=1e-9, abs=1e-6)
        assert job.gpu_fraction == (None if _number(milli) == 1000 else pytest.approx(_number(milli) / 1000))
        assert job.gpu_fraction is None or 0 < job.gpu_fraction < 1


NODE_COLUMNS = ["sn", "cpu_milli", "memory_mib", "gpu", "model"]
OPENB_TYPES = {"V100M16": "V100", "T4": "T4", "G1": "G1"}
node_rows = st.tuples(st.sampled_from(["n0", "n1", "n2", "n3", "n4", "n5"]), st.just("1000"), st.just("1000"),
                      st.integers(0, 16).map(str), st.sampled_from(sorted(OPENB_TYPES))).map(list)
node_damage = st.one_of(cells, st.sampled_from(["n0", "", "H900", "V100M16", "0", "257"]))


@FAST
@given(damaged(node_rows, node_damage, max_rows=3))
def test_openb_node_loader_builds_the_listed_nodes_or_names_the_cell(body: list[list[str]]) -> None:
    path = _write(_csv(NODE_COLUMNS, body), "n.csv")
    try:
        cluster = load_openb_cluster(path)
    except HorusInputError as exc:
        _assert_clear_error(exc, path, NODE_COLUMNS, len(body))
        return
    listed = {name.strip(): (_number(gpus), model) for name, _, _, gpus, model in body}
    assert len(listed) == len(body)  # node names are unique
    assert [node.name for node in cluster.nodes] == [name for name, (gpus, _) in listed.items() if gpus > 0]
    for node in cluster.nodes:  # GPU-less nodes dropped, the others with their count and type
        gpus, model = listed[node.name]
        assert node.num_gpus == gpus and _in("gpus_per_node", node.num_gpus)
        assert node.gpu_type.name == OPENB_TYPES[model]


# --- cluster spec, YAML and JSON -----------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=6), st.sampled_from(["V100", "pcie", "a"]))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["nodes", "name", "gpus", "gpu_type", "count", "intra_link", "gpu_types",
                                     "memory_mib", "speed", "inter_node_gbps", "x"]), inner, max_size=5)),
    max_leaves=20)
nodes = st.fixed_dictionaries({"name": st.one_of(st.sampled_from(["a", "b", " c "]), scalars),
                               "gpu_type": st.sampled_from(["V100", "T4", "Z"]),
                               "gpus": st.one_of(st.integers(1, 16), numbers, scalars)},
                              optional={"count": st.one_of(st.integers(1, 4), numbers),
                                        "intra_link": st.sampled_from(["pcie", "nvlink", "x"])})
SPEC_FIELD = re.compile(r"(nodes(\[\d+\](\.\w+)?)?|gpu_types(\..*?)?|inter_node_gbps|\w+): \S")


def _expected_nodes(data: dict) -> list[tuple[str, str, int, str]]:
    """(name, GPU type, GPUs, link) of every node a valid spec describes (``count`` copies named name-k)."""
    out = []
    for entry in data["nodes"]:
        name, count = entry["name"].strip(), entry.get("count", 1)
        names = [name] if count == 1 else [f"{name}-{k}" for k in range(count)]
        out += [(n, entry["gpu_type"], entry["gpus"], entry.get("intra_link", "nvlink")) for n in names]
    return out


@FAST
@given(st.one_of(documents, st.fixed_dictionaries({"nodes": st.lists(nodes, min_size=1, max_size=3)},
                                                  optional={"inter_node_gbps": numbers})))
def test_cluster_spec_builds_what_it_says_or_names_the_field(data: object) -> None:
    try:
        cluster = parse_cluster(data, "c.yaml")
    except HorusInputError as exc:
        _assert_clear_error(exc, "c.yaml")
        if isinstance(data, dict):  # (a non-mapping document: test_cluster_spec_root_error_names_the_document)
            assert SPEC_FIELD.match(exc.message), str(exc)
        return
    assert isinstance(data, dict)
    built = [(n.name, n.gpu_type.name, n.num_gpus, n.intra_link) for n in cluster.nodes]
    assert built == _expected_nodes(data)
    assert cluster.inter_node_gbps == data.get("inter_node_gbps", 12.5)
    assert _in("cluster_gpus", cluster.num_gpus) and cluster.num_gpus == sum(n[2] for n in built)
    assert all(_in("gpus_per_node", n.num_gpus) for n in cluster.nodes)
    assert math.isfinite(cluster.inter_node_gbps) and cluster.inter_node_gbps > 0


@pytest.mark.parametrize("data", [5, None, [1]])
def test_cluster_spec_root_error_names_the_document(data: object) -> None:
    with pytest.raises(HorusInputError) as info:
        parse_cluster(data, "c.yaml")
    assert "expected a mapping" in info.value.message and not info.value.message.startswith(":"), str(info.value)


def _depth(data: object) -> int:
    if isinstance(data, dict):
        return 1 + max(map(_depth, data.values()), default=0)
    if isinstance(data, list):
        return 1 + max(map(_depth, data), default=0)
    return 0


def _all_finite(data: object) -> bool:
    if isinstance(data, dict):
        return all(map(_all_finite, data.values()))
    if isinstance(data, list):
        return all(map(_all_finite, data))
    return not isinstance(data, float) or math.isfinite(data)


# documents every writer can express: what a valid file holds must come back unchanged (PyYAML itself does not
# round-trip the YAML 1.1 line breaks NEL, LS and PS inside plain scalars, so texts leave them out)
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x85\u2028\u2029"),
                max_size=6)
plain = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**18, 10**18),
                               st.floats(allow_nan=False, allow_infinity=False), texts),
                     lambda inner: st.one_of(st.lists(inner, max_size=3),
                                             st.dictionaries(texts, inner, max_size=3)),
                     max_leaves=12)


@st.composite
def spliced_json(draw: st.DrawFn) -> bytes:
    """A valid JSON document, sometimes with bytes cut out or spliced in (duplicate keys, NaN, junk)."""
    data = json.dumps(draw(plain)).encode()
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        cut = draw(st.integers(0, 3))
        patch = draw(st.one_of(st.binary(max_size=4), st.sampled_from([b"NaN", b"-Infinity", b'{"a": 1, "a": 2}',
                                                                       b"[" * 40, b"\xff", b"\x00", b"1e999"])))
        data = data[:at] + patch + data[at + cut:]
    return data


@FAST
@given(st.text(max_size=200))
def test_yaml_reader_agrees_with_safe_load_or_names_the_file(text: str) -> None:
    try:
        data = load_yaml_text(text, "c.yaml")
    except HorusInputError as exc:
        _assert_clear_error(exc, "c.yaml")
        return
    assert repr(data) == repr(yaml.safe_load(text))  # the strict loader only refuses, never reads differently
    assert _depth(data) <= MAX_DEPTH


@FAST
@given(plain)
def test_yaml_reader_returns_what_was_written(doc: object) -> None:
    assert load_yaml_text(yaml.safe_dump(doc, allow_unicode=True), "c.yaml") == doc


@FAST
@given(st.one_of(st.binary(max_size=200), spliced_json()))
def test_json_reader_agrees_with_json_loads_or_names_the_file(data: bytes) -> None:
    path = _write(data, "g.json")
    try:
        doc, raw = load_json(path, "a JSON file")
    except HorusInputError as exc:
        _assert_clear_error(exc, path)
        return
    assert raw == data and repr(doc) == repr(json.loads(data.decode("utf-8-sig")))
    assert _depth(doc) <= MAX_DEPTH
    assert _all_finite(doc), doc  # no NaN/Infinity, not even from a literal that overflows a float (1e999)


@pytest.mark.parametrize("literal", ["1e999", "-2e308", "1" + "0" * 400 + ".0"])
def test_json_reader_rejects_numbers_that_overflow_to_infinity(literal: str) -> None:
    path = _write(f'{{"a": {literal}}}', "g.json")
    with pytest.raises(HorusInputError) as info:
        load_json(path, "a JSON file")
    _assert_clear_error(info.value, path)


@FAST
@given(plain, st.booleans(), st.booleans())
def test_json_reader_returns_what_was_written(doc: object, ascii_only: bool, bom: bool) -> None:
    text = json.dumps(doc, ensure_ascii=ascii_only)
    path = _write(("\ufeff" if bom else "") + text, "g.json")
    assert load_json(path, "a JSON file") == (doc, path.read_bytes())


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
    path = _write(json.dumps({"v100": table}), "g.json")
    try:
        gavel = load_gavel(path, "v100")
    except HorusInputError as exc:
        _assert_clear_error(exc, path)
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
    path = _write(_csv(["model", "batch_size", "gpu_util_mean", "status"], body), "s.csv")
    try:
        frame = read_table(path)
    except HorusInputError as exc:
        _assert_clear_error(exc, path)
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
