"""What telemetry says about co-location: normalized throughputs learned from running jobs' observed rates.

Policies may read telemetry of running jobs (``RunningJob.observed_rate``, iterations per second), never
the truth. ``ObservedThroughput`` turns it into a belief about co-located *type sets* on a GPU type:

* a single-GPU job alone on its GPU gives its own and its type's **solo rate** there (and the
  predictor's speed bias on that GPU type: mean log of observed / predicted solo rate);
* a GPU whose residents are all single-GPU jobs gives one sample of the set's **normalized throughputs**
  ``x_i = rate_i / solo rate_i`` (the job's own solo rate if it ran alone, else its type's, else the
  predicted ``1 / iter_time_s`` corrected by the speed bias).

``estimate(types, gpu_type)`` answers for any set: the running mean of its samples when it was seen
(uncertainty ``obs_sigma / sqrt(n)``); otherwise the prior (an interference model's prediction, by default
the untrained summed-utilization rule on predicted utilization) corrected by each member type's mean
residual (observed minus prior) over the sets it was seen in, with uncertainty ``prior_sigma``. Multi-GPU
jobs are not sampled (a gang's rate is set by its slowest worker and communication, so a per-GPU share
cannot be read from it), nor are jobs without a model (the live service's placeholder belief; no job type).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from horus.cluster import Cluster, GPUType
from horus.interference.slowdown import SlowdownEstimator
from horus.jobs import JobSpec
from horus.predict.base import Prediction


class RunView(Protocol):
    """What is read of a running job (``horus.state.RunningJob`` is one)."""

    @property
    def spec(self) -> JobSpec: ...

    @property
    def gpus(self) -> tuple[int, ...]: ...

    @property
    def observed_rate(self) -> float: ...


class TelemetryView(Protocol):
    """What ``ObservedThroughput`` reads of the scheduler's state (``horus.state.SchedulerState`` is one): the
    running jobs' telemetry and predictions, never the truth."""

    @property
    def now(self) -> float: ...

    @property
    def cluster(self) -> Cluster: ...

    @property
    def gpu_changes(self) -> np.ndarray: ...

    @property
    def residents(self) -> list[list[str]]: ...

    @property
    def running(self) -> Mapping[str, RunView]: ...

    def predict(self, spec: JobSpec, gpu_type: GPUType) -> Prediction: ...


@dataclass
class SetEstimate:
    """Belief about one co-located set: each member's normalized throughput and the sum's uncertainty."""

    x: list[float]  # in the order the types were given
    sigma: float  # standard uncertainty of sum(x)
    observed: int  # samples behind it (0: prior)

    @property
    def combined(self) -> float:
        return float(sum(self.x))


