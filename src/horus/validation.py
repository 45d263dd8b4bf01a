"""The one place where input limits and safe readers live (docs/inputs.md).

Every file Horus reads goes through these readers before any work starts:

- ``read_input_bytes`` / ``read_text``: existence, size limit (checked with ``stat`` before reading),
  UTF-8 with or without BOM (anything else, or a NUL byte, is a clear error naming the line);
- ``load_json`` / ``load_yaml``: duplicate keys, nesting depth, non-standard numbers (NaN, Infinity,
  integers beyond 4300 digits) and YAML aliases are rejected;
- ``Domain`` values (``LIMITS``): the physical bounds that loaders and options check numbers against.

Everything raises :class:`horus.errors.HorusInputError` with ``file: where: what was expected``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from horus.errors import HorusInputError

KIB = 1024
MIB = 1024 * KIB

# --- size limits (checked before parsing) ------------------------------------------------------------
MAX_TABLE_BYTES = 2048 * MIB  # traces and measurement tables (Philly's 82k jobs are 4 MiB)
MAX_CONFIG_BYTES = 64 * MIB  # cluster YAML, Gavel JSON, campaign files (Gavel's file is ~1 MiB)
MAX_CELL_CHARS = 64 * KIB  # one CSV cell
MAX_ROWS = 20_000_000  # rows of one table
MAX_DEPTH = 32  # nesting of a JSON / YAML document

# a credential's name (horus.service.auth; a queue's ``users``, horus.tenancy): 1-64 letters, digits, '_', '.', '-'
TOKEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Domain:
    """A closed numeric range ``[low, high]``, optionally integral, with a description for messages."""

    low: float
    high: float
    integer: bool = False
    unit: str = ""

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        unit = f" {self.unit}" if self.unit else ""
        return f"{kind} in [{_fmt(self.low)}, {_fmt(self.high)}]{unit}"

    def contains(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.integer and (isinstance(value, float) and not value.is_integer()):
            return False
        return self.low <= value <= self.high

    def check(self, value: object, source: str, where: str) -> float:
        """``value`` as a number, or HorusInputError naming ``source`` and ``where``."""
        if not self.contains(value):
            raise HorusInputError(source, f"{where}: expected {self.describe()}, got {value!r}")
        return value  # type: ignore[return-value]


def _fmt(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:g}"


YEAR_S = 365.25 * 86400
# Physical bounds of the values Horus reads (documented in docs/inputs.md).
LIMITS: dict[str, Domain] = {
    "gpus_per_node": Domain(1, 256, True, "GPUs"),  # NVL72-class racks are the largest single nodes today
    "nodes": Domain(1, 100_000, True, "nodes"),
    "cluster_gpus": Domain(1, 200_000, True, "GPUs"),
    "job_gpus": Domain(1, 200_000, True, "GPUs"),
    "batch_size": Domain(1, 2**26, True),  # NCF-style recommenders train on 1-10 M samples per batch
    "gpu_fraction": Domain(1e-3, 1, False, "of a GPU"),
    "iterations": Domain(1, 1e12, False, "iterations"),
    "duration_s": Domain(1e-3, 10 * YEAR_S, False, "s"),
    "submit_time_s": Domain(0, 1e10, False, "s"),  # a format's own epoch; 1e10 s is year 2286 in Unix time
    "trace_span_s": Domain(0, 20 * YEAR_S, False, "s"),
    "gpu_memory_mib": Domain(1, 2**22, True, "MiB"),  # 4 TiB
    "gpu_speed": Domain(1e-3, 1000, False, "x V100"),
    "link_gbps": Domain(1e-3, 1e5, False, "GB/s"),
    "throughput": Domain(0, 1e9, False, "steps/s"),
    "normalized_throughput": Domain(0, 1.5, False),  # co-located / solo; >1 only by measurement noise
    "utilization_pct": Domain(0, 100, False, "%"),
    "memory_mib": Domain(0, 2**22, False, "MiB"),
    "iter_time_s": Domain(1e-6, 1e6, False, "s"),
    "seed": Domain(0, 2**32 - 1, True),
    "folds": Domain(2, 100, True),
    "input_size": Domain(1, 65_536, True),
    "set_size": Domain(1, 16, True, "jobs"),
}


# Domains of measurement-table columns (profile and co-location tables): empty cells are allowed
# (non-ok rows carry no measurements); anything else must be a number in the domain.
COLUMN_DOMAINS: dict[str, Domain] = {
    "set_size": LIMITS["set_size"],
    "member": Domain(0, 15, True),
    "batch_size": LIMITS["batch_size"],
    "input_size": LIMITS["input_size"],
    "repeat": Domain(0, 1e6, True),
    "normalized_throughput": LIMITS["normalized_throughput"],
    "throughput_samples_s": Domain(0, 1e12, False, "samples/s"),
    "solo_throughput_samples_s": Domain(0, 1e12, False, "samples/s"),
    **dict.fromkeys(("gpu_util_mean", "gpu_util_p50", "combined_util_mean", "solo_util_mean"),
                    LIMITS["utilization_pct"]),
    **dict.fromkeys(("mem_used_mib_peak", "torch_max_allocated_mib", "torch_max_reserved_mib",
                     "combined_mem_used_mib_peak", "solo_mem_mib"), LIMITS["memory_mib"]),
    "iter_time_s_mean": LIMITS["iter_time_s"],
    "iter_time_s_std": Domain(0, 1e6, False, "s"),
    "n_iters": Domain(0, 1e12, True),
    "window_s": Domain(0, 1e6, False, "s"),
    "sm_clock_mhz_mean": Domain(0, 1e5, False, "MHz"),
    "power_w_mean": Domain(0, 1e5, False, "W"),
}
COLUMN_NONEMPTY: tuple[str, ...] = ("set_id", "set_size", "member", "model", "batch_size", "status", "repeat",
                                     "precision")  # identity columns: never empty
COLUMN_CHOICES: dict[str, tuple[str, ...]] = {
    "status": ("ok", "oom", "error", "partner_failed"),
    "precision": ("fp32", "amp"),
}


def check_option(name: str, value: float | None, domain: str, *, allow_none: bool = True) -> None:
    """Raise HorusInputError for a command-line option outside ``LIMITS[domain]``."""
    if value is None and allow_none:
        return
    if not LIMITS[domain].contains(value):
        raise HorusInputError(name, f"expected {LIMITS[domain].describe()}, got {value!r}")


class NumberArg:
    """An argparse ``type=`` for a numeric option: ASCII digits only, parsed as an integer or a float, finite and
    inside ``domain`` (a ``LIMITS`` name or a :class:`Domain`), else argparse's one-line usage error (exit 2).

    The domain stays readable as ``.domain``: ``benchmarks/fuzz_inputs.py`` derives an option's valid and invalid
    values from it, so a new option declared this way is fuzzed against its documented range without anyone
    editing the fuzzer.
    """

    def __init__(self, domain: Domain | str) -> None:
        self.domain = LIMITS[domain] if isinstance(domain, str) else domain
        self.__name__ = "integer" if self.domain.integer else "number"  # argparse's "invalid <name> value"

    def __call__(self, text: str) -> int | float:
        import argparse

        raw = text.strip()
        value: int | float | None = None
        if raw.isascii() and raw and len(raw) <= 64 and "_" not in raw:  # Python's 1_000 is not a number to a user
            try:
                value = int(raw) if self.domain.integer else float(raw)
            except ValueError:
                value = None
        if value is None or not self.domain.contains(value):
            raise argparse.ArgumentTypeError(f"expected {self.domain.describe()}, got {text!r}")
        return value

    def __repr__(self) -> str:
        return f"NumberArg({self.domain.describe()})"


# --- files -------------------------------------------------------------------------------------------


def read_input_bytes(path: str | Path, what: str, max_bytes: int = MAX_TABLE_BYTES) -> bytes:
    """Bytes of ``path`` (a regular file of at most ``max_bytes``); ``what`` names the expected content.
    A directory, device, pipe or socket (``/dev/zero``, ``/dev/stdin``) is refused before reading."""
    import stat

    source = str(path)
    p = Path(path)
    try:
        info = p.stat()
    except FileNotFoundError:
        raise HorusInputError(source[:200], f"file not found (expected {what})") from None
    except (OSError, ValueError) as exc:  # ENAMETOOLONG, ELOOP, EACCES...; ValueError: a NUL byte
        raise HorusInputError(source[:200], f"cannot read file ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise HorusInputError(source, f"is a directory (expected {what})")
    if not stat.S_ISREG(info.st_mode):
        raise HorusInputError(source, f"is not a regular file (a device, pipe or socket; expected {what})")
    if info.st_size > max_bytes:
        raise HorusInputError(source, f"file is {info.st_size / MIB:,.1f} MiB, above the {max_bytes / MIB:,.0f} MiB "
                                      f"limit for {what}")
    try:
        with p.open("rb") as handle:  # the size stat() gave, plus one byte to see a file that grew past the limit
            data = handle.read(info.st_size + 1)
            if len(data) > info.st_size:
                data += handle.read(max_bytes + 1 - len(data))
    except OSError as exc:
        raise HorusInputError(source, f"cannot read file ({exc.strerror or exc})") from None
    if len(data) > max_bytes:  # a growing file
        raise HorusInputError(source, f"more than {max_bytes / MIB:,.0f} MiB (the limit for {what})")
    return data


def decode_text(raw: bytes, source: str) -> str:
    """UTF-8 text (a leading BOM is dropped); a clear error for other encodings and NUL bytes."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise HorusInputError(source, "line 1: UTF-16 text; expected UTF-8 (save the file as UTF-8)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise HorusInputError(source, f"line {line}: not UTF-8 text (byte {raw[exc.start]:#04x}); "
                                      "expected UTF-8 with or without BOM") from None
    nul = text.find("\x00")
    if nul >= 0:
        raise HorusInputError(source, f"line {text.count(chr(10), 0, nul) + 1}: NUL byte; expected text")
    return text


