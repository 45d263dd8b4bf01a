"""Policy ``gandiva``: Gandiva (Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep Learning",
OSDI 2018), packing under load with introspection.

``gandiva`` (``GandivaPolicy``) models the paper's packing and introspection, from job specs, predictions and
telemetry only (never the truth):

* **FIFO with backfill.** The queue is walked in arrival order (original submit time, so a preempted job
  keeps its place in line as a job Gandiva suspends does; ``order="queue"`` walks the queue's re-entry order
  as ``fifo-exclusive`` does); a job takes idle GPUs when enough are idle (exclusive, consolidated on few
  nodes: ``ExclusivePlacement``).
* **Packing only under load.** A single-GPU whole-GPU job that finds no idle GPU may join a busy GPU:
  at most ``max_residents`` (2) jobs per GPU, only single-GPU jobs (a multi-GPU job never packs and no
  job joins a GPU holding one), predicted memory must fit with ``mem_margin`` (10 %) of the card spare,
  and a job that already failed out of memory only goes to an idle GPU. Gandiva does not predict
  utilization: among the GPUs that fit, the one with the fewest residents, then the lowest predicted
  memory, then the lowest index is taken (no interference model ranks them).
* **Introspection.** Every call (at least every ``tick_s`` = 60 s while jobs run) first reads the running
  jobs' observed rates (``ObservedThroughput``; its prior, the untrained summed-utilization rule, only
  fills sets never seen and is not used to decide anything here). A packed
  GPU whose observed combined normalized throughput (summed over its residents) is below
  ``unpack_below`` (1) is unpacked: its newest job is preempted and restarted at once on an idle GPU if
  there is one (else it waits in the queue). A type set seen to be below 1 is not packed again (the
  tracker's observed mean says so), which is Gandiva's "remember bad packings".
* **Migration.** When no queued job is left waiting after a call, packed jobs move to idle GPUs (the one
  with the most remaining work, over ``migrate_min_s``, first; one move per packed GPU per call), as
  Gandiva spreads packed jobs out when load drops. A move is a preemption plus a checkpoint restore.

Not modelled: Gandiva's time-slicing and suspend-resume (oversubscribing GPUs by swapping jobs at
mini-batch boundaries; a preempted job here waits in the queue, in its arrival place, and pays a
checkpoint-restore stall when restarted), grow-shrink of a
job's GPU count, migration for defragmentation or locality of multi-GPU jobs, its profiling of
utilization and mini-batch time to pick packing candidates, and its per-user fairness. Unpacking needs a
pair to have been observed once, i.e. it acts at the next scheduling call after the pair ran (with periodic,
noisy telemetry, ``SimConfig(telemetry="noisy")``: once the pair's set is settled, after
``ObservedThroughput.min_samples`` reports).

``gandiva-greedy`` (FIFO x the ``gandiva`` placement of ``horus.policies.placements.gandiva``) is the earlier
**strawman** kept for reference: it packs whenever memory fits (no per-GPU cap, no memory margin, gangs too)
and never unpacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from horus.interference.observed import ObservedThroughput
from horus.interference.slowdown import estimator_for
from horus.jobs import JobSpec
from horus.policies.base import POLICIES, Action, Policy
from horus.policies.parts.cluster_index import cluster_index, job_mem_per_gpu
from horus.policies.parts.cycle import Cycle, migrate, unpack
from horus.policies.parts.gpu_changes import GpuChanges
from horus.policies.parts.ordered import EPS, KeyedOrder, fifo_head, needs_empty_gpu
from horus.policies.placements.exclusive import ExclusivePlacement
from horus.state import GPULoad, QueuedJob, RunningJob, SchedulerState, gpu_share


# ---- the faithful policy ----------------------------------------------------------------------------
@dataclass
class _Residents:
    """Who holds each GPU during one call: running jobs not stopped this call, plus jobs started this call."""

    types: dict[int, list[str]] = field(default_factory=dict)  # GPU -> job types of its packable residents
    no_pack: set[int] = field(default_factory=set)  # GPUs holding a multi-GPU or fractional job
    stopped: set[str] = field(default_factory=set)  # job ids preempted this call


class ArrivalOrder(KeyedOrder):
    """FIFO by original submit time: a preempted (unpacked, migrated) job keeps its place in line, as a job
    Gandiva suspends does; ties in queue order."""

    name = "arrival"

    def key(self, job: QueuedJob, state: SchedulerState) -> tuple[float]:
        return (job.spec.submit_time,)


def _packable(spec: Any) -> bool:
    """Only single-GPU, whole-GPU jobs pack (Gandiva does not pack gangs)."""
    return spec.num_gpus == 1 and gpu_share(spec) >= 1.0 - EPS


class GandivaPolicy(Policy):
    """FIFO with backfill; pack single-GPU jobs two per GPU only under load; unpack pairs observed to lose
    throughput; migrate packed jobs to idle GPUs. See the module docstring."""

    colocates = True

    def may_share(self, job: QueuedJob) -> bool:
        """Gandiva packs single-GPU jobs only, and never one that failed out of memory."""
        return job.spec.num_gpus == 1 and job.oom_failures == 0

    acts_on_running = True
    tick_s = 60.0  # telemetry period: running jobs' rates are read at least this often (as ``horus``)

    def __init__(self, *, max_residents: int = 2, mem_margin: float = 0.1, unpack_below: float = 1.0,
                 migrate: bool = True, migrate_min_s: float = 600.0, max_scan: int = 64, order: str = "arrival",
                 name: str = "gandiva") -> None:
        if max_residents < 1 or max_scan < 1 or not 0 <= mem_margin < 1:
            raise ValueError("max_residents and max_scan must be >= 1 and mem_margin in [0, 1)")
        self.max_residents = max_residents
        self.mem_margin = mem_margin
        self.unpack_below = unpack_below
        self.migrate = migrate
        self.migrate_min_s = migrate_min_s
        self.max_scan = max_scan
        if order not in ("arrival", "queue"):
            raise ValueError(f"order must be arrival or queue, got {order!r}")
        self.order = ArrivalOrder() if order == "arrival" else None
        self.name = name
        self.exclusive = ExclusivePlacement()
        self.tracker: ObservedThroughput | None = None
        self._predictor: object = None
        self.packed = 0  # packing starts
        # who holds each GPU, kept across calls and brought up to date from ``state.gpu_changes`` (GPUs whose
        # residents came or went); each call plans on its own copy (``_residents``)
        self._held_changes = GpuChanges()
        self._held_types: dict[int, list[str]] = {}
        self._held_no_pack: set[int] = set()
        self.unpacked = 0
        self.migrated = 0

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "oracle": False, "order": self.order.name if self.order else "queue",
                "max_residents": self.max_residents, "mem_margin": self.mem_margin, "unpack_below": self.unpack_below, "migrate": self.migrate,
                "migrate_min_s": self.migrate_min_s, "max_scan": self.max_scan,
                "telemetry": self.tracker.describe() if self.tracker else None}

    def schedule(self, state: SchedulerState) -> list[Action]:
        if self.tracker is None or self._predictor is not state.predictor:
            self.tracker = ObservedThroughput(estimator_for(None, state.predictor))
            self._predictor = state.predictor
        self.tracker.observe(state)
        self.idx = cluster_index(state.cluster)
        self.exclusive.begin(state.load, state)
        res = self._residents(state)
        cycle = Cycle(state, lambda spec, gpus, sign: self._changed(spec, gpus, sign, cycle, res))
        if self.max_residents > 1:
            self._unpack(cycle, res)
        waiting = 0
        if state.queue:
            waiting = self._place_queue(cycle, res)
        if self.migrate and not waiting:
            self._migrate(cycle, res)
        return cycle.actions

    def _residents(self, state: SchedulerState) -> _Residents:
        """This call's copy of who holds each GPU: the packable residents' types, or the GPU in ``no_pack``
        (kept across calls; only GPUs whose residents changed since the last call are read again)."""
        gpus = self._held_changes.since_last(state)
        if gpus is None:  # a state new to this policy: every busy GPU
            self._held_types, self._held_no_pack = {}, set()
            gpus = np.flatnonzero(state.load.n_residents > 0).tolist()
        types, no_pack, busy = self._held_types, self._held_no_pack, state.load.n_residents
        for g in gpus:
            types.pop(g, None)
            no_pack.discard(g)
            if busy[g] <= 0:
                continue
            specs = [state.running[j].spec for j in state.residents[g]]
            if all(_packable(s) for s in specs):
                types[g] = [s.job_type for s in specs]
            else:
                no_pack.add(g)
        return _Residents({g: list(held) for g, held in types.items()}, set(no_pack))

    def _changed(self, spec: JobSpec, gpus: tuple[int, ...], sign: int, cycle: Cycle, res: _Residents) -> None:
        """Keep who holds each GPU, and the exclusive placement's summary, in step with the planned load."""
        if sign < 0:  # only packed single-GPU jobs are stopped (unpack, migrate)
            res.stopped.add(spec.job_id)
            res.types[gpus[0]].remove(spec.job_type)
        else:
            for g in gpus:
                if _packable(spec) and g not in res.no_pack:
                    res.types.setdefault(g, []).append(spec.job_type)
                else:
                    res.no_pack.add(g)
                    res.types.pop(g, None)
        self.exclusive.update(cycle.load, cycle.state)

    # ---- introspection: unpack pairs observed to lose throughput ------------------------------------
    def _unpack(self, cycle: Cycle, res: _Residents) -> None:
        assert self.tracker is not None
        tracker, gpus_of = self.tracker, cycle.state.cluster.gpus

        def loses(g: int, runs: list[RunningJob]) -> bool:
            if g in res.no_pack:
                return False
            est = tracker.estimate([r.spec.job_type for r in runs], gpus_of[g].gpu_type)
            return bool(est.settled and est.combined < self.unpack_below)

        for run, g in unpack(cycle, loses):
            self.unpacked += 1
            target = self._idle_gpu(run.spec, g, cycle)
            if target is not None:  # restart at once on an idle GPU (it is queued once preempted)
                cycle.start(run.spec, (target,))

    def _idle_gpu(self, spec: Any, leaving: int, cycle: Cycle) -> int | None:
        """An idle GPU (in the plan) the job may use, of the same type as ``leaving`` if there is one."""
        idle = cycle.idle()
        allowed = self.idx.allowed(spec)
        if allowed is not None:
            idle = idle & allowed
        same = idle & (self.idx.type_of_gpu == self.idx.type_of_gpu[leaving])
        pool = np.flatnonzero(same if same.any() else idle)
        return int(pool[0]) if len(pool) else None

    # ---- placing queued jobs -------------------------------------------------------------------------
    def _place_queue(self, cycle: Cycle, res: _Residents) -> int:
        """FIFO with backfill: idle GPUs first, packing only when none fits. Returns how many queued jobs
        were left waiting."""
        state, excl = cycle.state, self.exclusive
        waiting = 0
        jobs = self.order.head(state, self.max_scan) if self.order else fifo_head(state, self.max_scan)
        for job in jobs:
            load = cycle.load
            gpus = excl.place(job, load, state) if excl.any_room() else None
            if gpus is None and self.max_residents > 1 and _packable(job.spec) and not needs_empty_gpu(job):
                gpus = self._pack_target(job, load, state, res)
                if gpus is not None:
                    self.packed += 1
            if gpus is None:
                waiting += 1
                continue
            cycle.start(job.spec, gpus)
        return waiting + max(0, len(state.queue) - self.max_scan)

    def _pack_target(self, job: QueuedJob, load: GPULoad, state: SchedulerState,
                     res: _Residents) -> tuple[int, ...] | None:
        """The busy GPU to pack ``job`` onto: room for one more resident, no gang or fractional job on it,
        predicted memory within the margin, and not a type set observed to lose throughput; fewest
        residents, then lowest predicted memory, then lowest index."""
        assert self.tracker is not None
        spec, idx = job.spec, self.idx
        mem = job_mem_per_gpu(spec, state, idx)
        ok = ((load.n_residents >= 1) & (load.n_residents < self.max_residents)
              & (load.pred_mem_mib + mem <= (1.0 - self.mem_margin) * state.mem_capacity_mib))
        allowed = idx.allowed(spec)
        if allowed is not None:
            ok &= allowed
        if res.no_pack:
            ok[list(res.no_pack)] = False
        cand = np.flatnonzero(ok)
        if not len(cand):
            return None
        verdict: dict[tuple[int, tuple[str, ...]], bool] = {}
        for g in cand.tolist():
            key = (int(idx.type_of_gpu[g]), tuple(sorted(res.types.get(g, []))))
            bad = verdict.get(key)
            if bad is None:
                est = self.tracker.estimate([*key[1], spec.job_type], idx.types[key[0]])
                bad = verdict[key] = bool(est.settled and est.combined < self.unpack_below)
            if bad:
                ok[g] = False
        if not ok.any():
            return None
        cost = np.where(ok, load.n_residents * 1e9 + load.pred_mem_mib, np.inf)
        return (int(np.argmin(cost)),)

    # ---- migration: spread packed jobs onto GPUs that went idle --------------------------------------
    def _migrate(self, cycle: Cycle, res: _Residents) -> None:
        state, load = cycle.state, cycle.load
        if not cycle.idle().any():
            return
        movers: list[tuple[float, str]] = []
        for g in np.flatnonzero(load.n_residents >= 2).tolist():
            if g in res.no_pack:
                continue
            for jid in state.residents[g]:
                run = state.running[jid]
                if jid in res.stopped or not run.observed_rate > 0:
                    continue
                left = run.iterations_left / run.observed_rate
                if left >= self.migrate_min_s:
                    movers.append((left, jid))

        def target(run: RunningJob) -> tuple[int, ...] | None:
            found = self._idle_gpu(run.spec, run.gpus[0], cycle)
            return None if found is None else (found,)

        self.migrated += migrate(cycle, movers, target)


@POLICIES.register("gandiva")
def gandiva(**kwargs: Any) -> Policy:
    """Gandiva (OSDI 2018): FIFO, packs two single-GPU jobs per GPU only under load, unpacks and migrates
    from observed throughput."""
    return GandivaPolicy(**kwargs)
