"""A file-based start/stop barrier shared by the workers of one co-located set (no torch).

Protocol (files in one directory): each worker writes ``ready-<i>`` after its warm-up and keeps
training; the launcher, once all are ready, writes ``go`` holding the common window start time
(``time.time()``) or ``abort``; each worker measures from that instant for the same window, writes
``done-<i>`` (also when it failed), and keeps training until the launcher writes ``stop``, so every
job sees its partners running during its whole window.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ABORT = "abort"


class FileBarrier:
    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def _write(self, name: str, text: str = "") -> None:
        tmp = self.dir / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.dir / name)

    def _read(self, name: str) -> str | None:
        try:
            return (self.dir / name).read_text()
        except FileNotFoundError:
            return None

    # worker side
    def signal_ready(self, member: int) -> None:
        self._write(f"ready-{member}")

    def signal_done(self, member: int) -> None:
        self._write(f"done-{member}")

    def go_time(self) -> float | str | None:
        """The common start time once ``go`` is written, ``'abort'``, or None while waiting."""
        text = self._read("go")
        if text is None or text == "":
            return None
        return ABORT if text == ABORT else float(text)

    def stopped(self) -> bool:
        return (self.dir / "stop").exists()

    # launcher side
    def count(self, prefix: str, members: int) -> int:
        return sum((self.dir / f"{prefix}-{i}").exists() for i in range(members))

    def release(self, delay_s: float = 0.5) -> float:
        """Write ``go`` with a start time ``delay_s`` from now; return that time."""
        start_at = time.time() + delay_s
        self._write("go", repr(start_at))
        return start_at

    def abort(self) -> None:
        self._write("go", ABORT)
        self.stop()

    def stop(self) -> None:
        self._write("stop")