def read_text(path: str | Path, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> tuple[str, bytes]:
    """(decoded text, raw bytes) of ``path``; see :func:`read_input_bytes` and :func:`decode_text`."""
    raw = read_input_bytes(path, what, max_bytes)
    return decode_text(raw, str(path)), raw


# --- structured documents ----------------------------------------------------------------------------


def _no_duplicates(source: str) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise HorusInputError(source, f"duplicate key {key!r} (each key may appear once)")
            out[key] = value
        return out

    return hook


def _reject_constant(source: str) -> Any:
    def hook(name: str) -> float:
        raise HorusInputError(source, f"{name} is not a JSON number; expected a finite number")

    return hook


def _finite_float(source: str) -> Any:
    def hook(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise HorusInputError(source, f"number {literal[:40]}{'...' if len(literal) > 40 else ''} is too large "
                                          f"for a float; expected a finite number")
        return value

    return hook


def check_depth(data: object, source: str, max_depth: int = MAX_DEPTH) -> None:
    """Fail when containers nest deeper than ``max_depth`` (iterative: no recursion limit involved)."""
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[object]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise HorusInputError(source, f"nested {depth} levels deep; expected at most {max_depth}")
        stack.extend((child, depth + 1) for child in children)


def load_json(path: str | Path, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> tuple[Any, bytes]:
    """(parsed document, raw bytes) of a strict JSON file: UTF-8, no duplicate keys, no NaN/Infinity,
    at most ``MAX_DEPTH`` levels."""
    text, raw = read_text(path, what, max_bytes)
    source = str(path)
    if not text.strip():
        raise HorusInputError(source, f"empty file (expected {what})")
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates(source), parse_constant=_reject_constant(source),
                          parse_float=_finite_float(source))
    except json.JSONDecodeError as exc:
        raise HorusInputError(source, f"line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise HorusInputError(source, f"nested too deeply; expected at most {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer literal with more than 4300 digits
        raise HorusInputError(source, f"not valid JSON ({str(exc).split(';')[0]})") from None
    check_depth(data, source)
    return data, raw


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader without aliases, duplicate keys or deep nesting."""

    source = "<yaml>"

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise HorusInputError(self.source, f"line {mark.line + 1}, column {mark.column + 1}: YAML aliases "
                                               "(*name) are not supported; write the value out")
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise HorusInputError(self.source, f"line {mark.line + 1}: nested more than {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        keys: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in keys
            except TypeError:
                duplicate = False
            if duplicate:
                mark = key_node.start_mark
                raise HorusInputError(self.source, f"line {mark.line + 1}, column {mark.column + 1}: duplicate key "
                                                   f"{key!r} (each key may appear once)")
            if not isinstance(key, (list, dict)):
                keys.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml_text(text: str, source: str) -> Any:
    """One YAML document with the strict loader; syntax errors name line and column."""
    loader = type("Loader", (_StrictLoader,), {"source": source})
    try:
        documents = list(yaml.load_all(text, Loader=loader))  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise HorusInputError(source, f"{where}not valid YAML ({problem})") from None
    except RecursionError:
        raise HorusInputError(source, f"nested too deeply; expected at most {MAX_DEPTH} levels") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer with more than 4,300 digits
        raise HorusInputError(source, f"not valid YAML ({str(exc).split(';')[0][:120]})") from None
    if len(documents) > 1:
        raise HorusInputError(source, f"{len(documents)} YAML documents; expected one")
    data = documents[0] if documents else None
    check_depth(data, source)
    return data


def load_yaml(path: str | Path, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> tuple[Any, bytes]:
    text, raw = read_text(path, what, max_bytes)
    return load_yaml_text(text, str(path)), raw


# --- outputs -----------------------------------------------------------------------------------------


def _exists(path: Path, option: str) -> bool:
    """``path.exists()``, with a clear error where the path itself is unusable (too long, a loop, a NUL byte)."""
    try:
        return path.exists()
    except (OSError, ValueError) as exc:
        raise HorusInputError(option, f"{str(path)[:200]}: unusable path "
                                      f"({getattr(exc, 'strerror', None) or exc})") from None


def check_output_path(path: Path, option: str, *, directory: bool = True) -> None:
    """Fail before any work when ``path`` cannot be written: it lies under a file (or is one where a directory
    should go), a directory stands where a file should go, the path is unusable (too long), or its nearest
    existing directory does not let a file be created there (probed with a temporary file: ``os.access`` says
    writable to root where it is not, e.g. ``/proc/x`` or a read-only mount)."""
    import os
    import tempfile

    if _exists(path, option):
        if directory and not path.is_dir():
            raise HorusInputError(option, f"{path} exists and is not a directory; expected a directory to write into")
        if not directory and path.is_dir():
            raise HorusInputError(option, f"{path} is a directory; expected a file path")
    if len(os.fsencode(path.name)) > 255 or len(os.fsencode(str(path.absolute()))) > 4095:
        raise HorusInputError(option, f"{str(path)[:200]}...: path too long")
    parent = path if path.is_dir() else path.parent  # an existing file (directory=False) is replaced in its parent
    while not _exists(parent, option) and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise HorusInputError(option, f"{path}: {parent} is a file, so nothing can be created under it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise HorusInputError(option, f"{path}: {parent} is not writable")
    try:
        handle, probe = tempfile.mkstemp(prefix=".horus-probe-", dir=parent)
    except OSError as exc:
        raise HorusInputError(option, f"{path}: cannot write in {parent} ({exc.strerror or exc})") from None
    os.close(handle)
    os.unlink(probe)


class OutputDir:
    """``with OutputDir(path, "--out") as out:``: checked up front, created on entry, and removed again if
    the block fails (and it did not exist before), so a failed run leaves nothing behind."""

    def __init__(self, path: Path, option: str) -> None:
        check_output_path(path, option)
        self.path = path
        self.existed = path.exists()
        self.created: list[Path] = []  # the directories this creates, innermost first

    def __enter__(self) -> Path:
        missing = []
        for directory in (self.path, *self.path.parents):
            if directory.exists():
                break
            missing.append(directory)
        self.path.mkdir(parents=True, exist_ok=True)
        self.created = missing
        return self.path

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None and not self.existed:
            import shutil

            shutil.rmtree(self.path, ignore_errors=True)
            for parent in self.created[1:]:  # e.g. the default results/ made for this run: removed if left empty
                try:
                    parent.rmdir()
                except OSError:
                    break


def path_arg(text: str) -> Path:
    """argparse ``type=`` of a path option: not empty (``Path('')`` is the current directory), no NUL byte."""
    import argparse

    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    if "\x00" in text:
        raise argparse.ArgumentTypeError("a path cannot hold a NUL byte")
    return Path(text)


def check_input_path(path: Path, option: str, what: str, *, directory: bool = False) -> None:
    """HorusInputError unless ``path`` exists and is a file (``directory``: a directory), before any work."""
    if not _exists(path, option):
        raise HorusInputError(option, f"{path}: {'no such directory' if directory else 'file not found'} "
                                      f"(expected {what})")
    if directory and not path.is_dir():
        raise HorusInputError(option, f"{path}: not a directory (expected {what})")
    if not directory and path.is_dir():
        raise HorusInputError(option, f"{path}: is a directory (expected {what})")


def read_secret(path: str | Path, source: str, *, min_chars: int = 16, hint: str = "") -> str:
    """A token or credential kept in a file: printable ASCII without spaces, at least ``min_chars`` long
    (surrounding whitespace stripped). Errors name ``source`` (an option or the file) in one line."""
    try:
        raw = read_input_bytes(path, "a token file", max_bytes=64 * KIB)
    except HorusInputError as exc:  # named by the option that gave the file
        raise HorusInputError(source, f"{path}: {exc.message}") from None
    try:
        token = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise HorusInputError(source, f"{path}: a token is printable ASCII without spaces") from None
    if len(token) < min_chars:
        raise HorusInputError(source, f"{path} holds {len(token)} characters; a token needs at least {min_chars}"
                                      f"{hint}")
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        raise HorusInputError(source, f"{path}: a token is printable ASCII without spaces")
    return token
