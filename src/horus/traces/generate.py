"""Synthetic workloads with a target load: ``horus trace generate`` (horus trace format).

Two kinds (docs/traces.md):

* ``stream``: a stationary Poisson stream whose *offered load* (mean GPU demand if every job started on
  arrival, divided by the cluster's GPUs) is ``load``: arrival rate = load x GPUs / E[gpus x duration].
  Loads near or above 1 saturate the cluster, which is where placement and co-location matter.
* ``batch``: every job submitted at time 0 (a work-bound batch); the makespan lower bound is the total
  GPU-seconds divided by the GPUs.

Per job: GPU count from ``gpu_counts`` (weights), run time alone on the reference GPU log-normal
(median, sigma) clipped to [min, max], model and batch from the ``by-size-duration`` profile sampler over
a mix (``gavel``: Gavel's 26 job types; ``zoo``: the parametric world's default mix, larger models too).
With ``tenants`` N > 0, each job's tenant queue (``tenant-1`` .. ``tenant-N``) is drawn last, with Zipf weights
P(tenant k) proportional to 1/k: unequal demand (N=4: 48 %, 24 %, 16 %, 12 % of the jobs, and in expectation of the
GPU time), the other columns as without tenants.
Everything is drawn from one seeded generator, so a seed gives the same file byte for byte.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from horus.errors import HorusInputError
from horus.jobs import parse_job_key
from horus.traces.base import RawJob
from horus.traces.horus_csv import DESCRIPTION
from horus.traces.sampler import GAVEL_JOB_TYPES, SAMPLERS

KINDS = ("stream", "batch")
MIXES = ("gavel", "zoo")
COLUMNS = ("job_id", "submit_time", "num_gpus", "model", "batch_size", "duration_s")
MAX_TENANTS = 1000


@dataclass(frozen=True)
class WorkloadSpec:
    kind: str = "stream"
    num_jobs: int = 1000
    load: float = 1.0
    cluster_gpus: int = 64
    seed: int = 0
    mix: str = "gavel"
    gpu_counts: dict[str, float] = field(default_factory=lambda: {"1": 0.70, "2": 0.12, "4": 0.10, "8": 0.08})
    duration_median_s: float = 1500.0
    duration_sigma: float = 1.2
    duration_min_s: float = 180.0
    duration_max_s: float = 16 * 3600.0
    sampler: str = "by-size-duration"
    tenants: int = 0  # 0: no queue column

    def check(self) -> None:
        """HorusInputError naming the option for any value out of its domain."""
        def bad(option: str, expected: str, got: object) -> HorusInputError:
            return HorusInputError(option, f"expected {expected}, got {got!r}")

        if self.kind not in KINDS:
            raise bad("--kind", " or ".join(KINDS), self.kind)
        if self.mix not in MIXES:
            raise bad("--mix", " or ".join(MIXES), self.mix)
        if not 1 <= self.num_jobs <= 10_000_000:
            raise bad("--jobs", "an integer in [1, 10000000]", self.num_jobs)
        if not (0 < self.load <= 100 and np.isfinite(self.load)):
            raise bad("--load", "a number in (0, 100]", self.load)
        if not 1 <= self.cluster_gpus <= 1_000_000:
            raise bad("--cluster", "a cluster with 1 to 1000000 GPUs", self.cluster_gpus)
        if not 0 <= self.seed <= 2**32 - 1:
            raise bad("--seed", "an integer in [0, 4,294,967,295]", self.seed)
        if not self.gpu_counts or any(not k.isdigit() or int(k) < 1 or not (v >= 0 and np.isfinite(v))
                                      for k, v in self.gpu_counts.items()) \
                or not 0 < sum(self.gpu_counts.values()) < math.inf:  # 1e308 + 1e308 overflows to inf
            raise bad("--gpu-counts", "weights like '1:0.7,2:0.12,4:0.1,8:0.08'", self.gpu_counts)
        if max(int(k) for k in self.gpu_counts) > self.cluster_gpus:
            raise bad("--gpu-counts", f"GPU counts at most the cluster's {self.cluster_gpus} GPUs", self.gpu_counts)
        if not (0 < self.duration_min_s <= self.duration_median_s <= self.duration_max_s < 1e9):
            raise bad("--duration-*", "0 < min <= median <= max < 1e9 seconds",
                      (self.duration_min_s, self.duration_median_s, self.duration_max_s))
        if not 0 <= self.duration_sigma <= 10:
            raise bad("--duration-sigma", "a number in [0, 10]", self.duration_sigma)
        if not (isinstance(self.tenants, int) and 0 <= self.tenants <= MAX_TENANTS):
            raise bad("--tenants", f"an integer in [0, {MAX_TENANTS}]", self.tenants)


def parse_gpu_counts(text: str) -> dict[str, float]:
    """``'1:0.7,2:0.3'`` -> ``{'1': 0.7, '2': 0.3}``."""
    out: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition(":")
        try:
            if not sep or key.strip() in out:
                raise ValueError
            out[key.strip()] = float(value)
        except ValueError:
            raise HorusInputError("--gpu-counts", f"expected 'GPUS:WEIGHT,...' with distinct GPU counts, got "
                                                  f"{text!r}") from None
    return out


def generate_workload(spec: WorkloadSpec) -> tuple[list[dict[str, object]], dict[str, object]]:
    """Rows of a horus-format trace and a summary of the load they offer."""
    spec.check()
    rng = np.random.default_rng(spec.seed)
    n = spec.num_jobs
    gpus, duration = draw_sizes_and_durations(rng, n, spec.gpu_counts, spec.duration_median_s, spec.duration_sigma,
                                              spec.duration_min_s, spec.duration_max_s)
    demand = gpus * duration
    if spec.kind == "stream":
        rate = spec.load * spec.cluster_gpus / float(demand.mean())  # jobs per second
        submit = np.cumsum(rng.exponential(1.0 / rate, n))
        submit -= submit[0]
    else:
        submit = np.zeros(n)
    jobs = [RawJob(f"job-{i:06d}", float(t), int(g), float(d)) for i, (t, g, d) in enumerate(zip(submit, gpus, duration))]
    rows = trace_rows(jobs, SAMPLERS.create(spec.sampler).assign(jobs, _mix(spec.mix), rng))
    if spec.tenants:
        queues = draw_tenants(rng, n, spec.tenants)
        for row, queue in zip(rows, queues):
            row["queue"] = queue
    span = float(submit[-1]) if spec.kind == "stream" and n > 1 else 0.0
    summary: dict[str, object] = {
        "gpu_hours": round(float(demand.sum()) / 3600, 2),
        "work_bound_h": round(float(demand.sum()) / spec.cluster_gpus / 3600, 3),
        "arrival_span_h": round(span / 3600, 3),
        "realized_offered_load": round(float(demand.sum()) / (spec.cluster_gpus * span), 3) if span > 0 else None,
        "jobs_per_gpu_count": {str(k): int((gpus == k).sum()) for k in sorted(set(gpus.tolist()))},
        "duration_s_quartiles": [float(np.percentile(duration, q)) for q in (25, 50, 75)],
    }
    if spec.tenants:
        by_queue: dict[str, float] = {}
        for row, d in zip(rows, demand.tolist()):
            by_queue[str(row["queue"])] = by_queue.get(str(row["queue"]), 0.0) + d
        summary["gpu_hours_per_queue"] = {q: round(by_queue[q] / 3600, 2) for q in sorted(by_queue)}
    return rows, summary


def tenant_names(n: int) -> list[str]:
    """``tenant-1`` .. ``tenant-N``, zero-padded so they sort in order."""
    width = len(str(n))
    return [f"tenant-{k:0{width}d}" for k in range(1, n + 1)]


def draw_tenants(rng: np.random.Generator, num_jobs: int, tenants: int) -> list[str]:
    """Each job's tenant queue: tenant k (1-based) with probability proportional to 1/k (Zipf, exponent 1)."""
    weights = 1.0 / np.arange(1, tenants + 1)
    names = tenant_names(tenants)
    return [names[i] for i in rng.choice(tenants, size=num_jobs, p=weights / weights.sum()).tolist()]


