"""Tenancy in the scheduler core: which queued jobs a policy may see, what each queue is charged, and reclaim.

A job of a tenancy-enabled cluster enters ``SchedulerState.held`` first. ``Admission.step`` (run by
``SchedulerCore.schedule`` before the policy) moves held jobs into ``state.queue`` (the policy's queue) when their
queue's quota allows it, in this order (docs/tenancy.md):

1. **Guaranteed**: a job that keeps its queue within its guarantee is admitted when the cluster has room; if
   the room is held by queues borrowing beyond their guarantee, their preemptible jobs are **reclaimed** (least
   attained GPU time first, never taking a queue below its guarantee) until it fits.
2. **Priority**: a job that does not fit its queue's limit may preempt preemptible jobs of lower priority classes
   in its own queue.
3. **Borrowing**: remaining room goes to jobs within their queue's borrowing limit, queue by queue in fair-share
   order: the smallest ``(decayed mean usage + current usage) / weight`` first (usage decays with the tenancy's
   half-life, as Slurm's fair-share factor does).

Within a queue, held jobs go by priority class (higher first), then arrival. Every entry into the queue, a
preempted job's included, is admitted again.

**Charges** (what a queue is counted for): a running job is charged per GPU its requested share (1 for a
whole-GPU job, its fraction otherwise) while the GPU's requests sum to at most 1; on a co-located GPU whose requests
exceed 1, the GPU is split among its residents (``equal``: by request; ``util``: by predicted utilization). A GPU in
use thus charges 1 in total, and co-location lets a queue run more jobs within its quota. An admitted job that
waits for placement holds a reservation of its full request. A queue over its limit (a co-runner left and its
share grew) gives back its least-attained preemptible jobs at the next step.

``Ledger`` integrates what the metrics need (per-queue usage, guaranteed GPU time received vs demanded, fair
shares while contended, reclaims), for the simulator's table and the live service's gauges.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice

import numpy as np
from sortedcontainers import SortedList

from horus.gpu_types import accepted_gpu_types
from horus.state import QueuedJob, RunningJob, SchedulerState, gpu_share
from horus.tenancy import ANY_TYPE, Queue, Tenancy

EPS = 1e-9
SCAN = 32  # held jobs of one queue looked at per step beyond the first that does not fit


@dataclass
class QueueAccount:
    """One queue's present state and integrals (GPU-seconds unless named otherwise)."""

    queue: Queue
    usage: dict[str, float] = field(default_factory=dict)  # key (type or ANY_TYPE) -> charged GPUs now
    reserved: dict[str, float] = field(default_factory=dict)  # admitted, not yet running: requested GPUs
    held_need: float = 0.0  # GPUs requested by its held jobs
    decayed_gpu_s: float = 0.0  # usage integral with exponential decay (fair-share history)
    used_gpu_s: float = 0.0
    guaranteed_demand_gpu_s: float = 0.0  # integral of min(demand, guarantee)
    guaranteed_received_gpu_s: float = 0.0  # integral of min(usage, guarantee)
    over_limit_s: float = 0.0  # time charged above its limit (a quota violation)
    contended_fair_gpu_s: float = 0.0  # while the cluster is contended: weighted max-min fair share
    contended_received_gpu_s: float = 0.0  # ... and what it received
    reclaimed: int = 0  # its jobs preempted to give borrowed GPUs back to their owners
    priority_preempted: int = 0  # its jobs preempted by a higher priority class of the same queue
    admitted: int = 0

    @property
    def guarantee(self) -> float:
        return sum(self.queue.guaranteed.values())

    def used(self, key: str = ANY_TYPE) -> float:
        return self.usage.get(key, 0.0)

    def committed(self, key: str = ANY_TYPE) -> float:
        return self.usage.get(key, 0.0) + self.reserved.get(key, 0.0)

    def demand(self) -> float:
        return self.used() + self.reserved.get(ANY_TYPE, 0.0) + self.held_need


