"""Event-driven cluster simulator (docs/simulator.md).

No fixed time step: jobs carry their remaining iterations and a piecewise-constant true rate;
a job's completion event is recomputed whenever its rate changes (old events go stale through a
version number). The policy sees only ``SchedulerState``; the truth model stays in here.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time as wallclock
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import pandas as pd

from horus.cluster import Cluster, GPUType
from horus.comm import allreduce_time_s, gradient_bytes
from horus.core import InvalidActionError, SchedulerCore  # noqa: F401  (re-exported)
from horus.errors import HorusInputError
from horus.gpu_types import accepted_gpu_types
from horus.jobs import JobSpec
from horus.policies.base import Policy
from horus.predict.base import Predictor
from horus.sim.bounds import type_capacities
from horus.sim.events import Arrival, Completion, EventQueue, OOMRestart, Tick
from horus.sim.metrics import (
    PLACEMENT_COLUMNS,
    JobRecord,
    MetricsRecorder,
    job_frame,
    placement_frame,
    summarize,
    warn_below_bounds,
)
from horus.sim.sizes import size_knowledge, size_ordered_error
from horus.sim.telemetry import Attempt, Reads, ReportedRun, TelemetryModel, create_telemetry
from horus.sim.queues import queue_frame, tenancy_summary
from horus.state import QueuedJob, SchedulerState
from horus.tenancy import Tenancy
from horus.truth.base import SoloTruth, TruthModel


@dataclass(frozen=True)
class SimConfig:
    """Simulator knobs (all times in seconds)."""

    oom_restart_s: float = 30.0  # lost time before a job that failed with out-of-memory is queued again
    max_oom_retries: int = 3  # out-of-memory failures tolerated; one more marks the job failed
    preempt_overhead_s: float = 30.0  # checkpoint-restore stall after restarting a preempted job
    timeline_points: int = 5000  # the timeline is downsampled to at most this many rows
    sizes: str = "exact"  # what policies are told of job lengths (horus.sim.sizes): exact, estimate or none
    sizes_seed: int = 0  # seed of the ``estimate`` draws
    telemetry: str = "exact"  # what running jobs report (horus.sim.telemetry): exact or noisy
    telemetry_options: dict[str, float] = field(default_factory=dict)  # keyword arguments of that model
    online_correction: bool = False  # solo telemetry corrects later predictions (horus.sim.online)

    def telemetry_model(self) -> TelemetryModel:
        return create_telemetry(self.telemetry, self.telemetry_options)

    def describe(self) -> dict[str, object]:
        out = asdict(self)
        out["telemetry_options"] = {k: v for k, v in self.telemetry_model().describe().items() if k != "name"}
        return out


@dataclass
class SimResult:
    policy: str
    summary: dict[str, float | int]
    jobs: pd.DataFrame
    gpus: pd.DataFrame
    timeline: pd.DataFrame
    events_processed: int
    wall_s: float
    # One row per (job, GPU) residency and per GPU of a start that failed out of memory (docs/simulator.md,
    # "Placements"): who held which GPU when. Recorded only; no scheduling decision reads it.
    placements: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PLACEMENT_COLUMNS)))
    # per tenant queue (horus.sim.queues): empty without a tenancy
    queues: pd.DataFrame = field(default_factory=pd.DataFrame)


class _Live:
    """Truth-side bookkeeping of one running job."""

    __slots__ = ("spec", "job_type", "gpus", "worker_solo_s", "comm_s", "solo_rate", "rate", "remaining",
                 "last", "stall_until", "version", "record", "started", "telemetry")

    def __init__(self, spec: JobSpec, gpus: tuple[int, ...], worker_solo_s: list[float], comm_s: float,
                 remaining: float, now: float, stall_until: float, record: JobRecord) -> None:
        self.spec = spec
        self.job_type = spec.job_type
        self.gpus = gpus
        self.worker_solo_s = worker_solo_s
        self.comm_s = comm_s
        self.solo_rate = 1.0 / (max(worker_solo_s) + comm_s)
        self.rate = 0.0
        self.remaining = remaining
        self.last = now
        self.stall_until = stall_until
        self.version = -1
        self.record = record
        self.started = now
        self.telemetry: Attempt | None = None  # what its reports follow (None: the engine writes the truth at once)


class _Engine:
    """The simulator backend: a virtual clock, the truth, and the ``Executor`` of a ``SchedulerCore``."""

    def __init__(self, jobs: Sequence[JobSpec], cluster: Cluster, policy: Policy, truth: TruthModel,
                 predictor: Predictor, config: SimConfig, tenancy: Tenancy | None = None, *,
                 lazy_reads: bool = True) -> None:
        self.cluster = cluster
        self.policy = policy
        self.truth = truth
        self.config = config
        self.telemetry = config.telemetry_model()
        # reported telemetry: (when, seq, job id, attempt) of each job's next read, and each job's pending one
        self._reads: list[tuple[float, int, str, Attempt]] = []
        self._read_at: dict[str, tuple[Attempt, float]] = {}
        self._read_seq = itertools.count()
        self.online = None
        if config.online_correction:
            from horus.sim.online import SimOnline

            self.online = SimOnline(predictor, getattr(self.telemetry, "noise", None))
            predictor = self.online.predictor
        self.state = SchedulerState(cluster, predictor)
        # reports are read when a running job's telemetry is looked at (``ReportedRun``), unless online correction
        # samples every report (or ``lazy_reads`` is off: every due report is read before each policy call)
        self.reads = Reads(self.telemetry)
        self.lazy = lazy_reads and not self.telemetry.instant and self.online is None
        if self.lazy:
            self.state.running_type = ReportedRun
        self.sizes = size_knowledge(config.sizes, config.sizes_seed)
        if not self.sizes.known and policy.orders_by_size():
            raise size_ordered_error(policy.name)
        self.sizes.prepare(jobs)
        self.tenancy = tenancy
        self.core = SchedulerCore(self.state, policy, self, truth=truth, tenancy=tenancy)
        if policy.is_oracle:
            policy.bind_true_sizes({s.job_id: s.iterations for s in jobs})
        self.events = EventQueue()
        self.arrivals = sorted(jobs, key=lambda s: s.submit_time)  # stable: ties keep input order
        self.next_arrival = 0
        self.records: dict[str, JobRecord] = {}
        for spec in jobs:
            if spec.job_id in self.records:
                raise HorusInputError("jobs", f"job_id {spec.job_id!r} appears twice")
            if spec.num_gpus < 1 or not (spec.iterations > 0 and math.isfinite(spec.iterations)):
                raise HorusInputError("jobs", f"job {spec.job_id!r}: expected num_gpus >= 1 and finite iterations > 0")
            if tenancy is not None:
                try:
                    tenancy.check_job(spec.queue, spec.priority)
                except HorusInputError as exc:
                    raise HorusInputError("jobs", f"job {spec.job_id!r}: {exc.source}: {exc.message}") from None
            self.records[spec.job_id] = JobRecord(spec)
        start = self.arrivals[0].submit_time if self.arrivals else 0.0
        self.metrics = MetricsRecorder(cluster, start)
        n = cluster.num_gpus
        self.gpu_type: list[GPUType] = [g.gpu_type for g in cluster.gpus]
        self.mem_capacity = [float(t.memory_mib) for t in self.gpu_type]
        self.mem_used = [0.0] * n
        self.residents: list[list[str]] = [[] for _ in range(n)]
        self.gpu_x: list[dict[str, float]] = [{} for _ in range(n)]  # normalized throughput of each resident
        self.live: dict[str, _Live] = {}
        self.remaining: dict[str, float] = {}  # work left of preempted jobs
        self.oom_waiting: dict[str, QueuedJob] = {}
        self._solo: dict[tuple[str, str], SoloTruth] = {}
        self._coloc: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        self._grad_bytes: dict[str, float] = {}
        self.version = 0
        self.tick_pending = False
        self.events_processed = 0
        self.preemptions = 0
        self.finished = 0
        self.placements: list[tuple[str, int, float, float, str]] = []  # (job, gpu, start, end, outcome)

    # ---- truth look-ups (cached) ---------------------------------------------------------------
    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        key = (job_type, gpu_type.name)
        value = self._solo.get(key)
        if value is None:
            value = self.truth.solo(job_type, gpu_type)
            if not (value.iter_time_s > 0 and math.isfinite(value.iter_time_s)):
                raise ValueError(f"truth {self.truth.name!r}: iter_time_s of {key} must be positive, got {value}")
            self._solo[key] = value
        return value

    def colocated(self, types: tuple[str, ...], gpu_type: GPUType) -> list[float]:
        key = (gpu_type.name, types)
        value = self._coloc.get(key)
        if value is None:
            value = [float(x) for x in self.truth.colocated_throughput(list(types), gpu_type)]
            if len(value) != len(types) or not all(x > 0 for x in value):
                raise ValueError(f"truth {self.truth.name!r}: colocated_throughput{key} must give one positive "
                                 f"value per job, got {value}")
            self._coloc[key] = value
        return value

    def comm_time(self, spec: JobSpec, gpus: tuple[int, ...]) -> float:
        if len(gpus) == 1:
            return 0.0
        size = self._grad_bytes.get(spec.model)
        if size is None:
            size = self._grad_bytes[spec.model] = gradient_bytes(spec.model)
        return allreduce_time_s(size, gpus, self.cluster)

    # ---- main loop -----------------------------------------------------------------------------
    def run(self, progress: bool) -> None:
        self._push_next_arrival()
        bar = None
        if progress:  # tqdm is imported only for a bar actually shown
            from tqdm import tqdm

            bar = tqdm(total=len(self.records), unit="job", desc=self.policy.name)
        events, state, metrics = self.events, self.state, self.metrics
        handlers = {Completion: self._on_completion, Arrival: self._on_arrival, OOMRestart: self._on_oom_restart,
                    Tick: self._on_tick}
        while len(events):
            now = events.peek_time()
            assert now is not None
            metrics.advance(now)
            state.now = now
            changed = False
            done_before = self.finished
            while len(events) and events.peek_time() == now:
                event = events.pop()[1]
                if handlers[type(event)](event, now):
                    changed = True
                    self.events_processed += 1
            if not changed:
                continue
            self._schedule(now)
            metrics.sample(now, len(state.queue) + len(state.held), len(state.running))
            if bar is not None and self.finished != done_before:
                bar.update(self.finished - done_before)
                bar.set_postfix(events=self.events_processed, refresh=False)
        if bar is not None:
            bar.close()

    def _push_next_arrival(self) -> None:
        if self.next_arrival < len(self.arrivals):
            spec = self.arrivals[self.next_arrival]
            self.next_arrival += 1
            self.events.push(spec.submit_time, Arrival(spec))

    # ---- events (each returns False when it changed nothing) ------------------------------------
    def _on_completion(self, event: Completion, now: float) -> bool:
        live = self.live.get(event.job_id)
        if live is None or live.version != event.version:
            return False  # stale: the job was re-rated or stopped since
        self._complete(live, now)
        return True

    def _on_arrival(self, event: Arrival, now: float) -> bool:
        spec = event.spec
        if not self.core.admits(spec):
            self.records[spec.job_id].status = "rejected"  # it could never run here: do not block the queue
        else:
            self.state.submit(self.sizes.visible(spec), now)
        self._push_next_arrival()
        return True

    def _on_oom_restart(self, event: OOMRestart, now: float) -> bool:
        queued = self.oom_waiting.pop(event.job_id)
        queued.queued_since = now
        self.state.enqueue(queued)
        return True

    def _on_tick(self, event: Tick, now: float) -> bool:
        self.tick_pending = False
        return True

    def _schedule(self, now: float) -> None:
        if self.lazy:
            self.reads.now = now  # due reports are read when looked at, as of this call
        elif not self.telemetry.instant:
            self._report(now)
        if self.online is not None:
            self.online.commit(self.state)  # the policy decides on predictions corrected by what was seen so far
        self.core.schedule(now)
        for job_id, reason in self.core.new_waits:  # the first reason each job had to wait
            record = self.records[job_id]
            if not record.wait_reason:
                record.wait_reason, record.wait_reason_detail = reason.code, reason.message
        wake = self.core.next_wakeup(now)
        if wake is not None and not self.tick_pending and len(self.events):
            self.tick_pending = True
            self.events.push(wake, Tick())

    def _report(self, now: float) -> None:
        """Bring every running job's telemetry up to what it has reported by ``now`` (read just before the policy
        is asked: no event per report, so reports do not change when the policy is called). Only jobs whose
        report may have changed are read (``TelemetryModel.next_report_s``, or a rate change at a report's time).
        Eager: only with online correction or ``lazy_reads`` off (``ReportedRun`` reads lazily otherwise)."""
        reads, read_at, running, report = self._reads, self._read_at, self.state.running, self.reads.read
        while reads and reads[0][0] <= now:
            at, _, job_id, attempt = heapq.heappop(reads)
            if read_at.get(job_id) != (attempt, at):
                continue  # superseded by an earlier read, or the attempt ended
            del read_at[job_id]
            live = self.live.get(job_id)
            if live is None or live.telemetry is not attempt:
                continue
            run = running[job_id]
            run.observed_rate, run.iterations_done, run.reported_at = report(attempt, now)
            if self.online is not None and run.observed_rate > 0 and attempt.last is not None:
                self.online.sample(self.state, job_id, run.observed_rate, self.solo(live.job_type,
                                   self.gpu_type[live.gpus[0]]), attempt.attempt, attempt.last[0], run.reported_at)
            self._read_from(job_id, attempt, self.telemetry.next_report_s(attempt, now))

    def _read_from(self, job_id: str, attempt: Attempt, at: float) -> None:
        """Read ``job_id``'s telemetry at the first policy call at or after ``at`` (unless one is due earlier)."""
        pending = self._read_at.get(job_id)
        if pending is not None and pending[0] is attempt and pending[1] <= at:
            return
        self._read_at[job_id] = (attempt, at)
        heapq.heappush(self._reads, (at, next(self._read_seq), job_id, attempt))

    # ---- Executor: carry out checked actions -----------------------------------------------------
    def start(self, spec: JobSpec, gpus: tuple[int, ...], now: float) -> None:
        job_id, job_type = spec.job_id, spec.job_type
        record = self.records[job_id]
        solos = [self.solo(job_type, self.gpu_type[g]) for g in gpus]
        mem_used, capacity = self.mem_used, self.mem_capacity
        if any(mem_used[g] + s.mem_mib > capacity[g] for g, s in zip(gpus, solos)):
            self.placements.extend((job_id, g, now, now, "oom") for g in gpus)
            self._oom(job_id, record, now)
            return
        run = self.state.start(job_id, gpus, now)
        resumed = job_id in self.remaining
        work = record.spec.iterations  # the true length (``spec`` is what the policy was told)
        remaining = self.remaining.pop(job_id) if resumed else work
        stall_until = now + self.config.preempt_overhead_s if resumed else now
        live = _Live(record.spec, gpus, [s.iter_time_s for s in solos], self.comm_time(spec, gpus), remaining, now,
                     stall_until, record)
        self.live[job_id] = live
        run.iterations_done = work - remaining
        live.telemetry = self.telemetry.track(job_id, record.preemptions, now, stall_until, run.iterations_done)
        if live.telemetry is not None:
            if self.lazy:
                assert isinstance(run, ReportedRun)
                run.watch(self.reads, live.telemetry)
            else:
                self._read_from(job_id, live.telemetry, now)
        if record.first_start != record.first_start:  # NaN: first real start
            record.first_start = now
        for g, s in zip(gpus, solos):
            self.residents[g].append(job_id)
            mem_used[g] += s.mem_mib
        if self.online is not None:
            self.online.started(self.state, job_id, record.preemptions, solos[0])
        self._rerate_gpus(gpus, now)

    def preempt(self, job_id: str, now: float) -> None:
        live = self.live[job_id]
        self._advance(live, now)
        self._stop_reads(job_id)
        self.state.requeue(job_id, now)
        self.remaining[job_id] = live.remaining
        live.record.preemptions += 1
        self.preemptions += 1
        self._remove(live, now, "preempted")

    def _oom(self, job_id: str, record: JobRecord, now: float) -> None:
        """The new job does not fit in true memory: it crashes at once; co-runners are unaffected."""
        queued = self.state.withdraw(job_id)
        queued.oom_failures += 1
        record.oom_failures = queued.oom_failures
        if queued.oom_failures > self.config.max_oom_retries:
            record.status = "failed"
            record.end = now
            self.remaining.pop(job_id, None)
            self.finished += 1
        else:
            self.oom_waiting[job_id] = queued
            self.events.push(now + self.config.oom_restart_s, OOMRestart(job_id))

    def _complete(self, live: _Live, now: float) -> None:
        self._advance(live, now)
        live.record.iterations_done += live.remaining  # float residue of remaining / rate
        live.remaining = 0.0
        live.record.status = "completed"
        live.record.end = now
        self._stop_reads(live.spec.job_id)
        self.state.finish(live.spec.job_id)
        self.finished += 1
        self._remove(live, now, "completed")

    def _stop_reads(self, job_id: str) -> None:
        """Lazy reads: the job stops running; it keeps the telemetry the current policy call would see."""
        run = self.state.running[job_id]
        if isinstance(run, ReportedRun):
            run.stop()

    def _remove(self, live: _Live, now: float, outcome: str) -> None:
        job_id = live.spec.job_id
        del self.live[job_id]
        if self.online is not None:
            self.online.stopped(job_id)
        self.placements.extend((job_id, g, live.started, now, outcome) for g in live.gpus)
        for g in live.gpus:
            self.residents[g].remove(job_id)
            self.mem_used[g] -= self.solo(live.job_type, self.gpu_type[g]).mem_mib
            if not self.residents[g]:
                self.mem_used[g] = 0.0  # no float drift on idle GPUs
        self._rerate_gpus(live.gpus, now)

    # ---- rates ---------------------------------------------------------------------------------
    def _rerate_gpus(self, gpus: tuple[int, ...], now: float) -> None:
        """Residents of ``gpus`` changed: refresh those GPUs, then re-rate every job on them."""
        if len(gpus) == 1:
            self._refresh_gpu(gpus[0], now)
            affected: Iterable[str] = list(self.residents[gpus[0]])
        else:
            seen: dict[str, None] = {}
            for g in gpus:
                self._refresh_gpu(g, now)
                seen.update(dict.fromkeys(self.residents[g]))
            affected = seen
        touched = dict.fromkeys(gpus)
        for job_id in affected:
            live = self.live[job_id]
            if self._rerate(live, now) and len(live.gpus) > 1:
                touched.update(dict.fromkeys(live.gpus))  # a gang's new rate changes its busy share everywhere
        for g in touched:
            self._record_busy(g, now)
        if self.online is not None:
            self._observe(list(affected), now)

    def _observe(self, job_ids: list[str], now: float) -> None:
        """Online correction: who is alone since when; with continuous telemetry, the current rate of each job
        alone on its GPUs is a report."""
        online = self.online
        assert online is not None
        online.residents_changed(self.state, job_ids, now)
        if not self.telemetry.instant:
            return
        for job_id in job_ids:
            live = self.live[job_id]
            if live.rate > 0:
                online.sample(self.state, job_id, live.rate, self.solo(live.job_type, self.gpu_type[live.gpus[0]]),
                              live.record.preemptions)

    def _record_busy(self, g: int, now: float) -> None:
        """Kernel-busy share of each resident worker on ``g``: util on g x (rate x solo iteration time on g).

        ``util x rate x solo_s`` is the fraction of time the worker's kernels run: it equals ``util x x`` for a
        one-GPU job, is lower on a gang's GPUs that wait at the barrier, and counts only once its
        checkpoint-restore stall ends (``stall_until``).
        """
        parts = []
        gpu_type = self.gpu_type[g]
        for job_id in self.residents[g]:
            live = self.live[job_id]
            solo_s = live.worker_solo_s[live.gpus.index(g)]
            parts.append((self.solo(live.job_type, gpu_type).util * live.rate * solo_s, live.stall_until))
        self.metrics.set_busy(g, parts, now)

    def _refresh_gpu(self, g: int, now: float) -> None:
        residents = self.residents[g]
        gpu_type = self.gpu_type[g]
        if not residents:
            self.gpu_x[g] = {}
            self.metrics.set_gpu(g, 0.0, 0.0, now)
            return
        if len(residents) == 1:
            job_id = residents[0]
            self.gpu_x[g] = {job_id: 1.0}
            util = self.solo(self.live[job_id].job_type, gpu_type).util
        else:
            types = [self.live[j].job_type for j in residents]
            key = tuple(sorted(types))
            thr = self.colocated(key, gpu_type)
            xs = {j: thr[key.index(t)] for j, t in zip(residents, types)}
            self.gpu_x[g] = xs
            util = 0.0
            for j, t in zip(residents, types):
                util += self.solo(t, gpu_type).util * xs[j]
                self.live[j].record.colocated = True
        self.metrics.set_gpu(g, min(1.0, util), self.mem_used[g], now)

    def _advance(self, live: _Live, now: float) -> None:
        """Bring ``live.remaining`` up to ``now`` at its current rate."""
        begin = live.last if live.last > live.stall_until else live.stall_until
        if now > begin and live.rate > 0:
            dt = now - begin
            done = min(live.remaining, live.rate * dt)
            live.remaining -= done
            record = live.record
            record.iterations_done += done
            record.slowdown_integral += live.solo_rate / live.rate * dt
            record.progress_s += dt
        live.last = now

    def _rerate(self, live: _Live, now: float) -> bool:
        """Recompute ``live``'s rate from the throughputs on its GPUs; True when it changed."""
        job_id = live.spec.job_id
        worst = 0.0
        for g, solo_s in zip(live.gpus, live.worker_solo_s):
            t = solo_s / self.gpu_x[g][job_id]
            if t > worst:
                worst = t
        rate = 1.0 / (worst + live.comm_s)
        if rate == live.rate:
            return False
        self._advance(live, now)
        live.rate = rate
        self.version += 1
        live.version = self.version
        begin = now if now > live.stall_until else live.stall_until
        self.events.push(begin + live.remaining / rate, Completion(job_id, self.version))
        if live.telemetry is None:
            run = self.state.running[job_id]
            run.observed_rate = rate
            run.iterations_done = live.spec.iterations - live.remaining
        else:
            run = self.state.running[job_id]
            if isinstance(run, ReportedRun):
                run.pull()  # the current call's report is the one before this change
            live.telemetry.change(now, rate, live.spec.iterations - live.remaining)
            if live.telemetry.last is None:  # a change at the latest report's own time: read it again
                if isinstance(run, ReportedRun):
                    run.due(now)
                else:
                    self._read_from(job_id, live.telemetry, now)
        return True

    # ---- results -------------------------------------------------------------------------------
    def solo_durations(self) -> dict[str, float]:
        """Each admitted job's shortest possible run: iterations x true solo iteration time on the fastest
        GPU type it accepts here (no waiting, no co-runners, no communication)."""
        types = {t.name: t for t in self.gpu_type}
        out = {}
        for job_id, record in self.records.items():
            if record.status == "rejected":
                continue
            spec = record.spec
            accepted = accepted_gpu_types(spec.gpu_type_request)
            times = [self.solo(spec.job_type, t).iter_time_s for name, t in types.items()
                     if accepted is None or name in accepted]
            out[job_id] = spec.iterations * min(times)
        return out

    def best_rates(self) -> dict[str, tuple[float, float]]:
        """Each admitted job's (best normalized rate, best combined throughput of a GPU it shares), the largest
        over the GPU types it accepts here (``horus.sim.bounds``): the co-location-valid lower bounds' inputs."""
        types = {t.name: t for t in self.gpu_type}
        admitted = [r.spec for r in self.records.values() if r.status != "rejected"]
        accepts = {s.job_id: accepted_gpu_types(s.gpu_type_request) for s in admitted}
        caps = {}
        for name, gpu_type in types.items():
            counts: dict[str, int] = {}
            for s in admitted:
                if accepts[s.job_id] is None or name in accepts[s.job_id]:
                    counts[s.job_type] = counts.get(s.job_type, 0) + 1
            caps[name] = type_capacities(self.truth, gpu_type, counts)
        out = {}
        for s in admitted:
            found = [caps[n][s.job_type] for n in types
                     if (accepts[s.job_id] is None or n in accepts[s.job_id]) and s.job_type in caps[n]]
            out[s.job_id] = (max((c.best_rate for c in found), default=1.0),
                             max((c.best_combined for c in found), default=1.0))
        return out

    def result(self, wall_s: float) -> SimResult:
        records = list(self.records.values())
        jobs = job_frame(records)
        end = float(jobs["end"].max()) if jobs["end"].notna().any() else self.metrics.start_time
        summary = summarize(jobs, self.metrics, self.preemptions, self.solo_durations(), self.best_rates(),
                            oom_restart_s=self.config.oom_restart_s)
        if self.online is not None:
            summary.update(self.online.summary())
        warn_below_bounds(self.policy.name, summary)
        queues = pd.DataFrame()
        admission = self.core.admission
        if admission is not None:
            admission.advance(max(end, self.state.now))
            queues = queue_frame(jobs, records, admission)
            summary.update(tenancy_summary(queues, admission))
        still = [(job_id, g, live.started, max(end, live.started), "running")
                 for job_id, live in self.live.items() for g in live.gpus]  # unfinished at the end of the run
        return SimResult(self.policy.name, summary, jobs, self.metrics.gpu_frame(end),
                         self.metrics.timeline_frame(self.config.timeline_points), self.events_processed, wall_s,
                         placement_frame(self.placements + still), queues)


def simulate(jobs: Sequence[JobSpec], cluster: Cluster, policy: Policy, truth: TruthModel, predictor: Predictor,
             config: SimConfig | None = None, progress: bool = False, tenancy: Tenancy | None = None) -> SimResult:
    """Run ``policy`` on ``jobs`` against ``truth`` and return metrics (deterministic). With a ``tenancy``, jobs
    wait for their queue's quota (horus.core.tenancy) and ``SimResult.queues`` has one row per queue."""
    started = wallclock.perf_counter()
    engine = _Engine(jobs, cluster, policy, truth, predictor, config or SimConfig(), tenancy)
    engine.run(progress)
    return engine.result(wallclock.perf_counter() - started)
