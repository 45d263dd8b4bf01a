"""The job of the fault campaign (``benchmarks/fault_campaign.py``): it records when it is alive, apart from Horus.

    python benchmarks/fault_job.py --records DIR [--seconds 5] [--period 0.2]

Each process appends to its own file ``DIR/<job>.<attempt>.<pid>.jsonl`` (``HORUS_JOB_ID``, ``HORUS_ATTEMPT``;
line-buffered, so what was written survives ``kill -9``) one JSON line per event::

    {"job": "7", "attempt": 2, "pid": 4242, "agent": "a1", "t": 1700000000.123, "event": "start"}

``start`` first, ``alive`` every ``--period`` seconds, and ``end`` (with ``reason``: ``done`` or ``sigterm``)
when it ends by itself (exit 0 after ``--seconds`` of wall time) or is stopped (SIGTERM: exit 143). After a
``kill -9`` its last line is at most one period older than its death. It reports one iteration per period to
``HORUS_PROGRESS_FILE`` as a Horus job does. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO


def record_path(records: Path) -> Path:
    """This process's record file."""
    job = os.environ.get("HORUS_JOB_ID", "nojob")
    attempt = os.environ.get("HORUS_ATTEMPT", "0")
    return records / f"{job}.{attempt}.{os.getpid()}.jsonl"


def write_event(out: IO[str], event: str, **extra: object) -> None:
    """Append one record line (line-buffered: it reaches the file at once)."""
    line = {"job": os.environ.get("HORUS_JOB_ID", "nojob"), "attempt": int(os.environ.get("HORUS_ATTEMPT", "0")),
            "pid": os.getpid(), "agent": os.environ.get("HORUS_AGENT", ""), "t": time.time(), "event": event, **extra}
    out.write(json.dumps(line) + "\n")


def report_progress(iteration: int) -> None:
    """One progress line for the agent (``HORUS_PROGRESS_FILE``), as ``horus.report`` writes it."""
    path = os.environ.get("HORUS_PROGRESS_FILE")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"iteration": float(iteration), "time": time.time()}) + "\n")


def run(records: Path, seconds: float, period: float) -> int:
    """Record ``start``, then ``alive`` every ``period`` until ``seconds`` have passed or SIGTERM arrives."""
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    records.mkdir(parents=True, exist_ok=True)
    began = time.time()
    with open(record_path(records), "a", buffering=1) as out:
        write_event(out, "start", seconds=seconds)
        iteration = 0
        while not stopping and time.time() - began < seconds:
            time.sleep(min(period, max(0.0, seconds - (time.time() - began))))
            iteration += 1
            write_event(out, "alive")
            report_progress(iteration)
        if stopping:
            write_event(out, "end", reason="sigterm")
            return 143
        write_event(out, "end", reason="done")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, required=True, help="folder of the record files")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to run (wall seconds, default 5)")
    parser.add_argument("--period", type=float, default=0.2, help="seconds between alive lines (default 0.2)")
    args = parser.parse_args(argv)
    if not (0 < args.seconds < 3600 and 0 < args.period <= args.seconds):
        parser.error("expected 0 < --period <= --seconds < 3600")
    return run(args.records, args.seconds, args.period)


if __name__ == "__main__":
    sys.exit(main())
