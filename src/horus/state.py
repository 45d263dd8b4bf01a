"""Scheduler state: what every policy sees, maintained identically by every backend.

It holds job specs, the scheduler's *predictions* (belief) and online telemetry, never the
truth. Per-GPU quantities are numpy arrays indexed by global GPU index, so policies can score
all GPUs at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np

from horus.cluster import Cluster, GPUType
from horus.jobs import JobSpec
from horus.predict.base import Prediction, Predictor


@dataclass
class QueuedJob:
    spec: JobSpec
    queued_since: float  # when it (re-)entered the queue
    attained_gpu_s: float = 0.0  # GPU-seconds received so far (for LAS/Tiresias)
    oom_failures: int = 0  # times a start failed with out-of-memory (telemetry)
    preemptions: int = 0
    entered: int = field(default=0, compare=False)  # the state's entry counter when it (re-)entered the queue
    # with a tenancy: its queue's guarantee covers it now (``horus.core.tenancy``, set at each step); a policy may
    # then place a pod requesting a GPU fraction by its request alone (``horus``)
    within_guarantee: bool = False


@dataclass
class RunningJob:
    spec: JobSpec
    gpus: tuple[int, ...]
    start_time: float
    attained_gpu_s: float = 0.0  # including service before preemptions
    iterations_done: float = 0.0  # telemetry: progress reported by the job
    observed_rate: float = 0.0  # telemetry: iterations per second, as last reported (0: no rate yet)
    oom_failures: int = 0
    preemptions: int = 0
    # telemetry: when the report behind ``observed_rate`` and ``iterations_done`` was made; None for continuous
    # telemetry (the simulator's exact model, the live service), whose values are current
    reported_at: float | None = None

    @property
    def iterations_left(self) -> float:
        """Iterations still to run (telemetry: the job's size minus its reported progress, never negative)."""
        return max(self.spec.iterations - self.iterations_done, 0.0)

    def attained(self, now: float) -> float:
        """GPU-seconds attained so far, including the current run."""
        return self.attained_gpu_s + len(self.gpus) * (now - self.start_time)


def gpu_share(spec: JobSpec) -> float:
    """Share of a GPU a job requests per worker: its fraction, or 1.0 for whole-GPU jobs."""
    return spec.gpu_fraction if spec.gpu_fraction is not None else 1.0


@dataclass
class GPULoad:
    """Per-GPU belief arrays. ``Tentative`` copies these for look-ahead planning."""

    pred_util: np.ndarray  # sum of predicted solo utilization of residents (fractions)
    pred_mem_mib: np.ndarray  # sum of predicted memory of residents
    n_residents: np.ndarray  # number of resident workers
    alloc_share: np.ndarray  # sum of requested GPU shares (fractions; whole-GPU job = 1)

    @classmethod
    def zeros(cls, n: int) -> GPULoad:
        return cls(np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n))

    def copy(self) -> GPULoad:
        return GPULoad(self.pred_util.copy(), self.pred_mem_mib.copy(), self.n_residents.copy(), self.alloc_share.copy())

    def equals(self, other: GPULoad | None) -> bool:
        """Same per-GPU load, value by value."""
        return (other is not None and len(other.n_residents) == len(self.n_residents)
                and np.array_equal(self.n_residents, other.n_residents)
                and np.array_equal(self.pred_mem_mib, other.pred_mem_mib)
                and np.array_equal(self.pred_util, other.pred_util)
                and np.array_equal(self.alloc_share, other.alloc_share))

    def add(self, gpus: Sequence[int], pred: Prediction, share: float, sign: int = 1) -> None:
        """Add (sign=+1) or remove (-1) one worker of a job on each of ``gpus`` (distinct indices)."""
        if len(gpus) == 1:  # the same values, without building index arrays
            g = gpus[0]
            self.pred_util[g] += sign * pred.util
            self.pred_mem_mib[g] += sign * pred.mem_mib
            self.n_residents[g] += sign
            self.alloc_share[g] += sign * share
            return
        idx = list(gpus)
        self.pred_util[idx] += sign * pred.util
        self.pred_mem_mib[idx] += sign * pred.mem_mib
        self.n_residents[idx] += sign
        self.alloc_share[idx] += sign * share


