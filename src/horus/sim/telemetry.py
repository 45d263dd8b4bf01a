"""What running jobs report to the scheduler in the simulator: ``RunningJob.observed_rate`` and ``iterations_done``.

Models are registered by name in ``TELEMETRY_MODELS`` and chosen with ``SimConfig.telemetry`` (docs/simulator.md,
"Telemetry"):

* ``exact``: the true current rate and progress, written by the engine at every rate change (even during a
  checkpoint-restore stall). Instant and noise-free; the world every golden decision was pinned in.
* ``noisy``: what a real monitoring pipeline gives. A job reports every ``period_s`` seconds from its (re)start;
  a report carries the progress at that time and the true rate in effect then times log-normal noise
  ``exp(sigma z - sigma^2 / 2)`` (mean 1: an average of reports converges to the true rate), ``z`` a standard
  normal drawn from (seed, job id, attempt, report index) so that runs are deterministic by seed. There is no
  rate (``observed_rate = 0``) until ``warmup_iterations`` have run since the restore stall ended.
  ``RunningJob.reported_at`` says when the report behind the values was made.
  Reports are pure functions of the attempt and the time, so the engine reads one lazily, when a running job's
  telemetry is first looked at in a policy call (``ReportedRun``): the same values as reading every due report
  before each call, which it still does with online correction (it samples every report).

Defaults of ``noisy`` (assumptions, not measurements; change them with ``telemetry_options``):

* ``period_s = 60``: Prometheus' default ``scrape_interval`` is one minute and clusters commonly scrape every
  10 s to 1 min; it is also the tick of the adaptive policies (``horus``, ``gandiva``), so a policy call sees
  at most one new report per job.
* ``sigma = 0.05``: data-parallel (PyTorch DDP) iteration times jitter by a few percent from input pipelines,
  Python garbage collection, collective communication and GPU clock changes; a reported rate over a short
  window keeps part of that. 5 % is a middle value; ``sigma = 0`` gives the periodic, lagging reports alone.
* ``warmup_iterations = 50``: the first iterations of a (re)started job are slow and unrepresentative (CUDA
  context and NCCL set-up, cuDNN autotuning of convolution algorithms with ``cudnn.benchmark``, allocator and
  data-loader warm-up); training benchmarks commonly discard the first ten to a hundred iterations.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from statistics import NormalDist
from typing import Any, NamedTuple

from horus.registry import Registry
from horus.state import RunningJob

_NORMAL = NormalDist()
_blake2b = hashlib.blake2b
_new_report = tuple.__new__


class Report(NamedTuple):
    """What a running job reports: its rate (iterations/s; 0 = no rate yet), its progress and when it reported
    (None: continuous telemetry, no report period)."""

    rate: float
    iterations_done: float
    at: float | None


class Attempt:
    """One run of a job as its telemetry sees it: when it started, when its restore stall ends, its progress
    then, and its true rate changes since, as ``(time, rate, progress at that time)``, oldest first."""

    __slots__ = ("attempt", "changes", "job_id", "last", "noise_key", "stall_until", "start_progress", "started")

    def __init__(self, job_id: str, attempt: int, started: float, stall_until: float, progress: float) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self.started = started
        self.stall_until = stall_until
        self.start_progress = progress
        self.changes: list[tuple[float, float, float]] = []
        self.last: tuple[int, Report] | None = None  # (report index, report) of the latest read
        self.noise_key: Any = None  # the noise hash fed its inputs up to the report index (``NoisyTelemetry``)

    def change(self, now: float, rate: float, progress: float) -> None:
        """The true rate became ``rate`` at ``now``, with ``progress`` iterations done by then."""
        self.changes.append((now, rate, progress))
        if self.last is not None and self.last[1].at is not None and now <= self.last[1].at:
            self.last = None  # a change at the report's own time: read it again

    def at(self, t: float) -> tuple[float, float]:
        """(true rate in effect, iterations done) at time ``t``; changes before the one in effect are dropped
        (reads go forward in time)."""
        changes = self.changes
        i = len(changes) - 1
        while i >= 0 and changes[i][0] > t:
            i -= 1
        if i < 0:
            return 0.0, self.start_progress
        if i:
            del changes[:i]
        t0, rate, progress = changes[0]
        stall = self.stall_until
        ran = t - (stall if stall > t0 else t0)  # ``max(0.0, t - max(t0, stall))``, without the calls
        return rate, progress + rate * (ran if ran > 0.0 else 0.0)


class TelemetryModel(ABC):
    """How running jobs' reports follow the truth. ``instant`` models are written by the engine at every rate
    change; the others are read (``report``) just before each policy call."""

    name = "telemetry"
    instant = False

    def track(self, job_id: str, attempt: int, now: float, stall_until: float, progress: float) -> Attempt | None:
        """Bookkeeping of a job (re)started at ``now`` (``attempt``: its earlier starts), or None when instant."""
        return None if self.instant else Attempt(job_id, attempt, now, stall_until, progress)

    @abstractmethod
    def report(self, run: Attempt, now: float) -> Report:
        """What the job has reported by ``now``."""

    def next_report_s(self, run: Attempt, now: float) -> float:
        """The earliest time after ``now`` at which ``report`` may answer differently, barring a rate change at a
        report's own time (``Attempt.last`` is then cleared). The engine reads a job again only from then on;
        by default at every later time."""
        return math.nextafter(now, math.inf)

    def describe(self) -> dict[str, object]:
        return {"name": self.name}


TELEMETRY_MODELS: Registry[TelemetryModel] = Registry("telemetry model")


@TELEMETRY_MODELS.register("exact")
class ExactTelemetry(TelemetryModel):
    """The true rate and progress at the latest rate change, at once (the engine writes them)."""

    name = "exact"
    instant = True

    def report(self, run: Attempt, now: float) -> Report:
        if not run.changes:
            return Report(0.0, run.start_progress, None)
        _, rate, progress = run.changes[-1]
        return Report(rate, progress, None)


@TELEMETRY_MODELS.register("noisy")
class NoisyTelemetry(TelemetryModel):
    """Periodic reports after a warm-up, with log-normal rate noise (see the module docstring)."""

    name = "noisy"

    def __init__(self, period_s: float = 60.0, sigma: float = 0.05, warmup_iterations: float = 50.0,
                 seed: int = 0) -> None:
        if not (math.isfinite(period_s) and period_s > 0):
            raise ValueError(f"period_s must be a positive number of seconds, got {period_s!r}")
        if not (math.isfinite(sigma) and 0 <= sigma <= 1):
            raise ValueError(f"sigma must be in [0, 1], got {sigma!r}")
        if not (math.isfinite(warmup_iterations) and warmup_iterations >= 0):
            raise ValueError(f"warmup_iterations must be >= 0, got {warmup_iterations!r}")
        self.period_s = float(period_s)
        self.sigma = float(sigma)
        self.warmup_iterations = float(warmup_iterations)
        self.seed = int(seed)
        self._half_var = 0.5 * self.sigma ** 2

    def report(self, run: Attempt, now: float) -> Report:
        index = math.floor((now - run.started) / self.period_s)
        if index < 0:
            index = 0
        last = run.last
        if last is not None and last[0] == index:
            return last[1]
        at = run.started + index * self.period_s
        rate, done = run.at(at)
        if index == 0 or done - run.start_progress < self.warmup_iterations or not rate > 0:
            rate = 0.0  # no report yet, or still warming up (the restore stall makes no progress)
        elif self.sigma != 0:  # ``noise(run.job_id, run.attempt, index)``: the attempt's hash state, then the index
            base = run.noise_key
            if base is None:
                base = run.noise_key = _blake2b(f"{self.seed}\0{run.job_id}\0{run.attempt}\0".encode(), digest_size=8)
            digest = base.copy()
            digest.update(str(index).encode())
            u = (int.from_bytes(digest.digest(), "big") + 0.5) / 2.0**64  # ``_noise``, inline
            rate *= math.exp(self.sigma * _NORMAL.inv_cdf(u) - self._half_var)
        found = _new_report(Report, (rate, done, at))  # ``Report(rate, done, at)``, without its Python ``__new__``
        run.last = (index, found)
        return found

    def next_report_s(self, run: Attempt, now: float) -> float:
        """When the next report is made: the first time the report index passes the current one."""
        started, period = run.started, self.period_s
        index = math.floor((now - started) / period)
        if index < 0:
            index = 0
        due = started + (index + 1) * period  # within a few ulps of the boundary: find the exact first float
        while due > now and math.floor((math.nextafter(due, -math.inf) - started) / period) > index:
            due = math.nextafter(due, -math.inf)
        while math.floor((due - started) / period) <= index:
            due = math.nextafter(due, math.inf)
        return due

    def noise(self, job_id: str, attempt: int, index: int) -> float:
        """The multiplicative noise of one report: ``exp(sigma z - sigma^2 / 2)``, ``z`` standard normal from a hash."""
        if self.sigma == 0:
            return 1.0
        return self._noise(_blake2b(f"{self.seed}\0{job_id}\0{attempt}\0{index}".encode(), digest_size=8))

    def _noise(self, digest: hashlib._Hash) -> float:
        """``noise`` from the 8-byte blake2b hash of its inputs (sigma > 0)."""
        u = (int.from_bytes(digest.digest(), "big") + 0.5) / 2.0**64  # in (0, 1)
        return math.exp(self.sigma * _NORMAL.inv_cdf(u) - self._half_var)

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "period_s": self.period_s, "sigma": self.sigma,
                "warmup_iterations": self.warmup_iterations, "seed": self.seed}


class Reads:
    """The engine's reads of reported telemetry: the model, the time of the current policy call (``now``) and
    how many reports were read so far (``count``)."""

    __slots__ = ("count", "model", "now")

    def __init__(self, model: TelemetryModel | None) -> None:
        self.model = model
        self.now = -math.inf
        self.count = 0

    def read(self, run: Attempt, now: float) -> Report:
        self.count += 1
        assert self.model is not None
        return self.model.report(run, now)


_IDLE = Reads(None)  # of a ``ReportedRun`` not watched yet: nothing is ever due


def _reported(name: str) -> property:
    def get(run: ReportedRun) -> object:
        if run._due <= run._reads.now:
            run.pull()
        return run.__dict__[name]

    def put(run: ReportedRun, value: object) -> None:
        run.__dict__[name] = value

    return property(get, put, doc=f"``RunningJob.{name}``, read when due.")


class ReportedRun(RunningJob):
    """A simulated running job whose periodic report is read only when its telemetry (``observed_rate``,
    ``iterations_done``, ``reported_at``, ``iterations_left``) is looked at: at the current policy call's time,
    giving what an eager read of every due report at that call would have written (reports are pure functions
    of the attempt and the time). The engine calls ``pull`` before the attempt changes or ends."""

    _reads: Reads = _IDLE
    _attempt: Attempt | None = None
    _due = math.inf  # the report is read again at the first policy call at or after this time
    observed_rate = _reported("observed_rate")  # type: ignore[assignment]
    iterations_done = _reported("iterations_done")  # type: ignore[assignment]
    reported_at = _reported("reported_at")  # type: ignore[assignment]

    def watch(self, reads: Reads, attempt: Attempt) -> None:
        """Follow ``attempt``'s reports, the first at the next policy call."""
        self._reads, self._attempt = reads, attempt
        self.due(reads.now)

    def due(self, at: float) -> None:
        """Read again at the first policy call at or after ``at`` (unless due earlier); one due during the
        current call waits for the next call (an eager read happens when a call begins)."""
        if at <= self._reads.now:
            at = math.nextafter(self._reads.now, math.inf)
        if at < self._due:
            self._due = at

    def pull(self) -> None:
        """Read the report if one is due by the current policy call."""
        reads = self._reads
        now = reads.now
        if self._due <= now:
            attempt, model = self._attempt, reads.model
            assert attempt is not None and model is not None
            reads.count += 1  # ``reads.read``, inline
            values = self.__dict__
            values["observed_rate"], values["iterations_done"], values["reported_at"] = model.report(attempt, now)
            self._due = model.next_report_s(attempt, now)

    def stop(self) -> None:
        """The attempt ends: keep what the current call would see, and read no more."""
        self.pull()
        self._due = math.inf


def create_telemetry(name: str, options: dict[str, object] | None = None) -> TelemetryModel:
    """The registered model ``name`` with ``options`` (KeyError for an unknown name, TypeError or ValueError for
    bad options)."""
    return TELEMETRY_MODELS.create(name, **dict(options or {}))
