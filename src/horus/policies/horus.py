"""``horus``: co-locate only where it pays, learn from what running jobs show, undo what does not pay.

A queue order (``sjf`` by predicted remaining time by default; ``fifo`` and Tiresias' LAS compose the
same way) walks the queue. Each job takes idle GPUs when there are any (exclusive placement:
consolidated, best fit). Otherwise a single-GPU job may join a busy GPU, but only when

* the set's predicted combined normalized throughput, minus ``kappa`` times its uncertainty, exceeds
  the residents' current combined throughput by ``margin`` or more (``horus.interference.observed``: the
  running mean observed for that type set, else the prior -- by default the untrained summed-utilization
  rule on predicted utilization -- corrected by each type's observed residual); and
* co-locating shortens expected completion: the wait it avoids (when enough GPUs are predicted to
  free up for the jobs ahead of it and itself, from running jobs' remaining iterations and observed
  rates) exceeds the time lost to interference while they overlap (overlap x lost throughput);
* memory fits with ``mem_margin`` of the card spare, at most ``max_residents`` share a GPU, and no
  multi-GPU job is involved (gang-aware: a gang runs at its slowest worker and slowing one GPU of it
  costs every GPU it holds, so gangs only take idle GPUs and single jobs never join a gang's GPU).

A pod requesting a GPU fraction is placed by the paper's rule (memory, summed predicted utilization under a cap);
under a tenancy, one its queue's guarantee covers (``QueuedJob.within_guarantee``) that the rule refuses goes where
its requested share and memory fit, as device sharing would place it (``_by_request``).

Each call first reads telemetry (``ObservedThroughput.observe``), then **unpacks** GPUs whose observed
combined throughput (with periodic, noisy reports: the set's settled mean) is below ``unpack_below`` (the
newest resident is preempted and, if a GPU is idle, restarted there at once), and after placing **migrates**:
while GPUs stay idle, the co-located job with the most remaining work (more than ``migrate_min_s`` of it) moves
to an idle GPU (a preemption plus a checkpoint-restore stall). The policy never reads the truth.
``horus-paper`` keeps the original rule (summed predicted utilization under a cap, look-ahead over the queue)
for reference.

``horus-las`` is the non-clairvoyant form, compared with ``tiresias`` at equal information: Tiresias' 2D-LAS
order, **no job size read** (``use_sizes=False``) and Tiresias' preemption (``preempt_s`` = 300 s):

* sizes: a running job's time left (the wait avoided, the overlap's end, migration's "most work left") and a
  queued job's run time (the overlap) are the ``ServiceHistory`` expectation from attained service alone (the
  mean residual run time of the jobs seen to complete, ``parts/attained_service.py``); the critical path is off
  ("longest" is a size); background co-runners are the LAS order's last jobs instead of the longest predicted.
* preemption: after unpacking and placing (co-location is tried first: joining a busy GPU where it pays costs
  no restart), at most once per ``preempt_s``, for the first ``max_preempt_for`` jobs still blocked it preempts
  running jobs of a strictly lower priority queue, lowest priority and most service first, when that frees
  enough GPUs (``parts/las_preemption.py``, shared with ``tiresias``). A co-located GPU is freed only when all
  its residents are victims (a victim that frees nothing is dropped); jobs unpacked in the call, and jobs on a
  GPU something was started on in it, are never victims; the freed GPUs are used at the next call (the call
  does not migrate). ``colocate=False`` (``horus-las-solo``) is then Tiresias with Horus's exclusive placement
  (the same on one GPU type); the telemetry tick (60 s, Tiresias' is 300 s) shifts when a due scan runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from horus.interference.observed import ObservedThroughput, SetEstimate
from horus.interference.slowdown import estimator_for
from horus.plugins import load_all
from horus.policies.base import POLICIES, Action, Policy, Start
from horus.policies.orders.sjf import SjfOrder, predicted_remaining_s
from horus.policies.orders.tiresias import TiresiasOrder
from horus.policies.parts.attained_service import ServiceHistory
from horus.policies.parts.by_request import place_by_request
from horus.policies.parts.cluster_index import cluster_index, job_mem_per_gpu
from horus.policies.parts.cycle import Cycle, migrate, unpack
from horus.policies.parts.gpu_selection import select_gpus
from horus.policies.parts.gpu_signatures import GpuSignatures
from horus.policies.parts.las_preemption import las_victims
from horus.policies.parts.ordered import EPS, ORDERS, KeyedOrder, needs_empty_gpu
from horus.policies.placements.exclusive import ExclusivePlacement
from horus.policies.placements.horus import HorusPlacement
from horus.state import GPULoad, PlanMemo, QueuedJob, RunningJob, SchedulerState, gpu_share


class _Snapshot:
    """Running jobs seen once per call, each part made when first asked (most calls need only ``x_now``): when
    GPUs free up, when each GPU's first resident ends, and each co-located job's believed current normalized
    throughput (a gang's: its slowest GPU's)."""

    def __init__(self, policy: AdaptiveHorusPolicy, state: SchedulerState) -> None:
        self._policy, self._state = policy, state
        self._x_now: dict[str, float] | None = None
        self._times: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def x_now(self) -> dict[str, float]:
        if self._x_now is None:
            tracker, state = self._policy.tracker, self._state
            assert tracker is not None
            x_now: dict[str, float] = {}
            for g in np.flatnonzero(state.load.n_residents >= 2).tolist():
                runs = [state.running[j] for j in state.residents[g]]
                est = tracker.estimate([r.spec.job_type for r in runs], state.cluster.gpus[g].gpu_type)
                for r, x in zip(runs, est.x):
                    jid = r.spec.job_id
                    x_now[jid] = min(x_now.get(jid, 1.0), x)
            self._x_now = x_now
        return self._x_now

    def _timing(self) -> tuple[np.ndarray, np.ndarray]:
        """(predicted seconds until each busy GPU is idle, ascending; per GPU until its first resident ends)."""
        if self._times is None:
            state, policy = self._state, self._policy
            n = state.cluster.num_gpus
            at: list[int] = []  # (GPU, seconds its resident is expected to keep it) pairs
            lefts: list[float] = []
            sized = policy.history is None
            for run in state.running.values():
                rate = run.observed_rate if sized else 0.0
                if rate > 0:  # ``_run_left_s``, inline on its common path (the same float operations)
                    left = max(run.spec.iterations - run.iterations_done, 0.0) / rate
                else:
                    left = policy._run_left_s(run, state)
                gpus = run.gpus
                if len(gpus) == 1:
                    at.append(gpus[0])
                    lefts.append(left)
                else:
                    at.extend(gpus)
                    lefts.extend([left] * len(gpus))
            last, first = np.zeros(n), np.full(n, np.inf)
            if at:
                where, values = np.array(at, dtype=np.int64), np.array(lefts)
                np.fmax.at(last, where, values)  # fmax/fmin: NaN-blind, as max()/min() were
                np.fmin.at(first, where, values)
            busy = state.load.n_residents > 0
            self._times = (np.sort(last[busy]), first)
        return self._times

    @property
    def first_end(self) -> np.ndarray:
        return self._timing()[1]

    def wait(self, gpus_needed: int) -> float:
        """Predicted wait until ``gpus_needed`` GPUs have freed up (inf if never)."""
        if gpus_needed <= 0:
            return 0.0
        free_at = self._timing()[0]
        return float(free_at[gpus_needed - 1]) if gpus_needed <= len(free_at) else math.inf


@dataclass
class _Plan:
    types: dict[int, list[str]] = field(default_factory=dict)  # GPU -> job types started on it this call
    started: set[str] = field(default_factory=set)
    no_gain: set[tuple[str, int, str | None]] = field(default_factory=set)  # (type, GPUs, request) with no paying GPU
    # (type, GPUs, request) -> (GPUs chosen, the job's throughput there, throughput lost, first resident's end there):
    # a kind's best paying GPUs on this planned load, which only the wait test can still refuse for a job of it
    offers: dict[tuple[str, int, str | None], tuple[tuple[int, ...], float, float, float]] = field(
        default_factory=dict)
    offers_oom: int = 0  # how many job types had failed out of memory when ``offers`` were made (more bar GPUs)
    sig_ids: np.ndarray | None = None  # GPU -> signature id with this call's planned types (``GpuSignatures``)
    # gang signature id -> each resident's (GPUs, believed current throughput): a gang's current rate varies per call
    gang_patterns: dict[int, tuple[tuple[int, float], ...]] = field(default_factory=dict)
    dirty: set[int] = field(default_factory=set)  # GPUs whose planned load differs from the state's (starts, stops)


class MemoryAwareExclusive(ExclusivePlacement):
    """Exclusive placement that avoids GPU types the job's predicted memory does not fit (with ``mem_margin``
    spare) while some idle GPU of another type does; with none, the plain exclusive choice (an idle GPU takes
    any job). Identical to ``exclusive`` on single-type clusters."""

    def __init__(self, mem_margin: float) -> None:
        self.mem_margin = mem_margin

    def cost_per_gpu(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> np.ndarray | None:
        cost = super().cost_per_gpu(job, load, state)
        if cost is None or len(self.idx.types) == 1:
            return cost
        mem = job_mem_per_gpu(job.spec, state, self.idx)
        fits = mem <= (1.0 - self.mem_margin) * state.mem_capacity_mib
        narrowed = np.where(fits, cost, np.inf)
        return narrowed if np.isfinite(narrowed).sum() >= job.spec.num_gpus else cost


class AdaptiveHorusPolicy(Policy):
    """Exclusive first; co-locate a single-GPU job only where predicted gain and avoided wait pay; unpack
    and migrate from telemetry. See the module docstring."""

    acts_on_running = True
    tick_s = 60.0  # telemetry period: running jobs' rates are read at least this often

    def __init__(self, *, order: str = "sjf", margin: float = 0.1, kappa: float = 1.0, max_residents: int = 3,
                 mem_margin: float = 0.1, unpack_below: float = 1.0, migrate: bool = True,
                 migrate_min_s: float = 600.0, max_scan: int = 64, background: int = 8, gangs: str = "observed",
                 critical_path: bool | str = True, horizon_refresh_s: float = 300.0,
                 interference_model: str | None = None,
                 prior_sigma: float = 0.15, colocate: bool = True, use_sizes: bool = True,
                 preempt_s: float | None = None, max_preempt_for: int = 4, thresholds: Sequence[float] | None = None,
                 name: str | None = None) -> None:
        if max_residents < 1 or max_scan < 1 or not 0 <= mem_margin < 1:
            raise ValueError("max_residents and max_scan must be >= 1 and mem_margin in [0, 1)")
        load_all("horus.policies")
        if thresholds is not None and order != "tiresias":
            raise ValueError("thresholds are the tiresias order's (attained GPU-seconds between priority queues)")
        self.order_rule = ORDERS.create(order) if thresholds is None else ORDERS.create(order, thresholds=thresholds)
        if not use_sizes and isinstance(self.order_rule, SjfOrder):
            raise ValueError("the sjf order ranks jobs by their size: use_sizes=False needs another order")
        if preempt_s is not None and not (isinstance(self.order_rule, TiresiasOrder) and preempt_s >= 0):
            raise ValueError("preemption by priority needs the tiresias order and preempt_s >= 0")
        self.use_sizes = use_sizes
        self.history = None if use_sizes else ServiceHistory()  # size-free expectations (module docstring)
        self.preempt_s, self.max_preempt_for = preempt_s, max_preempt_for
        # it preempts by LAS queue (``parts.las_preemption``) but co-locates: under a tenancy, taking the place of
        # its own queue's jobs (``Policy.preempts_by_order``) lowered the worst guarantee attainment (Philly 10k:
        # 0.93 -> 0.77, docs/tenancy.md), since the GPUs freed need not go to the job they were freed for; left off
        self.preempts_by_order = False
        self._last_scan = -math.inf
        self.preempted = 0
        self.exclusive = MemoryAwareExclusive(mem_margin)
        self.fractional = HorusPlacement()  # jobs that request a GPU fraction (gpu_fraction < 1)
        self.margin, self.kappa = margin, kappa
        self.max_residents = max_residents
        self.mem_margin = mem_margin
        self.unpack_below = unpack_below
        self.migrate = migrate
        self.migrate_min_s = migrate_min_s
        self.max_scan = max_scan
        self.background = background
        if gangs not in ("off", "observed", "on"):
            raise ValueError(f"gangs must be off, observed or on, got {gangs!r}")
        self.gangs = gangs
        self.critical_path = critical_path if use_sizes else False  # "longest" is a size: off without sizes
        self.horizon_refresh_s = horizon_refresh_s
        self._horizon, self._horizon_at, self._horizon_state = 0.0, -math.inf, None
        # background co-runners come from this order's tail: the longest predicted jobs, or LAS's last
        self.background_order: KeyedOrder = SjfOrder()
        if not use_sizes:
            assert isinstance(self.order_rule, KeyedOrder)
            self.background_order = self.order_rule
        self.model_dir = interference_model
        self.prior_sigma = prior_sigma
        self.colocate = colocate and max_residents > 1
        self.name = name or ("horus" if order == "sjf" else f"horus-{order}")
        self.tracker: ObservedThroughput | None = None
        self._predictor: object = None
        # what a joining job meets on each GPU, interned (``parts/gpu_signatures.py``), and ``_join``'s answers:
        # they depend only on the job type, the tracker's two set estimates and, where a gang resides, its
        # residents' rates. (job type, signature id) -> (clock, tracker generation, gang pattern, answer); valid
        # while no estimate naming one of the types changed since that call (``_type_clock``), the tracker kept its
        # answers (``generation``) and the gang pattern is the same
        self._sigs = GpuSignatures()
        self._joins_table: list[tuple] | None = None  # the signature table the kept answers refer to
        self._settled: dict[tuple[str, int], tuple[int, int, tuple[tuple[int, float], ...],
                                                   tuple[float, float, float, bool]]] = {}
        # "no GPU pays" remembered across calls: (job type, GPUs, request) -> (clock, GPUs dirty in that call). A
        # later call re-examines only GPUs where what a join reads changed since: ``_touched[g]`` is the clock of
        # the call that last saw GPU g's residents, a resident gang's GPUs or its set estimates change,
        # ``_type_clock[t]`` of the last that saw an estimate naming job type t change (``_refresh_call``)
        self._clock = 0
        self._touched = np.zeros(0, dtype=np.int64)
        self._type_clock: dict[str, int] = {}
        self._learn_clock = -1  # the latest value in ``_type_clock``
        self._no_pay: dict[tuple[str, int, str | None], tuple[int, tuple[int, ...]]] = {}
        self._touched_since: dict[int, np.ndarray] = {}  # this call: clock -> GPUs touched after it
        self._touched_lists: dict[int, list[int]] = {}  # the same as lists
        # (job type, GPUs, request) -> (clock, GPUs dirty in that call, own, drop, sigma, known): ``_colocation``
        self._kind_arrays: dict[tuple[str, int, str | None], tuple[int, np.ndarray, np.ndarray, np.ndarray,
                                                                   np.ndarray, np.ndarray]] = {}
        self.unpacked = 0
        self.migrated = 0
        # job types seen to fail out of memory (telemetry: a queued job's ``oom_failures``): their memory is
        # under-predicted, so they share no GPU and no job joins a GPU holding one
        self.oom_types: set[str] = set()
        self._oom_hosts_key: tuple[int, int, int] | None = None
        self._oom_hosts_mask = np.zeros(0, dtype=bool)
        # (tracker samples, queue head) of a call that found nothing to do, trusted while no job starts or stops
        self._quiet: PlanMemo[tuple[int, list[QueuedJob]] | None] = PlanMemo(None)

    @property
    def colocates(self) -> bool:  # type: ignore[override]
        return self.colocate

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "oracle": False, "order": self.order_rule.name, "margin": self.margin,
                "kappa": self.kappa, "max_residents": self.max_residents, "mem_margin": self.mem_margin,
                "unpack_below": self.unpack_below, "migrate": self.migrate, "migrate_min_s": self.migrate_min_s,
                "colocate": self.colocate, "max_scan": self.max_scan, "background": self.background,
                "gangs": self.gangs, "critical_path": self.critical_path, "use_sizes": self.use_sizes,
                "preempt_s": self.preempt_s,
                **({"thresholds_gpu_s": list(self.order_rule.thresholds)}
                   if isinstance(self.order_rule, TiresiasOrder) else {}),
                **(self.tracker.describe() if self.tracker else {"interference_model": self.model_dir})}

    # ---- the decision step ----------------------------------------------------------------------
    def schedule(self, state: SchedulerState) -> list[Action]:
        if self.tracker is None or self._predictor is not state.predictor:
            self.tracker = ObservedThroughput(estimator_for(self.model_dir, state.predictor),
                                              prior_sigma=self.prior_sigma)
            self._predictor = state.predictor
            self.tracker.learned = []
            self._no_pay, self._kind_arrays, self._settled = {}, {}, {}
        self.tracker.observe(state)
        if self.history is not None:
            self.history.observe(state)
        head = self.order_rule.head(state, self.max_scan) if state.queue else []
        for job in head:
            if job.oom_failures and job.spec.job_type not in self.oom_types:
                self.oom_types.add(job.spec.job_type)
        scan_due = self.preempt_s is not None and bool(state.queue) and state.now >= self._last_scan + self.preempt_s
        if not scan_due and self._quiet.recall(state) == (self.tracker.samples, head):
            self._quiet.renew(state)
            return []  # nothing seen or changed since a call that found nothing to do
        self.idx = cluster_index(state.cluster)
        self.exclusive.begin(state.load, state)
        cycle = Cycle(state, lambda _spec, _gpus, _sign: self.exclusive.update(cycle.load, state))
        stopped: list[str] = []  # jobs unpacked this call
        if self.colocate:
            stopped = self._unpack(cycle)
        blocked: list[QueuedJob] = []
        plan = _Plan()
        if state.queue:
            blocked, plan = self._place_queue(cycle, head, stopped)
        waiting = [job for job in blocked if job.spec.job_id not in plan.started] if scan_due else []
        if waiting:
            self._last_scan = state.now
            self._preempt(cycle, waiting, stopped, plan)
        elif self.colocate and self.migrate and not blocked:  # idle GPUs a waiting job could need are left alone
            self._migrate(cycle, stopped)
        self._quiet.remember(state, None if cycle.actions else (self.tracker.samples, head))
        return cycle.actions

    # ---- introspection: undo co-locations that do not pay ---------------------------------------
    def _unpack(self, cycle: Cycle) -> list[str]:
        """Preempt the newest resident of every GPU whose observed combined throughput is below
        ``unpack_below`` (each job's observed rate over its solo rate; a gang counts on all its GPUs)."""
        assert self.tracker is not None
        tracker, state = self.tracker, cycle.state

        def loses(g: int, runs: list[RunningJob]) -> bool:
            if any(not r.observed_rate > 0 or gpu_share(r.spec) < 1.0 - EPS for r in runs):
                return False  # fractional jobs share by request (their placement is the exclusive one), not by choice
            gpu_type = state.cluster.gpus[g].gpu_type
            reported = tracker.reported_estimate(runs, gpu_type)
            if reported is not None:  # periodic noisy reports: the set's settled mean decides, not one report
                return reported.settled and reported.combined < self.unpack_below
            return sum(min(1.0, r.observed_rate / tracker.solo_rate(r.spec, gpu_type, state)) for r in runs) \
                < self.unpack_below

        stopped = [run.spec.job_id for run, _ in unpack(cycle, loses)]
        self.unpacked += len(stopped)
        return stopped

    # ---- placing queued jobs ---------------------------------------------------------------------
    def _place_queue(self, cycle: Cycle, head: list[QueuedJob], stopped: list[str]) -> tuple[list[QueuedJob], _Plan]:
        """Start what pays in queue order, then try the longest waiting jobs (LAS: its last) as background
        co-runners; returns the jobs the queue-order walk left waiting (in that order; a few may have started
        as background co-runners since) and the call's plan."""
        state, excl = cycle.state, self.exclusive
        excl.begin(cycle.load, state)
        plan = _Plan(dirty={g for jid in stopped for g in state.running[jid].gpus})
        blocked: list[QueuedJob] = []
        blocked_gpus = 0
        snap: _Snapshot | None = None
        idle_now = -1  # idle GPUs on the planned load (counted again after each planned start)
        for job in self._critical(state) + head:
            if job.spec.job_id in plan.started:
                continue
            spec, load = job.spec, cycle.load
            if gpu_share(spec) < 1.0 - EPS:  # a requested share: placed by the paper's rule (memory, utilization)
                self.fractional.begin(load, state)
                gpus = self.fractional.place(job, load, state) if self.fractional.any_room() else None
                if gpus is None and job.within_guarantee:
                    gpus = self._by_request(job, load, state)
            else:
                gpus = excl.place(job, load, state) if excl.any_room() else None
            if gpus is None and self._may_share(job):
                snap = snap or self._snapshot(state)
                if idle_now < 0:
                    idle_now = int(cycle.idle().sum())
                gpus = self._colocation(job, load, state, blocked_gpus + spec.num_gpus - idle_now, snap, plan)
            if gpus is None:
                blocked.append(job)
                blocked_gpus += spec.num_gpus
                continue
            self._plan_start(cycle, job, gpus, plan)
            idle_now = -1
        if self.colocate and self.background and blocked_gpus:
            snap = snap or self._snapshot(state)
            for job in self.background_order.tail(state, self.background):
                if job.spec.job_id in plan.started or not self._may_share(job):
                    continue
                gpus = self._colocation(job, cycle.load, state, blocked_gpus, snap, plan)
                if gpus is not None:
                    self._plan_start(cycle, job, gpus, plan)
        return blocked, plan

    def _by_request(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> tuple[int, ...] | None:
        """A one-GPU pod requesting a fraction, within its queue's guarantee, that the paper's rule refused: placed by
        its request (``parts.by_request.place_by_request``, the fractional placement's ``mem_margin`` and
        ``max_residents``), not on a GPU holding a type that failed out of memory, nor if its own type did. Only such
        pods: for every fractional pod, tenant-unaware horus on openb's 1 % cell lost to the interference (mean JCT
        34.4 -> 50.8 h). None where no GPU fits."""
        if job.spec.job_type in self.oom_types:
            return None
        frac = self.fractional
        return place_by_request(job, load, state, self.idx, max_residents=frac.max_residents,
                                mem_margin=frac.mem_margin, barred=self._oom_hosts(state))

    def _critical(self, state: SchedulerState) -> list[QueuedJob]:
        """The longest queued jobs whose predicted run time reaches past the remaining work horizon (all
        predicted work left, queued and running, spread over the cluster's GPUs): started later, they would
        set the makespan, so they go first, longest first. The horizon is refreshed every
        ``horizon_refresh_s`` seconds of state time (at least 5 % of the horizon).

        ``critical_path="tail"`` flags more: from the longest job down, every job longer than the GPU-time of
        the jobs from the longest to itself spread over the cluster (an LPT tail). It shortens the makespan of
        work-bound batches but costs mean JCT (docs/policies.md gives the measured trade-off)."""
        if not self.critical_path:  # always off without sizes
            return []
        if self.critical_path == "tail":
            out: list[QueuedJob] = []
            behind = 0.0  # GPU-seconds of the jobs from the longest down to this one
            for job in self.background_order.tail(state, 32):
                run_s = predicted_remaining_s(job, state)
                behind += run_s * job.spec.num_gpus
                if run_s * state.cluster.num_gpus <= behind:
                    break
                out.append(job)
            return out
        refresh = max(self.horizon_refresh_s, 0.05 * self._horizon)  # O(queue): rarely on long horizons
        if state.now - self._horizon_at >= refresh or self._horizon_state is not state:
            work = sum(predicted_remaining_s(job, state) * job.spec.num_gpus for job in state.queue.values())
            for run in state.running.values():
                if run.observed_rate > 0:
                    work += run.iterations_left / run.observed_rate * run.spec.num_gpus
            self._horizon = work / max(state.cluster.num_gpus, 1)
            self._horizon_at, self._horizon_state = state.now, state
        out = []
        for job in self.background_order.tail(state, 8):
            if predicted_remaining_s(job, state) < self._horizon:
                break
            out.append(job)
        return out

    def may_share(self, job: QueuedJob) -> bool:
        """Whether ``job`` may go to a GPU that has residents: not once it, or a job of its type, failed out of memory
        (their memory is under-predicted: an empty GPU only, ``_may_share`` and ``_by_request``). A tenancy's
        admission then counts such a waiting pod as a whole GPU to free, not a free slot (``Admission.shares_gpu``)."""
        if not self.colocate or needs_empty_gpu(job) or job.spec.job_type in self.oom_types:
            return False
        return gpu_share(job.spec) < 1.0 - EPS or job.spec.num_gpus == 1 or self.gangs != "off"

    def _may_share(self, job: QueuedJob) -> bool:
        """``may_share`` for the queue walk's joins (whole-GPU jobs only: a fractional pod goes by its placement),
        recording the type of a job that failed out of memory."""
        if needs_empty_gpu(job):  # it failed out of memory: its type's memory is under-predicted
            self.oom_types.add(job.spec.job_type)
            return False
        return gpu_share(job.spec) >= 1.0 - EPS and self.may_share(job)

    def _oom_hosts(self, state: SchedulerState) -> np.ndarray:
        """GPUs holding a job of a type that failed out of memory before (no one joins them), cached per load."""
        key = (state.load_version, len(self.oom_types), id(state))
        if self._oom_hosts_key != key:
            hosts = np.zeros(state.cluster.num_gpus, dtype=bool)
            for g in np.flatnonzero(state.load.n_residents >= 1).tolist():
                hosts[g] = any(state.running[j].spec.job_type in self.oom_types for j in state.residents[g])
            self._oom_hosts_key, self._oom_hosts_mask = key, hosts
        return self._oom_hosts_mask

    def _plan_start(self, cycle: Cycle, job: QueuedJob, gpus: tuple[int, ...], plan: _Plan) -> None:
        spec = job.spec
        cycle.start(spec, gpus)
        for g in gpus:
            plan.types.setdefault(g, []).append(spec.job_type)
        plan.dirty.update(gpus)
        plan.started.add(spec.job_id)
        plan.no_gain.clear()  # the planned load changed
        plan.offers.clear()
        if plan.sig_ids is not None:
            for g in gpus:
                plan.sig_ids[g] = self._sigs.with_planned(int(self._sigs.ids[g]), tuple(plan.types[g]))

    def _run_left_s(self, run: RunningJob, state: SchedulerState) -> float:
        """Seconds a running job is expected to keep its GPUs: remaining iterations at its observed rate (else
        its predicted one); without sizes, the ``ServiceHistory`` expectation from its attained service."""
        if self.history is not None:
            return self.history.remaining_s(run.attained(state.now), run.spec.num_gpus)
        rate = run.observed_rate
        if not rate > 0:
            pred = state.predict(run.spec, state.cluster.gpus[run.gpus[0]].gpu_type)
            rate = 1.0 / pred.iter_time_s if pred.iter_time_s > 0 else math.inf
        return run.iterations_left / rate

    def _queued_left_s(self, job: QueuedJob, state: SchedulerState) -> float:
        """A queued job's expected run time alone: predicted from its size, else from its attained service."""
        if self.history is not None:
            return self.history.remaining_s(job.attained_gpu_s, job.spec.num_gpus)
        return predicted_remaining_s(job, state)

    def _snapshot(self, state: SchedulerState) -> _Snapshot:
        """Running jobs seen once per call (``_Snapshot``: each part when first asked)."""
        return _Snapshot(self, state)

    def _colocation(self, job: QueuedJob, load: GPULoad, state: SchedulerState, gpus_needed: int, snap: _Snapshot,
                    plan: _Plan) -> tuple[int, ...] | None:
        """GPUs where starting ``job`` now (sharing at least one) pays most, or None. The wait it avoids is the
        predicted time until ``gpus_needed`` GPUs free up (``_Snapshot.wait``).

        Per candidate GPU: the job's predicted throughput there and the throughput its residents lose
        (a gang resident loses on all its GPUs: ``k x`` the drop of its slowest worker). The job's
        throughput is its slowest GPU's. Accept when (gain - kappa x sigma) >= margin per GPU and the
        wait avoided exceeds the overlap x the throughput lost (both per GPU of the job).
        """
        assert self.tracker is not None
        spec, idx, k = job.spec, self.idx, job.spec.num_gpus
        kind = (spec.job_type, k, spec.gpu_type_request)
        if kind in plan.no_gain:
            return None  # an earlier job of this kind found no GPU worth sharing on this planned load
        if plan.offers_oom != len(self.oom_types):  # a type failed out of memory since: its GPUs no longer take joins
            plan.offers.clear()
            plan.offers_oom = len(self.oom_types)
        offer = plan.offers.get(kind)
        if offer is not None:  # a job of this kind found these GPUs on this planned load before: only the wait differs
            return self._worth_waiting(job, state, gpus_needed, snap, *offer)
        sig_ids = self._refresh_call(state, plan)
        memo = self._no_pay.get(kind)
        if memo is not None and self._type_clock.get(spec.job_type, -1) <= memo[0]:
            redo = [*self._touched_list(memo[0]), *memo[1], *plan.dirty]
            if not self._may_pay(job, redo, load, state, sig_ids, snap, plan):  # no GPU pays (the short path)
                plan.no_gain.add(kind)
                self._no_pay[kind] = (self._clock, tuple(plan.dirty))
                return None
        mem = job_mem_per_gpu(spec, state, idx)
        shared_ok = ((load.n_residents >= 1) & (load.n_residents < self.max_residents)
                     & (load.pred_mem_mib + mem <= (1.0 - self.mem_margin) * state.mem_capacity_mib))
        if self.oom_types:
            shared_ok &= ~self._oom_hosts(state)
        idle = load.n_residents == 0
        allowed = idx.allowed(spec)
        if allowed is not None:
            shared_ok &= allowed
            idle = idle & allowed
        n_shared = int(np.count_nonzero(shared_ok))
        if not n_shared or n_shared + int(idle.sum()) < k:
            return None
        # per GPU: the job's throughput (1 on idle GPUs), the throughput the residents lose, uncertainty, whether the
        # joined set's throughput was observed (settled); kept per job kind and re-derived only where a join's
        # inputs changed since (``_touched``, GPUs planned on in that call or this one)
        kept = self._kind_arrays.get(kind)
        if kept is not None and self._type_clock.get(spec.job_type, -1) <= kept[0]:
            redo = np.concatenate([self._touched_after(kept[0]), kept[1], np.fromiter(plan.dirty, dtype=np.int64)])
            own, drop, sigma, known = kept[2].copy(), kept[3].copy(), kept[4].copy(), kept[5].copy()
            own[redo], drop[redo], sigma[redo], known[redo] = 1.0, 0.0, 0.0, False
            evaluate = np.zeros(len(own), dtype=bool)
            evaluate[redo] = True
            shared = np.flatnonzero(shared_ok & evaluate)
        else:
            own = np.ones(len(load.n_residents))
            drop, sigma = np.zeros(len(own)), np.zeros(len(own))
            known = np.zeros(len(own), dtype=bool)
            shared = np.flatnonzero(shared_ok)
        if len(shared):
            uniq, first, inv = np.unique(sig_ids[shared], return_index=True, return_inverse=True)
            found = np.array([self._join_cached(spec.job_type, int(sig_id), int(shared[i]), state, snap, plan)
                              for sig_id, i in zip(uniq.tolist(), first.tolist())], dtype=float).reshape(-1, 4)
            own[shared], drop[shared], sigma[shared] = found[inv, 0], found[inv, 1], found[inv, 2]
            known[shared] = found[inv, 3] > 0
        if len(self._kind_arrays) > 256:
            self._kind_arrays.clear()
        self._kind_arrays[kind] = (self._clock, np.fromiter(plan.dirty, dtype=np.int64, count=len(plan.dirty)),
                                   own, drop, sigma, known)
        gain_per_gpu = own - drop
        paying = shared_ok & (gain_per_gpu - self.kappa * sigma >= self.margin)
        if not paying.any():
            plan.no_gain.add(kind)
            self._no_pay[kind] = (self._clock, tuple(plan.dirty))
            return None
        self._no_pay.pop(kind, None)
        feasible = paying | (idle if k > 1 else False)
        if k == 1:
            cost = np.where(feasible, -gain_per_gpu, np.inf)
        else:
            cost = np.where(feasible, 1.0 - gain_per_gpu, np.inf)
        # up to the wait test below, what is decided depends on the job only through its kind: a kind refused
        # here is refused for every job of it on this planned load (``plan.no_gain``, emptied by the next start)
        found_gpus = select_gpus(cost, k, idx)
        if found_gpus is None:
            plan.no_gain.add(kind)
            return None
        gpus = found_gpus[0]
        chosen = np.array(gpus)
        if not shared_ok[chosen].any():
            plan.no_gain.add(kind)
            return None  # all idle: exclusive placement would have taken them
        if k > 1 and self.gangs == "observed" and not known[chosen[shared_ok[chosen]]].all():
            plan.no_gain.add(kind)
            return None  # a gang shares only where the sets it joins were seen to pay
        x_job = float(own[chosen].min())
        gain = k * x_job - float(drop[chosen].sum())
        if gain - self.kappa * float(sigma[chosen].max()) < k * self.margin:
            plan.no_gain.add(kind)
            return None
        offer = plan.offers[kind] = (gpus, x_job, max(0.0, k - gain), float(snap.first_end[chosen].min()))
        return self._worth_waiting(job, state, gpus_needed, snap, *offer)

    def _worth_waiting(self, job: QueuedJob, state: SchedulerState, gpus_needed: int, snap: _Snapshot,
                       gpus: tuple[int, ...], x_job: float, loss: float, first_end: float) -> tuple[int, ...] | None:
        """``gpus`` if the wait avoided by starting ``job`` there now exceeds the time lost to interference while
        it overlaps the residents (overlap x ``loss``), else None."""
        overlap = min(self._queued_left_s(job, state) / max(x_job, 1e-3), first_end)
        if job.spec.num_gpus * snap.wait(gpus_needed) - overlap * loss <= 0:
            return None
        return gpus

    def _touched_after(self, clock: int) -> np.ndarray:
        """GPUs touched by a call after ``clock`` (``_touched``), computed once per clock and call."""
        found = self._touched_since.get(clock)
        if found is None:
            found = self._touched_since[clock] = np.flatnonzero(self._touched > clock)
        return found

    def _touched_list(self, clock: int) -> list[int]:
        """``_touched_after`` as a list."""
        found = self._touched_lists.get(clock)
        if found is None:
            found = self._touched_lists[clock] = self._touched_after(clock).tolist()
        return found

    def _may_pay(self, job: QueuedJob, gpus: list[int], load: GPULoad, state: SchedulerState, sig_ids: np.ndarray,
                 snap: _Snapshot, plan: _Plan) -> bool:
        """Whether one of ``gpus`` passes ``_colocation``'s sharing and gain screens for ``job``: its test on the
        GPUs a remembered "no GPU pays" leaves open (usually a few), GPU by GPU on the same float64 values, each
        signature joined once, without the arrays over the whole cluster."""
        if not gpus:
            return False
        spec = job.spec
        mem = job_mem_per_gpu(spec, state, self.idx)
        n_res, pred_mem, capacity = load.n_residents, load.pred_mem_mib, state.mem_capacity_mib
        spare, most = 1.0 - self.mem_margin, self.max_residents
        per_gpu = isinstance(mem, np.ndarray)
        oom = self._oom_hosts(state) if self.oom_types else None
        allowed = self.idx.allowed(spec)
        passing: Iterable[tuple[int, int]]  # (GPU, its signature id) that pass the screen, in ``gpus`` order
        if len(gpus) > 16:  # the screen below on arrays (the same float64 operations)
            at = np.array(gpus, dtype=np.int64)
            n_at = n_res[at]
            ok = (n_at >= 1) & (n_at < most) & (pred_mem[at] + (mem[at] if per_gpu else mem) <= spare * capacity[at])
            if oom is not None:
                ok &= ~oom[at]
            if allowed is not None:
                ok &= allowed[at]
            passing = zip(at[ok].tolist(), sig_ids[at[ok]].tolist())
        else:
            passing = ((g, int(sig_ids[g])) for g in gpus
                       if not (n_res[g] < 1 or n_res[g] >= most
                               or not pred_mem[g] + (mem[g] if per_gpu else mem) <= spare * capacity[g]
                               or (oom is not None and oom[g]) or (allowed is not None and not allowed[g])))
        seen: set[int] = set()
        for g, sig_id in passing:
            if sig_id in seen:
                continue
            seen.add(sig_id)
            own, drop, sigma, _ = self._join_cached(spec.job_type, sig_id, g, state, snap, plan)
            if (own - drop) - self.kappa * sigma >= self.margin:
                return True
        return False

    def _refresh_call(self, state: SchedulerState, plan: _Plan) -> np.ndarray:
        """Every GPU's signature id in this call (planned types included). Made once per call, when it also
        brings ``_touched`` and ``_type_clock`` up to date (what changed since the last call that looked)."""
        if plan.sig_ids is not None:
            return plan.sig_ids
        assert self.tracker is not None and self.tracker.learned is not None
        sigs, n = self._sigs, len(state.gpu_changes)
        changed = sigs.refresh(state, self.idx.type_of_gpu)
        learned, self.tracker.learned = self.tracker.learned, []
        self._clock += 1
        self._touched_since, self._touched_lists = {}, {}
        if changed is None or self._joins_table is not sigs.sigs or len(self._touched) != n:
            # ids were re-issued (a new state or an overgrown table): cached answers name old signatures
            self._joins_table, self._no_pay, self._kind_arrays, self._settled = sigs.sigs, {}, {}, {}
            self._touched = np.zeros(n, dtype=np.int64)
        else:
            touched = set(changed)
            for gpu_type, types in learned:
                on_type = self.idx.type_masks.get(gpu_type)
                for t in set(types):
                    self._type_clock[t] = self._learn_clock = self._clock
                    with_t = sigs.with_type.get(t)
                    if with_t and on_type is not None:
                        touched.update(np.flatnonzero(np.isin(sigs.ids, list(with_t)) & on_type).tolist())
            for g in list(touched):  # a gang's current rate is its slowest GPU's: all its GPUs read it
                for j in state.residents[g]:
                    run = state.running[j]
                    if run.spec.num_gpus > 1:
                        touched.update(run.gpus)
            if touched:
                self._touched[list(touched)] = self._clock
        plan.sig_ids = sigs.ids.copy()
        for g, planned in plan.types.items():
            plan.sig_ids[g] = sigs.with_planned(int(sigs.ids[g]), tuple(planned))
        return plan.sig_ids

    def _join_cached(self, job_type: str, sig_id: int, g: int, state: SchedulerState, snap: _Snapshot,
                     plan: _Plan) -> tuple[float, float, float, bool]:
        """``_join`` for one signature (``g`` is a GPU that has it). The answer is a function of the tracker's
        estimates of the set before and after and, where a gang resides, of each resident's GPU count and current
        throughput (the same on every GPU of the signature: it places gangs by position). Answers are kept across
        calls (``_settled``) and returned without asking the tracker while no sample named one of the set's types
        since (the tracker would return the same estimate objects then)."""
        assert self.tracker is not None
        sig = self._sigs.sigs[sig_id]
        key = (job_type, sig_id)
        pattern: tuple[tuple[int, float], ...] = ()
        if sig[2]:
            found_pattern = plan.gang_patterns.get(sig_id)
            if found_pattern is None:
                runs = [state.running[j] for j in state.residents[g]]
                found_pattern = plan.gang_patterns[sig_id] = tuple(
                    (r.spec.num_gpus, snap.x_now.get(r.spec.job_id, 1.0) if r.spec.num_gpus > 1 else 0.0)
                    for r in runs)
            pattern = found_pattern
        generation = self.tracker.generation
        kept = self._settled.get(key)
        if kept is not None and kept[1] == generation and kept[2] == pattern:
            clock, type_clock = kept[0], self._type_clock
            if clock >= self._learn_clock:  # no type's clock is past it (``_learn_clock`` is the latest of them)
                return kept[3]
            if (type_clock.get(job_type, -1) <= clock and all(type_clock.get(t, -1) <= clock for t in sig[1])
                    and all(type_clock.get(t, -1) <= clock for t in sig[3])):
                return kept[3]
        gpu_type = state.cluster.gpus[g].gpu_type
        types = [*sig[1], *sig[3]]
        before = self.tracker.estimate(types, gpu_type)
        after = self.tracker.estimate([*types, job_type], gpu_type)
        found = self._join(before, after, pattern)
        if len(self._settled) > 65536:
            self._settled.clear()
        self._settled[key] = (self._clock, generation, pattern, found)
        return found

    @staticmethod
    def _join(before: SetEstimate, after: SetEstimate,
              gangs: tuple[tuple[int, float], ...]) -> tuple[float, float, float, bool]:
        """(the job's throughput, the residents' summed throughput loss, uncertainty, settled?) if it joins a GPU
        whose set (residents, then types planned this call) the tracker estimates as ``before`` (``after`` with
        the job). ``gangs``: per resident (GPUs it holds, its current throughput) where a gang resides, else
        empty. A gang resident loses on all its GPUs what its current (slowest) rate would drop to."""
        lost = 0.0
        for i, (k_r, now) in enumerate(gangs):
            if k_r == 1:
                now = before.x[i]
            lost += k_r * max(0.0, now - min(now, after.x[i]))
        for i in range(len(gangs), len(before.x)):
            lost += max(0.0, before.x[i] - after.x[i])
        return after.x[-1], lost, after.sigma, after.settled

    # ---- Tiresias' preemption (horus-las) ------------------------------------------------------------
    def _preempt(self, cycle: Cycle, blocked: list[QueuedJob], stopped: list[str], plan: _Plan) -> None:
        """For jobs still blocked after placing (co-location tried first), preempt running jobs of a strictly
        lower LAS priority queue where that frees enough GPUs (``parts.las_preemption``, as ``tiresias``), on
        the planned load. Jobs stopped earlier in the call and jobs on a GPU something was started on in it are
        never victims; the GPUs freed are used at the next call."""
        state = cycle.state
        assert isinstance(self.order_rule, TiresiasOrder)
        exclude = set(stopped)
        for g in plan.types:
            exclude.update(state.residents[g])
        for jid in las_victims(blocked, state, cycle.load.n_residents, self.order_rule.thresholds,
                               self.max_preempt_for, exclude):
            cycle.stop(jid)
            self.preempted += 1

    # ---- migration: spread co-located jobs onto GPUs that went idle --------------------------------
    def _migrate(self, cycle: Cycle, unpacked: list[str]) -> None:
        """Restart unpacked jobs on idle GPUs, then move co-located jobs with the most work left (at least
        ``migrate_min_s`` at their current rate) onto GPUs that stay idle (exclusive placement)."""
        state = cycle.state
        if not cycle.idle().any():
            return
        stopped = set(unpacked) - {a.job_id for a in cycle.actions if isinstance(a, Start)}
        movers: list[tuple[float, str]] = [(math.inf, jid) for jid in sorted(stopped)]
        for jid, run in state.running.items():
            if (jid in stopped or gpu_share(run.spec) < 1.0 - EPS
                    or not (state.load.n_residents[list(run.gpus)] >= 2).any() or not run.observed_rate > 0):
                continue  # (the rate last: a job running alone is not asked for a report)
            left = self._run_left_s(run, state)
            if left >= self.migrate_min_s:
                movers.append((left, jid))
        if not movers:
            return
        excl = self.exclusive
        excl.begin(cycle.load, state)

        def target(run: RunningJob) -> tuple[int, ...] | None:
            load = cycle.load
            gpus = excl.place(QueuedJob(run.spec, queued_since=state.now), load, state)
            return None if gpus is None or (load.n_residents[list(gpus)] > 0).any() else gpus  # only onto idle GPUs

        self.migrated += migrate(cycle, movers, target, restart=stopped, room=excl.any_room)


@POLICIES.register("horus")
def horus(**kwargs: Any) -> Policy:
    """Shortest predicted job first; co-locate where predicted gain and avoided wait pay; unpack and migrate."""
    return AdaptiveHorusPolicy(**{"order": "sjf", **kwargs})


@POLICIES.register("horus-fifo")
def horus_fifo(**kwargs: Any) -> Policy:
    """``horus`` with a FIFO queue order (backfilling)."""
    return AdaptiveHorusPolicy(**{"order": "fifo", **kwargs})


@POLICIES.register("horus-las")
def horus_las(**kwargs: Any) -> Policy:
    """``horus`` in Tiresias' world: discretised least-attained-service order and its preemption by priority
    every ``preempt_s`` = 300 s, reading no job sizes (``use_sizes=False``)."""
    return AdaptiveHorusPolicy(**{"order": "tiresias", "use_sizes": False, "preempt_s": 300.0, **kwargs})
