"""horus.validation: the documented limits (docs/inputs.md) at their boundaries, the safe file readers, strict
JSON/YAML and output paths, each failing with one line naming the source and what was expected."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horus.errors import HorusInputError
from horus.validation import (COLUMN_CHOICES, COLUMN_DOMAINS, COLUMN_NONEMPTY, KIB, LIMITS, MAX_CELL_CHARS,
                              MAX_CONFIG_BYTES, MAX_DEPTH, MAX_ROWS, MAX_TABLE_BYTES, MIB, YEAR_S, Domain, OutputDir,
                              check_depth, check_option, check_output_path, decode_text, load_json, load_yaml,
                              load_yaml_text, read_input_bytes, read_text)

# (low, high, integer, unit, description) of every limit, as docs/inputs.md states them
DOCUMENTED: dict[str, tuple[float, float, bool, str, str]] = {
    "gpus_per_node": (1, 256, True, "GPUs", "an integer in [1, 256] GPUs"),
    "nodes": (1, 100_000, True, "nodes", "an integer in [1, 100,000] nodes"),
    "cluster_gpus": (1, 200_000, True, "GPUs", "an integer in [1, 200,000] GPUs"),
    "job_gpus": (1, 200_000, True, "GPUs", "an integer in [1, 200,000] GPUs"),
    "batch_size": (1, 67_108_864, True, "", "an integer in [1, 67,108,864]"),
    "gpu_fraction": (0.001, 1, False, "of a GPU", "a number in [0.001, 1] of a GPU"),
    "iterations": (1, 1e12, False, "iterations", "a number in [1, 1,000,000,000,000] iterations"),
    "duration_s": (0.001, 10 * 365.25 * 86400, False, "s", "a number in [0.001, 315,576,000] s"),
    "submit_time_s": (0, 1e10, False, "s", "a number in [0, 10,000,000,000] s"),
    "trace_span_s": (0, 20 * 365.25 * 86400, False, "s", "a number in [0, 631,152,000] s"),
    "gpu_memory_mib": (1, 4 * 1024 * 1024, True, "MiB", "an integer in [1, 4,194,304] MiB"),
    "gpu_speed": (0.001, 1000, False, "x V100", "a number in [0.001, 1,000] x V100"),
    "link_gbps": (0.001, 100_000, False, "GB/s", "a number in [0.001, 100,000] GB/s"),
    "throughput": (0, 1e9, False, "steps/s", "a number in [0, 1,000,000,000] steps/s"),
    "normalized_throughput": (0, 1.5, False, "", "a number in [0, 1.5]"),
    "utilization_pct": (0, 100, False, "%", "a number in [0, 100] %"),
    "memory_mib": (0, 4 * 1024 * 1024, False, "MiB", "a number in [0, 4,194,304] MiB"),
    "iter_time_s": (1e-6, 1e6, False, "s", "a number in [1e-06, 1,000,000] s"),
    "seed": (0, 2**32 - 1, True, "", "an integer in [0, 4,294,967,295]"),
    "folds": (2, 100, True, "", "an integer in [2, 100]"),
    "input_size": (1, 65_536, True, "", "an integer in [1, 65,536]"),
    "set_size": (1, 16, True, "jobs", "an integer in [1, 16] jobs"),
}
# measurement-table columns: (low, high, integer, unit)
COLUMNS: dict[str, tuple[float, float, bool, str]] = {
    "set_size": (1, 16, True, "jobs"), "member": (0, 15, True, ""), "batch_size": (1, 67_108_864, True, ""),
    "input_size": (1, 65_536, True, ""), "repeat": (0, 1e6, True, ""), "normalized_throughput": (0, 1.5, False, ""),
    "throughput_samples_s": (0, 1e12, False, "samples/s"), "solo_throughput_samples_s": (0, 1e12, False, "samples/s"),
    **dict.fromkeys(("gpu_util_mean", "gpu_util_p50", "combined_util_mean", "solo_util_mean"), (0, 100, False, "%")),
    **dict.fromkeys(("mem_used_mib_peak", "torch_max_allocated_mib", "torch_max_reserved_mib",
                     "combined_mem_used_mib_peak", "solo_mem_mib"), (0, 4 * 1024 * 1024, False, "MiB")),
    "iter_time_s_mean": (1e-6, 1e6, False, "s"), "iter_time_s_std": (0, 1e6, False, "s"),
    "n_iters": (0, 1e12, True, ""), "window_s": (0, 1e6, False, "s"), "sm_clock_mhz_mean": (0, 1e5, False, "MHz"),
    "power_w_mean": (0, 1e5, False, "W"),
}


def outside(low: float, high: float, integer: bool) -> list[float]:
    """Values just outside ``[low, high]`` (the next integers for integer domains)."""
    if integer:
        return [low - 1, high + 1, float(low - 1), float(high + 1)]
    return [math.nextafter(low, -math.inf), math.nextafter(high, math.inf)]


def assert_domain(domain: Domain, low: float, high: float, integer: bool, unit: str) -> None:
    assert (domain.low, domain.high, domain.integer, domain.unit) == (low, high, integer, unit)
    for value in (low, high, float(low), float(high)):
        assert domain.contains(value), value
        assert domain.check(value, "f", "w") == value
    for value in outside(low, high, integer):
        assert not domain.contains(value), value
    if integer:
        assert domain.contains(int(low) + 1) and domain.contains(float(int(low) + 1))
        assert not domain.contains(low + 0.5) and not domain.contains(high - 0.5)
    else:
        assert domain.contains((low + high) / 2) and domain.contains(math.nextafter(high, -math.inf))


# ---- limits ----------------------------------------------------------------------------------------------------
def test_every_limit_is_documented() -> None:
    assert set(LIMITS) == set(DOCUMENTED) and set(COLUMN_DOMAINS) == set(COLUMNS)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_limit_bounds_are_inclusive_and_described(name: str) -> None:
    low, high, integer, unit, text = DOCUMENTED[name]
    assert_domain(LIMITS[name], low, high, integer, unit)
    assert LIMITS[name].describe() == text
    bad = outside(low, high, integer)[1]
    with pytest.raises(HorusInputError) as info:
        LIMITS[name].check(bad, "trace.csv", "line 3, field 'x'")
    assert info.value.source == "trace.csv"
    assert info.value.message == f"line 3, field 'x': expected {text}, got {bad!r}"
    assert str(info.value) == f"trace.csv: line 3, field 'x': expected {text}, got {bad!r}"


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_column_domains(name: str) -> None:
    assert_domain(COLUMN_DOMAINS[name], *COLUMNS[name])


def test_column_identity_and_choices() -> None:
    assert set(COLUMN_NONEMPTY) == {"set_id", "set_size", "member", "model", "batch_size", "status", "repeat",
                                    "precision"}
    assert COLUMN_CHOICES == {"status": ("ok", "oom", "error", "partner_failed"), "precision": ("fp32", "amp")}


def test_size_limits() -> None:
    assert (KIB, MIB) == (1024, 1024 * 1024)
    assert MAX_TABLE_BYTES == 2 * 1024**3 and MAX_CONFIG_BYTES == 64 * MIB
    assert MAX_CELL_CHARS == 64 * 1024 and MAX_ROWS == 20_000_000 and MAX_DEPTH == 32
    assert YEAR_S == 365.25 * 86400


@pytest.mark.parametrize("value", [True, False, None, "1", b"1", [1], math.nan, math.inf, -math.inf, 1 + 0j])
def test_non_numbers_are_outside_every_domain(value: object) -> None:
    wide = Domain(-math.inf, math.inf)
    assert not wide.contains(value)
    assert not LIMITS["seed"].contains(value)
    with pytest.raises(HorusInputError, match=r"^f: w: expected a number in \[-inf, inf\], got "):
        wide.check(value, "f", "w")


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e6, 1e6, allow_nan=False), st.floats(0, 1e6, allow_nan=False), st.booleans(),
       st.one_of(st.integers(-2 * 10**6, 2 * 10**6), st.floats(allow_nan=False)))
def test_contains_is_the_closed_range(low: float, width: float, integer: bool, value: float) -> None:
    domain = Domain(low, low + width, integer)
    expected = low <= value <= low + width and not (integer and isinstance(value, float) and not value.is_integer())
    assert domain.contains(value) == expected
    if expected:
        assert domain.check(value, "s", "w") == value
    else:
        with pytest.raises(HorusInputError, match=r"^s: w: expected an? "):
            domain.check(value, "s", "w")


def test_describe_formats_numbers() -> None:
    assert Domain(0.5, 2.25).describe() == "a number in [0.5, 2.25]"
    assert Domain(-3, 1e15, True, "x").describe() == "an integer in [-3, 1e+15] x"
    assert Domain(-1e15, 999_999_999_999_999.0).describe() == "a number in [-1e+15, 999,999,999,999,999]"
    assert Domain(1.5e-7, 12_345.0).describe() == "a number in [1.5e-07, 12,345]"


def test_check_option() -> None:
    check_option("--seed", None, "seed")
    check_option("--seed", 0, "seed")
    check_option("--seed", 2**32 - 1, "seed", allow_none=False)
    with pytest.raises(HorusInputError) as info:
        check_option("--seed", None, "seed", allow_none=False)
    assert info.value.source == "--seed" and info.value.message == "expected an integer in [0, 4,294,967,295], got None"
    with pytest.raises(HorusInputError) as info:
        check_option("--folds", 1, "folds")
    assert str(info.value) == "--folds: expected an integer in [2, 100], got 1"
    with pytest.raises(HorusInputError, match="got 2.5"):
        check_option("--folds", 2.5, "folds")


# ---- files -------------------------------------------------------------------------------------------------------
def test_read_input_bytes(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_bytes(b"a,b\n1,2\n")
    assert read_input_bytes(f, "a trace") == b"a,b\n1,2\n"
    assert read_input_bytes(str(f), "a trace", max_bytes=8) == b"a,b\n1,2\n"  # exactly the limit
    with pytest.raises(HorusInputError) as info:
        read_input_bytes(tmp_path / "missing.csv", "a trace")
    assert info.value.source == str(tmp_path / "missing.csv")
    assert info.value.message == "file not found (expected a trace)"
    with pytest.raises(HorusInputError) as info:
        read_input_bytes(tmp_path, "a trace")
    assert info.value.message == "is a directory (expected a trace)"
    with pytest.raises(HorusInputError) as info:
        read_input_bytes(f / "child", "a trace")
    assert info.value.message == "cannot read file (Not a directory)"
    with pytest.raises(HorusInputError) as info:
        read_input_bytes(f, "a trace", max_bytes=7)
    assert info.value.message == "file is 0.0 MiB, above the 0 MiB limit for a trace"


def test_size_is_checked_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    with big.open("wb") as fh:
        fh.truncate(3 * MIB + MIB // 2)  # sparse: nothing is written or read
    with pytest.raises(HorusInputError) as info:
        read_input_bytes(big, "a trace", max_bytes=2 * MIB)
    assert info.value.message == "file is 3.5 MiB, above the 2 MiB limit for a trace"
    with pytest.raises(HorusInputError, match=r"file is 3\.5 MiB, above the 3 MiB limit for a cluster spec"):
        read_text(big, "a cluster spec", max_bytes=3 * MIB)
    assert len(read_input_bytes(big, "a trace", max_bytes=4 * MIB)) == 3 * MIB + MIB // 2


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs /proc")
def test_file_larger_than_its_stat_size() -> None:
    """/proc files stat as 0 bytes but read as more: the limit is checked on the bytes read too."""
    data = read_input_bytes("/proc/self/status", "a status file", max_bytes=MIB)
    assert len(data) > 10
    with pytest.raises(HorusInputError) as info:
        read_input_bytes("/proc/self/status", "a status file", max_bytes=10)
    assert info.value.message == "more than 0 MiB (the limit for a status file)"


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs /proc")
def test_read_error_after_stat_is_one_line() -> None:
    with pytest.raises(HorusInputError) as info:
        read_input_bytes("/proc/self/mem", "a trace")  # stats fine, reading at offset 0 fails
    assert info.value.message == "cannot read file (Input/output error)"


def test_decode_text() -> None:
    assert decode_text(b"a\nb", "f") == "a\nb"
    assert decode_text("\ufeffé\n".encode(), "f") == "é\n"  # BOM dropped
    assert decode_text(b"", "f") == ""
    for bom in (b"\xff\xfe", b"\xfe\xff"):
        with pytest.raises(HorusInputError) as info:
            decode_text(bom + "ab".encode("utf-16-le"), "f.csv")
        assert str(info.value) == "f.csv: line 1: UTF-16 text; expected UTF-8 (save the file as UTF-8)"
    with pytest.raises(HorusInputError) as info:
        decode_text(b"ok\nok\nbad \xff here\n", "f.csv")
    assert info.value.message == "line 3: not UTF-8 text (byte 0xff); expected UTF-8 with or without BOM"
    with pytest.raises(HorusInputError, match=r"^f: line 1: not UTF-8 text \(byte 0x80\)"):
        decode_text(b"\x80", "f")
    with pytest.raises(HorusInputError) as info:
        decode_text(b"a\nb\x00\nc", "f.csv")
    assert info.value.message == "line 2: NUL byte; expected text"
    with pytest.raises(HorusInputError, match=r"^f: line 1: NUL byte"):
        decode_text(b"\x00", "f")
    with pytest.raises(HorusInputError, match=r"^f: line 2: NUL byte"):  # a newline as the very first character
        decode_text(b"\n\x00", "f")


def test_read_text_returns_text_and_bytes(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert read_text(f, "a cluster spec") == ("a: 1\n", b"\xef\xbb\xbfa: 1\n")
    f.write_bytes(b"x" * 65)
    with pytest.raises(HorusInputError, match="above the 0 MiB limit"):
        read_text(f, "a cluster spec", max_bytes=64)


# ---- JSON ----------------------------------------------------------------------------------------------------------
def write(tmp_path: Path, text: str, name: str = "d.json") -> Path:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return f


def json_error(tmp_path: Path, text: str) -> HorusInputError:
    f = write(tmp_path, text)
    with pytest.raises(HorusInputError) as info:
        load_json(f, "a Gavel table")
    assert info.value.source == str(f)
    return info.value


def test_load_json_strictness(tmp_path: Path) -> None:
    f = write(tmp_path, '{"a": [1, 2.5, {"b": null}]}')
    assert load_json(f, "x") == ({"a": [1, 2.5, {"b": None}]}, f.read_bytes())
    assert json_error(tmp_path, "").message == "empty file (expected a Gavel table)"
    assert json_error(tmp_path, " \n\t").message == "empty file (expected a Gavel table)"
    assert json_error(tmp_path, '{"a": 1, "a": 2}').message == "duplicate key 'a' (each key may appear once)"
    assert json_error(tmp_path, '[{"k": 1, "k": 1}]').message == "duplicate key 'k' (each key may appear once)"
    for constant in ("NaN", "Infinity", "-Infinity"):
        assert json_error(tmp_path, f'[{constant}]').message == f"{constant} is not a JSON number; expected a finite " \
                                                                 "number"
    assert json_error(tmp_path, '{\n  "a": 1,\n  "b" 2}').message == ("line 3, column 7: not valid JSON (Expecting "
                                                                       "':' delimiter)")
    huge = json_error(tmp_path, "[" + "9" * 5000 + "]").message
    assert huge.startswith("not valid JSON (Exceeds the limit (4300 digits)") and ";" not in huge
    assert json_error(tmp_path, "[" * 100_000 + "]" * 100_000).message == "nested too deeply; expected at most 32 " \
                                                                            "levels"


def test_json_depth_limit(tmp_path: Path) -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load_json(write(tmp_path, ok), "x")[0] is not None
    deeper = '{"a": ' * MAX_DEPTH + "[]" + "}" * MAX_DEPTH
    assert json_error(tmp_path, deeper).message == "nested 33 levels deep; expected at most 32"


def test_check_depth() -> None:
    check_depth(5, "s")
    check_depth([], "s", max_depth=1)
    check_depth({"a": 1, "b": "x"}, "s", max_depth=1)  # scalars add no level
    with pytest.raises(HorusInputError) as info:
        check_depth([[]], "s", max_depth=1)
    assert str(info.value) == "s: nested 2 levels deep; expected at most 1"
    check_depth({"a": {"b": [1]}}, "s", max_depth=3)
    with pytest.raises(HorusInputError, match="nested 3 levels deep; expected at most 2"):
        check_depth([1, {"a": {"b": 1}}], "s", max_depth=2)
    with pytest.raises(HorusInputError, match="nested 3 levels deep"):
        check_depth({"x": 1, "y": [[0]]}, "s", max_depth=2)
    nested: list[object] = []
    for _ in range(10_000):  # iterative: deep data is no RecursionError
        nested = [nested]
    with pytest.raises(HorusInputError, match=f"expected at most {MAX_DEPTH}$"):
        check_depth(nested, "s")


# ---- YAML ----------------------------------------------------------------------------------------------------------
def yaml_error(text: str) -> str:
    with pytest.raises(HorusInputError) as info:
        load_yaml_text(text, "c.yaml")
    assert info.value.source == "c.yaml"
    return info.value.message


def test_load_yaml_text() -> None:
    assert load_yaml_text("a: 1\nb: [x, 2.5]\n", "c.yaml") == {"a": 1, "b": ["x", 2.5]}
    assert load_yaml_text("", "c.yaml") is None
    assert load_yaml_text("---\n- 1\n", "c.yaml") == [1]
    assert yaml_error("a: &x 1\nb: *x\n") == ("line 2, column 4: YAML aliases (*name) are not supported; "
                                             "write the value out")
    assert yaml_error("a: 1\nb:\n  c: 2\n  c: 3\n") == "line 4, column 3: duplicate key 'c' (each key may appear once)"
    assert yaml_error("a: 1\n---\nb: 2\n") == "2 YAML documents; expected one"
    assert yaml_error("a: 1\n---\nb: 2\n---\n") == "3 YAML documents; expected one"
    assert yaml_error("a: [1, 2\nb: 3\n").startswith("line 2, column 2: not valid YAML (")
    assert yaml_error("a: " + "9" * 5000 + "\n").startswith("not valid YAML (Exceeds the limit (4300 digits)")


def test_yaml_keys_that_cannot_be_compared_are_not_duplicates() -> None:
    # unhashable keys (a list) are not duplicates here; the YAML constructor then refuses them as keys
    message = yaml_error("? [1]\n: a\n? [1]\n: b\n")
    assert "not valid YAML" in message and "duplicate" not in message
    assert load_yaml_text("1: a\n'1': b\n", "c.yaml") == {1: "a", "1": "b"}


def test_yaml_depth_limit() -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load_yaml_text(ok, "c.yaml") is not None
    assert yaml_error("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)) == "line 1: nested more than 32 levels deep"
    block = "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH - 1)) + "  " * (MAX_DEPTH - 1) + "v\n"
    assert load_yaml_text(block, "c.yaml") is not None  # 31 mappings and a scalar: 32 levels
    deeper = "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH)) + "  " * MAX_DEPTH + "v\n"
    assert yaml_error(deeper) == f"line {MAX_DEPTH}: nested more than 32 levels deep"  # the 32nd mapping's key
    # sibling subtrees each count from their parent's depth
    wide = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\nb: " + "[" * (MAX_DEPTH - 1) + \
        "]" * (MAX_DEPTH - 1) + "\n"
    assert set(load_yaml_text(wide, "c.yaml")) == {"a", "b"}


def test_load_yaml_reads_the_file(tmp_path: Path) -> None:
    f = write(tmp_path, "nodes: 2\n", "c.yaml")
    assert load_yaml(f, "a cluster spec") == ({"nodes": 2}, b"nodes: 2\n")
    f2 = write(tmp_path, "a: 1\na: 2\n", "d.yaml")
    with pytest.raises(HorusInputError) as info:
        load_yaml(f2, "a cluster spec")
    assert info.value.source == str(f2) and info.value.message.startswith("line 2, column 1: duplicate key 'a'")
    with pytest.raises(HorusInputError, match="above the 0 MiB limit for a cluster spec"):
        load_yaml(f, "a cluster spec", max_bytes=3)


# ---- outputs -------------------------------------------------------------------------------------------------------
def test_check_output_path(tmp_path: Path) -> None:
    check_output_path(tmp_path, "--out")
    check_output_path(tmp_path / "new" / "deeper", "--out")
    check_output_path(tmp_path / "file.json", "--out", directory=False)
    f = tmp_path / "taken"
    f.write_text("x")
    check_output_path(f, "--out", directory=False)  # an existing file is replaced (e.g. plan-pairs rerun)
    with pytest.raises(HorusInputError) as info:
        check_output_path(f, "--out")
    assert info.value.source == "--out"
    assert info.value.message == f"{f} exists and is not a directory; expected a directory to write into"
    with pytest.raises(HorusInputError) as info:
        check_output_path(tmp_path, "--out", directory=False)
    assert info.value.message == f"{tmp_path} is a directory; expected a file path"
    for under in (f / "sub", f / "sub" / "deeper"):
        for directory in (True, False):
            with pytest.raises(HorusInputError) as info:
                check_output_path(under, "--out", directory=directory)
            assert info.value.message == f"{under}: {f} is a file, so nothing can be created under it"


@pytest.mark.skipif(os.access("/proc/1", os.W_OK) or not os.path.isdir("/proc/1"), reason="needs a read-only dir")
def test_unwritable_parent_is_refused() -> None:
    for path in (Path("/proc/1/horus-out"), Path("/proc/1/horus-out/deeper")):
        with pytest.raises(HorusInputError) as info:
            check_output_path(path, "--out")
        assert info.value.message == f"{path}: /proc/1 is not writable"


def test_output_dir_is_removed_only_when_a_new_one_fails(tmp_path: Path) -> None:
    new = tmp_path / "run" / "out"
    with OutputDir(new, "--out") as out:
        assert out == new and new.is_dir()
        (out / "summary.json").write_text("{}")
    assert (new / "summary.json").is_file()  # success keeps it
    failing = tmp_path / "failing"
    with pytest.raises(RuntimeError):
        with OutputDir(failing, "--out") as out:
            (out / "partial.csv").write_text("x")
            raise RuntimeError("boom")
    assert not failing.exists()
    with pytest.raises(RuntimeError):
        with OutputDir(new, "--out"):  # existed before: kept, with what was there
            raise RuntimeError("boom")
    assert (new / "summary.json").is_file()
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(HorusInputError, match="exists and is not a directory"):
        OutputDir(f, "--out")


def test_a_failed_run_also_removes_the_parent_directories_it_created(tmp_path: Path) -> None:
    """The default ``results/<run>`` of a first run that fails leaves no empty ``results/`` behind; a parent that
    existed, or that holds something else, stays."""
    with pytest.raises(RuntimeError):
        with OutputDir(tmp_path / "results" / "a" / "run", "--out"):
            raise RuntimeError("boom")
    assert not (tmp_path / "results").exists()
    (tmp_path / "results" / "other").mkdir(parents=True)
    with pytest.raises(RuntimeError):
        with OutputDir(tmp_path / "results" / "b" / "run", "--out"):
            raise RuntimeError("boom")
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["other"]


def test_a_limit_that_is_not_whole_mib_is_rounded_in_the_message(tmp_path: Path) -> None:
    from horus.validation import read_text

    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * (2 * 1024 * 1024))
    with pytest.raises(HorusInputError, match=r"file is 2\.0 MiB, above the 2 MiB limit for a text file"):
        read_text(path, "a text file", max_bytes=int(1.6 * 1024 * 1024))


def test_an_overflowing_number_is_quoted_whole_up_to_40_characters(tmp_path: Path) -> None:
    from horus.validation import load_json

    exact, longer = "9" * 36 + "e999", "9" * 37 + "e999"  # 40 and 41 characters, both beyond a float
    for literal, shown in ((exact, exact), (longer, longer[:40] + "...")):
        path = tmp_path / "n.json"
        path.write_text(f'{{"a": {literal}}}')
        with pytest.raises(HorusInputError) as info:
            load_json(path, "a JSON file")
        assert info.value.message == f"number {shown} is too large for a float; expected a finite number"
