"""Run metrics: O(1) time integrals per GPU change, per-job records, timeline and the summary dict.

Definitions are in docs/metrics.md. All quantities are *true* (from the truth model), never the
scheduler's predictions.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from horus.cluster import Cluster
from horus.jobs import JobSpec

JOB_COLUMNS: tuple[str, ...] = (
    "job_id", "job_type", "num_gpus", "submit", "first_start", "end", "jct", "wait", "slowdown", "colocated",
    "oom_failures", "preemptions", "status", "iterations", "iterations_done", "wait_reason", "wait_reason_detail",
)
GPU_COLUMNS: tuple[str, ...] = ("gpu", "node", "type", "allocated_s", "kernel_busy_s", "util_integral", "mem_integral",
                                "mean_util", "mean_busy")
TIMELINE_COLUMNS: tuple[str, ...] = ("time", "gpu_util", "queue_len", "running_jobs")
# outcome: completed | preempted (by the policy: unpack, migrate, priority) | running (at the end of the run) |
# oom (a start that failed out of memory: start == end)
PLACEMENT_COLUMNS: tuple[str, ...] = ("job_id", "gpu", "start", "end", "outcome")


@dataclass(slots=True)
class JobRecord:
    """What happened to one job (mutable while the run goes on)."""

    spec: JobSpec
    first_start: float = math.nan
    end: float = math.nan
    slowdown_integral: float = 0.0  # integral of solo_rate / rate over progressing time
    progress_s: float = 0.0  # time spent progressing (running, not stalled)
    iterations_done: float = 0.0
    colocated: bool = False
    oom_failures: int = 0
    preemptions: int = 0
    status: str = "unfinished"  # completed | failed | rejected | unfinished
    wait_reason: str = ""  # why it first had to wait (horus.reasons code; "" if it started at once)
    wait_reason_detail: str = ""


BusyPart = tuple[float, float]  # (kernel-busy share of one resident, time from which it counts)


def busy_integral(parts: Sequence[BusyPart], t0: float, t1: float) -> float:
    """Integral over [t0, t1] of ``min(1, sum of the shares that count by then)``, exact (piecewise constant).

    A share counts from its own start time on: a job restoring a checkpoint is resident but runs no
    kernels until its stall ends (docs/metrics.md, "GPU busy").
    """
    if t1 <= t0 or not parts:
        return 0.0
    cuts = sorted({since for _, since in parts if t0 < since < t1})
    total, start = 0.0, t0
    for end in (*cuts, t1):
        share = math.fsum(a for a, since in parts if since <= start)
        total += min(1.0, share) * (end - start)
        start = end
    return total


class MetricsRecorder:
    """Accumulates per-GPU and cluster-wide integrals of true utilization, kernel-busy time and memory.

    Call ``advance(t)`` once before changing anything at time ``t``; then ``set_gpu`` for every GPU
    whose residents changed and ``set_busy`` for every GPU whose residents or their rates changed.
    Each call is O(residents of that GPU).
    """

    def __init__(self, cluster: Cluster, start_time: float) -> None:
        n = cluster.num_gpus
        self.cluster = cluster
        self.start_time = start_time
        self._util = [0.0] * n
        self._mem = [0.0] * n
        self._alloc = [False] * n
        self._since = [start_time] * n
        self._util_int = [0.0] * n
        self._mem_int = [0.0] * n
        self._alloc_int = [0.0] * n
        self._busy_parts: list[tuple[BusyPart, ...]] = [()] * n
        self._busy_since = [start_time] * n
        self._kbusy_int = [0.0] * n
        self._total_util = 0.0
        self._total_mem = 0.0
        self._now = start_time
        self.util_integral = 0.0  # integral over time of sum_g util_g
        self.mem_integral = 0.0  # integral over time of sum_g mem_g (MiB s)
        self._timeline: list[tuple[float, float, int, int]] = []

    def advance(self, now: float) -> None:
        dt = now - self._now
        if dt > 0:
            self.util_integral += self._total_util * dt
            self.mem_integral += self._total_mem * dt
            self._now = now

    def set_gpu(self, gpu: int, util: float, mem_mib: float, now: float) -> None:
        """GPU ``gpu`` has true utilization ``util`` and memory ``mem_mib`` from ``now`` on."""
        dt = now - self._since[gpu]
        if dt > 0:
            self._util_int[gpu] += self._util[gpu] * dt
            self._mem_int[gpu] += self._mem[gpu] * dt
            if self._alloc[gpu]:
                self._alloc_int[gpu] += dt
        self._since[gpu] = now
        self._total_util += util - self._util[gpu]
        self._total_mem += mem_mib - self._mem[gpu]
        self._util[gpu] = util
        self._mem[gpu] = mem_mib
        self._alloc[gpu] = mem_mib > 0 or util > 0

    def set_busy(self, gpu: int, parts: Sequence[BusyPart], now: float) -> None:
        """From ``now`` on, GPU ``gpu`` runs kernels of its residents: ``(share, since)`` per resident worker,
        the share of time its kernels run (counted from ``since``, the end of a checkpoint-restore stall).
        Co-runners combine as ``min(1, sum of shares)`` (time-sliced contexts: docs/metrics.md)."""
        self._kbusy_int[gpu] += busy_integral(self._busy_parts[gpu], self._busy_since[gpu], now)
        self._busy_since[gpu] = now
        self._busy_parts[gpu] = tuple(parts)

    def allocated_seconds(self) -> list[float]:
        """Per GPU, the time it held at least one job so far (open intervals included)."""
        return [b + (self._now - since if alloc else 0.0)
                for b, since, alloc in zip(self._alloc_int, self._since, self._alloc)]

    def kernel_busy_seconds(self) -> list[float]:
        """Per GPU, the time any of its residents' kernels ran so far (nvidia-smi's view; open intervals included)."""
        return [b + busy_integral(parts, since, self._now)
                for b, parts, since in zip(self._kbusy_int, self._busy_parts, self._busy_since)]

    @property
    def now(self) -> float:
        """Time up to which the cluster-wide integrals are accumulated."""
        return self._now

    def sample(self, now: float, queue_len: int, running_jobs: int) -> None:
        n = max(1, self.cluster.num_gpus)
        self._timeline.append((now, max(0.0, self._total_util) / n, queue_len, running_jobs))

    # ---- results ------------------------------------------------------------------------------
    def gpu_frame(self, end: float) -> pd.DataFrame:
        for gpu in range(self.cluster.num_gpus):
            self.set_gpu(gpu, self._util[gpu], self._mem[gpu], end)  # close the open intervals
            self.set_busy(gpu, self._busy_parts[gpu], end)
        span = max(end - self.start_time, 1e-12)
        gpus = self.cluster.gpus
        util_int = np.asarray(self._util_int)
        busy_int = np.asarray(self._kbusy_int)
        return pd.DataFrame({
            "gpu": np.arange(len(gpus)),
            "node": [g.node for g in gpus],
            "type": [g.gpu_type.name for g in gpus],
            "allocated_s": np.asarray(self._alloc_int),
            "kernel_busy_s": busy_int,
            "util_integral": util_int,
            "mem_integral": np.asarray(self._mem_int),
            "mean_util": util_int / span,
            "mean_busy": busy_int / span,
        }, columns=list(GPU_COLUMNS))

    def timeline_frame(self, max_points: int) -> pd.DataFrame:
        rows = self._timeline
        if len(rows) > max_points > 0:
            keep = np.unique(np.linspace(0, len(rows) - 1, max_points).round().astype(np.int64))
            rows = [rows[i] for i in keep]
        return pd.DataFrame(rows, columns=list(TIMELINE_COLUMNS))


def placement_frame(rows: Sequence[tuple[str, int, float, float, str]]) -> pd.DataFrame:
    """Placements (``PLACEMENT_COLUMNS``) sorted by start time, then GPU (stable: ties keep event order)."""
    frame = pd.DataFrame(list(rows), columns=list(PLACEMENT_COLUMNS))
    frame = frame.astype({"job_id": str, "gpu": "int64", "start": float, "end": float, "outcome": str})
    return frame.sort_values(["start", "gpu"], kind="stable").reset_index(drop=True)


def job_frame(records: list[JobRecord]) -> pd.DataFrame:
    rows = []
    for r in records:
        s = r.spec
        jct = r.end - s.submit_time if r.status == "completed" else math.nan
        rows.append((
            s.job_id, s.job_type, s.num_gpus, s.submit_time, r.first_start, r.end, jct,
            r.first_start - s.submit_time, r.slowdown_integral / r.progress_s if r.progress_s > 0 else math.nan,
            r.colocated, r.oom_failures, r.preemptions, r.status, s.iterations, r.iterations_done, r.wait_reason,
            r.wait_reason_detail,
        ))
    return pd.DataFrame(rows, columns=list(JOB_COLUMNS))


def _stat(values: pd.Series, fn: str) -> float:
    values = values.dropna()
    if values.empty:
        return math.nan
    if fn == "mean":
        return float(values.mean())
    if fn == "median":
        return float(values.median())
    return float(np.percentile(values.to_numpy(), 95))


def summarize(jobs: pd.DataFrame, recorder: MetricsRecorder, preemptions: int,
              solo_s: dict[str, float] | None = None, best: Mapping[str, tuple[float, float]] | None = None,
              oom_restart_s: float = 0.0) -> dict[str, float | int]:
    """The summary dict (docs/metrics.md) from per-job records, the recorder's integrals, each
    admitted job's solo duration (for goodput and the bounds) and its (best normalized rate, best combined
    throughput of a GPU it shares) (``horus.sim.bounds``; without it, the values of exclusive runs, 1 and 1),
    and the delay before a job that failed out of memory is queued again (``SimConfig.oom_restart_s``)."""
    first_submit = recorder.start_time
    completed = jobs[jobs["status"] == "completed"]
    end = float(completed["end"].max()) if not completed.empty else recorder.now
    span = end - first_submit
    n_gpus = max(1, recorder.cluster.num_gpus)
    capacity = float(sum(g.gpu_type.memory_mib for g in recorder.cluster.gpus)) or 1.0
    # Integrals run to the last event; past the last completion nothing runs, so they add zero.
    util_mean = recorder.util_integral / (n_gpus * span) if span > 0 else math.nan
    allocated = math.fsum(recorder.allocated_seconds())
    busy = math.fsum(recorder.kernel_busy_seconds())
    mem_mean = recorder.mem_integral / (capacity * span) if span > 0 else math.nan
    return {
        "num_jobs": int(len(jobs)),
        "jobs_completed": int(len(completed)),
        "jobs_failed": int((jobs["status"] == "failed").sum()),
        "jobs_rejected": int((jobs["status"] == "rejected").sum()),
        "jobs_unfinished": int((jobs["status"] == "unfinished").sum()),
        "makespan_s": float(span),
        "mean_jct_s": _stat(completed["jct"], "mean"),
        "median_jct_s": _stat(completed["jct"], "median"),
        "p95_jct_s": _stat(completed["jct"], "p95"),
        "mean_wait_s": _stat(jobs["wait"], "mean"),
        "p95_wait_s": _stat(jobs["wait"], "p95"),
        "gpu_util_mean": float(util_mean),
        "gpu_busy_mean": float(busy / (n_gpus * span)) if span > 0 else math.nan,
        "gpu_busy_allocated_mean": float(busy / allocated) if allocated > 0 else math.nan,
        "gpu_mem_occupancy_mean": float(mem_mean),
        "gpu_allocated_share": float(allocated / (n_gpus * span)) if span > 0 else math.nan,
        "gpu_h_per_job": float(allocated / 3600.0 / len(completed)) if len(completed) else math.nan,
        "colocated_share": float(jobs["colocated"].mean()) if len(jobs) else math.nan,
        "mean_slowdown": _stat(completed["slowdown"], "mean"),
        "p95_slowdown": _stat(completed["slowdown"], "p95"),
        "oom_failures": int(jobs["oom_failures"].sum()),
        **_oom_costs(jobs, oom_restart_s),
        "preemptions": int(preemptions),
        **_bounds_and_goodput(jobs, completed, solo_s or {}, best or {}, first_submit, span, n_gpus),
    }


def _oom_costs(jobs: pd.DataFrame, oom_restart_s: float) -> dict[str, float | int]:
    """``oom_restarts``: out-of-memory failures after which the job was queued again (all but a failed job's last);
    ``oom_lost_job_h``: job-hours spent sitting out those restart delays (docs/metrics.md, "Out of memory")."""
    last = int(((jobs["status"] == "failed") & (jobs["oom_failures"] > 0)).sum())
    restarts = int(jobs["oom_failures"].sum()) - last
    return {"oom_restarts": restarts, "oom_lost_job_h": restarts * oom_restart_s / 3600.0}


def _bounds_and_goodput(jobs: pd.DataFrame, completed: pd.DataFrame, solo_s: dict[str, float],
                        best: Mapping[str, tuple[float, float]], t0: float, span: float,
                        n_gpus: int) -> dict[str, float]:
    """Lower bounds (docs/metrics.md, "Lower bounds") and goodput.

    ``*_exclusive_bound_s`` hold for schedules that never co-locate (each GPU runs at most one job's solo
    throughput); ``*_lower_bound_s`` hold for every schedule: a job runs at most ``best_rate`` x its solo rate,
    and a unit of its GPU work costs at least ``1 / best_combined`` GPU-seconds (a GPU shared by the set ``S``
    delivers ``sum x_i(S)``; charge each member its share ``x_i / sum x``)."""
    if not solo_s:
        return {}
    admitted = jobs[jobs["job_id"].isin(list(solo_s))]
    solo = admitted["job_id"].map(solo_s).to_numpy(float)
    gpus = admitted["num_gpus"].to_numpy(float)
    pairs = [best.get(j, (1.0, 1.0)) for j in admitted["job_id"]]
    rate = np.array([p[0] for p in pairs], dtype=float).reshape(len(pairs))
    combined = np.array([p[1] for p in pairs], dtype=float).reshape(len(pairs))
    submit = admitted["submit"].to_numpy(float)
    fastest = solo / rate if len(solo) else solo
    solo_done = completed["job_id"].map(solo_s).to_numpy(float)
    done = solo_done * completed["num_gpus"].to_numpy(float)
    stretch = completed["jct"].to_numpy(float) / solo_done if len(solo_done) else np.array([math.nan])
    return {
        "makespan_lower_bound_s": _makespan_bound(submit, fastest, gpus * solo / combined, t0, n_gpus),
        "makespan_job_term_s": float(np.max(submit + fastest) - t0) if len(solo) else math.nan,
        "mean_jct_lower_bound_s": float(np.mean(fastest)) if len(solo) else math.nan,
        "makespan_exclusive_bound_s": _makespan_bound(submit, solo, gpus * solo, t0, n_gpus),
        "mean_jct_exclusive_bound_s": float(np.mean(solo)) if len(solo) else math.nan,
        "goodput": float(np.sum(done) / (n_gpus * span)) if span > 0 else math.nan,
        "mean_stretch": float(np.mean(stretch)),
        "p95_stretch": float(np.percentile(stretch, 95)),
        "max_stretch": float(np.max(stretch)),
    }


def _makespan_bound(submit: np.ndarray, shortest: np.ndarray, gpu_seconds: np.ndarray, t0: float,
                    n_gpus: int) -> float:
    """``max(max_j (submit_j + shortest_j) - t0, sum_j gpu_seconds_j / n_gpus)``."""
    arrival = float(np.max(submit + shortest) - t0) if len(shortest) else math.nan
    return max(arrival, float(np.sum(gpu_seconds) / n_gpus))


def below_bounds(summary: Mapping[str, float | int], rel: float = 1e-9) -> list[str]:
    """Names of the co-location-valid bounds the run finished below (none if the bounds are right). Only runs
    where every admitted job completed are checked: the bounds count every admitted job."""
    out: list[str] = []
    if summary.get("jobs_failed") or summary.get("jobs_unfinished"):
        return out
    for key, bound in (("makespan_s", "makespan_lower_bound_s"), ("mean_jct_s", "mean_jct_lower_bound_s")):
        value, limit = summary.get(key), summary.get(bound)
        if value is not None and limit is not None and not math.isnan(value) and value < limit * (1 - rel):
            out.append(f"{key} {value:.6g} < {bound} {limit:.6g}")
    return out


def warn_below_bounds(policy: str, summary: Mapping[str, float | int]) -> None:
    """A ``RuntimeWarning`` when a run beat a bound that every schedule must respect (a bug in the bound,
    the engine or the truth's contract; never expected)."""
    for line in below_bounds(summary):
        warnings.warn(f"policy {policy!r} finished below its lower bound: {line}", RuntimeWarning, stacklevel=2)