def job_need(spec_gpus: int, share: float) -> float:
    """GPUs a job is charged at most: its gang size times its requested share of each GPU."""
    return spec_gpus * min(1.0, share)


def water_fill(demand: dict[str, float], weight: dict[str, float], capacity: float) -> dict[str, float]:
    """Weighted max-min fair shares of ``capacity`` (no queue above its demand)."""
    share = dict.fromkeys(demand, 0.0)
    active = {q for q, d in demand.items() if d > EPS}
    left = capacity
    while active and left > EPS:
        total_w = sum(weight[q] for q in active)
        step = min((demand[q] - share[q]) / weight[q] for q in active)
        step = min(step, left / total_w)
        for q in list(active):
            share[q] += step * weight[q]
            if demand[q] - share[q] <= EPS:
                active.discard(q)
        left -= step * total_w
    return share


class Admission:
    """Tenancy of one ``SchedulerState``: admission of held jobs, charges, reclaim and the per-queue ledger."""

    def __init__(self, tenancy: Tenancy) -> None:
        self.tenancy = tenancy
        self.accounts = {name: QueueAccount(q) for name, q in tenancy.queues.items()}
        self._state: SchedulerState | None = None
        self._seen_changes = np.zeros(0, dtype=np.int64)
        self._gpu_charges: list[list[tuple[str, str, float]]] = []  # per GPU: (job id, queue, charge)
        self._job_charge: dict[str, float] = {}  # running job -> charged GPUs (sum over its GPUs)
        self._reserved: dict[str, tuple[QueuedJob, str, tuple[str, ...], float]] = {}
        self._held: dict[str, SortedList] = {name: SortedList() for name in tenancy.queues}  # (-prio, entered, id)
        self._held_seen = 0  # held entries up to this ``entered`` number are in ``_held``
        self._version = -1
        self._last_t: float | None = None
        self.capacity: dict[str, float] = {}
        self.reclaims = 0
        self.contended_s = 0.0

    # ---- the cluster and its charges ---------------------------------------------------------------
    def _bind(self, state: SchedulerState) -> None:
        """(Re)derive everything from ``state``: a new state object or a rebuilt cluster."""
        self._state = state
        n = state.cluster.num_gpus
        self._seen_changes = np.full(n, -1, dtype=np.int64)
        self._gpu_charges = [[] for _ in range(n)]
        self._job_charge = {}
        for acc in self.accounts.values():
            acc.usage, acc.reserved, acc.held_need = {}, {}, 0.0
        self.capacity = {ANY_TYPE: float(n)}
        for gpu_type, where in state.gpus_of_type:
            self.capacity[gpu_type.name] = float(len(where))
        self._held = {name: SortedList() for name in self.tenancy.queues}
        self._held_seen = 0
        self._reserved = {}
        for job in state.queue.values():  # already admitted (e.g. a state rebuilt around a running service)
            self._reserve(job)

    def queue_name(self, queue: str | None) -> str:
        return self.tenancy.queue_of(queue).name

    def _refresh_charges(self, state: SchedulerState) -> None:
        changed = np.flatnonzero(state.gpu_changes != self._seen_changes)
        if not len(changed):
            return
        self._seen_changes[changed] = state.gpu_changes[changed]
        util_rule = self.tenancy.charge == "util"
        for g in changed.tolist():
            for job_id, q, c in self._gpu_charges[g]:
                self._charge(job_id, q, state.cluster.gpus[g].gpu_type.name, -c)
            residents = [state.running[j] for j in state.residents[g]]
            requests = [min(1.0, gpu_share(r.spec)) for r in residents]
            total = math.fsum(requests)
            if total > 1.0 + EPS:
                weights = ([max(state.predict(r.spec, state.cluster.gpus[g].gpu_type).util, EPS) for r in residents]
                           if util_rule else requests)
                w_total = math.fsum(weights)
                charges = [w / w_total for w in weights]
            else:
                charges = requests
            entries = []
            type_name = state.cluster.gpus[g].gpu_type.name
            for run, c in zip(residents, charges, strict=True):
                q = self.queue_name(run.spec.queue)
                entries.append((run.spec.job_id, q, c))
                self._charge(run.spec.job_id, q, type_name, c)
            self._gpu_charges[g] = entries

    def _charge(self, job_id: str, queue: str, type_name: str, amount: float) -> None:
        usage = self.accounts[queue].usage
        for key in (ANY_TYPE, type_name):
            usage[key] = usage.get(key, 0.0) + amount
        left = self._job_charge.get(job_id, 0.0) + amount
        if abs(left) <= EPS:
            self._job_charge.pop(job_id, None)
        else:
            self._job_charge[job_id] = left

    def charge_of(self, job_id: str) -> float:
        """GPUs the running job ``job_id`` is charged now."""
        return self._job_charge.get(job_id, 0.0)

    def total(self, key: str) -> float:
        return sum(acc.committed(key) for acc in self.accounts.values())

    # ---- reservations of admitted jobs ---------------------------------------------------------------
    def _keys(self, job: QueuedJob) -> tuple[str, ...]:
        accepted = accepted_gpu_types(job.spec.gpu_type_request)
        if accepted is not None and len(accepted) == 1:
            return (ANY_TYPE, next(iter(accepted)))
        return (ANY_TYPE,)

    def _reserve(self, job: QueuedJob) -> None:
        q = self.queue_name(job.spec.queue)
        need = job_need(job.spec.num_gpus, gpu_share(job.spec))
        keys = self._keys(job)
        reserved = self.accounts[q].reserved
        for key in keys:
            reserved[key] = reserved.get(key, 0.0) + need
        self._reserved[job.spec.job_id] = (job, q, keys, need)

    def _release_reservations(self, state: SchedulerState) -> None:
        for job_id, (job, q, keys, need) in list(self._reserved.items()):
            if state.queue.get(job_id) is not job:
                reserved = self.accounts[q].reserved
                for key in keys:
                    reserved[key] = reserved.get(key, 0.0) - need
                del self._reserved[job_id]

    # ---- held jobs ------------------------------------------------------------------------------------
    def _collect_held(self, state: SchedulerState) -> None:
        fresh = []
        for job in reversed(state.held.values()):
            if job.entered <= self._held_seen:
                break
            fresh.append(job)
        self._held_seen = state.entries
        for job in fresh:
            q = self.queue_name(job.spec.queue)
            prio = self.tenancy.priority_of(job.spec.priority).value
            need = job_need(job.spec.num_gpus, gpu_share(job.spec))
            self._held[q].add((-prio, job.entered, job.spec.job_id, need))
            self.accounts[q].held_need += need

    def _held_jobs(self, state: SchedulerState, q: str) -> Iterator[QueuedJob]:
        """Held jobs of queue ``q`` in admission order, read in chunks so admissions and preemptions may change the
        list meanwhile (entries that left the held set are dropped as met)."""
        held = self._held[q]
        last: tuple[float, int, str, float] | None = None
        while True:
            start = held.irange(minimum=last, inclusive=(False, False)) if last is not None else iter(held)
            chunk = list(islice(start, 64))
            if not chunk:
                return
            for item in chunk:
                last = item
                job = state.held.get(item[2])
                if job is None or job.entered != item[1]:
                    if item in held:
                        held.remove(item)
                        self.accounts[q].held_need -= item[3]
                    continue
                yield job

    # ---- one step -------------------------------------------------------------------------------------
    def needs_step(self, state: SchedulerState) -> bool:
        return state is not self._state or state.version != self._version

    def step(self, state: SchedulerState, now: float, preempt: Callable[[str], None]) -> None:
        """Admit what quotas allow, reclaiming and preempting through ``preempt(job_id)`` where they say so."""
        if state is not self._state or len(self._seen_changes) != state.cluster.num_gpus:
            self._bind(state)
        self.advance(now)
        self._refresh(state)
        self._give_back_over_limit(state, now, preempt)
        if state.held:
            self._admit(state, now, preempt)
        self._refresh(state)
        self._version = state.version

    def settle(self, state: SchedulerState) -> None:
        """After the policy's actions: charges and reservations as they now are (the ledger integrates them)."""
        self._refresh(state)
        self._version = state.version

    def observe(self, state: SchedulerState) -> None:
        """Charges of ``state``'s running jobs as they now are, admitting and preempting nothing (a read-only
        view of a state that others place jobs on, e.g. the Kubernetes extender's)."""
        if state is not self._state or len(self._seen_changes) != state.cluster.num_gpus:
            self._bind(state)
        self._refresh(state)

    def _refresh(self, state: SchedulerState) -> None:
        self._refresh_charges(state)
        self._release_reservations(state)
        self._collect_held(state)

    def _quota_key(self, acc: QueueAccount, type_name: str | None) -> str:
        """The key ``acc``'s quota counts a job on ``type_name`` under: its any-type quota, else the type."""
        return ANY_TYPE if ANY_TYPE in acc.queue.guaranteed or type_name is None else type_name

    def _give_back_over_limit(self, state: SchedulerState, now: float, preempt: Callable[[str], None]) -> None:
        for name, acc in self.accounts.items():
            if acc.queue.borrow_limit is None:
                continue
            for key in acc.queue.guaranteed:
                over = acc.used(key) - acc.queue.limit(key)
                if over <= EPS:
                    continue
                for run in self._victims(state, now, {name}, key):
                    if over <= EPS:
                        break
                    over -= self.charge_of(run.spec.job_id)
                    preempt(run.spec.job_id)
                    acc.reclaimed += 1
                    self.reclaims += 1
                self._refresh(state)

    def _victims(self, state: SchedulerState, now: float, queues: set[str], key: str,
                 below_priority: int | None = None) -> list[RunningJob]:
        """Preemptible running jobs of ``queues`` on GPUs counted under ``key``, lowest priority class and least
        attained GPU time first."""
        out = []
        for job_id in self._job_charge:
            run = state.running.get(job_id)
            if run is None or self.queue_name(run.spec.queue) not in queues:
                continue
            cls = self.tenancy.priority_of(run.spec.priority)
            if not cls.preemptible or (below_priority is not None and cls.value >= below_priority):
                continue
            if key != ANY_TYPE and state.cluster.gpus[run.gpus[0]].gpu_type.name != key:
                continue
            out.append(run)
        out.sort(key=lambda r: (self.tenancy.priority_of(r.spec.priority).value, r.attained(now), r.spec.job_id))
        return out

    def _flavors(self, job: QueuedJob, queue: Queue) -> list[str | None]:
        """GPU types to admit ``job`` under: None for a queue whose quota is of any type; else its accepted types
        in the order the queue lists its quota (types it has no quota for last)."""
        if ANY_TYPE in queue.guaranteed:
            return [None]
        accepted = accepted_gpu_types(job.spec.gpu_type_request)
        types = [t for t in self.capacity if t != ANY_TYPE and (accepted is None or t in accepted)]
        listed = [t for t in queue.guaranteed if t in types]
        return listed + [t for t in types if t not in listed]

    def _room(self, keys: tuple[str, ...], need: float) -> bool:
        return all(self.total(k) + need <= self.capacity.get(k, 0.0) + EPS for k in keys)

    def _shortfall(self, keys: tuple[str, ...], need: float) -> float:
        return max(self.total(k) + need - self.capacity.get(k, 0.0) for k in keys)

    def _admit(self, state: SchedulerState, now: float, preempt: Callable[[str], None]) -> None:
        one_class = len(self.tenancy.priority_classes) == 1
        for phase in ("guaranteed", "borrow"):
            order = sorted((name for name in self.accounts if self._held[name]), key=self._fair_key)
            for name in order:
                acc = self.accounts[name]
                if phase == "guaranteed" and all(acc.committed(k) >= g - EPS for k, g in acc.queue.guaranteed.items()):
                    continue  # no guarantee left to claim
                if (phase == "borrow" and one_class and self.total(ANY_TYPE) >= self.capacity[ANY_TYPE] - EPS):
                    break  # no room, and nothing a priority may preempt
                misses = 0
                for job in self._held_jobs(state, name):
                    if misses >= SCAN:
                        break
                    if not self._try(state, now, job, acc, phase, preempt):
                        misses += 1

    def _fair_key(self, name: str) -> float:
        acc = self.accounts[name]
        mean = acc.decayed_gpu_s * math.log(2) / self.tenancy.half_life_s
        return (mean + acc.committed()) / acc.queue.weight

    def _try(self, state: SchedulerState, now: float, job: QueuedJob, acc: QueueAccount, phase: str,
             preempt: Callable[[str], None]) -> bool:
        need = job_need(job.spec.num_gpus, gpu_share(job.spec))
        queue = acc.queue
        prio = self.tenancy.priority_of(job.spec.priority).value
        for flavor in self._flavors(job, queue):
            keys = self._keys(job) if flavor is None else (ANY_TYPE, flavor)
            qkey = ANY_TYPE if flavor is None else flavor
            if phase == "guaranteed":
                if acc.committed(qkey) + need > queue.guaranteed.get(qkey, 0.0) + EPS:
                    continue
                if not self._room(keys, need) and not self._reclaim(state, now, keys, need, queue.name, preempt):
                    continue
            elif acc.committed(qkey) + need > queue.limit(qkey) + EPS:
                short = acc.committed(qkey) + need - queue.limit(qkey)
                if not self._preempt_lower(state, now, acc, qkey, short, prio, preempt):
                    continue
                if not self._room(keys, need):
                    continue
            elif not self._room(keys, need):
                if not self._preempt_lower(state, now, acc, keys[-1], self._shortfall(keys, need), prio, preempt):
                    continue
                if not self._room(keys, need):
                    continue
            self._enter(state, job, flavor, need)
            return True
        return False

    def _enter(self, state: SchedulerState, job: QueuedJob, flavor: str | None, need: float) -> None:
        q = self.queue_name(job.spec.queue)
        prio = self.tenancy.priority_of(job.spec.priority).value
        self._held[q].discard((-prio, job.entered, job.spec.job_id, need))
        if flavor is not None and job.spec.gpu_type_request != flavor:
            job.spec = replace(job.spec, gpu_type_request=flavor)
        self._reserve(state.admit(job.spec.job_id))
        acc = self.accounts[q]
        acc.held_need -= need
        acc.admitted += 1

    def _reclaim(self, state: SchedulerState, now: float, keys: tuple[str, ...], need: float, owner: str,
                 preempt: Callable[[str], None]) -> bool:
        """Preempt jobs of queues borrowing beyond their guarantee until ``need`` GPUs fit; False (nothing
        preempted) if not enough can be freed."""
        key = keys[-1]
        short = self._shortfall(keys, need)
        excess: dict[str, float] = {}
        for name, acc in self.accounts.items():
            if name == owner:
                continue
            qkey = self._quota_key(acc, None if key == ANY_TYPE else key)
            over = acc.used(qkey) - acc.queue.guaranteed.get(qkey, 0.0)
            if over > EPS:
                excess[name] = over
        if not excess:
            return False
        plan: list[RunningJob] = []
        freed = 0.0
        for run in self._victims(state, now, set(excess), key):
            if freed >= short - EPS:
                break
            name = self.queue_name(run.spec.queue)
            c = self.charge_of(run.spec.job_id)
            if excess[name] - c < -EPS:  # would take its queue below its guarantee
                continue
            excess[name] -= c
            freed += c
            plan.append(run)
        if freed < short - EPS:
            return False
        for run in plan:
            preempt(run.spec.job_id)
            self.accounts[self.queue_name(run.spec.queue)].reclaimed += 1
            self.reclaims += 1
        self._refresh(state)
        return self._room(keys, need)

    def _preempt_lower(self, state: SchedulerState, now: float, acc: QueueAccount, key: str, short: float,
                       prio: int, preempt: Callable[[str], None]) -> bool:
        """Free ``short`` GPUs (under ``key``) for a job of priority ``prio`` by preempting preemptible jobs of
        lower priority classes in its own queue; False (nothing preempted) if they do not free enough."""
        if len(self.tenancy.priority_classes) == 1:
            return False
        plan, freed = [], 0.0
        for run in self._victims(state, now, {acc.queue.name}, key, below_priority=prio):
            if freed >= short - EPS:
                break
            plan.append(run)
            freed += self.charge_of(run.spec.job_id)
        if not plan or freed < short - EPS:
            return False
        for run in plan:
            preempt(run.spec.job_id)
            acc.priority_preempted += 1
        self._refresh(state)
        return True

    # ---- the ledger -------------------------------------------------------------------------------------
    def advance(self, now: float) -> None:
        """Integrate every account's present values from the last call up to ``now``."""
        last, self._last_t = self._last_t, now
        if last is None or now <= last:
            return
        dt = now - last
        decay = 2.0 ** (-dt / self.tenancy.half_life_s)
        for acc in self.accounts.values():
            used = acc.used()
            g = acc.guarantee
            acc.used_gpu_s += used * dt
            acc.decayed_gpu_s = acc.decayed_gpu_s * decay + used * (1 - decay) * self.tenancy.half_life_s / math.log(2)
            acc.guaranteed_received_gpu_s += min(used, g) * dt
            acc.guaranteed_demand_gpu_s += min(acc.demand(), g) * dt
            if any(acc.used(k) > acc.queue.limit(k) + 1e-6 for k in acc.queue.guaranteed):
                acc.over_limit_s += dt
        demand = {name: acc.demand() for name, acc in self.accounts.items()}
        capacity = self.capacity.get(ANY_TYPE, 0.0)
        if sum(1 for d in demand.values() if d > EPS) >= 2 and sum(demand.values()) > capacity + EPS:
            self.contended_s += dt
            fair = water_fill(demand, {n: a.queue.weight for n, a in self.accounts.items()}, capacity)
            for name, acc in self.accounts.items():
                acc.contended_fair_gpu_s += fair[name] * dt
                acc.contended_received_gpu_s += acc.used() * dt

    def jain_index(self) -> float:
        """Jain's fairness index over received / weighted max-min fair GPU time, while contended (nan: never)."""
        x = [a.contended_received_gpu_s / a.contended_fair_gpu_s for a in self.accounts.values()
             if a.contended_fair_gpu_s > 0]
        if not x:
            return math.nan
        return sum(x) ** 2 / (len(x) * sum(v * v for v in x)) if any(x) else 0.0

    def summary(self) -> dict[str, dict[str, float]]:
        """Per queue: its integrals (GPU-hours) and counts, JSON-able."""
        out: dict[str, dict[str, float]] = {}
        for name, acc in self.accounts.items():
            gd = acc.guaranteed_demand_gpu_s
            out[name] = {
                "guaranteed_gpus": acc.guarantee,
                "borrow_limit": math.nan if acc.queue.borrow_limit is None else acc.queue.borrow_limit,
                "weight": acc.queue.weight,
                "used_gpu_h": acc.used_gpu_s / 3600,
                "guaranteed_demand_gpu_h": gd / 3600,
                "guaranteed_received_gpu_h": acc.guaranteed_received_gpu_s / 3600,
                "guarantee_attainment": acc.guaranteed_received_gpu_s / gd if gd > 0 else math.nan,
                "contended_share_ratio": (acc.contended_received_gpu_s / acc.contended_fair_gpu_s
                                          if acc.contended_fair_gpu_s > 0 else math.nan),
                "over_limit_s": acc.over_limit_s,
                "reclaimed": acc.reclaimed,
                "priority_preempted": acc.priority_preempted,
                "admitted": acc.admitted,
            }
        return out
