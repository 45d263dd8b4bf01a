"""Command-line option domains and path checks shared by ``simulate``, ``sweep``, ``sweep-report``, ``truth fit``,
``trace generate`` and ``interference`` (docs/inputs.md). Light on imports: every ``register`` reads it."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from horus.errors import HorusInputError
from horus.validation import LIMITS, MAX_ROWS, Domain, NumberArg, check_output_path

YEAR_S = 365.25 * 86400

# Domains of numeric options (NumberArg reads them; the CLI fuzzer derives valid and invalid values from them).
SEED = LIMITS["seed"]
MAX_JOBS = Domain(1, MAX_ROWS, True, "jobs")  # a trace holds at most MAX_ROWS rows
INTERFERENCE_SCALE = Domain(0, 100)  # 0: co-location is free; 100: a hundred times the truth's slowdown
LOSING_PAIRS = Domain(0, 1, False, "of job-type pairs")
TELEMETRY_PERIOD_S = Domain(1, 86_400, False, "s")  # monitoring scrapes every 1 s to once a day
TELEMETRY_SIGMA = Domain(0, 1)  # log-normal sigma of the reported rate
TELEMETRY_WARMUP = Domain(0, 1e6, False, "iterations")
GENERATE_JOBS = Domain(1, 10_000_000, True, "jobs")
OFFERED_LOAD = Domain(1e-3, 100, False, "x the cluster's GPUs")
JOB_DURATION_S = Domain(1, 10 * YEAR_S, False, "s")  # generated run times are whole seconds
DURATION_SIGMA = Domain(0, 10)
TRAIN_FOLDS = Domain(0, 100, True)  # interference train: 0 or 1 skip the held-out check
EVALUATE_FOLDS = LIMITS["folds"]


def number(domain: Domain) -> NumberArg:
    """``type=`` of a numeric option with ``domain``."""
    return NumberArg(domain)


def path_arg(text: str) -> Path:
    """``type=`` of a path option: not empty (``Path('')`` would be the current directory), no NUL byte."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    if "\x00" in text:
        raise argparse.ArgumentTypeError("a path cannot hold a NUL byte")
    return Path(text)


def check_writable(path: Path, option: str, *, directory: bool = True) -> None:
    """:func:`horus.validation.check_output_path`, then a real probe: a temporary file is created and removed in
    the nearest existing directory, so a path the process may not write (``/proc/x``, a read-only mount, which
    ``os.access`` reports as writable to root) fails here, before any work."""
    check_output_path(path, option, directory=directory)
    parent = path if path.is_dir() else path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    try:
        handle, probe = tempfile.mkstemp(prefix=".horus-probe-", dir=parent)
    except OSError as exc:
        raise HorusInputError(option, f"{path}: cannot write in {parent} ({exc.strerror or exc})") from None
    os.close(handle)
    os.unlink(probe)


def check_input_file(path: Path, option: str, what: str) -> None:
    """HorusInputError unless ``path`` is an existing regular file (checked before any work)."""
    if not path.exists():
        raise HorusInputError(option, f"{path}: file not found (expected {what})")
    if path.is_dir():
        raise HorusInputError(option, f"{path}: is a directory (expected {what})")


def check_input_dir(path: Path, option: str, what: str) -> None:
    """HorusInputError unless ``path`` is an existing directory (checked before any work)."""
    if not path.exists():
        raise HorusInputError(option, f"{path}: no such directory (expected {what})")
    if not path.is_dir():
        raise HorusInputError(option, f"{path}: not a directory (expected {what})")
