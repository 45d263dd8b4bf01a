"""Job attempts as processes on this machine: launch, observe, stop, and adopt after a restart.

Each attempt lives in ``<workdir>/jobs/<job>/<attempt>/`` (see ``wrapper.py`` for the files). The
manager keeps no state that the folders do not hold, so an agent restarted after ``kill -9`` finds
its running attempts again (``scan``) and reports how the others ended.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from horus.agent import wrapper

log = logging.getLogger("horus.agent")

OOM_MARKERS = (b"CUDA out of memory", b"OutOfMemoryError", b"CUBLAS_STATUS_ALLOC_FAILED",
               b"cudaErrorMemoryAllocation")
LOG_TAIL_BYTES = 64 * 1024  # searched for out-of-memory markers
REPORT_TAIL_BYTES = 4 * 1024  # sent with an exit report (``horus job`` shows it)


@dataclass
class Attempt:
    job_id: str
    attempt: int
    folder: Path
    proc: subprocess.Popen[bytes] | None = None  # set when this agent process launched it
    stop_deadline: float | None = None  # SIGKILL after this (set when asked to stop)
    first_progress: tuple[float, float] | None = None  # (iteration, time) of the first progress line
    gpu_uuids: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        return self.job_id, self.attempt

    def pid(self) -> int | None:
        """The wrapper's pid if it is alive (pid file present, same start time, not a zombie)."""
        if self.proc is not None and self.proc.poll() is not None:
            return None
        try:
            pid_text, ticks = (self.folder / "pid").read_text().split()
            pid = int(pid_text)
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except (OSError, ValueError):
            return None
        after = stat.rsplit(")", 1)[1].split()
        if after[0] == "Z" or after[19] != ticks:
            return None
        return pid

    def alive(self) -> bool:
        """The wrapper runs (or is still starting)."""
        return self.pid() is not None or (self.proc is not None and self.proc.poll() is None)

    def exit_status(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.folder / "exit.json").read_text())
        except (OSError, ValueError):
            return None

    def progress(self) -> tuple[float | None, float | None]:
        """(iterations done, iterations per second) from the job's progress file, if it reported any."""
        path = self.folder / "progress.jsonl"
        try:
            with open(path, "rb") as fh:
                if self.first_progress is None:
                    first = _parse(fh.readline())
                    if first is None:
                        return None, None
                    self.first_progress = first
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - 4096))
                lines = fh.read().splitlines()
        except OSError:
            return None, None
        last = next((p for p in map(_parse, reversed(lines)) if p is not None), None)
        if last is None:
            return None, None
        it0, t0 = self.first_progress
        rate = (last[0] - it0) / (last[1] - t0) if last[1] > t0 else None
        return last[0], rate

    def _log_bytes(self, limit: int) -> tuple[bytes, bool]:
        """The last ``limit`` bytes of the attempt's log, and whether earlier bytes were cut off."""
        with open(self.folder / "log", "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read(limit), size > limit

    def ran_out_of_memory(self) -> bool:
        try:
            tail, _ = self._log_bytes(LOG_TAIL_BYTES)
        except OSError:
            return False
        return any(marker in tail for marker in OOM_MARKERS)

    def log_tail(self, limit: int = REPORT_TAIL_BYTES) -> str | None:
        """The end of the attempt's log (at most ``limit`` bytes, whole lines where it was cut, undecodable bytes
        replaced), or None without a log."""
        try:
            tail, cut = self._log_bytes(limit)
        except OSError:
            return None
        if cut and b"\n" in tail[:-1]:
            tail = tail[tail.index(b"\n") + 1:]
        return tail.decode("utf-8", errors="replace")


def _parse(line: bytes) -> tuple[float, float] | None:
    try:
        data = json.loads(line)
        return float(data["iteration"]), float(data["time"])
    except (ValueError, KeyError, TypeError):
        return None


class ProcessManager:
    """The attempts of one agent, in ``workdir`` (mode 0700; 0711 with ``run_as``, so the job's user can reach
    its own progress file and checkpoint folder and nothing else of the agent's).

    ``run_as`` (uid, gid): job commands run as that user (the wrapper keeps the agent's identity)."""

    def __init__(self, workdir: Path, run_as: tuple[int, int] | None = None) -> None:
        self.workdir = Path(workdir)
        self.jobs_dir = self.workdir / "jobs"
        self.run_as = run_as
        self._dir_mode = 0o711 if run_as else 0o700
        for folder in (self.workdir, self.jobs_dir):
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(self._dir_mode)
        self.attempts: dict[tuple[str, int], Attempt] = {}

    def folder(self, job_id: str, attempt: int) -> Path:
        return self.jobs_dir / job_id / str(attempt)

    def checkpoint_dir(self, job_id: str) -> Path:
        """The job's checkpoint folder (created; owned by the job's user with ``run_as``)."""
        path = self.jobs_dir / job_id / "checkpoint"
        self._mkdir(path.parent)
        if not path.is_dir():
            path.mkdir(mode=0o700)
            if self.run_as:
                os.chown(path, *self.run_as)
        return path

    def _mkdir(self, path: Path) -> None:
        if not path.is_dir():
            path.mkdir(mode=self._dir_mode, parents=True, exist_ok=True)
            path.chmod(self._dir_mode)

    @staticmethod
    def renew(item: Attempt, deadline: float, kill_s: float) -> None:
        """Extend the attempt's lease to ``deadline`` (``time.monotonic()`` clock); its wrapper fences it after
        that (``wrapper.py``). Written atomically; not synced (a machine that crashes takes its jobs with it)."""
        tmp = item.folder / "lease.tmp"
        tmp.write_text(f"{deadline:.3f} {kill_s:.3f}\n")
        os.replace(tmp, item.folder / "lease")

    def scan(self) -> None:
        """Adopt every attempt folder not yet forgotten (after an agent restart)."""
        for folder in sorted(self.jobs_dir.glob("*/*")):
            if not folder.name.isdigit() or (folder / "forgotten").exists():
                continue
            key = (folder.parent.name, int(folder.name))
            self.attempts.setdefault(key, Attempt(key[0], key[1], folder))

    def attempt(self, job_id: str, attempt: int) -> Attempt:
        """The attempt's record (its folder created), known or new."""
        key = (job_id, attempt)
        item = self.attempts.get(key)
        if item is None:
            folder = self.folder(job_id, attempt)
            self._mkdir(folder.parent)
            self._mkdir(folder)
            item = self.attempts[key] = Attempt(job_id, attempt, folder)
        return item

    def launch(self, job_id: str, attempt: int, command: list[str], env: dict[str, str]) -> Attempt:
        """Start one attempt, or find it again. Never runs an attempt twice (the wrapper's lock)."""
        item = self.attempt(job_id, attempt)
        started = (item.proc is not None and item.proc.poll() is None) or (item.folder / "pid").exists()
        if not started and item.exit_status() is None:
            progress = item.folder / "progress.jsonl"
            full_env = {**os.environ, **env, "HORUS_PROGRESS_FILE": str(progress)}
            if self.run_as:
                progress.touch(mode=0o600)
                os.chown(progress, *self.run_as)
                full_env["HORUS_RUN_AS"] = f"{self.run_as[0]}:{self.run_as[1]}"
            item.proc = subprocess.Popen([sys.executable, "-S", wrapper.__file__, str(item.folder), "--", *command],
                                         env=full_env, start_new_session=True, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
        return item

    def report(self, item: Attempt) -> dict[str, Any] | None:
        """The attempt's report for the server (None while it is starting or being stopped)."""
        if item.stop_deadline is not None:
            return None
        iterations, rate = item.progress()
        status = item.exit_status()
        if status is not None:
            return self._exited(item, status, iterations, rate)
        if item.pid() is not None:
            return {"job_id": item.job_id, "attempt": item.attempt, "status": "running", "iterations": iterations,
                    "rate": rate}
        if item.proc is not None and item.proc.poll() is None:
            return None  # the wrapper is starting
        if item.proc is not None and item.proc.returncode == wrapper.DUPLICATE:
            item.proc = None  # another wrapper owns this attempt; look again next time
            return None
        if (item.folder / "pid").exists() or item.proc is not None:
            status = item.exit_status()  # the wrapper may have written it and exited since the first look
            if status is not None:
                return self._exited(item, status, iterations, rate)
            # vanished without recording an exit (SIGKILL, OOM killer)
            return {"job_id": item.job_id, "attempt": item.attempt, "status": "exited", "exit_code": None,
                    "iterations": iterations, "rate": rate, "log_tail": item.log_tail()}
        return None

    @staticmethod
    def _exited(item: Attempt, status: dict[str, Any], iterations: float | None,
                rate: float | None) -> dict[str, Any]:
        code = int(status["exit_code"])
        report = {"job_id": item.job_id, "attempt": item.attempt, "status": "exited", "exit_code": code,
                  "oom": code != 0 and item.ran_out_of_memory(), "iterations": iterations, "rate": rate,
                  "log_tail": item.log_tail()}
        if status.get("fenced"):
            report["fenced"] = True
        return report

    def reports(self) -> list[dict[str, Any]]:
        return [r for r in map(self.report, list(self.attempts.values())) if r is not None]

    def stop(self, item: Attempt, grace_s: float, now: float) -> None:
        """SIGTERM to the attempt's group now, SIGKILL after ``grace_s`` (see ``reap``)."""
        if item.stop_deadline is None:
            item.stop_deadline = now + grace_s
            self._signal(item, signal.SIGTERM)

    def reap(self, now: float) -> None:
        """Escalate overdue stops; forget attempts that are stopped or whose end was acknowledged."""
        for item in list(self.attempts.values()):
            if item.stop_deadline is None:
                continue
            if not item.alive():
                self.forget(item)
            elif now >= item.stop_deadline:
                self._signal(item, signal.SIGKILL)

    def forget(self, item: Attempt) -> None:
        self.attempts.pop(item.key, None)
        if item.proc is not None:
            item.proc.poll()
        try:
            (item.folder / "forgotten").touch()
        except OSError:
            pass

    def running_pids(self) -> dict[int, tuple[str, int]]:
        """Wrapper pid (= process group id) of each live attempt."""
        out = {}
        for item in self.attempts.values():
            pid = item.pid()
            if pid is not None:
                out[pid] = item.key
        return out

    @staticmethod
    def _signal(item: Attempt, sig: int) -> None:
        pid = item.pid()
        if pid is None and item.proc is not None and item.proc.poll() is None:
            pid = item.proc.pid  # still starting: the wrapper leads its session already
        if pid is None:
            return
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError as exc:
            log.warning("cannot signal job %s attempt %s: %s", item.job_id, item.attempt, exc)

