"""What telemetry says about co-location: normalized throughputs learned from running jobs' observed rates.

Policies may read telemetry of running jobs (``RunningJob.observed_rate``, iterations per second), never
the truth. ``ObservedThroughput`` turns it into a belief about co-located *type sets* on a GPU type:

* a single-GPU job alone on its GPU gives its own and its type's **solo rate** there (and the
  predictor's speed bias on that GPU type: mean log of observed / predicted solo rate);
* a GPU whose residents are all single-GPU jobs gives one sample of the set's **normalized throughputs**
  ``x_i = rate_i / solo rate_i`` (the job's own solo rate if it ran alone, else its type's, else the
  predicted ``1 / iter_time_s`` corrected by the speed bias).

``estimate(types, gpu_type)`` answers for any set: the running mean of its samples when it was seen, with
the uncertainty of that mean (below); otherwise the prior (an interference model's prediction, by default
the untrained summed-utilization rule on predicted utilization) corrected by each member type's mean
residual (observed minus prior) over the sets it was seen in, with uncertainty ``prior_sigma``. Multi-GPU
jobs are not sampled (a gang's rate is set by its slowest worker and communication, so a per-GPU share
cannot be read from it), nor are jobs without a model (the live service's placeholder belief; no job type).

Telemetry comes in two kinds, told apart by ``RunningJob.reported_at``:

* **continuous** (``None``: the simulator's ``exact`` model, the live service): a rate is the current one and
  exact. A GPU is read when its residents change, while it waits for a rate, and every ``rescan_s``; a repeat
  of a set's sample is not counted; one sample settles a set; a job's own solo rate is its latest.
* **reported** (a time: the simulator's ``noisy`` model): a rate comes from a periodic, noisy report. A GPU is
  read again whenever every resident has reported anew since its last reading (so samples are independent),
  but only reports made after its residents last changed count (older ones describe another set). Samples are
  not capped at 1 (capping noise biases the mean low; the estimate is), a job's own solo rate is the mean of
  its reports, and a set is *settled* only after ``min_samples`` samples. A set's mean and a job's own solo rate
  (a gang's too) are known well enough after ``max_samples`` reports and no longer read (at a noise of 5 %, 32
  reports give a mean to about 1 %; each new set sample makes the policies re-plan). A job's reports stop
  feeding its type's solo rate and the GPU type's speed bias with its own: those means keep learning, from at
  most ``max_samples`` reports of each job (they average *across* jobs and types, which one job's reports do not
  teach). A job whose readings can change nothing more (on each GPU it holds: alone with its own mean capped, or
  sharing it with a set that is capped or never sampled) is not asked for its report at all until the residents
  of one of its GPUs change: in the simulator its reports are then never generated (other readers of its
  telemetry still get them when they look).

The uncertainty of a set's mean is ``max(obs_sigma, s) / sqrt(n)`` over its ``n`` samples. For reported
samples ``s`` is the spread (standard deviation) of their combined throughputs, pooled with one pseudo-sample
of ``prior_sigma`` (one noisy report says nothing of the noise): ``s^2 = (prior_sigma^2 + sum of squared
deviations) / n``. Continuous samples are exact (they differ only as solo references improve, which is no
noise to average), so ``s = 0``: ``obs_sigma / sqrt(n)``.
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


_NO_READING: dict[str, float] = {}  # a GPU not read yet (never written)


class RunView(Protocol):
    """What is read of a running job (``horus.state.RunningJob`` is one)."""

    @property
    def spec(self) -> JobSpec: ...

    @property
    def gpus(self) -> tuple[int, ...]: ...

    @property
    def observed_rate(self) -> float: ...

    @property
    def reported_at(self) -> float | None: ...


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
    settled: bool = False  # enough samples to act on: one continuous sample, or ``min_samples`` reported ones

    @property
    def combined(self) -> float:
        return float(sum(self.x))


class ObservedThroughput:
    """Solo rates and co-located set throughputs learned from ``RunningJob.observed_rate`` (no truth).

    Call ``observe(state)`` at the start of every scheduling call; it reads only GPUs whose residents
    changed since the last call (``SchedulerState.gpu_changes``: any arrival or departure, even of a job
    with the same predicted load), plus those still waiting for a first rate, those with new reports, and
    all GPUs every ``rescan_s`` seconds of state time, so drifting live telemetry is followed.
    """

    def __init__(self, prior: SlowdownEstimator, *, prior_sigma: float = 0.15, obs_sigma: float = 0.05,
                 rescan_s: float = 1800.0, min_samples: int = 3, max_samples: int = 32) -> None:
        if not 1 <= min_samples <= max_samples:
            raise ValueError(f"expected 1 <= min_samples <= max_samples, got {min_samples} and {max_samples}")
        self.prior = prior
        self.prior_sigma = prior_sigma
        self.obs_sigma = obs_sigma
        self.rescan_s = rescan_s
        self.min_samples = min_samples
        self.max_samples = max_samples
        self.solo: dict[tuple[str, str], tuple[float, int]] = {}  # (type, gpu type) -> (mean rate, n)
        self.sets: dict[tuple[str, tuple[str, ...]], tuple[np.ndarray, int]] = {}  # (gpu, sorted types) -> (x, n)
        # (gpu, sorted types) -> (sum of squared deviations of the combined samples, any reported sample)
        self.spread: dict[tuple[str, tuple[str, ...]], tuple[float, bool]] = {}
        self.residual: dict[tuple[str, str], tuple[float, int]] = {}  # (type, gpu type) -> (mean obs - prior, n)
        self.job_solo: dict[tuple[str, str], float] = {}  # (job id, gpu type) -> its own rate alone
        self._job_solo_n: dict[tuple[str, str], int] = {}  # (job id, gpu type) -> reports averaged in job_solo
        self.log_bias: dict[str, tuple[float, int]] = {}  # gpu type -> mean log(observed / predicted solo rate)
        self._changes: np.ndarray | None = None  # state.gpu_changes at the last call
        self._pending: set[int] = set()
        self._last_scan = -math.inf
        self._state: TelemetryView | None = None
        self._changed_at: dict[int, float] = {}  # GPU -> state time its residents were last seen to change
        self._read: dict[int, dict[str, float]] = {}  # GPU -> its residents' report times at its latest reading
        self._seen: dict[str, float] = {}  # job id -> its latest report time seen
        self._reported = False  # some job's telemetry came in reports (then new reports are looked for)
        # per job (checked to be the same running job): when the residents of a GPU it holds last changed, and
        # whether it is alone on all its GPUs; kept across calls, dropped for the residents of GPUs that changed
        self._since: dict[str, tuple[RunView, float]] = {}
        self._alone: dict[str, tuple[RunView, bool]] = {}
        # reported telemetry: jobs whose reports can change nothing more (``_saturated``), until a GPU they hold changes
        self._done: dict[str, RunView] = {}
        self.samples = 0
        self._names_of: Cluster | None = None  # the cluster ``_names`` and ``_one_type`` describe (``_gpu_names``)
        self._names: list[str] = []
        self._one_type: str | None = None
        # answers of ``estimate`` kept until a sample changes what they read: a sample of a set on a GPU type
        # moves that set's mean and its member types' residuals there, so it drops the cached answers about that set
        # (``_by_set``) and those from the prior on that GPU type that name one of its types (``_by_type``)
        self._cache: dict[tuple[str, tuple[str, ...]], SetEstimate] = {}
        self._by_type: dict[tuple[str, str], set[tuple[str, tuple[str, ...]]]] = {}  # (GPU type, type): prior answers
        self._by_set: dict[tuple[str, tuple[str, ...]], set[tuple[str, tuple[str, ...]]]] = {}  # (GPU type, sorted set)
        # when a list, every sample appends (GPU type name, the set's sorted types): what it may have changed,
        # for a reader that keeps answers derived from ``estimate`` (the reader empties it)
        self.learned: list[tuple[str, tuple[str, ...]]] | None = None
        self.generation = 0  # bumped when the cache of answers is emptied whole (answers are then new objects)

    # ---- learning -------------------------------------------------------------------------------
    def observe(self, state: TelemetryView) -> None:
        """Record what the running jobs' rates say now (cost follows the GPUs that changed)."""
        changes = state.gpu_changes
        fresh = state is not self._state or self._changes is None or len(self._changes) != len(changes)
        if fresh or state.now - self._last_scan >= self.rescan_s:
            changed = np.arange(len(changes))
            moved = changed if fresh else np.flatnonzero(changes != self._changes)
            if state is not self._state:  # another cluster (the live service rebuilt it): old indices mean nothing
                self._pending, self._read, self._seen = set(), {}, {}
                self._since, self._alone, self._done = {}, {}, {}
            self._state, self._last_scan = state, state.now
        else:
            changed = moved = np.flatnonzero(changes != self._changes)
        self._changes = changes.copy()
        since, alone, done, residents = self._since, self._alone, self._done, state.residents
        for g in moved.tolist():
            self._changed_at[g] = state.now
            for j in residents[g]:  # what ``_since_job``, ``_alone_job`` and ``_saturated`` read of its jobs changed
                since.pop(j, None)
                alone.pop(j, None)
                done.pop(j, None)
        if len(since) + len(alone) > 4 * len(state.running) + 1024:  # jobs that left
            self._since = {j: v for j, v in since.items() if state.running.get(j) is v[0]}
            self._alone = {j: v for j, v in alone.items() if state.running.get(j) is v[0]}
        gpus = set(changed.tolist()) | self._pending
        alone_gangs: list[RunView] = []  # gangs that reported anew and hold their GPUs alone: read whole, below
        if self._reported:
            gpus |= self._new_reports(state, alone_gangs)
        gpus = {g for g in gpus if g < len(changes)}
        self._pending = set()
        gangs: dict[str, list[int]] = {}  # a gang alone on GPUs to read: its GPUs, read together (``_observe_gang``)
        running, pending = state.running, self._pending
        for g in gpus:
            on_g = residents[g]
            if done and any(done.get(j) is running[j] for j in on_g):
                continue  # a resident's reports can change nothing on any GPU it holds, so neither can this GPU's
            if len(on_g) == 1:  # ``_observe_gpu`` for one resident, without looking it up twice
                run = running[on_g[0]]
                if run.spec.num_gpus > 1:
                    gangs.setdefault(on_g[0], []).append(g)
                elif not self._observe_alone(g, run, state):
                    pending.add(g)
            elif on_g and not self._observe_gpu(g, state):
                pending.add(g)
        for run in alone_gangs:  # every GPU of it, once (some may have come through the GPUs above)
            listed = gangs.get(run.spec.job_id)
            if listed is None:
                gangs[run.spec.job_id] = list(run.gpus)
            else:
                known = set(listed)
                listed.extend(h for h in run.gpus if h not in known)
        for job_id, gang_gpus in gangs.items():
            self._observe_gang(running[job_id], gang_gpus, state)

    def _new_reports(self, state: TelemetryView, alone_gangs: list[RunView]) -> set[int]:
        """GPUs of running jobs that reported since the last call (reported telemetry only); a gang that holds all
        its GPUs alone goes to ``alone_gangs`` instead of its GPUs (``observe`` reads it whole)."""
        seen, done, out = self._seen, self._done, set()
        for job_id, run in state.running.items():
            found = done.get(job_id)
            if found is run:
                continue  # nothing left to learn from its reports: not even asked for one
            if self._saturated(run, state):
                done[job_id] = run
                continue
            at = getattr(run, "reported_at", None)
            if at is not None and seen.get(job_id) != at:
                seen[job_id] = at
                gpus = run.gpus
                if len(gpus) == 1:
                    out.add(gpus[0])
                elif len(gpus) > 1 and self._alone_job(run, state):
                    alone_gangs.append(run)
                else:
                    out.update(gpus)
        if len(seen) > 2 * len(state.running) + 1024:  # jobs that left
            self._seen = {j: at for j, at in seen.items() if j in state.running}
        if len(done) > 2 * len(state.running) + 1024:
            self._done = {j: run for j, run in done.items() if state.running.get(j) is run}
        return out

    def _saturated(self, run: RunView, state: TelemetryView) -> bool:
        """Whether no reading of any GPU ``run`` holds can change anything (reported telemetry: every mean it
        would move is capped at ``max_samples`` reports); reads no telemetry, only who runs where."""
        return all(self._learns_nothing(g, state) for g in run.gpus)

    def _learns_nothing(self, g: int, state: TelemetryView) -> bool:
        """Whether a reading of GPU ``g`` (its residents' reports) can no longer change a mean (reported
        telemetry; as ``_observe_gpu`` and ``_observe_alone`` would use it)."""
        on_g = state.residents[g]
        if not on_g:
            return True
        cap, name = self.max_samples, self._gpu_names(state)[g]
        runs = [state.running[j] for j in on_g]
        if len(runs) > 1:
            if any(r.spec.num_gpus > 1 or not r.spec.model for r in runs):
                return True  # such a set is not sampled
            found = self.sets.get((name, tuple(sorted(r.spec.job_type for r in runs))))
            return found is not None and found[1] >= cap
        run = runs[0]
        spec = run.spec
        if spec.num_gpus > 1 and not self._alone_job(run, state):
            return True  # a gang sharing one of its GPUs: nothing is read of it
        return self._job_solo_n.get((spec.job_id, name), 0) >= cap

    def _fresh_reading(self, g: int, runs: list[RunView]) -> bool | None:
        """For a GPU whose residents report periodically: None when every resident reported anew since the GPU's
        last reading, after the residents of every GPU they hold last changed (read it now); else whether to stop
        waiting (True: nothing new, False: a report older than such a change, wait for the next one)."""
        stamps = {r.spec.job_id: getattr(r, "reported_at", None) for r in runs}
        since = max(self._since_job(r) for r in runs)
        if any(at is not None and at < since for at in stamps.values()):
            return False
        last = self._read.get(g, {})
        if any(at is not None and last.get(j) == at for j, at in stamps.items()):
            return True
        self._read[g] = stamps  # type: ignore[assignment]
        return None

    def _observe_alone(self, g: int, run: RunView, state: TelemetryView) -> bool:
        """``_observe_gpu`` for a GPU with one resident (most reads): its solo rate, or a gang's own one."""
        rate = run.observed_rate
        if not rate > 0:
            return False
        spec = run.spec
        job_id = spec.job_id
        at = getattr(run, "reported_at", None)
        if at is not None:  # ``_fresh_reading`` for one resident
            self._reported = True
            found = self._since.get(job_id)  # ``_since_job``, inline
            since = found[1] if found is not None and found[0] is run else self._since_job(run)
            if at < since:
                return False
            last = self._read.get(g)
            if last is not None and last.get(job_id) == at:
                return True
            self._read[g] = {job_id: at}
        gpu_type = state.cluster.gpus[g].gpu_type
        name = gpu_type.name
        if spec.num_gpus > 1:
            if self._alone_job(run, state):  # a gang alone on all its GPUs
                self._own_solo((job_id, name), rate, at is not None)
            return True
        key = (job_id, name)  # ``_own_solo``, inline
        if at is None:
            self.job_solo[key] = rate
        else:
            counts, job_solo = self._job_solo_n, self.job_solo
            n = counts.get(key, 0)
            if n >= self.max_samples:
                return True  # its own rate known well enough; its type's and the bias take no more of its reports
            job_solo[key] = (job_solo.get(key, 0.0) * n + rate) / (n + 1)
            counts[key] = n + 1
        if not spec.model:  # no type to learn about, and its prediction is a placeholder (no speed bias)
            return True
        key = (spec.job_type, name)
        mean, n = self.solo.get(key, (0.0, 0))
        self.solo[key] = ((mean * n + rate) / (n + 1), n + 1)
        iter_time_s = state.predict(spec, gpu_type).iter_time_s
        if iter_time_s > 0:
            bias, m = self.log_bias.get(name, (0.0, 0))
            self.log_bias[name] = ((bias * m + math.log(rate * iter_time_s)) / (m + 1), m + 1)
        return True

    def _observe_gang(self, run: RunView, gpus: list[int], state: TelemetryView) -> None:
        """``_observe_alone`` on each of ``gpus``, GPUs where the gang ``run`` is the only resident, in one pass: its
        checks once, and its own solo rate averaged once per GPU whose reading is new (as GPU by GPU)."""
        rate = run.observed_rate
        at = getattr(run, "reported_at", None)
        if not rate > 0 or (at is not None and at < self._since_job(run)):
            if at is not None and rate > 0:
                self._reported = True
            self._pending.update(gpus)
            return
        job_id, names = run.spec.job_id, self._gpu_names(state)
        new: dict[str, int] = {}  # GPU type name -> GPUs read anew
        if at is None:
            for g in gpus:
                new[names[g]] = 1  # continuous telemetry: the latest rate, however often
        else:
            self._reported = True
            read, stamp = self._read, {job_id: at}  # readings are replaced, never changed: one dict serves all
            fresh = [g for g in gpus if (read.get(g) or _NO_READING).get(job_id) != at]
            if fresh:
                read.update(dict.fromkeys(fresh, stamp))
                if self._one_type is not None:
                    new[self._one_type] = len(fresh)
                else:
                    for g in fresh:
                        new[names[g]] = new.get(names[g], 0) + 1
        if new and self._alone_job(run, state):  # a gang alone on all its GPUs: ``_own_solo`` once per GPU read anew
            if at is None:
                for name in new:
                    self.job_solo[(job_id, name)] = rate
                return
            job_solo, counts = self.job_solo, self._job_solo_n
            for name, times in new.items():  # ``_own_solo`` ``times`` times over: the same float operations
                key = (job_id, name)
                n = counts.get(key, 0)
                if n >= self.max_samples:
                    continue  # capped (module docstring)
                mean = job_solo.get(key, 0.0)
                for _ in range(min(times, self.max_samples - n)):
                    mean = (mean * n + rate) / (n + 1)
                    n += 1
                job_solo[key], counts[key] = mean, n

    def _gpu_names(self, state: TelemetryView) -> list[str]:
        """Each GPU's type name (kept per cluster); ``_one_type`` is the name when all GPUs have one type."""
        cluster = state.cluster
        if self._names_of is not cluster or len(self._names) != len(cluster.gpus):
            self._names = [gpu.gpu_type.name for gpu in cluster.gpus]
            self._one_type = self._names[0] if len(set(self._names)) == 1 else None
            self._names_of = cluster
        return self._names

    def _since_job(self, run: RunView) -> float:
        """When the residents of a GPU ``run`` holds last changed (kept per job until one of its GPUs changes: a
        gang holds many)."""
        found = self._since.get(run.spec.job_id)
        if found is None or found[0] is not run:
            changed_at = self._changed_at
            found = self._since[run.spec.job_id] = (run, max(changed_at.get(h, -math.inf) for h in run.gpus))
        return found[1]

    def _alone_job(self, run: RunView, state: TelemetryView) -> bool:
        """Whether ``run`` is the only resident of every GPU it holds (kept as ``_since_job``)."""
        found = self._alone.get(run.spec.job_id)
        if found is None or found[0] is not run:
            found = self._alone[run.spec.job_id] = (run, all(len(state.residents[h]) == 1 for h in run.gpus))
        return found[1]

    def _own_solo(self, key: tuple[str, str], rate: float, reported: bool) -> None:
        """A job's own solo rate: its latest (continuous telemetry) or the mean of its first ``max_samples``
        reports."""
        if not reported:
            self.job_solo[key] = rate
            return
        n = self._job_solo_n.get(key, 0)
        if n >= self.max_samples:
            return  # known well enough (module docstring)
        self.job_solo[key] = (self.job_solo.get(key, 0.0) * n + rate) / (n + 1)
        self._job_solo_n[key] = n + 1

    def _observe_gpu(self, g: int, state: TelemetryView) -> bool:
        """Sample GPU ``g``; False when a resident has no rate yet (retry later)."""
        residents = state.residents[g]
        if not residents:
            return True
        if len(residents) == 1:
            return self._observe_alone(g, state.running[residents[0]], state)
        runs = [state.running[j] for j in residents]
        if any(not r.observed_rate > 0 for r in runs):
            return False
        reported = any(getattr(r, "reported_at", None) is not None for r in runs)
        if reported:
            self._reported = True
            fresh = self._fresh_reading(g, runs)
            if fresh is not None:
                return fresh
        if any(r.spec.num_gpus > 1 for r in runs):
            run = runs[0]
            if len(runs) == 1 and self._alone_job(run, state):  # a gang alone on all its GPUs
                self._own_solo((run.spec.job_id, state.cluster.gpus[g].gpu_type.name), run.observed_rate, reported)
            return True
        gpu_type = state.cluster.gpus[g].gpu_type
        if any(not r.spec.model for r in runs):  # a job without a model has no type to learn about, and its
            if len(runs) == 1:                   # prediction is a placeholder (no speed bias to read from it)
                self._own_solo((runs[0].spec.job_id, gpu_type.name), runs[0].observed_rate, reported)
            return True
        types = [r.spec.job_type for r in runs]
        order = sorted(range(len(types)), key=lambda i: types[i])
        key2 = (gpu_type.name, tuple(types[i] for i in order))
        found = self.sets.get(key2)
        if reported and found is not None and found[1] >= self.max_samples:
            return True  # known well enough: more reports would barely move it (and would re-plan every call)
        xs = [r.observed_rate / self.solo_rate(r.spec, gpu_type, state) for r in runs]
        sample = np.array([xs[i] if reported else min(1.0, xs[i]) for i in order])
        mean_x, n = found if found is not None else (np.zeros(len(order)), 0)
        if not reported and n and np.allclose(mean_x, sample, rtol=0.0, atol=1e-9):
            return True  # the same again (a rescan of a deterministic world): nothing learned
        new_mean = (mean_x * n + sample) / (n + 1)
        self.sets[key2] = (new_mean, n + 1)
        m2, any_reported = self.spread.get(key2, (0.0, False))
        combined = float(sample.sum())  # Welford's update of the combined samples' squared deviations
        self.spread[key2] = (m2 + (combined - float(mean_x.sum())) * (combined - float(new_mean.sum())),
                             any_reported or reported)
        prior = self.prior.throughputs(list(key2[1]), gpu_type)
        for t, obs, pri in zip(key2[1], sample, prior):
            mean_r, m = self.residual.get((t, gpu_type.name), (0.0, 0))
            self.residual[(t, gpu_type.name)] = ((mean_r * m + (obs - pri)) / (m + 1), m + 1)
        self.samples += 1
        self._forget(gpu_type.name, key2[1])
        if self.learned is not None:
            self.learned.append((gpu_type.name, key2[1]))
        return True

    def _forget(self, gpu_type: str, types: tuple[str, ...]) -> None:
        """Drop the cached answers on ``gpu_type`` that a sample of the set ``types`` (sorted) changed: those about
        that set (its mean and spread), and those from the prior that name one of its types (their residuals).
        An observed set's answer reads only its own samples, so other observed sets keep theirs."""
        cache = self._cache
        for key in self._by_set.pop((gpu_type, types), ()):
            cache.pop(key, None)
        by_type = self._by_type
        for t in set(types):
            for key in by_type.pop((gpu_type, t), ()):
                cache.pop(key, None)

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
        cached until a sample changes them: one of the same set, or, for an answer from the prior, one of a set on
        that GPU type naming one of its types (``_forget``); the same object is returned meanwhile)."""
        key = (gpu_type.name, tuple(types))
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) > 65536:
                self._cache.clear()
                self._by_type.clear()
                self._by_set.clear()
                self.generation += 1
            found = self._cache[key] = self._estimate(types, gpu_type)
            if len(key[1]) > 1:  # sets of one or none are always alone (1.0): never dropped
                self._by_set.setdefault((key[0], tuple(sorted(key[1]))), set()).add(key)
                if not found.observed:  # from the prior: its types' residuals move with any sample naming them
                    for t in set(key[1]):
                        self._by_type.setdefault((key[0], t), set()).add(key)
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
                out[i] = min(1.0, float(mean_x[pos]))
            m2, reported = self.spread.get(key, (0.0, False))
            if not reported:  # exact samples: they differ only as solo references improve, not by noise
                return SetEstimate(out, self.obs_sigma / math.sqrt(n), n, True)
            spread = math.sqrt((self.prior_sigma ** 2 + m2) / n)  # with one pseudo-sample at prior_sigma
            return SetEstimate(out, max(self.obs_sigma, spread) / math.sqrt(n), n, n >= self.min_samples)
        prior = self.prior.throughputs(list(types), gpu_type)
        for i, t in enumerate(types):
            resid = self.residual.get((t, gpu_type.name))
            out[i] = min(1.0, max(0.02, prior[i] + (resid[0] if resid else 0.0)))
        return SetEstimate(out, self.prior_sigma, 0)

    def reported_estimate(self, runs: Sequence[RunView], gpu_type: GPUType) -> SetEstimate | None:
        """The belief about the set ``runs`` form on one GPU when their telemetry comes in reports and the tracker
        learns such sets (two or more single-GPU jobs with a model); None otherwise (their current rates are
        then the best reading)."""
        if (len(runs) < 2 or all(getattr(r, "reported_at", None) is None for r in runs)
                or any(r.spec.num_gpus > 1 or not r.spec.model for r in runs)):
            return None
        return self.estimate([r.spec.job_type for r in runs], gpu_type)

    def describe(self) -> dict[str, object]:
        return {"prior": self.prior.describe(), "prior_sigma": self.prior_sigma, "obs_sigma": self.obs_sigma,
                "rescan_s": self.rescan_s, "min_samples": self.min_samples,
                "max_samples": self.max_samples}
