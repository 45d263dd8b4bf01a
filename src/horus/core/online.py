"""What running jobs show of themselves, turned into observations for online correction (``horus.predict.corrected``);
the same path for every backend that has telemetry (the live service, the simulator).

A backend tells the observer when an attempt starts (``start``: the raw and the corrected prediction it started
with are kept) and passes telemetry as it arrives:

* ``sample_gpu``: the utilization and memory of the job's first GPU (nvidia-smi / NVML, or a fake GPU's stand-in)
  and, where the backend measures it, the job's own memory. Utilization and a GPU's memory count only while the job
  is alone on all its GPUs (a shared GPU's utilization is its residents' together); the job's own memory counts
  whoever shares the GPU.
* ``sample_progress``: iterations done by a time; the solo iteration time is the time over the iterations of
  intervals during which the job was alone on its GPUs (no resident came or went: ``SchedulerState.gpu_changes``),
  counted from the job's first progress report (start-up excluded).
* ``sample_rate``: a rate the backend's telemetry reported while the job ran alone (the simulator's reports).

Only one-GPU jobs give an iteration time (a gang's includes its all-reduce). ``observations`` gives a job's current
observations (utilization: mean of its solo samples; memory: peak; iteration time as above); ``commit`` feeds them
to the ``Corrections`` the predictor reads and refreshes the state's predictions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from horus.predict.base import Prediction
from horus.predict.corrected import CorrectedPredictor, Observation
from horus.state import RunningJob, SchedulerState

MIN_UTIL_SAMPLES = 2  # solo utilization samples before a job's utilization is observed (the first may be partial)
MIN_SOLO_S = 1.0  # seconds of solo progress before a job's iteration time is observed (progress samples)


@dataclass(frozen=True)
class Observed:
    """One observation with what the scheduler believed when the attempt started (``believed``, corrected) and how
    many samples it rests on."""

    observation: Observation
    believed: float
    attempt: int
    samples: int


class _Watch:
    __slots__ = ("attempt", "believed", "changed", "committed", "committed_n", "first_iterations", "gpu_type",
                 "job_type", "last", "log_rate", "mem_n", "mem_peak", "rate_n", "raw", "single", "solo_iterations",
                 "solo_s", "util_n", "util_sum")

    def __init__(self, attempt: int, job_type: str, gpu_type: str, single: bool, raw: Prediction,
                 believed: Prediction, iterations: float) -> None:
        self.attempt, self.job_type, self.gpu_type, self.single = attempt, job_type, gpu_type, single
        self.raw, self.believed = raw, believed
        self.first_iterations = iterations
        self.util_sum, self.util_n = 0.0, 0
        self.mem_peak, self.mem_n = 0.0, 0
        self.last: tuple[float, float, tuple[int, ...]] | None = None  # (time, iterations, GPU changes) solo sample
        self.solo_s, self.solo_iterations = 0.0, 0.0
        self.log_rate, self.rate_n = 0.0, 0
        self.changed = False
        self.committed: float | None = None  # when its observations were last committed
        self.committed_n = 0  # how many quantities were observed then


class OnlineObserver:
    """Per running attempt, solo telemetry accumulated into observations (see the module docstring)."""

    def __init__(self, predictor: CorrectedPredictor, min_util_samples: int = MIN_UTIL_SAMPLES) -> None:
        self.predictor = predictor
        self.min_util_samples = min_util_samples
        self.corrections = predictor.corrections
        self.watches: dict[str, _Watch] = {}

    # ---- attempts ----------------------------------------------------------------------------------
    def start(self, state: SchedulerState, job_id: str, attempt: int) -> None:
        """Attempt ``attempt`` of running job ``job_id`` started (or was adopted after a restart)."""
        run = state.running[job_id]
        if not run.spec.model:
            self.watches.pop(job_id, None)
            return
        gpu_type = state.cluster.gpus[run.gpus[0]].gpu_type
        believed, raw, _ = self.predictor.explain(run.spec, gpu_type)
        self.watches[job_id] = _Watch(attempt, run.spec.job_type, gpu_type.name,
                                      run.spec.num_gpus == 1, raw, believed, run.iterations_done)

    def stop(self, job_id: str) -> list[Observed]:
        """The attempt left its GPUs: its final observations (empty if it showed too little), forgotten here."""
        found = self.observations(job_id)
        self.watches.pop(job_id, None)
        return found

    @staticmethod
    def solo(state: SchedulerState, run: RunningJob) -> bool:
        """Is the job alone on every one of its GPUs?"""
        job_id = run.spec.job_id
        return all(len(state.residents[g]) == 1 and state.residents[g][0] == job_id for g in run.gpus)

    # ---- telemetry ---------------------------------------------------------------------------------
    def sample_gpu(self, state: SchedulerState, job_id: str, util: float | None = None,
                   gpu_mem_mib: float | None = None, job_mem_mib: float | None = None) -> None:
        watch, run = self.watches.get(job_id), state.running.get(job_id)
        if watch is None or run is None:
            return
        solo = self.solo(state, run)
        if solo and util is not None and math.isfinite(util):
            watch.util_sum += util
            watch.util_n += 1
            watch.changed = True
        mem = job_mem_mib if job_mem_mib is not None else gpu_mem_mib if solo else None
        if mem is not None and math.isfinite(mem) and mem > 0:
            watch.mem_peak = max(watch.mem_peak, mem)
            watch.mem_n += 1
            watch.changed = True

    def sample_progress(self, state: SchedulerState, job_id: str, now: float, iterations: float) -> None:
        watch, run = self.watches.get(job_id), state.running.get(job_id)
        if watch is None or run is None or not watch.single:
            return
        if not self.solo(state, run) or iterations <= watch.first_iterations:
            watch.last = None  # not alone, or no progress reported yet (start-up is not an iteration)
            return
        changes = tuple(int(state.gpu_changes[g]) for g in run.gpus)
        last = watch.last
        if last is not None and last[2] == changes and now > last[0] and iterations >= last[1]:
            watch.solo_s += now - last[0]
            watch.solo_iterations += iterations - last[1]
            watch.changed = True
        watch.last = (now, iterations, changes)

    def sample_rate(self, state: SchedulerState, job_id: str, rate: float) -> None:
        """A rate (iterations/s) reported while the job ran alone (the caller knows the report's time)."""
        watch, run = self.watches.get(job_id), state.running.get(job_id)
        if watch is None or run is None or not watch.single or not (rate > 0 and math.isfinite(rate)):
            return
        if self.solo(state, run):
            watch.log_rate += math.log(rate)
            watch.rate_n += 1
            watch.changed = True

    # ---- observations ------------------------------------------------------------------------------
    def observations(self, job_id: str) -> list[Observed]:
        """The job's current observations (those with enough samples)."""
        watch = self.watches.get(job_id)
        if watch is None:
            return []
        found: list[tuple[str, float, int]] = []
        if watch.util_n >= max(1, self.min_util_samples):
            found.append(("util", watch.util_sum / watch.util_n, watch.util_n))
        if watch.mem_n:
            found.append(("mem_mib", watch.mem_peak, watch.mem_n))
        if watch.rate_n:
            found.append(("iter_time_s", math.exp(-watch.log_rate / watch.rate_n), watch.rate_n))
        elif watch.solo_s >= MIN_SOLO_S and watch.solo_iterations > 0:
            found.append(("iter_time_s", watch.solo_s / watch.solo_iterations, int(watch.solo_iterations)))
        return [Observed(Observation(job_id, watch.job_type, watch.gpu_type, q, getattr(watch.raw, q), value),
                         getattr(watch.believed, q), watch.attempt, n) for q, value, n in found]

    def due(self, now: float, every_s: float) -> dict[str, list[Observed]]:
        """Observations to commit now: of jobs with new samples that observe a quantity more than at their last
        commit, or were last committed ``every_s`` seconds ago or more."""
        out = {}
        for job_id, w in self.watches.items():
            if not w.changed:
                continue
            found = self.observations(job_id)
            if found and (len(found) > w.committed_n or w.committed is None or now - w.committed >= every_s):
                out[job_id] = found
        return out

    def taken(self, job_id: str, now: float, count: int) -> None:
        """``count`` observations of the job were committed at ``now``."""
        watch = self.watches.get(job_id)
        if watch is not None:
            watch.changed, watch.committed, watch.committed_n = False, now, count

    def resync(self, state: SchedulerState, attempts: dict[str, int]) -> list[Observed]:
        """Match the watches to the running attempts (``attempts``: job id -> attempt): an attempt not watched yet
        starts now, a watched one that stopped running gives its final observations (returned)."""
        ended: list[Observed] = []
        for job_id, watch in list(self.watches.items()):
            if attempts.get(job_id) != watch.attempt or job_id not in state.running:
                ended += self.stop(job_id)
        for job_id, attempt in attempts.items():
            if job_id not in self.watches and job_id in state.running:
                self.start(state, job_id, attempt)
        return ended

    def rebased(self) -> None:
        """The state was rebuilt (GPU change counters start again): progress intervals start afresh."""
        for watch in self.watches.values():
            watch.last = None

    def commit(self, state: SchedulerState, found: list[Observed]) -> bool:
        """Feed ``found`` to the corrections; if any correction changed, the state's predictions are refreshed.
        True if they were."""
        before = self.corrections.version
        for item in found:
            self.corrections.observe(item.observation)
        if self.corrections.version == before:
            return False
        state.refresh_predictions()
        return True
