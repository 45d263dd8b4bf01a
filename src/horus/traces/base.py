"""Trace data model and loader registry (docs/traces.md).

A loader turns a file into a ``Trace`` of ``RawJob``s: what the trace says, nothing invented.
Jobs are sorted by submit time and times rebased so the first submit is 0. ``materialize``
(horus.traces.materialize) then fills model/batch and converts durations into iterations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from horus.errors import HorusInputError
from horus.registry import Registry


@dataclass(slots=True)
class RawJob:
    """One job as a trace describes it (treat as read-only; not frozen only because building 82k
    frozen instances is several times slower). Exactly one of ``duration_s`` / ``iterations`` is set."""

    job_id: str
    submit_time: float
    num_gpus: int
    duration_s: float | None = None
    iterations: float | None = None
    model: str | None = None
    batch_size: int | None = None
    gpu_fraction: float | None = None  # share of one GPU, only when num_gpus == 1
    gpu_type_request: str | None = None  # acceptable GPU type names, '|'-separated (horus.gpu_types)
    line: int | None = None  # line in the source file, for error messages
    queue: str | None = None  # tenant queue (horus.tenancy.check_name); None: the tenancy's default
    priority: str | None = None  # priority class name; None: the tenancy's default
    input_size: int | None = None  # image side / sequence length / feature count; None: the catalog's
    precision: str | None = None  # canonical horus.jobs.PRECISIONS name; None: the predictor's default
    optimizer: str | None = None  # horus.jobs.OPTIMIZERS; None: the predictor's default


@dataclass
class Trace:
    """Jobs of one trace file plus where they came from (for run manifests)."""

    jobs: list[RawJob]
    source: str
    sha256: str
    format: str
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows left out
    time_offset_s: float = 0.0  # original timestamp of the first submit (seconds, format's own epoch)

    def describe(self) -> dict[str, object]:
        return {
            "source": self.source,
            "format": self.format,
            "sha256": self.sha256,
            "num_jobs": len(self.jobs),
            "skipped": dict(self.skipped),
            "span_s": self.jobs[-1].submit_time if self.jobs else 0.0,
        }


TraceLoader = Callable[..., Trace]
TRACE_LOADERS: Registry[Trace] = Registry("trace format")


def make_trace(jobs: Iterable[RawJob], source: str, sha256: str, fmt: str,
               skipped: dict[str, int] | None = None) -> Trace:
    """Sort jobs by submit time (stable) and rebase times so the first submit is 0."""
    ordered = sorted(jobs, key=lambda job: job.submit_time)
    if not ordered:
        raise HorusInputError(source, f"no usable jobs in this {fmt} trace (skipped: {skipped or {}})")
    offset = ordered[0].submit_time
    if offset != 0.0:
        ordered = [replace(job, submit_time=job.submit_time - offset) for job in ordered]
    _check_jobs(ordered, source)
    return Trace(ordered, source, sha256, fmt, dict(skipped or {}), offset)


def _check_jobs(jobs: list[RawJob], source: str) -> None:
    """Unique job ids and a span within ``LIMITS['trace_span_s']`` (checks every loader shares)."""
    from horus.validation import LIMITS

    def where(job: RawJob) -> str:
        return f"line {job.line}" if job.line is not None else f"job {job.job_id!r}"

    span = LIMITS["trace_span_s"]
    if jobs[-1].submit_time > span.high:
        raise HorusInputError(source, f"{where(jobs[-1])}: submitted {jobs[-1].submit_time:,.0f} s after the first "
                                      f"job; expected a trace spanning at most {span.high:,.0f} s")
    seen: dict[str, RawJob] = {}
    for job in jobs:
        if job.job_id in seen:
            first = seen[job.job_id]
            raise HorusInputError(source, f"{where(job)}: job id {job.job_id!r} also on {where(first)}; expected "
                                          "unique job ids")
        seen[job.job_id] = job


def load_trace(path: str | Path, fmt: str = "horus") -> Trace:
    """Load ``path`` with the loader registered as ``fmt`` (horus, philly, openb)."""
    from horus.plugins import load_all

    load_all("horus.traces")
    if fmt not in TRACE_LOADERS:
        raise HorusInputError(str(path), f"unknown trace format {fmt!r} (known: {', '.join(TRACE_LOADERS)})")
    return TRACE_LOADERS.create(fmt, path=Path(path))


def default_trace_path() -> Path:
    """The packaged default workload (horus format, see benchmarks/make_default_trace.py)."""
    return Path(str(resources.files("horus.data").joinpath("default_trace.csv")))


def load_default_trace() -> Trace:
    return load_trace(default_trace_path(), "horus")
