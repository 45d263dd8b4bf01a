"""``oracle-truth``: co-locate by the TRUE change in total completion time. READS THE SIMULATOR'S TRUTH.

A reference for what knowing the world buys, not a deployable policy and not a proven bound: it is
greedy (one start at a time, no look-ahead over future arrivals, no preemption or migration).

It keeps a replica of the true running state (``TrueWorld``): each running job's remaining
iterations and true rate, computed exactly as the simulator does from the truth's solo iteration
times and ``colocated_throughput`` of each GPU's resident set (a gang runs at the pace of its
slowest worker: rate = 1 / (max_g solo_s_g / x_g + all-reduce time)).

Each call:

1. **Exclusive starts.** Queued jobs (FIFO window of ``lookahead``, aging after ``max_bypass``
   bypasses as in ``horus``) start on idle GPUs when enough are idle: fewest nodes, fastest true
   type, fullest nodes first, never on a card the job's true memory exceeds (unless none fits).
2. **Co-location, only where it truly pays.** For every remaining job J of the window and candidate
   GPUs G (screened: true memory fits, at most ``max_residents`` workers (2: truths measure pairs),
   the GPU's summed true normalized throughput rises; the ``shortlist`` best per job), it simulates
   the affected jobs (J and every job resident on G, gangs with their other GPUs' pace held fixed) to completion with
   their true remaining work, once with J started on G now and once with J waiting, and takes

       delta = sum of completion times (J on G now)  -  sum of completion times (J waits).

   J waiting means starting alone when a FIFO list schedule of the window over the GPUs' true free
   times gives it GPUs (``k`` GPUs, after the jobs ahead of it), at its true solo speed. With
   ``queue_effect`` (default) the best candidate's delta also counts every other waiting job of the
   window: its start in that list schedule with J sharing G now (G and the slowed residents' GPUs free
   up later; J takes no slot) minus its start with J waiting. The start with the most negative delta
   (below ``-min_benefit_s``) is made, the world updated, and the search repeated; a co-location that
   lengthens the estimated total completion time is never made.

Costs follow the window and the screened GPUs, not the cluster size times the queue: truth look-ups
are cached per (GPU type, resident types), and jobs found not worth co-locating are not re-examined
until a job starts or finishes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Any

import numpy as np

from horus.cluster import Cluster, GPUType
from horus.comm import allreduce_time_s, gradient_bytes
from horus.errors import OracleAccessError
from horus.jobs import JobSpec
from horus.policies.base import POLICIES, Action, Policy, Start
from horus.policies.parts.cluster_index import ClusterIndex, cluster_index
from horus.policies.parts.gpu_selection import select_gpus
from horus.state import QueuedJob, SchedulerState
from horus.truth.base import SoloTruth, TruthModel

_NONE: dict[str, float] = {}  # x of an empty GPU (shared, read-only)


class _Job:
    __slots__ = ("comm_s", "gpus", "rate", "rem", "solo_s", "spec", "type")

    def __init__(self, spec: JobSpec, gpus: tuple[int, ...], solo_s: list[float], comm_s: float, rem: float) -> None:
        self.spec = spec
        self.type = spec.job_type
        self.gpus = gpus
        self.solo_s = solo_s
        self.comm_s = comm_s
        self.rem = rem
        self.rate = 0.0


class TrueWorld:
    """The oracle's replica of the simulator's true state: residents, remaining work and true rates."""

    def __init__(self, truth: TruthModel, cluster: Cluster, now: float,
                 sizes: Mapping[str, float] | None = None) -> None:
        self.truth = truth
        self.sizes = sizes if sizes is not None else {}  # true lengths (the specs carry what the world announced)
        self.cluster = cluster
        self.gpu_type: list[GPUType] = [g.gpu_type for g in cluster.gpus]
        self.capacity = [float(t.memory_mib) for t in self.gpu_type]
        self.mem = [0.0] * cluster.num_gpus
        self.residents: list[list[str]] = [[] for _ in range(cluster.num_gpus)]
        self.gx: list[dict[str, float]] = [{} for _ in range(cluster.num_gpus)]  # true x of each resident type
        self.type_key: list[tuple[str, ...]] = [() for _ in range(cluster.num_gpus)]  # sorted resident types
        self.jobs: dict[str, _Job] = {}
        self.version = 0  # bumped whenever a job starts or finishes
        self.t = now
        self._solo: dict[tuple[str, str], SoloTruth] = {}
        self._x: dict[tuple[str, tuple[str, ...]], dict[str, float]] = {}
        self._grad: dict[str, float] = {}
        self._one: dict[str, tuple[dict[str, float], tuple[str]]] = {}

    # ---- truth look-ups (cached) --------------------------------------------------------------
    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        key = (job_type, gpu_type.name)
        value = self._solo.get(key)
        if value is None:
            value = self._solo[key] = self.truth.solo(job_type, gpu_type)
        return value

    def x(self, types: Sequence[str], gpu_type: GPUType) -> dict[str, float]:
        """True normalized throughput of each job type in a co-located set (repeats share a value)."""
        if len(types) == 1:
            return self._alone(types[0])[0]
        key = (gpu_type.name, tuple(sorted(types)))
        value = self._x.get(key)
        if value is None:
            thr = self.truth.colocated_throughput(list(key[1]), gpu_type)
            value = self._x[key] = {t: float(thr[key[1].index(t)]) for t in key[1]}
        return value

    def _alone(self, job_type: str) -> tuple[dict[str, float], tuple[str]]:
        """(x, type key) of a GPU holding one job of ``job_type`` (shared, read-only: looked up, never changed)."""
        found = self._one.get(job_type)
        if found is None:
            found = self._one[job_type] = ({job_type: 1.0}, (job_type,))
        return found

    def comm(self, spec: JobSpec, gpus: tuple[int, ...]) -> float:
        if len(gpus) == 1:
            return 0.0
        size = self._grad.get(spec.model)
        if size is None:
            size = self._grad[spec.model] = gradient_bytes(spec.model)
        return allreduce_time_s(size, gpus, self.cluster)

    # ---- state ---------------------------------------------------------------------------------
    def advance(self, now: float) -> None:
        dt = now - self.t
        if dt > 0:
            for job in self.jobs.values():
                job.rem = max(0.0, job.rem - job.rate * dt)
        self.t = now

    def sync(self, state: SchedulerState) -> None:
        """Advance to ``state.now`` and follow the jobs that finished or started since the last call.

        Finished jobs are replayed in the order of their true completion, each one re-rating its co-runners
        (the policy is not called while nothing waits, so several may have finished since)."""
        running = state.running
        gone = [jid for jid in self.jobs if jid not in running]
        if gone:
            self._replay_finishes(gone, state.now)
        self.advance(state.now)
        for jid, run in running.items():
            if jid not in self.jobs:
                self.add(run.spec, run.gpus, self.length(run.spec) - run.iterations_done)

    def _replay_finishes(self, gone: list[str], now: float) -> None:
        """Remove ``gone``, the earliest true completion (``rem / rate``; ties: ``gone`` order) first.

        A heap of those keys: a removal changes only its co-runners' rates (their keys are pushed anew), an
        advance of the clock every remaining key (the heap is rebuilt). O(gone log gone) while the clock stands
        still, as when many jobs left between two calls."""
        jobs = self.jobs
        version = [0] * len(gone)
        at = {jid: i for i, jid in enumerate(gone)}
        heap = [(jobs[jid].rem / jobs[jid].rate, i, 0) for i, jid in enumerate(gone)]
        heapq.heapify(heap)
        for _ in range(len(gone)):
            while True:
                _, i, ver = heapq.heappop(heap)
                if ver == version[i]:
                    break
            done = gone[i]
            del at[done]
            t = self.t
            self.advance(min(now, self.t + jobs[done].rem / jobs[done].rate))
            gpus = jobs[done].gpus
            self.remove(done)
            if self.t != t:  # every remaining job's work left moved: rebuild
                for k in at.values():
                    version[k] += 1
                heap = [(jobs[jid].rem / jobs[jid].rate, k, version[k]) for jid, k in at.items()]
                heapq.heapify(heap)
                continue
            for jid in dict.fromkeys(j for g in gpus for j in self.residents[g]):  # re-rated by the removal
                k = at.get(jid)
                if k is not None:
                    version[k] += 1
                    heapq.heappush(heap, (jobs[jid].rem / jobs[jid].rate, k, version[k]))

    def length(self, spec: JobSpec) -> float:
        """The job's true length (its announced one where the simulator gave none)."""
        return self.sizes.get(spec.job_id, spec.iterations)

    def add(self, spec: JobSpec, gpus: tuple[int, ...], rem: float) -> None:
        if len(gpus) == 1:  # the common case, as below without the lists
            g = gpus[0]
            solo = self.solo(spec.job_type, self.gpu_type[g])
            self.jobs[spec.job_id] = _Job(spec, gpus, [solo.iter_time_s], 0.0, rem)  # comm(): 0.0 on one GPU
            self.version += 1
            self.residents[g].append(spec.job_id)
            self.mem[g] += solo.mem_mib
            self._rerate(gpus)
            return
        solos = [self.solo(spec.job_type, self.gpu_type[g]) for g in gpus]
        job = _Job(spec, gpus, [s.iter_time_s for s in solos], self.comm(spec, gpus), rem)
        self.jobs[spec.job_id] = job
        self.version += 1
        for g, s in zip(gpus, solos):
            self.residents[g].append(spec.job_id)
            self.mem[g] += s.mem_mib
        self._rerate(gpus)

    def remove(self, jid: str) -> None:
        job = self.jobs.pop(jid)
        self.version += 1
        residents, mem = self.residents, self.mem
        for g in job.gpus:
            there = residents[g]
            there.remove(jid)
            mem[g] = mem[g] - self.solo(job.type, self.gpu_type[g]).mem_mib if there else 0.0
        self._rerate(job.gpus)

    def _rerate(self, gpus: tuple[int, ...]) -> None:
        """Per-GPU x and type keys of ``gpus``, then the rate of every job resident there."""
        jobs, residents, gx, type_key = self.jobs, self.residents, self.gx, self.type_key
        affected: dict[str, None] = {}
        for g in gpus:
            there = residents[g]
            if len(there) <= 1:  # the common cases, without the general path's temporaries
                if there:
                    gx[g], type_key[g] = self._alone(jobs[there[0]].type)
                    affected[there[0]] = None
                else:
                    gx[g], type_key[g] = _NONE, ()
                continue
            types = [jobs[j].type for j in there]
            gx[g] = self.x(types, self.gpu_type[g]) if types else {}
            type_key[g] = tuple(sorted(types))
            affected.update(dict.fromkeys(there))
        for jid in affected:
            job = jobs[jid]
            if len(job.gpus) == 1:
                worst = job.solo_s[0] / gx[job.gpus[0]][job.type]
            else:
                worst = max(s / gx[g][job.type] for g, s in zip(job.gpus, job.solo_s))
            job.rate = 1.0 / (worst + job.comm_s)

    def free_time(self, g: int) -> float:
        """When GPU ``g`` empties if nothing else changes (its residents at their current true rates)."""
        return max((self.t + self.jobs[j].rem / self.jobs[j].rate for j in self.residents[g]), default=self.t)

    # ---- the objective ---------------------------------------------------------------------------
    def completion_sum(self, spec: JobSpec, gpus: tuple[int, ...], rem: float, wait_until: float) -> float:
        """True change in the summed completion time of ``spec`` and every job resident on ``gpus`` if
        ``spec`` starts there now instead of starting alone at ``wait_until``."""
        _, after, before = self.effect(spec, gpus, rem)
        return sum(after) - sum(before) - (wait_until + rem * self.alone_iter_s(spec, gpus))

    def alone_iter_s(self, spec: JobSpec, gpus: tuple[int, ...]) -> float:
        return max(self.solo(spec.job_type, self.gpu_type[g]).iter_time_s for g in gpus) + self.comm(spec, gpus)

    def effect(self, spec: JobSpec, gpus: tuple[int, ...], rem: float) -> tuple[list[str], list[float], list[float]]:
        """The jobs resident on ``gpus``, their true completion times with ``spec`` started there now
        (``spec``'s last) and without it. Gang residents keep the pace of their other GPUs."""
        on = set(gpus)
        affected = list(dict.fromkeys(j for g in gpus for j in self.residents[g]))
        members = []
        for jid in affected:
            job = self.jobs[jid]
            fixed = 0.0  # the pace its workers off ``gpus`` impose (their co-runners do not change)
            inside: dict[int, float] = {}
            for g, s in zip(job.gpus, job.solo_s):
                if g in on:
                    inside[g] = s
                else:
                    fixed = max(fixed, s / self.gx[g][job.type])
            members.append((job.type, inside, fixed, job.comm_s, job.rem))
        solo_j = {g: self.solo(spec.job_type, self.gpu_type[g]).iter_time_s for g in gpus}
        new = (spec.job_type, solo_j, 0.0, self.comm(spec, gpus), rem)
        return affected, self._finish_times([*members, new], gpus), self._finish_times(members, gpus)

    def _finish_times(self, members: list[tuple[str, dict[int, float], float, float, float]],
                      gpus: tuple[int, ...]) -> list[float]:
        """Completion times of ``members`` run together from now; each one's pace follows who is still
        running on ``gpus`` (true x of the remaining set)."""
        t = self.t
        rem = [m[4] for m in members]
        alive = list(range(len(members)))
        end = [t] * len(members)
        on_gpu = {g: [i for i, m in enumerate(members) if g in m[1]] for g in gpus}
        done = [False] * len(members)
        while alive:
            xs = {}
            for g, there in on_gpu.items():
                types = [members[i][0] for i in there if not done[i]]
                if types:
                    xs[g] = self.x(types, self.gpu_type[g])
            rates = []
            for i in alive:
                kind, inside, fixed, comm_s, _ = members[i]
                worst = fixed
                for g, s in inside.items():
                    worst = max(worst, s / xs[g][kind])
                rates.append(1.0 / (worst + comm_s))
            step = min(rem[i] / r for i, r in zip(alive, rates))
            t += step
            left = []
            for i, r in zip(alive, rates):
                rem[i] -= r * step
                if rem[i] <= 1e-9 * max(1.0, members[i][4]):
                    done[i] = True
                    end[i] = t
                else:
                    left.append(i)
            if len(left) == len(alive):  # float guard: the argmin finishes
                j = min(range(len(alive)), key=lambda n: rem[alive[n]])
                done[alive[j]] = True
                end[alive[j]] = t
                left.pop(j)
            alive = left
        return end