def draw_sizes_and_durations(rng: np.random.Generator, n: int, gpu_counts: dict[str, float], median_s: float,
                             sigma: float, min_s: float, max_s: float) -> tuple[np.ndarray, np.ndarray]:
    """GPU counts by weight, then run times alone on the reference GPU (log-normal, clipped, whole seconds),
    drawn in that order from ``rng`` (the default workload's generator draws the same way)."""
    sizes = np.array([int(k) for k in gpu_counts])
    weights = np.array(list(gpu_counts.values()), dtype=float)
    gpus = rng.choice(sizes, size=n, p=weights / weights.sum())
    duration = np.clip(rng.lognormal(np.log(median_s), sigma, n), min_s, max_s).round()
    return gpus, duration


def trace_rows(jobs: list[RawJob], job_types: list[str]) -> list[dict[str, object]]:
    """horus-format rows of ``jobs`` (submit times as given, rounded to 0.1 s) with their sampled job types; a
    type that states an input size, precision or optimizer (``resnet18/b128/s32/amp-fp16``) fills those columns."""
    rows = []
    for job, key in zip(jobs, job_types):
        parts = parse_job_key(key)
        row: dict[str, object] = {"job_id": job.job_id, "submit_time": round(job.submit_time, 1),
                                  "num_gpus": job.num_gpus, "model": parts.model, "batch_size": parts.batch_size,
                                  "duration_s": int(job.duration_s or 0)}
        for column in DESCRIPTION:
            if getattr(parts, column) is not None:
                row[column] = getattr(parts, column)
        rows.append(row)
    return rows


def _mix(name: str) -> tuple[str, ...]:
    if name == "gavel":
        return GAVEL_JOB_TYPES
    from horus.truth.parametric import DEFAULT_JOB_TYPES

    return DEFAULT_JOB_TYPES


def write_trace(path: Path, rows: list[dict[str, object]], spec: WorkloadSpec, summary: dict[str, object]) -> None:
    """The CSV with the spec and summary in ``#`` header lines (what produced it); ``input_size`` / ``precision`` /
    ``optimizer`` columns when a job type states them and a ``queue`` column when the spec has tenants (without
    either, the file is what it was before they existed)."""
    settings = asdict(spec)
    if not spec.tenants:
        del settings["tenants"]
    described = tuple(c for c in DESCRIPTION if any(c in row for row in rows))  # only when a job states one
    columns = (*COLUMNS, *described, *(("queue",) if spec.tenants else ()))
    lines = [
        "# Horus synthetic workload (horus trace format, docs/traces.md): horus trace generate",
        "# duration_s = run time alone on the reference GPU",
        f"# spec: {json.dumps(settings, sort_keys=True)}",
        f"# summary: {json.dumps(summary, sort_keys=True)}",
        ",".join(columns),
        *(",".join(str(row.get(c, "")) for c in columns) for row in rows),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