class ObservedThroughput:
    """Solo rates and co-located set throughputs learned from ``RunningJob.observed_rate`` (no truth).

    Call ``observe(state)`` at the start of every scheduling call; it reads only GPUs whose residents
    changed since the last call (``SchedulerState.gpu_changes``: any arrival or departure, even of a job
    with the same predicted load), plus those still waiting for a first rate, and all GPUs every
    ``rescan_s`` seconds of state time, so drifting live telemetry is followed.
    """

    def __init__(self, prior: SlowdownEstimator, *, prior_sigma: float = 0.15, obs_sigma: float = 0.05,
                 rescan_s: float = 1800.0) -> None:
        self.prior = prior
        self.prior_sigma = prior_sigma
        self.obs_sigma = obs_sigma
        self.rescan_s = rescan_s
        self.solo: dict[tuple[str, str], tuple[float, int]] = {}  # (type, gpu type) -> (mean rate, n)
        self.sets: dict[tuple[str, tuple[str, ...]], tuple[np.ndarray, int]] = {}  # (gpu, sorted types) -> (x, n)
        self.residual: dict[tuple[str, str], tuple[float, int]] = {}  # (type, gpu type) -> (mean obs - prior, n)
        self.job_solo: dict[tuple[str, str], float] = {}  # (job id, gpu type) -> its own rate alone
        self.log_bias: dict[str, tuple[float, int]] = {}  # gpu type -> mean log(observed / predicted solo rate)
        self._changes: np.ndarray | None = None  # state.gpu_changes at the last call
        self._pending: set[int] = set()
        self._last_scan = -math.inf
        self._state: TelemetryView | None = None
        self.samples = 0
        self._cache: dict[tuple[str, tuple[str, ...]], SetEstimate] = {}
        self._cache_version = -1

    # ---- learning -------------------------------------------------------------------------------
    def observe(self, state: TelemetryView) -> None:
        """Record what the running jobs' rates say now (cost follows the GPUs that changed)."""
        changes = state.gpu_changes
        if (state is not self._state or self._changes is None or len(self._changes) != len(changes)
                or state.now - self._last_scan >= self.rescan_s):
            changed = np.arange(len(changes))
            if state is not self._state:  # another cluster (the live service rebuilt it): old indices mean nothing
                self._pending = set()
            self._state, self._last_scan = state, state.now
        else:
            changed = np.flatnonzero(changes != self._changes)
        self._changes = changes.copy()
        gpus = {g for g in set(changed.tolist()) | self._pending if g < len(changes)}
        self._pending = set()
        for g in gpus:
            if not self._observe_gpu(g, state):
                self._pending.add(g)

    def _observe_gpu(self, g: int, state: TelemetryView) -> bool:
        """Sample GPU ``g``; False when a resident has no rate yet (retry later)."""
        residents = state.residents[g]
        if not residents:
            return True
        runs = [state.running[j] for j in residents]
        if any(not r.observed_rate > 0 for r in runs):
            return False
        if any(r.spec.num_gpus > 1 for r in runs):
            run = runs[0]
            if len(runs) == 1 and all(len(state.residents[h]) == 1 for h in run.gpus):  # a gang alone everywhere
                self.job_solo[(run.spec.job_id, state.cluster.gpus[g].gpu_type.name)] = run.observed_rate
            return True
        gpu_type = state.cluster.gpus[g].gpu_type
        if any(not r.spec.model for r in runs):  # a job without a model has no type to learn about, and its
            if len(runs) == 1:                   # prediction is a placeholder (no speed bias to read from it)
                self.job_solo[(runs[0].spec.job_id, gpu_type.name)] = runs[0].observed_rate
            return True
        if len(runs) == 1:
            run = runs[0]
            key = (run.spec.job_type, gpu_type.name)
            mean, n = self.solo.get(key, (0.0, 0))
            self.solo[key] = ((mean * n + run.observed_rate) / (n + 1), n + 1)
            self.job_solo[(run.spec.job_id, gpu_type.name)] = run.observed_rate
            pred = state.predict(run.spec, gpu_type)
            if pred.iter_time_s > 0:
                bias, m = self.log_bias.get(gpu_type.name, (0.0, 0))
                self.log_bias[gpu_type.name] = ((bias * m + math.log(run.observed_rate * pred.iter_time_s)) / (m + 1),
                                                m + 1)
            return True
        types = [r.spec.job_type for r in runs]
        xs = [r.observed_rate / self.solo_rate(r.spec, gpu_type, state) for r in runs]
        order = sorted(range(len(types)), key=lambda i: types[i])
        key2 = (gpu_type.name, tuple(types[i] for i in order))
        sample = np.array([min(1.0, xs[i]) for i in order])
        mean_x, n = self.sets.get(key2, (np.zeros(len(order)), 0))
        if n and np.allclose(mean_x, sample, rtol=0.0, atol=1e-9):
            return True  # the same again (a rescan of a deterministic world): nothing learned
        self.sets[key2] = ((mean_x * n + sample) / (n + 1), n + 1)
        prior = self.prior.throughputs(list(key2[1]), gpu_type)
        for t, obs, pri in zip(key2[1], sample, prior):
            mean_r, m = self.residual.get((t, gpu_type.name), (0.0, 0))
            self.residual[(t, gpu_type.name)] = ((mean_r * m + (obs - pri)) / (m + 1), m + 1)
        self.samples += 1
        return True

    # ---- belief ---------------------------------------------------------------------------------
    def solo_rate(self, spec: JobSpec, gpu_type: GPUType, state: TelemetryView) -> float:
        """Solo iterations/s of a job on a GPU type: its own observed rate alone, else its type's, else the
        predicted one corrected by the predictor's mean observed bias on that GPU type."""
        own = self.job_solo.get((spec.job_id, gpu_type.name))
        if own is not None:
            return own
        found = self.solo.get((spec.job_type, gpu_type.name))
        if found is not None:
            return found[0]
        pred = state.predict(spec, gpu_type)
        if not pred.iter_time_s > 0:
            return math.inf
        bias = self.log_bias.get(gpu_type.name)
        return math.exp(bias[0] if bias else 0.0) / pred.iter_time_s

    def estimate(self, types: Sequence[str], gpu_type: GPUType) -> SetEstimate:
        """Belief about the set ``types`` sharing one GPU of ``gpu_type`` (order of ``types`` kept; answers are
        cached until something new is learned)."""
        key = (gpu_type.name, tuple(types))
        if self._cache_version != self.samples:
            self._cache.clear()
            self._cache_version = self.samples
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._estimate(types, gpu_type)
        return found

    def _estimate(self, types: Sequence[str], gpu_type: GPUType) -> SetEstimate:
        n_types = len(types)
        if n_types <= 1:
            return SetEstimate([1.0] * n_types, 0.0, 0)
        order = sorted(range(n_types), key=lambda i: types[i])
        key = (gpu_type.name, tuple(types[i] for i in order))
        found = self.sets.get(key)
        out = [0.0] * n_types
        if found is not None:
            mean_x, n = found
            for pos, i in enumerate(order):
                out[i] = float(mean_x[pos])
            return SetEstimate(out, self.obs_sigma / math.sqrt(n), n)
        prior = self.prior.throughputs(list(types), gpu_type)
        for i, t in enumerate(types):
            resid = self.residual.get((t, gpu_type.name))
            out[i] = min(1.0, max(0.02, prior[i] + (resid[0] if resid else 0.0)))
        return SetEstimate(out, self.prior_sigma, 0)

    def describe(self) -> dict[str, object]:
        return {"prior": self.prior.describe(), "prior_sigma": self.prior_sigma, "obs_sigma": self.obs_sigma,
                "rescan_s": self.rescan_s}