class SchedulerState:
    """Queue, running jobs and per-GPU predicted load of one cluster.

    Backends call ``submit``, ``start``, ``finish``, ``requeue``, ``withdraw`` and ``enqueue``; each bumps
    ``version`` (those that start or stop a job also ``load_version``), so "nothing changed since" is one
    integer comparison. ``SchedulerCore`` numbers its policy calls (``begin_step``) and marks a step whose
    actions were all carried out as planned (``settle``); ``PlanMemo`` builds on that. Policies only read (and plan on
    ``tentative()`` copies). ``predict`` caches predictions per (job type, GPU type).
    """

    def __init__(self, cluster: Cluster, predictor: Predictor) -> None:
        self.cluster = cluster
        self.predictor = predictor
        self.now: float = 0.0
        self.queue: dict[str, QueuedJob] = {}  # insertion order = arrival/requeue order
        # with a tenancy (``gated``), jobs enter ``held`` and the core admits them into ``queue`` (horus.core.tenancy)
        self.held: dict[str, QueuedJob] = {}
        self.gated = False
        self.running: dict[str, RunningJob] = {}
        self.running_type: type[RunningJob] = RunningJob  # what ``start`` makes (a backend may use a subclass)
        self.residents: list[list[str]] = [[] for _ in cluster.gpus]
        self.load = GPULoad.zeros(cluster.num_gpus)
        self.mem_capacity_mib = np.array([g.gpu_type.memory_mib for g in cluster.gpus], dtype=float)
        self.node_of_gpu = np.array([g.node for g in cluster.gpus], dtype=np.int64)
        self.gpu_type_names = np.array([g.gpu_type.name for g in cluster.gpus])
        self.gpus_of_type = [(t, np.flatnonzero(self.gpu_type_names == t.name)) for t in cluster.gpu_types()]
        self._pred_cache: dict[tuple[str, str], Prediction] = {}
        self.version = 0  # bumped by every transition
        self.load_version = 0  # bumped whenever a job starts or stops (the per-GPU load changed)
        self.step = 0  # policy calls made by the core so far
        self._settled: dict[int, int] = {}  # recent step -> load_version once its actions were all carried out
        self.gpu_changes = np.zeros(cluster.num_gpus, dtype=np.int64)  # per GPU: times a resident came or went
        self.entries = 0  # queue entries so far (``QueuedJob.entered``: newer entries are larger)

    # ---- belief -------------------------------------------------------------------------
    def predict(self, spec: JobSpec, gpu_type: GPUType) -> Prediction:
        key = (spec.job_type, gpu_type.name)
        pred = self._pred_cache.get(key)
        if pred is None:
            pred = self.predictor.predict(spec, gpu_type)
            self._pred_cache[key] = pred
        return pred

    def refresh_predictions(self) -> None:
        """The predictor's belief changed (online correction): forget cached predictions and rebuild the per-GPU
        load of the running jobs from fresh ones (a new load version: plans made on the old load are void)."""
        self._pred_cache.clear()
        for array in (self.load.pred_util, self.load.pred_mem_mib, self.load.n_residents, self.load.alloc_share):
            array[:] = 0  # in place: the same load object, rebuilt
        for run in self.running.values():
            self.load.add(run.gpus, self.predict(run.spec, self.cluster.gpus[run.gpus[0]].gpu_type),
                          gpu_share(run.spec))
        self.load_version += 1
        self.version += 1

    def tentative(self) -> GPULoad:
        """A private copy of the per-GPU load to plan several placements on."""
        return self.load.copy()

    # ---- policy steps (the core only) -------------------------------------------------------
    def begin_step(self) -> int:
        """Number the policy call about to be made."""
        self.step += 1
        return self.step

    def settle(self, step: int) -> None:
        """The actions of ``step`` were all carried out as planned: the load now is the load that step planned."""
        self._settled[step] = self.load_version
        if len(self._settled) > 16:
            del self._settled[min(self._settled)]

    def load_as_planned(self, step: int) -> bool:
        """True while the load is exactly what policy call ``step`` planned: that step was settled and no job
        started or stopped since."""
        return self._settled.get(step) == self.load_version

    # ---- transitions (backends only) ----------------------------------------------------
    def submit(self, spec: JobSpec, now: float) -> None:
        self._enter(QueuedJob(spec, queued_since=now))

    def withdraw(self, job_id: str) -> QueuedJob:
        """A queued (or held) job leaves the queue without running (a start that failed, a cancel)."""
        queued = self.queue.pop(job_id, None) or self.held.pop(job_id)
        self.version += 1
        return queued

    def waiting(self, job_id: str) -> QueuedJob | None:
        """The job's entry if it waits: in the policy's queue, or held for its queue's quota."""
        return self.queue.get(job_id) or self.held.get(job_id)

    def entries_since(self, mark: int, *, held: bool = False) -> list[QueuedJob]:
        """Entries of the queue (or of ``held``) made after entry number ``mark``, oldest first (cost: those only;
        both dicts keep entry order)."""
        fresh = []
        for job in reversed((self.held if held else self.queue).values()):
            if job.entered <= mark:
                break
            fresh.append(job)
        fresh.reverse()
        return fresh

    def hold(self, job_id: str) -> QueuedJob:
        """An admitted job that has not started goes back to ``held`` (its admission revoked): a new entry."""
        return self._move(job_id, self.queue, self.held)

    def admit(self, job_id: str) -> QueuedJob:
        """A held job enters the policy's queue (its tenant's quota allows it): a new queue entry."""
        return self._move(job_id, self.held, self.queue)

    def _move(self, job_id: str, source: dict[str, QueuedJob], target: dict[str, QueuedJob]) -> QueuedJob:
        job = source.pop(job_id)
        self.entries += 1
        job.entered = self.entries
        target[job_id] = job
        self.version += 1
        return job

    def enqueue(self, job: QueuedJob) -> None:
        """A withdrawn job comes back at the end of the queue (e.g. after its out-of-memory restart delay)."""
        self._enter(job)

    def _enter(self, job: QueuedJob) -> None:
        self.entries += 1
        job.entered = self.entries
        (self.held if self.gated else self.queue)[job.spec.job_id] = job
        self.version += 1

    def start(self, job_id: str, gpus: tuple[int, ...], now: float) -> RunningJob:
        queued = self.queue.pop(job_id)
        run = self.running_type(queued.spec, gpus, now, queued.attained_gpu_s,
                                oom_failures=queued.oom_failures, preemptions=queued.preemptions)
        self.running[job_id] = run
        self._apply(run, +1)
        self.version += 1
        return run

    def finish(self, job_id: str) -> RunningJob:
        run = self._stop(job_id)
        self.version += 1
        return run

    def _stop(self, job_id: str) -> RunningJob:
        run = self.running.pop(job_id)
        self._apply(run, -1)
        return run

    def requeue(self, job_id: str, now: float, *, oom: bool = False) -> QueuedJob:
        """Stop a running job and put it back in the queue (preemption or OOM failure), keeping the
        GPU-seconds it attained, this run included."""
        run = self._stop(job_id)
        queued = QueuedJob(run.spec, queued_since=now, attained_gpu_s=run.attained(now),
                           oom_failures=run.oom_failures + int(oom), preemptions=run.preemptions + int(not oom))
        self._enter(queued)
        return queued

    def _apply(self, run: RunningJob, sign: int) -> None:
        self.load_version += 1
        if len(run.gpus) == 1:  # the same count, without an index array
            self.gpu_changes[run.gpus[0]] += 1
        else:
            self.gpu_changes[list(run.gpus)] += 1
        for gpu in run.gpus:
            if sign > 0:
                self.residents[gpu].append(run.spec.job_id)
            else:
                self.residents[gpu].remove(run.spec.job_id)
        pred = self.predict(run.spec, self.cluster.gpus[run.gpus[0]].gpu_type)
        self.load.add(run.gpus, pred, gpu_share(run.spec), sign)


T = TypeVar("T")


class PlanMemo(Generic[T]):
    """What a policy concluded in one call about its planned load (e.g. the jobs it found unplaceable there),
    trusted at a later call only while the load is exactly as that call planned it
    (``SchedulerState.load_as_planned``); otherwise ``recall`` gives ``empty``. Placement is monotone in the
    load, so a job unplaceable under a load stays so until some job starts or stops."""

    def __init__(self, empty: T) -> None:
        self.empty = empty
        self.value = empty
        self.step = -1

    def remember(self, state: SchedulerState, value: T) -> None:
        self.value, self.step = value, state.step

    def recall(self, state: SchedulerState) -> T:
        return self.value if state.load_as_planned(self.step) else self.empty

    def renew(self, state: SchedulerState) -> None:
        """This call returns no action: a value still trusted stays trusted from this step on (without this, a
        memo older than the state's window of settled steps would be re-derived, which a policy whose decisions
        also depend on time may not do alike)."""
        if state.load_as_planned(self.step):
            self.step = state.step
