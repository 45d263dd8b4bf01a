"""Launch profiling workers (one process per job): solo configurations one after another, and
co-located sets as concurrent workers on one GPU whose measuring windows start together.

Results go to a campaign directory (see :mod:`horus.profiling.store`): ``profiles.jsonl`` and
``colocation.jsonl`` while running (a rerun skips what is done), then tables and ``manifest.json``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import horus
from horus.profiling.colocation_schema import COLOC_COLUMNS
from horus.profiling.barrier import FileBarrier
from horus.profiling.campaign import Campaign, ColocEntry, JobConfig
from horus.profiling.loop import LoopSettings, empty_row
from horus.profiling.nvml import NvmlSampler, Reader, summarize
from horus.profiling.schema import PROFILE_COLUMNS
from horus.profiling.store import append_rows, read_jsonl, write_tables

SOLO_FILE = "profiles.jsonl"
COLOC_FILE = "colocation.jsonl"
STARTUP_ALLOWANCE_S = 180.0  # interpreter + torch import + CUDA context + model build, generously


def worker_env() -> dict[str, str]:
    """Environment for worker processes: finds this horus even when it is not installed."""
    env = dict(os.environ)
    src = str(Path(horus.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


def worker_command(job: JobConfig, settings: LoopSettings, repeat: int, barrier: Path | None = None,
                   member: int = 0, out: Path | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "horus.profiling.worker", "--job", json.dumps(job.to_dict()),
           "--settings", json.dumps(settings.to_dict()), "--repeat", str(repeat)]
    if barrier is not None:
        cmd += ["--barrier", str(barrier), "--member", str(member)]
    if out is not None:
        cmd += ["--out", str(out)]
    return cmd


def _failed_row(job: JobConfig, repeat: int, message: str) -> dict[str, Any]:
    row = empty_row(job, repeat, gpu_name="")
    row.update(status="error", error=message.replace("\n", " ")[:300])
    return row


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _restore_nans(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (math.nan if v is None and PROFILE_COLUMNS.get(k, ("",))[0] == "float" else v) for k, v in row.items()}


def run_solo(job: JobConfig, settings: LoopSettings, repeat: int = 0) -> dict[str, Any]:
    """Profile one configuration alone in a fresh worker process; return its schema row."""
    timeout = settings.warmup_s + settings.window_s + STARTUP_ALLOWANCE_S
    try:
        done = subprocess.run(worker_command(job, settings, repeat), capture_output=True, text=True,
                              timeout=timeout, env=worker_env())
    except subprocess.TimeoutExpired:
        return _failed_row(job, repeat, f"worker timed out after {timeout:.0f} s")
    if done.returncode != 0 or not done.stdout.strip():
        return _failed_row(job, repeat, f"worker exited {done.returncode}: {_last_line(done.stderr)}")
    return _restore_nans(json.loads(done.stdout.strip().splitlines()[-1])["row"])


@dataclass
class SoloReference:
    """Solo throughput / utilization / memory per (model, batch, precision): mean over ok rows."""

    values: dict[tuple[str, int, str], dict[str, float]] = field(default_factory=dict)

    @classmethod
    def from_rows(cls, rows: Sequence[dict[str, Any]]) -> SoloReference:
        groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
        for row in rows:
            if row.get("status") == "ok":
                key = (str(row["model"]), int(row["batch_size"]), str(row["precision"]))
                groups.setdefault(key, []).append(row)
        ref = cls()
        for key, members in groups.items():
            ref.values[key] = {col: _nanmean([m.get(src) for m in members]) for col, src in (
                ("throughput", "throughput_samples_s"), ("util", "gpu_util_mean"), ("mem", "torch_max_reserved_mib"))}
        return ref

    def get(self, job: JobConfig, what: str) -> float:
        return self.values.get((job.model, job.batch, job.precision), {}).get(what, math.nan)


def _nanmean(values: Sequence[Any]) -> float:
    finite = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(finite) / len(finite) if finite else math.nan


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _drive_barrier(barrier: FileBarrier, procs: list[subprocess.Popen], timeout_s: float) -> float | None:
    """Release the set once every worker is ready; None (and abort) when one fails or time runs out."""
    n, deadline = len(procs), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if barrier.count("ready", n) == n:
            return barrier.release()
        exited = [p for p in procs if p.poll() is not None]
        if exited:  # a worker died (OOM, import error...) before its window
            barrier.abort()
            return None
        time.sleep(0.05)
    barrier.abort()
    return None


def run_colocated(members: Sequence[JobConfig], settings: LoopSettings, repeat: int, work_dir: Path,
                  solo: SoloReference, reader: Reader | None = None) -> list[dict[str, Any]]:
    """Run ``members`` as concurrent workers with a common window; return one COLOC row per member."""
    entry = ColocEntry(tuple(members))
    barrier_dir = work_dir / f"{entry.set_id}-r{repeat}"
    shutil.rmtree(barrier_dir, ignore_errors=True)
    barrier = FileBarrier(barrier_dir)
    outs = [barrier_dir / f"result-{i}.json" for i in range(len(members))]
    procs = [subprocess.Popen(worker_command(job, settings, repeat, barrier_dir, i, outs[i]), env=worker_env(),
                              stdout=subprocess.DEVNULL, stderr=(barrier_dir / f"stderr-{i}.txt").open("w"))
             for i, job in enumerate(members)]
    sampler = NvmlSampler(reader, settings.nvml_period_s).start() if reader else None
    try:
        start_at = _drive_barrier(barrier, procs, settings.warmup_s + STARTUP_ALLOWANCE_S)
        if start_at is not None:
            deadline = time.monotonic() + settings.window_s + STARTUP_ALLOWANCE_S
            while barrier.count("done", len(members)) < len(members) and time.monotonic() < deadline:
                time.sleep(0.05)
        barrier.stop()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        if sampler is not None:
            sampler.stop()
    results = [_read_result(path) for path in outs]
    rows = [_coloc_row(entry, i, job, results[i], barrier_dir, repeat, solo) for i, job in enumerate(members)]
    _mark_set(rows, results, sampler, start_at)
    shutil.rmtree(barrier_dir, ignore_errors=True)
    return rows


def _coloc_row(entry: ColocEntry, i: int, job: JobConfig, result: dict[str, Any] | None, barrier_dir: Path,
               repeat: int, solo: SoloReference) -> dict[str, Any]:
    if result is None:
        stderr = (barrier_dir / f"stderr-{i}.txt").read_text() if (barrier_dir / f"stderr-{i}.txt").exists() else ""
        worker = {"status": "error", "error": f"worker gave no result: {_last_line(stderr)}"[:300]}
    else:
        worker = result["row"]
    tput = worker.get("throughput_samples_s")
    tput = math.nan if tput is None else float(tput)
    solo_tput = solo.get(job, "throughput")
    nan = math.nan
    return {
        "set_id": entry.set_id, "set_size": len(entry.members), "member": i, "model": job.model,
        "batch_size": job.batch, "precision": job.precision, "throughput_samples_s": tput,
        "solo_throughput_samples_s": solo_tput, "normalized_throughput": tput / solo_tput if solo_tput > 0 else nan,
        "status": worker.get("status", "error"), "error": worker.get("error") or "",
        "combined_util_mean": nan, "combined_mem_used_mib_peak": nan, "repeat": repeat,
        "gpu_name": worker.get("gpu_name") or "", "solo_util_mean": solo.get(job, "util"),
        "solo_mem_mib": solo.get(job, "mem"),
        "torch_max_reserved_mib": _float(worker.get("torch_max_reserved_mib")),
        "iter_time_s_mean": _float(worker.get("iter_time_s_mean")), "n_iters": int(worker.get("n_iters") or 0),
        "window_s": _float(worker.get("window_s")),
        "_window": (None if result is None else result.get("window_start"),
                    None if result is None else result.get("window_end")),
    }


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def _mark_set(rows: list[dict[str, Any]], results: list[dict[str, Any] | None], sampler: NvmlSampler | None,
              start_at: float | None) -> None:
    """Set-level fields: partner failures and the device-wide NVML statistics of the common window."""
    set_ok = all(row["status"] == "ok" for row in rows)
    for row in rows:
        if row["status"] == "ok" and not set_ok:
            row["status"], row["error"] = "partner_failed", "a partner job failed: " + "; ".join(
                f"{r['model']}:{r['status']}" for r in rows if r["status"] != "ok")
        if row["status"] == "error" and row["error"].startswith("aborted"):
            row["status"] = "partner_failed"
    ends = [r["_window"][1] for r in rows if r["_window"][1] is not None]
    if sampler is not None and set_ok and start_at is not None and ends:
        stats = summarize(sampler.samples, start_at, max(ends))
        for row in rows:
            row["combined_util_mean"], row["combined_mem_used_mib_peak"] = stats.util_mean, stats.mem_peak_mib
    for row in rows:
        del row["_window"]


@dataclass
class CampaignRunner:
    """Runs a :class:`Campaign` into ``out_dir``, skipping rows already there (resume)."""

    out_dir: Path
    settings: LoopSettings
    reader: Reader | None = None  # NVML reader of the launcher (co-located sets); None without NVML
    solo_reference_rows: list[dict[str, Any]] = field(default_factory=list)  # from --solo FILE
    time_budget_s: float = math.inf
    log: Callable[[str], None] = print

    def __post_init__(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()

    def _estimated_s(self) -> float:
        return self.settings.warmup_s + self.settings.window_s + 15.0

    def _out_of_time(self) -> bool:
        return time.monotonic() - self.started + self._estimated_s() > self.time_budget_s

    def run(self, campaign: Campaign) -> int:
        """Run what is not done yet; return the number of configurations left (0 when complete)."""
        solo_path, coloc_path = self.out_dir / SOLO_FILE, self.out_dir / COLOC_FILE
        done_solo = {row["config_id"] for row in read_jsonl(solo_path)}
        todo_solo = [(e.job, r) for e in campaign.solo for r in range(e.repeats) if e.job.config_id(r) not in done_solo]
        done_sets = {(row["set_id"], row["repeat"]) for row in read_jsonl(coloc_path)}
        todo_sets = [(e, r) for e in campaign.colocate for r in range(e.repeats) if (e.set_id, r) not in done_sets]
        for k, (job, repeat) in enumerate(todo_solo):
            if self._out_of_time():
                return len(todo_solo) - k + len(todo_sets)
            row = run_solo(job, self.settings, repeat)
            append_rows(solo_path, [row])
            self.log(f"solo {row['config_id']}: {row['status']} {row['throughput_samples_s']:.4g} samples/s "
                     f"{row['error']}".rstrip())
        reference = SoloReference.from_rows(self.solo_reference_rows + read_jsonl(solo_path))
        for k, (entry, repeat) in enumerate(todo_sets):
            if self._out_of_time():
                return len(todo_sets) - k
            rows = run_colocated(entry.members, self.settings, repeat, self.out_dir / "_barriers", reference,
                                 self.reader)
            append_rows(coloc_path, rows)
            summary = ", ".join(f"{r['model']}:{r['status']} {r['normalized_throughput']:.3g}" for r in rows)
            self.log(f"set {entry.set_id} r{repeat}: {summary}")
        return 0

    def write_tables(self) -> list[Path]:
        written: list[Path] = []
        for name, columns in ((SOLO_FILE, PROFILE_COLUMNS), (COLOC_FILE, COLOC_COLUMNS)):
            rows = read_jsonl(self.out_dir / name)
            if rows:
                written += write_tables(rows, list(columns), self.out_dir / Path(name).stem)
        return written