def list_schedule(free: list[float], jobs: list[QueuedJob], durations: list[float],
                  skip: int | None = None) -> list[float]:
    """Start time of each job (``skip``: left out, its own start reported as +inf) when ``jobs`` start in
    order, each alone on the ``num_gpus`` GPUs that free up first (``free``: when each GPU frees up)."""
    heap = list(free)
    heapq.heapify(heap)
    starts = []
    pop, push, replace = heapq.heappop, heapq.heappush, heapq.heapreplace
    for n, (job, duration) in enumerate(zip(jobs, durations)):
        if n == skip:
            starts.append(math.inf)
            continue
        k = min(job.spec.num_gpus, len(heap))
        if k == 1:  # the GPU that frees first takes it (a pop and a push as one)
            start = heap[0]
            replace(heap, start + duration)
            starts.append(start)
            continue
        start = max([pop(heap) for _ in range(k)])
        starts.append(start)
        for _ in range(k):
            push(heap, start + duration)
    return starts


@POLICIES.register("oracle-truth")
class TrueCompletionOracle(Policy):
    """Greedy co-location by the true change in summed completion time (reads the truth; see module doc)."""

    colocates = True

    name = "oracle-truth"
    is_oracle = True

    def __init__(self, *, lookahead: int = 64, max_bypass: int = 1024, max_residents: int = 2,
                 shortlist: int = 4, min_benefit_s: float = 0.0, queue_effect: bool = True) -> None:
        if lookahead < 1 or max_bypass < 0 or max_residents < 1 or shortlist < 1 or min_benefit_s < 0:
            raise ValueError("oracle-truth: lookahead, max_residents, shortlist >= 1; max_bypass, min_benefit_s >= 0")
        self.lookahead = lookahead
        self.max_bypass = max_bypass
        self.max_residents = max_residents
        self.shortlist = shortlist
        self.min_benefit_s = float(min_benefit_s)
        self.queue_effect = bool(queue_effect)
        self.truth: TruthModel | None = None
        self.true_sizes: dict[str, float] = {}
        self.world: TrueWorld | None = None
        self.bypassed: dict[str, int] = {}
        self._rejected: set[str] = set()  # not worth co-locating under the current residents
        self._screen: dict[tuple[str, str, tuple[str, ...]], float] = {}
        self._gain_cache: dict[tuple[str, str | None], tuple[np.ndarray, np.ndarray]] = {}
        self._gain_version = -1

    def bind_truth(self, truth: object) -> None:
        if not isinstance(truth, TruthModel):
            raise TypeError(f"{self.name} needs a TruthModel, got {type(truth).__name__}")
        self.truth = truth
        self.world = None

    def bind_true_sizes(self, iterations: Mapping[str, float]) -> None:
        self.true_sizes = dict(iterations)
        self.world = None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "oracle": True, "reads_truth": True, "upper_bound": False,
                "lookahead": self.lookahead, "max_bypass": self.max_bypass, "max_residents": self.max_residents,
                "shortlist": self.shortlist, "min_benefit_s": self.min_benefit_s, "queue_effect": self.queue_effect,
                "note": "reads the simulator's truth: co-locates only where the true summed completion time of "
                        "the job and its co-runners (gangs included) falls; a greedy reference, not a bound"}

    # ---- scheduling ------------------------------------------------------------------------------
    def schedule(self, state: SchedulerState) -> list[Action]:
        if self.truth is None:
            raise OracleAccessError(f"{self.name} policy used before bind_truth(truth)")
        world = self.world
        if world is None or world.cluster is not state.cluster:
            world = self.world = TrueWorld(self.truth, state.cluster, state.now, self.true_sizes)
            self._rejected = set()
            self._gain_version = -1
        before = set(world.jobs)
        world.sync(state)
        if set(world.jobs) != before:
            self._rejected = set()
        if not state.queue:
            return []
        idx = cluster_index(state.cluster)
        window = list(islice(state.queue.values(), self.lookahead))
        head_only = self.bypassed.get(window[0].spec.job_id, 0) > self.max_bypass
        started = self._exclusive(window[:1] if head_only else window, world, idx)
        rest = [job for job in (window[:1] if head_only else window) if job.spec.job_id not in started]
        started.update(self._colocate(rest, world, idx))
        head = window[0].spec.job_id
        for jid in started:
            self.bypassed.pop(jid, None)
        if started and head not in started:
            self.bypassed[head] = self.bypassed.get(head, 0) + len(started)
        if len(self.bypassed) > 4 * len(state.queue) + 1024:
            self.bypassed = {jid: n for jid, n in self.bypassed.items() if jid in state.queue}
        return [Start(jid, gpus) for jid, gpus in started.items()]

    def _exclusive(self, window: list[QueuedJob], world: TrueWorld, idx: ClusterIndex) -> dict[str, tuple[int, ...]]:
        """FIFO with backfill onto idle GPUs (only the head once it was bypassed ``max_bypass`` times)."""
        started: dict[str, tuple[int, ...]] = {}
        idle = np.array([not r for r in world.residents], dtype=bool)
        for job in window:
            if not idle.any():
                break
            gpus = self._pick_idle(job.spec, idle, world, idx)
            if gpus is None:
                continue
            world.add(job.spec, gpus, world.length(job.spec))
            idle[list(gpus)] = False
            started[job.spec.job_id] = gpus
        return started

    def _pick_idle(self, spec: JobSpec, idle: np.ndarray, world: TrueWorld, idx: ClusterIndex) -> tuple[int, ...] | None:
        allowed = idx.allowed(spec)
        ok = idle if allowed is None else idle & allowed
        fits = np.array([world.solo(spec.job_type, t).mem_mib <= t.memory_mib for t in idx.types])[idx.type_of_gpu]
        if (fits if allowed is None else fits & allowed).any():
            ok = ok & fits  # never a start that truly runs out of memory, unless no card of the cluster fits
        if np.count_nonzero(ok) < spec.num_gpus:
            return None
        busy_share = 1.0 - np.add.reduceat(idle, idx.node_first) / idx.node_size  # fuller nodes first
        speed = np.array([world.solo(spec.job_type, t).iter_time_s for t in idx.types])[idx.type_of_gpu]
        cost = np.where(ok, speed / speed.min() - 0.01 * busy_share[idx.node_of_gpu], np.inf)
        found = select_gpus(cost, spec.num_gpus, idx)
        return None if found is None else found[0]

    def _colocate(self, rest: list[QueuedJob], world: TrueWorld, idx: ClusterIndex) -> dict[str, tuple[int, ...]]:
        started: dict[str, tuple[int, ...]] = {}
        while rest:
            free = [world.free_time(g) for g in range(len(world.residents))]
            durations = [world.length(job.spec) * world.solo(job.spec.job_type, idx.main_type).iter_time_s
                         for job in rest]
            waits = list_schedule(free, rest, durations)
            best: tuple[float, int, tuple[int, ...]] | None = None
            for i, job in enumerate(rest):
                jid = job.spec.job_id
                if jid in self._rejected:
                    continue
                found = self._best_shared(i, rest, waits, free, durations, world, idx)
                if found is None:
                    self._rejected.add(jid)
                    continue
                if best is None or found[0] < best[0]:
                    best = (found[0], i, found[1])
            if best is None:
                break
            job = rest.pop(best[1])
            world.add(job.spec, best[2], world.length(job.spec))
            started[job.spec.job_id] = best[2]
            self._rejected = set()  # the residents changed: every job's options did
        return started

    def _best_shared(self, i: int, rest: list[QueuedJob], waits: list[float], free: list[float],
                     durations: list[float], world: TrueWorld,
                     idx: ClusterIndex) -> tuple[float, tuple[int, ...]] | None:
        """The candidate GPUs (at least one shared) for ``rest[i]`` with the most negative true change, if negative.

        Candidates are ranked by the change for the job and its co-runners; the best one then also counts
        the change in the start times of the other waiting jobs (``queue_effect``)."""
        spec = rest[i].spec
        if waits[i] <= world.t:
            return None  # it can start alone now: sharing cannot beat that
        gain, idle = self._gains(spec, world, idx)
        shared = np.flatnonzero(np.isfinite(gain) & ~idle)
        if len(shared) == 0:
            return None
        candidates: list[tuple[int, ...]] = []
        if spec.num_gpus == 1:
            top = shared[np.argsort(-gain[shared], kind="stable")[: self.shortlist]]
            candidates = [(int(g),) for g in top]
        else:
            found = select_gpus(np.where(np.isfinite(gain), -gain, np.inf), spec.num_gpus, idx)
            if found is not None and not idle[list(found[0])].all():
                candidates = [found[0]]
        best: tuple[float, tuple[int, ...], tuple[list[str], list[float], list[float]]] | None = None
        for gpus in candidates:
            eff = world.effect(spec, gpus, world.length(spec))
            local = sum(eff[1]) - sum(eff[2]) - (waits[i] + world.length(spec) * world.alone_iter_s(spec, gpus))
            if best is None or local < best[0]:
                best = (local, gpus, eff)
        if best is None:
            return None
        delta, gpus, (affected, after, before) = best
        if self.queue_effect:
            delta = self._with_queue(i, rest, gpus, affected, after, before, free, durations, world)
        return (delta, gpus) if delta < -self.min_benefit_s else None

    def _with_queue(self, i: int, rest: list[QueuedJob], gpus: tuple[int, ...], affected: list[str],
                    after: list[float], before: list[float], free: list[float], durations: list[float],
                    world: TrueWorld) -> float:
        """Change in the summed completion time of the job, its co-runners and every other waiting job of
        the window (their starts in a FIFO list schedule over the GPUs' true free times)."""
        spec = rest[i].spec
        touched = {g for jid in affected for g in world.jobs[jid].gpus} | set(gpus)
        free_with, free_without = list(free), list(free)
        end_with = dict(zip(affected, after))
        end_without = dict(zip(affected, before))
        for g in touched:
            here = world.residents[g]
            others = [world.t + world.jobs[j].rem / world.jobs[j].rate for j in here if j not in end_with]
            free_with[g] = max([world.t, *others, *(end_with[j] for j in here if j in end_with)])
            free_without[g] = max([world.t, *others, *(end_without[j] for j in here if j in end_without)])
        for g in gpus:
            free_with[g] = max(free_with[g], after[-1])
        starts_without = list_schedule(free_without, rest, durations)
        starts_with = list_schedule(free_with, rest, durations, skip=i)
        queue = sum(w - o for n, (w, o) in enumerate(zip(starts_with, starts_without)) if n != i)
        alone = starts_without[i] + world.length(spec) * world.alone_iter_s(spec, gpus)
        return sum(after) - sum(before) - alone + queue

    def _gains(self, spec: JobSpec, world: TrueWorld, idx: ClusterIndex) -> tuple[np.ndarray, np.ndarray]:
        """Per GPU (and the idle mask): 1.0 if idle; else the rise in its summed true normalized throughput
        if the job joins (screened: true memory fits, below ``max_residents``, a rise > 0); ``inf`` where it
        cannot go. Cached per (job type, GPU request) until a job starts or finishes."""
        if self._gain_version != world.version or len(self._gain_cache) > 4096:
            self._gain_cache = {}
            self._gain_version = world.version
        key = (spec.job_type, spec.gpu_type_request)
        cached = self._gain_cache.get(key)
        if cached is None:
            cached = self._gain_cache[key] = self._compute_gains(spec, world, idx)
        return cached

    def _compute_gains(self, spec: JobSpec, world: TrueWorld, idx: ClusterIndex) -> tuple[np.ndarray, np.ndarray]:
        allowed = idx.allowed(spec)
        gain = np.full(len(world.residents), np.inf)
        idle = np.zeros(len(world.residents), dtype=bool)
        for g, residents in enumerate(world.residents):
            if allowed is not None and not allowed[g]:
                continue
            if not residents:
                gain[g] = 1.0
                idle[g] = True
                continue
            if len(residents) >= self.max_residents:
                continue
            gpu_type = world.gpu_type[g]
            if world.mem[g] + world.solo(spec.job_type, gpu_type).mem_mib > world.capacity[g]:
                continue
            types = world.type_key[g]
            key = (spec.job_type, gpu_type.name, types)
            value = self._screen.get(key)
            if value is None:
                before = world.x(types, gpu_type)
                after = world.x([*types, spec.job_type], gpu_type)
                value = sum(after[t] for t in [*types, spec.job_type]) - sum(before[t] for t in types)
                self._screen[key] = value
            if value > 0:
                gain[g] = value
        return gain, idle


POLICIES.alias("oracle", "oracle-truth")  # the name kept for the reference co-location oracle
