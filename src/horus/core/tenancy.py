"""Tenancy in the scheduler core: which queued jobs a policy may see, what each queue is charged, and reclaim.

A job of a tenancy-enabled cluster enters ``SchedulerState.held`` first. ``Admission.step`` (run by
``SchedulerCore.schedule`` before the policy) moves held jobs into ``state.queue`` (what the policy sees):

* when only one queue waits, all its jobs (the policy's own order decides; a limit below the cluster's capacity
  holds back what does not fit);
* otherwise **guaranteed** first (a job keeping its queue within its guarantee, at once; other queues' borrowed
  admissions that have not started leave the policy's view when idle GPUs would not cover both), then
  **borrowing** into the room left (idle capacity, or free worker slots for a co-locating policy; a queue below
  its weighted max-min fair share needs no room), queue by queue in fair-share order: the smallest ``(decayed mean usage + current usage) / weight`` first (usage decays with
  the tenancy's half-life, as Slurm's fair-share factor does); a job over its queue's limit may preempt lower
  priority classes of its own queue.

After the policy, ``reclaim_for_guarantees`` frees GPUs for guaranteed jobs it could not place (borrowers'
preemptible jobs, the one the policy's order ranks last first, never below a borrower's guarantee but for a job
larger than all of it) and the core
asks the policy again; whether a waiting job is guaranteed is decided at each step by what its queue is charged
then (``_within_guarantee``), not when it was admitted;
then (and in ``step`` when no guaranteed job is short of idle GPUs) ``reclaim_for_fair_share`` admits the head job
of the queue furthest behind its weighted max-min fair share over time (``fair_deficit_gpu_s``: fair share minus
charges while contended, decayed with the half-life), once it is owed that job's request for ``FAIR_RECLAIM_S``,
with GPUs reclaimed from queues ahead of their share (borrowed preemptible jobs only, never below a guarantee); a
job so helped is not taken back by it. ``may_start`` holds a queue's limit at every start. Within a queue, held
jobs go by priority class, then the policy's own keyed order (``order_key``), then arrival.

**Charges** (what a queue is counted for): a running job is charged per GPU its requested share (1 for a
whole-GPU job, its fraction otherwise) while the GPU's requests sum to at most 1; on a co-located GPU whose
requests exceed 1, the GPU is split among its residents (``equal``: by request; ``util``: by predicted
utilization). A GPU in use thus charges at most 1 in total (exactly 1 once its requests reach 1; fractional pods
that leave part of it unrequested charge only their sum), and co-location lets a queue run more jobs within its
quota. Reclaim under a policy that never co-locates counts what a borrower *occupies* instead (``_occupancy``).
An admitted job that waits for placement holds a reservation of its full request. A queue over its limit (a
co-runner left and its share grew) gives back preemptible jobs (``_victims``' order) at the next step.

``Admission`` also keeps the ledger the metrics need (per-queue usage, guaranteed GPU time received vs
demanded, fair shares while contended, reclaims), for the simulator's table and the live service's gauges
(docs/tenancy.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from horus.gpu_types import accepted_gpu_types
from horus.jobs import JobSpec
from horus.state import QueuedJob, RunningJob, SchedulerState, gpu_share
from horus.tenancy import ANY_TYPE, Queue, Tenancy

EPS = 1e-9
# a queue reclaims toward its fair share once it is owed its head job's request for this long (``reclaim_for_fair_share``)
FAIR_RECLAIM_S = 3600.0
SCAN = 32  # held jobs of one queue looked at per step beyond the first that does not fit


@dataclass
class QueueAccount:
    """One queue's present state and integrals (GPU-seconds unless named otherwise)."""

    queue: Queue
    usage: dict[str, float] = field(default_factory=dict)  # key (type or ANY_TYPE) -> charged GPUs now
    reserved: dict[str, float] = field(default_factory=dict)  # admitted, not yet running: requested GPUs
    reserved_beyond: float = 0.0  # of ``reserved[ANY_TYPE]``: jobs larger than its whole guarantee
    held_need: float = 0.0  # GPUs requested by its held jobs
    fill: float = 0.0  # GPUs of held jobs that would fit in what is left of its guarantee (first fit, in order)
    held_needs: SortedList = field(default_factory=SortedList)  # each held job's request (the smallest first)
    commit: dict[str, float] = field(default_factory=dict)  # usage + reserved per key
    waiting: int = 0  # its admitted jobs that have not started
    decayed_gpu_s: float = 0.0  # usage integral with exponential decay (fair-share history)
    used_gpu_s: float = 0.0
    running_job_s: float = 0.0  # integral of its number of running jobs (co-location runs more per charged GPU)
    guaranteed_demand_gpu_s: float = 0.0  # integral of min(demand, guarantee)
    guaranteed_received_gpu_s: float = 0.0  # integral of min(usage, guarantee)
    over_limit_s: float = 0.0  # time charged above its limit (a quota violation)
    contended_fair_gpu_s: float = 0.0  # while the cluster is contended: weighted max-min fair share
    contended_received_gpu_s: float = 0.0  # ... and what it received
    fair_deficit_gpu_s: float = 0.0  # weighted max-min fair share minus charges while contended, decayed (< 0: ahead)
    reclaimed: int = 0  # its jobs preempted to give borrowed GPUs back to their owners
    priority_preempted: int = 0  # its jobs preempted by a higher priority class of the same queue
    order_preempted: int = 0  # its jobs preempted for a job of its own queue the policy's order ranks ahead
    admitted: int = 0

    @property
    def guarantee(self) -> float:
        """GPUs guaranteed in all: its any-type guarantee where it has one (per-type ones lie within it), else the
        sum of its per-type guarantees."""
        g = self.queue.guaranteed
        return g[ANY_TYPE] if ANY_TYPE in g else sum(g.values())

    def used(self, key: str = ANY_TYPE) -> float:
        return self.usage.get(key, 0.0)

    def committed(self, key: str = ANY_TYPE) -> float:
        return self.commit.get(key, 0.0)

    def demand(self) -> float:
        return self.used() + self.reserved.get(ANY_TYPE, 0.0) + self.held_need

    def guaranteeable_demand(self) -> float:
        """Demand its guarantee can cover: what it runs and has admitted, plus the held jobs that fit in the rest
        of its guarantee taken in admission order (``fill``; whole jobs: a gang larger than what is left of the
        guarantee only ever runs on borrowed GPUs). An admitted job larger than the whole guarantee is left out as
        it is while held (``reserved_beyond``): no guarantee covers it, and ``_reclaim`` takes it back whole."""
        return self.used() + self.reserved.get(ANY_TYPE, 0.0) - self.reserved_beyond + self.fill


def job_need(spec_gpus: int, share: float) -> float:
    """GPUs a job is charged at most: its gang size times its requested share of each GPU."""
    return spec_gpus * min(1.0, share)


def spec_need(spec: JobSpec) -> float:
    """``job_need`` of a job spec."""
    return job_need(spec.num_gpus, gpu_share(spec))


def by_type(state: SchedulerState, per_gpu: np.ndarray) -> dict[str, float]:
    """Sums of a per-GPU quantity over the cluster (``ANY_TYPE``) and over each GPU type's GPUs."""
    out = {ANY_TYPE: float(per_gpu.sum())}
    for gpu_type, where in state.gpus_of_type:
        out[gpu_type.name] = float(per_gpu[where].sum())
    return out


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
        self._queue_jobs: dict[str, set[str]] = {name: set() for name in self.accounts}  # charged jobs per queue
        # admitted job -> (its entry, queue, keys, request, admitted within its queue's guarantee)
        self._reserved: dict[str, tuple[QueuedJob, str, tuple[str, ...], float]] = {}
        # per queue, held jobs in admission order: (-class value, policy's order key, entered, job id, request)
        self._held: dict[str, SortedList] = {name: SortedList() for name in tenancy.queues}
        self._held_seen = 0  # held entries up to this ``entered`` number are in ``_held``
        self._version = -1
        self._last_t: float | None = None
        self.capacity: dict[str, float] = {}
        self._totals: dict[str, float] = {}
        self._names: dict[str | None, str] = {}
        self._fair: dict[str, float] = {}  # per queue: weighted max-min fair share of the cluster this step
        # the policy's queue-order key (a ``KeyedOrder``'s): held jobs of one queue and class are admitted in the
        # policy's order (SJF, LAS, ...) rather than by arrival; fixed while an entry waits
        self.order_key: Callable[[QueuedJob], tuple[float, ...]] | None = None
        self._held_items: dict[str, tuple[float, tuple[float, ...], int, str, float]] = {}  # held job -> its item
        self._reserved_total: dict[str, float] = {}  # admitted, not yet running, all queues: requested GPUs per key
        # the policy's preemption level of a job (its order key's leading part: Tiresias' LAS queue), set by the core
        # only for a policy that preempts by its order: a held job of a queue with no room left may then take the
        # place of its own queue's running jobs of a strictly lower level (``_preempt_own``)
        self.preempt_level: Callable[[QueuedJob], float] | None = None
        self.slots_per_gpu = 1  # workers a GPU may hold (the core sets it from the policy: > 1 if it co-locates)
        # whether the policy may place a job on a GPU that has residents (the core sets ``Policy.may_share``): a
        # waiting pod it may not (one whose memory is under-predicted) needs a whole GPU, not a free slot
        self.shares_gpu: Callable[[QueuedJob], bool] = lambda job: True
        self._slots: dict[str, float] = {}
        self._slots_version = -1
        self.reclaims = 0
        self.fair_reclaims = 0  # of ``reclaims``: preemptions toward a queue's fair share (``reclaim_for_fair_share``)
        self._helped: dict[str, str] = {}  # job admitted or given GPUs by ``reclaim_for_fair_share`` -> its queue
        self.contended_s = 0.0

    # ---- the cluster and its charges ---------------------------------------------------------------
    def _bind(self, state: SchedulerState) -> None:
        """(Re)derive everything from ``state``: a new state object or a rebuilt cluster."""
        self._state = state
        n = state.cluster.num_gpus
        self._seen_changes = np.full(n, -1, dtype=np.int64)
        self._gpu_charges = [[] for _ in range(n)]
        self._job_charge = {}
        self._queue_jobs = {name: set() for name in self.accounts}
        for acc in self.accounts.values():
            acc.usage, acc.reserved, acc.commit, acc.held_need, acc.reserved_beyond = {}, {}, {}, 0.0, 0.0
            acc.held_needs = SortedList()
            acc.waiting = 0
        self._totals: dict[str, float] = {}
        self.capacity = {ANY_TYPE: float(n)}
        for gpu_type, where in state.gpus_of_type:
            self.capacity[gpu_type.name] = float(len(where))
        self._held = {name: SortedList() for name in self.tenancy.queues}
        self._held_items = {}
        self._held_seen = 0
        self._reserved = {}
        self._reserved_total = {}
        self._slots_version = -1
        for job in state.queue.values():  # already admitted (e.g. a state rebuilt around a running service)
            self._reserve(job)

    def queue_name(self, queue: str | None) -> str:
        """The queue a job naming ``queue`` belongs to (None: the default queue)."""
        name = self._names.get(queue)
        if name is None:
            name = self._names[queue] = self.tenancy.queue_of(queue).name
        return name

    def _refresh_charges(self, state: SchedulerState) -> None:
        changed = np.flatnonzero(state.gpu_changes != self._seen_changes)
        if not len(changed):
            return
        self._seen_changes[changed] = state.gpu_changes[changed]
        for g in changed.tolist():
            for job_id, q, c in self._gpu_charges[g]:
                self._charge(job_id, q, state.cluster.gpus[g].gpu_type.name, -c)
            residents = [state.running[j] for j in state.residents[g]]
            charges = self.split(state, g, [r.spec for r in residents])
            entries = []
            type_name = state.cluster.gpus[g].gpu_type.name
            for run, c in zip(residents, charges, strict=True):
                q = self.queue_name(run.spec.queue)
                entries.append((run.spec.job_id, q, c))
                self._charge(run.spec.job_id, q, type_name, c)
            self._gpu_charges[g] = entries

    def split(self, state: SchedulerState, g: int, specs: list[JobSpec]) -> list[float]:
        """What each of ``specs`` (the residents of GPU ``g``) is charged for it: its requested share while the
        requests sum to at most 1, else its part of the whole GPU (by request, or by predicted utilization)."""
        requests = [min(1.0, gpu_share(spec)) for spec in specs]
        total = math.fsum(requests)
        if total <= 1.0 + EPS:
            return requests
        weights = requests
        if self.tenancy.charge == "util":
            gpu_type = state.cluster.gpus[g].gpu_type
            weights = [max(state.predict(spec, gpu_type).util, EPS) for spec in specs]
        w_total = math.fsum(weights)
        return [w / w_total for w in weights]

    def _charge(self, job_id: str, queue: str, type_name: str, amount: float) -> None:
        acc = self.accounts[queue]
        for key in (ANY_TYPE, type_name):
            acc.usage[key] = acc.usage.get(key, 0.0) + amount
            self._add_commit(acc, key, amount)
        left = self._job_charge.get(job_id, 0.0) + amount
        if abs(left) <= EPS:
            self._job_charge.pop(job_id, None)
            self._queue_jobs[queue].discard(job_id)
        else:
            self._job_charge[job_id] = left
            self._queue_jobs[queue].add(job_id)

    def charge_of(self, job_id: str) -> float:
        """GPUs the running job ``job_id`` is charged now."""
        return self._job_charge.get(job_id, 0.0)

    def _add_commit(self, acc: QueueAccount, key: str, amount: float) -> None:
        acc.commit[key] = acc.commit.get(key, 0.0) + amount
        self._totals[key] = self._totals.get(key, 0.0) + amount

    def total(self, key: str) -> float:
        """GPUs (of type ``key``, or any) committed to all queues: charged plus reserved."""
        return self._totals.get(key, 0.0)

    # ---- reservations of admitted jobs ---------------------------------------------------------------
    def _keys(self, job: QueuedJob) -> tuple[str, ...]:
        accepted = accepted_gpu_types(job.spec.gpu_type_request)
        if accepted is not None and len(accepted) == 1:
            return (ANY_TYPE, next(iter(accepted)))
        return (ANY_TYPE,)

    def _reserve(self, job: QueuedJob) -> None:
        q = self.queue_name(job.spec.queue)
        need = spec_need(job.spec)
        keys = self._keys(job)
        acc = self.accounts[q]
        for key in keys:
            acc.reserved[key] = acc.reserved.get(key, 0.0) + need
            self._reserved_total[key] = self._reserved_total.get(key, 0.0) + need
            self._add_commit(acc, key, need)
        self._reserved[job.spec.job_id] = (job, q, keys, need)
        if need > acc.guarantee + EPS:
            acc.reserved_beyond += need
        acc.waiting += 1

    def _release_reservations(self, state: SchedulerState) -> None:
        for job_id, (job, q, keys, need) in list(self._reserved.items()):
            if state.queue.get(job_id) is not job:
                acc = self.accounts[q]
                for key in keys:
                    acc.reserved[key] = acc.reserved.get(key, 0.0) - need
                    self._reserved_total[key] = self._reserved_total.get(key, 0.0) - need
                    self._add_commit(acc, key, -need)
                if need > acc.guarantee + EPS:
                    acc.reserved_beyond -= need
                acc.waiting -= 1
                del self._reserved[job_id]

    # ---- held jobs ------------------------------------------------------------------------------------
    def _collect_held(self, state: SchedulerState) -> None:
        fresh = state.entries_since(self._held_seen, held=True)
        self._held_seen = state.entries
        for job in fresh:
            q = self.queue_name(job.spec.queue)
            prio = self.tenancy.priority_of(job.spec.priority).value
            need = spec_need(job.spec)
            order = () if self.order_key is None else tuple(self.order_key(job))
            item = self._held_items[job.spec.job_id] = (-prio, order, job.entered, job.spec.job_id, need)
            self._held[q].add(item)
            self._held_need(self.accounts[q], need, +1)

    @staticmethod
    def _held_need(acc: QueueAccount, need: float, sign: int) -> None:
        acc.held_need += sign * need
        if sign > 0:
            acc.held_needs.add(need)
        else:
            acc.held_needs.remove(need)

    def _held_jobs(self, state: SchedulerState, q: str) -> Iterator[QueuedJob]:
        """Held jobs of queue ``q`` in admission order, read in chunks so admissions and preemptions may change the
        list meanwhile (entries that left the held set are dropped as met)."""
        held = self._held[q]
        last: tuple[float, tuple[float, ...], int, str, float] | None = None
        while True:
            start = held.irange(minimum=last, inclusive=(False, False)) if last is not None else iter(held)
            chunk = list(islice(start, 64))
            if not chunk:
                return
            for item in chunk:
                last = item
                job = state.held.get(item[3])
                if job is None or job.entered != item[2]:
                    if item in held:
                        held.remove(item)
                        self._held_need(self.accounts[q], item[4], -1)
                        if self._held_items.get(item[3]) is item:
                            del self._held_items[item[3]]
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
            self._admit(state, now, preempt, before_policy=True)
        covered = self._within_guarantee(state)
        short, owners = self._guarantee_shortfall(state, covered, borrowed_too=True)
        if short:  # guaranteed jobs go first: borrowers' jobs that have not started leave the policy's view
            self._revoke_borrowed(state, owners, covered)
        elif state.held:
            self.reclaim_for_fair_share(state, now, preempt)
        self._refresh(state)
        self._fill(state)
        self._mark_guaranteed(state)
        self._version = state.version

    def settle(self, state: SchedulerState) -> None:
        """After the policy's actions: charges and reservations as they now are (the ledger integrates them)."""
        self._refresh(state)
        self._fill(state)
        self._mark_guaranteed(state)
        self._version = state.version

    def _mark_guaranteed(self, state: SchedulerState) -> None:
        """Each admitted waiting job's ``within_guarantee``: what ``_within_guarantee`` says now (a policy may place
        such a fractional pod by its request, ``horus``)."""
        for job_id, ok in self._within_guarantee(state).items():
            self._reserved[job_id][0].within_guarantee = ok

    def _fill(self, state: SchedulerState, scan: int = 64) -> None:
        """Each queue's ``fill``: its held jobs, in admission order, that fit what is left of its guarantee."""
        for name, acc in self.accounts.items():
            left = acc.guarantee - acc.committed()
            acc.fill = 0.0
            if left <= EPS or not acc.held_needs or acc.held_needs[0] > left + EPS:
                continue
            for i, job in enumerate(self._held_jobs(state, name)):
                need = spec_need(job.spec)
                if need <= left + EPS:
                    acc.fill += need
                    left -= need
                if i >= scan or not acc.held_needs or left < acc.held_needs[0] - EPS:
                    break

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
        """Preemptible running jobs of ``queues`` on GPUs counted under ``key``: lowest priority class first, then
        the job the policy's order ranks last (``order_key`` reversed: SJF's longest predicted left, LAS's most
        attained; preempted, it keeps its work and waits least where that order is the policy's), then least
        attained; without a keyed order (FIFO), least attained GPU time first."""
        out = []
        for job_id in [j for q in sorted(queues) for j in self._queue_jobs[q]]:
            run = state.running.get(job_id)
            if run is None:
                continue
            cls = self.tenancy.priority_of(run.spec.priority)
            if not cls.preemptible or (below_priority is not None and cls.value >= below_priority):
                continue
            if key != ANY_TYPE and state.cluster.gpus[run.gpus[0]].gpu_type.name != key:
                continue
            out.append(run)
        order_key = self.order_key  # the job the policy's order ranks last first (SJF: the longest left)

        def rank(r: RunningJob) -> tuple[float, tuple[float, ...], float, str]:
            last_first = () if order_key is None else tuple(
                -x for x in order_key(QueuedJob(r.spec, now, attained_gpu_s=r.attained(now))))
            return self.tenancy.priority_of(r.spec.priority).value, last_first, r.attained(now), r.spec.job_id
        out.sort(key=rank)
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

    def _room(self, state: SchedulerState, keys: tuple[str, ...], need: float) -> bool:
        return self._shortfall(state, keys, need) <= EPS

    def _shortfall(self, state: SchedulerState, keys: tuple[str, ...], need: float) -> float:
        """GPUs missing for ``need`` more: against the capacity for a policy that never shares a GPU; for one that
        co-locates, against the free worker slots (``slots_per_gpu`` per GPU, minus residents) that admitted jobs
        have not yet been counted against, so jobs can be admitted onto busy GPUs the policy may share."""
        if self.slots_per_gpu <= 1:
            return max(self.total(k) + need - self.capacity.get(k, 0.0) for k in keys)
        free = self._free_slots(state)
        return max(self._reserved_total.get(k, 0.0) + need - free.get(k, 0.0) for k in keys)

    def _free_slots(self, state: SchedulerState) -> dict[str, float]:
        if self._slots_version != state.load_version:
            self._slots = by_type(state, self.slots_per_gpu - state.load.n_residents)
            self._slots_version = state.load_version
        return self._slots

    def _admit(self, state: SchedulerState, now: float, preempt: Callable[[str], None], *,
               before_policy: bool = False) -> None:
        """Admit held jobs: guaranteed first, then borrowing. ``before_policy`` (``step``): when guaranteed jobs
        already wait for more than the idle GPUs after the guaranteed phase, only their own queues borrow: the
        end of ``step`` would revoke every other queue's borrowed admission anyway (borrowing only adds to what the
        idle GPUs must cover), and admitting them only to revoke them was most of the admissions (openb, 1 % of its
        nodes, horus: 751k for 6,203 pods) and sent each revoked job behind its queue's other held jobs."""
        wanting = [name for name, acc in self.accounts.items() if acc.held_needs or acc.waiting]
        if len(wanting) == 1:  # nobody else waits: the policy sees all of it (its own order decides), limits hold
            self._admit_all(state, self.accounts[wanting[0]])
            return
        one_class = len(self.tenancy.priority_classes) == 1
        self._fair = water_fill({n: a.demand() for n, a in self.accounts.items()},
                                {n: a.queue.weight for n, a in self.accounts.items()}, self.capacity[ANY_TYPE])
        borrowers: set[str] | None = None  # queues that may borrow (None: all)
        for phase in ("guaranteed", "borrow"):
            if phase == "borrow" and before_policy:
                covered = self._within_guarantee(state)
                short, owners = self._guarantee_shortfall(state, covered, borrowed_too=True)
                borrowers = owners if short else None
            order = sorted((name for name in self.accounts if self._held[name]), key=self._fair_key)
            for name in order:
                acc = self.accounts[name]
                if not acc.held_needs or (borrowers is not None and name not in borrowers):
                    continue
                if phase == "borrow" and one_class and self._reserves_room(state, acc):
                    break  # the room that frees up is kept for this queue's next job (no starvation of gangs)
                avail = self._available(state, acc, phase, one_class)
                if acc.held_needs[0] > avail + EPS:
                    continue  # none of its held jobs can be admitted in this phase
                misses = 0
                for job in self._held_jobs(state, name):
                    if misses >= SCAN or not acc.held_needs or acc.held_needs[0] > avail + EPS:
                        break
                    if spec_need(job.spec) > avail + EPS:
                        # the guaranteed phase looks on past jobs larger than what is left of the guarantee while
                        # a smaller one is held (the bound just checked): taking each as a miss left a queue's
                        # pods that its guarantee covered held behind 32 larger ones (openb, 1 % of its nodes,
                        # fifo-exclusive: 150 of the 174 GPU-h of ``BE``'s guarantee gap)
                        misses += phase != "guaranteed"
                    elif self._try(state, now, job, acc, phase, preempt):
                        avail = self._available(state, acc, phase, one_class)
                    else:
                        misses += 1
        if self.preempt_level is not None:
            self._preempt_own(state, now, preempt)

    def _preempt_own(self, state: SchedulerState, now: float, preempt: Callable[[str], None]) -> None:
        """Within-queue preemption by the policy's own order, for a policy that preempts by it (Tiresias' LAS):
        a held job the phases above left held takes the place of running preemptible jobs of its own queue that
        the policy ranks strictly behind it (a strictly higher ``preempt_level``; of its class or lower, lowest
        class and lowest level first, then most attained service), when their GPUs, all theirs, cover its gang
        and their charges its request. Its queue's charge does not grow (what its victims held, it reserves), so
        no other queue loses GPUs or fair share; without it a new short job of a queue at its share waits behind
        that queue's long jobs, which the tenant-unaware policy would have preempted (Kueue's preemption
        ``withinClusterQueue``, KAI's "preempt" within a queue vs "reclaim" across queues)."""
        level = self.preempt_level
        assert level is not None
        for name, acc in self.accounts.items():
            if not acc.held_needs or not self._queue_jobs[name] or ANY_TYPE not in acc.queue.guaranteed:
                continue  # (a queue with per-type quotas is left to the phases above)
            runs = None
            misses = 0
            spare_gpus, spare = 0, 0.0  # what its victims freed beyond the jobs they were preempted for
            for job in self._held_jobs(state, name):
                if misses >= 4:
                    break
                need = spec_need(job.spec)
                if job.spec.num_gpus <= spare_gpus and need <= spare + EPS and job.spec.gpu_type_request is None:
                    spare_gpus, spare = spare_gpus - job.spec.num_gpus, spare - need
                    self._enter(state, job, None, need)
                    continue
                if runs is None:  # computed once per queue and step
                    runs = self._own_runs(state, name, now, level)
                if not runs:
                    break
                found = self._own_victims(state, job, need, level(job), runs)
                if found is None:
                    misses += 1
                    continue
                plan, freed = found
                spare_gpus += freed - job.spec.num_gpus
                spare += sum(self.charge_of(item[3]) for item in plan) - need
                for item in plan:
                    preempt(item[3])
                    acc.order_preempted += 1
                    runs.remove(item)
                self._refresh(state)
                self._enter(state, job, None, need)

    def _own_runs(self, state: SchedulerState, name: str, now: float, level: Callable[[QueuedJob], float]
                  ) -> list[tuple[float, float, float, str, RunningJob]]:
        """Queue ``name``'s preemptible whole-GPU running jobs as ``_preempt_own`` may take them: lowest class, then
        lowest level (``level`` of each as if queued now), then most attained service first."""
        runs = []
        for job_id in self._queue_jobs[name]:
            run = state.running.get(job_id)
            if run is None or gpu_share(run.spec) < 1.0:
                continue
            cls = self.tenancy.priority_of(run.spec.priority)
            if not cls.preemptible:
                continue
            as_queued = QueuedJob(run.spec, now, attained_gpu_s=run.attained(now))
            runs.append((cls.value, -level(as_queued), -run.attained(now), job_id, run))
        runs.sort()
        return runs

    def _own_victims(self, state: SchedulerState, job: QueuedJob, need: float, mine: float,
                     runs: list[tuple[float, float, float, str, RunningJob]]
                     ) -> tuple[list[tuple[float, float, float, str, RunningJob]], int] | None:
        """``_preempt_own``'s victims for ``job`` (its request ``need``, its level ``mine``) among its queue's sorted
        ``runs``: those of its class or lower, ranked strictly behind it, on a GPU type it accepts, taken in order
        until the GPUs they leave empty cover its gang and their charges its request; of those, the ones that do
        leave a GPU empty, and the GPUs freed. None when they do not suffice."""
        accepted = accepted_gpu_types(job.spec.gpu_type_request)
        prio = self.tenancy.priority_of(job.spec.priority).value
        left: dict[int, int] = {}
        plan: list[tuple[float, float, float, str, RunningJob]] = []
        freed, charge = 0, 0.0
        for item in runs:
            if freed >= job.spec.num_gpus and charge >= need - EPS:
                break
            cls_value, neg_level, _, job_id, run = item
            if cls_value > prio or -neg_level <= mine or (
                    accepted is not None and state.cluster.gpus[run.gpus[0]].gpu_type.name not in accepted):
                continue
            plan.append(item)
            charge += self.charge_of(job_id)
            for g in run.gpus:
                left[g] = left.get(g, int(state.load.n_residents[g])) - 1
                freed += left[g] == 0
        if freed < job.spec.num_gpus or charge < need - EPS:
            return None
        return [item for item in plan if any(left[g] == 0 for g in item[4].gpus)], freed

    def _reserves_room(self, state: SchedulerState, acc: QueueAccount) -> bool:
        """Whether ``acc``, below its fair share and first in fair-share order among the queues still to borrow,
        keeps the room for its next held job: true when that job does not fit the room now but fits its limit.
        Borrowing by queues after it then waits, as a backfill reservation keeps GPUs for the top job; without
        it a gang of a queue with a small share would wait for as many GPUs to free at once forever."""
        if acc.committed() >= self._fair.get(acc.queue.name, 0.0) - EPS:
            return False
        head = next(self._held_jobs(state, acc.queue.name), None)
        if head is None:
            return False
        need = spec_need(head.spec)
        fits_limit = any(acc.committed(k) + need <= acc.queue.limit(k) + EPS for k in acc.queue.guaranteed)
        return fits_limit and not self._room(state, self._keys(head), need)

    def _admit_all(self, state: SchedulerState, acc: QueueAccount) -> None:
        """Admit the held jobs of the one queue that waits, in order: every job when its limit is the cluster's
        capacity or more, else those that fit next to what it runs and has admitted, plus (for a policy that
        co-locates) as many as could join its own GPUs."""
        queue = acc.queue
        for job in list(self._held_jobs(state, queue.name)):
            need = spec_need(job.spec)
            for flavor in self._flavors(job, queue):
                qkey = ANY_TYPE if flavor is None else flavor
                limit = queue.limit(qkey)
                # a limit the cluster cannot exceed anyway shows every job (the policy's order decides); else only
                # what fits next to what the queue runs (``may_start`` still holds the limit at the start)
                if limit >= self.capacity.get(qkey, 0.0) - EPS:
                    bound = limit
                else:  # and, for a policy that co-locates, jobs that may join its own GPUs at no extra charge
                    bound = limit - acc.committed(qkey) + self._joinable(acc)
                if need <= bound + EPS:
                    self._enter(state, job, flavor, need)
                    break

    def admit_after_starts(self, state: SchedulerState, now: float, preempt: Callable[[str], None],
                           started: int) -> bool:
        """For a policy that co-locates, after it started jobs: admit what may now join their GPUs. True if any."""
        if self.slots_per_gpu <= 1 or not started or not state.held:
            return False
        version = state.version
        self._admit(state, now, preempt)
        self._refresh(state)
        return state.version != version

    def _joinable(self, acc: QueueAccount) -> float:
        """Jobs of ``acc`` that could join the GPUs its running jobs hold (a co-locating policy's free slots)."""
        if self.slots_per_gpu <= 1:
            return 0.0
        return float(len(self._queue_jobs[acc.queue.name]) * (self.slots_per_gpu - 1))

    def readmit(self, state: SchedulerState, job_id: str) -> None:
        """A job the policy itself preempted stays visible to it (e.g. to start it elsewhere in the same step)."""
        job = state.held[job_id]
        acc = self.accounts[self.queue_name(job.spec.queue)]
        need = spec_need(job.spec)
        self._collect_held(state)
        self._enter(state, job, None, need)

    def may_start(self, state: SchedulerState, spec: JobSpec, gpus: tuple[int, ...]) -> bool:
        """Whether starting ``spec`` on ``gpus`` keeps its queue within its limit, charges as they would become."""
        acc = self.accounts[self.queue_name(spec.queue)]
        if acc.queue.borrow_limit is None:
            return True
        self._refresh_charges(state)
        qkey = self._quota_key(acc, state.cluster.gpus[gpus[0]].gpu_type.name)
        name = acc.queue.name
        delta = 0.0
        for g in gpus:  # its charge there, and how its queue's co-runners' charges change
            residents = [state.running[j].spec for j in state.residents[g]]
            after = self.split(state, g, [*residents, spec])
            before = self.split(state, g, residents)
            delta += after[-1] + sum(a - b for r, a, b in zip(residents, after, before, strict=False)
                                     if self.queue_name(r.queue) == name)
        return acc.used(qkey) + delta <= acc.queue.limit(qkey) + EPS

    def _available(self, state: SchedulerState, acc: QueueAccount, phase: str, one_class: bool) -> float:
        """An upper bound of the request a held job of ``acc`` may have to be admitted in ``phase`` now."""
        if phase == "guaranteed":  # reclaim may make room: only what is left of the guarantee bounds it
            return max(g - acc.committed(k) for k, g in acc.queue.guaranteed.items())
        if not one_class:  # a higher class may preempt lower ones in its queue
            return math.inf
        # a queue below its fair share needs no room up to that share (``_try``); a job beyond it needs room, as in
        # any queue: a gang larger than what is left of its share (8 GPUs of a queue whose share is 1.3) or a 1-GPU
        # job of a queue 0.4 GPUs below it may still borrow (bounding it by the share left such a queue waiting
        # for as long as another queue waited too, while it kept the room, ``_reserves_room``, from everybody).
        # For a co-locating policy the room beyond its share is free worker slots for a job of at most one GPU and,
        # for a gang, GPUs that no queue is charged for or has reserved (a queue below its share goes first: its
        # gangs admitted into free slots of busy GPUs too lowered the worst guarantee attainment, Philly 10k,
        # horus, 0.96 -> 0.80); a queue at its share borrows free slots as before
        fair = self._fair.get(acc.queue.name, 0.0) - acc.committed()
        room = -self._shortfall(state, (ANY_TYPE,), 0.0)
        if self.slots_per_gpu > 1 and fair > EPS:
            room = max(self.capacity[ANY_TYPE] - self.total(ANY_TYPE), min(1.0, room))
        return min(max(fair, room), max(acc.queue.limit(k) - acc.committed(k) for k in acc.queue.guaranteed))

    def _fair_key(self, name: str) -> float:
        acc = self.accounts[name]
        mean = acc.decayed_gpu_s * math.log(2) / self.tenancy.half_life_s
        return (mean + acc.committed()) / acc.queue.weight

    def _try(self, state: SchedulerState, now: float, job: QueuedJob, acc: QueueAccount, phase: str,
             preempt: Callable[[str], None]) -> bool:
        need = spec_need(job.spec)
        queue = acc.queue
        prio = self.tenancy.priority_of(job.spec.priority).value
        for flavor in self._flavors(job, queue):
            keys = self._keys(job) if flavor is None else (ANY_TYPE, flavor)
            qkey = ANY_TYPE if flavor is None else flavor
            if phase == "guaranteed":  # room is made after the policy had its chance (``reclaim_for_guarantees``)
                if acc.committed(qkey) + need > queue.guaranteed.get(qkey, 0.0) + EPS:
                    continue
            elif acc.committed(qkey) + need > queue.limit(qkey) + EPS:
                short = acc.committed(qkey) + need - queue.limit(qkey)
                if not self._preempt_lower(state, now, acc, qkey, short, prio, preempt):
                    continue
                if acc.committed(qkey) + need <= queue.guaranteed.get(qkey, 0.0) + EPS:  # its own GPUs back
                    self._enter(state, job, flavor, need)
                    return True
                if not self._room(state, keys, need):
                    continue
            elif not self._room(state, keys, need) and acc.committed() + need > self._fair.get(acc.queue.name, 0.0) + EPS:
                if not self._preempt_lower(state, now, acc, keys[-1], self._shortfall(state, keys, need), prio,
                                           preempt):
                    continue
                if not self._room(state, keys, need):
                    continue
            self._enter(state, job, flavor, need)
            return True
        return False

    def _enter(self, state: SchedulerState, job: QueuedJob, flavor: str | None, need: float) -> None:
        q = self.queue_name(job.spec.queue)
        self._held[q].discard(self._held_items.pop(job.spec.job_id))
        if flavor is not None and job.spec.gpu_type_request != flavor:
            job.spec = replace(job.spec, gpu_type_request=flavor)
        job.within_guarantee = False  # a mark of an earlier admission is stale: set again by ``_mark_guaranteed``
        self._reserve(state.admit(job.spec.job_id))
        acc = self.accounts[q]
        self._held_need(acc, need, -1)
        acc.admitted += 1

    def _guarantee_shortfall(self, state: SchedulerState, covered: dict[str, bool], *, borrowed_too: bool = False
                             ) -> tuple[dict[str, float], set[str]]:
        """GPUs (per key) that jobs admitted within their queue's guarantee (``covered``: ``_within_guarantee``) and
        still waiting need beyond the idle ones (only keys short of GPUs), and the queues they belong to;
        ``borrowed_too``: the idle GPUs must also cover other queues' waiting borrowed jobs (which the policy might
        start first). For a policy that co-locates, a job needing less than one GPU (a fractional pod) takes a free
        worker slot where its request fits (``_pods_short``): of a busy GPU, or of an idle GPU whole jobs leave;
        only those no such slot is left for count a GPU each. Counting each against an idle GPU revoked every other
        queue's borrowed admission at the end of the step that made it, and made it again at the next (openb, 1 %
        of its nodes, horus: 751k admissions for 6,203 pods); counting any free slot of a busy GPU, even of one
        whose requests already summed to 1, left a guaranteed pod waiting with no reclaim made for it (openb 1 %,
        horus: 53 of the 103 GPU-h of ``BE``'s guarantee gap, another queue charged beyond its guarantee)."""
        waiting: dict[str, float] = {}  # per key: GPUs of whole jobs (a key is here if a guaranteed job waits)
        small: dict[str, list[float]] = {}  # co-locating policy: requests of jobs needing less than one GPU, per key
        borrowed: dict[str, float] = {}
        borrowed_small: dict[str, list[float]] = {}
        owners: set[str] = set()
        shares = self.slots_per_gpu > 1
        for job_id, (job, q, keys, need) in self._reserved.items():
            guaranteed = covered.get(job_id)
            if guaranteed is None or not (guaranteed or borrowed_too):
                continue
            key = keys[-1]
            fractional = shares and need < 1.0 - EPS and self.shares_gpu(job)
            if guaranteed:
                owners.add(q)
                waiting[key] = waiting.get(key, 0.0) + (0.0 if fractional else job.spec.num_gpus)
                if fractional:
                    small.setdefault(key, []).append(need)
            elif fractional:
                borrowed_small.setdefault(key, []).append(need)
            else:
                borrowed[key] = borrowed.get(key, 0.0) + job.spec.num_gpus
        def under(per_key: dict[str, Any], key: str, none: Any) -> Any:  # borrowed jobs that may take key's GPUs
            return per_key.get(key, none) + (per_key.get(ANY_TYPE, none) if key != ANY_TYPE else none)

        if borrowed_too:
            for key in waiting:
                waiting[key] += under(borrowed, key, 0.0)
                extra = under(borrowed_small, key, [])
                if extra:
                    small.setdefault(key, []).extend(extra)
        if not waiting:
            return {}, owners
        idle = by_type(state, state.load.n_residents == 0)
        short = {}
        for key, need in waiting.items():
            missing = need - idle.get(key, 0)
            if small.get(key):  # slots of busy GPUs where a request fits, then of the idle GPUs whole jobs leave
                missing = max(missing, 0.0) + self._pods_short(state, key, small[key], max(0.0, -missing))
            if missing > EPS:
                short[key] = missing
        return short, owners

    def _pods_short(self, state: SchedulerState, key: str, requests: list[float], spare: float) -> float:
        """GPUs missing for pods requesting GPU fractions (``requests``) on GPUs counted under ``key``, packed
        first fit, the largest request first, into the free worker slots of busy GPUs whose requests leave room for
        theirs (requests summed at most 1, as device sharing grants them: HAMi, Kubernetes' GPU sharing), then
        into ``spare`` idle GPUs, then into GPUs that must be freed (the count returned)."""
        load = state.load
        busy = (load.n_residents > 0) & (load.n_residents < self.slots_per_gpu)
        if key != ANY_TYPE:
            busy &= state.gpu_type_names == key
        room = 1.0 - load.alloc_share[busy] + EPS  # usable request room per busy GPU (no room: no bin)
        slots = (self.slots_per_gpu - load.n_residents[busy]).astype(float)
        room[room <= EPS] = -1.0
        fresh: list[list[float]] = []  # GPUs to be freed: [room, slots]
        for need in sorted(requests, reverse=True):
            fits = np.flatnonzero(room >= need)
            if len(fits):
                i = fits[0]
                room[i] -= need
                slots[i] -= 1
                if slots[i] <= 0:
                    room[i] = -1.0
                continue
            for gpu in fresh:
                if gpu[1] > 0 and need <= gpu[0] + EPS:
                    gpu[0] -= need
                    gpu[1] -= 1
                    break
            else:
                fresh.append([1.0 - need, self.slots_per_gpu - 1])
        return max(0.0, len(fresh) - spare)

    def _within_guarantee(self, state: SchedulerState) -> dict[str, bool]:
        """Per admitted job still waiting: whether its queue's guarantee covers it *now*, whatever it was admitted
        as. In admission order, a job is covered while what its queue is charged plus the requests of its covered
        jobs before it leave room for its own. Charges move after admission (a co-runner leaves and a share grows;
        the queue's later borrowed jobs start first; its running jobs end): a queue charged beyond its guarantee
        reclaims nothing and counts as a borrower for the others' reclaims, and a job admitted as a borrower whose
        queue fell below its guarantee gets its GPUs back by reclaim."""
        out: dict[str, bool] = {}
        left: dict[tuple[str, str], float] = {}
        for job_id, (job, q, keys, need) in self._reserved.items():
            if state.queue.get(job_id) is not job:
                continue
            acc = self.accounts[q]
            qkey = self._quota_key(acc, None if keys[-1] == ANY_TYPE else keys[-1])
            room = left.get((q, qkey))
            if room is None:
                room = acc.queue.guaranteed.get(qkey, 0.0) - acc.used(qkey)
            out[job_id] = ok = need <= room + EPS
            left[(q, qkey)] = room - need if ok else room
        return out

    def _revoke_borrowed(self, state: SchedulerState, owners: set[str], covered: dict[str, bool]) -> int:
        """Admissions of other queues' borrowing jobs (not ``covered``: ``_within_guarantee``) that have not started
        go back to held (no work is lost)."""
        revoked = [job_id for job_id, (_, q, _, _) in self._reserved.items()
                   if covered.get(job_id) is False and q not in owners]
        for job_id in revoked:
            state.hold(job_id)
        if revoked:
            self._refresh(state)
        return len(revoked)

    def reclaim_for_guarantees(self, state: SchedulerState, now: float, preempt: Callable[[str], None]) -> bool:
        """After the policy ran: jobs admitted within their queue's guarantee that it could not place get idle
        GPUs back from queues borrowing beyond their guarantee (first their admitted jobs that have not started,
        then their preemptible jobs in ``_victims``' order, never taking a borrower below its guarantee but for a
        job larger than all of it: a gang that only ever runs on borrowed GPUs, ``_reclaim``). True if anything
        changed (the core then asks the policy again)."""
        covered = self._within_guarantee(state)
        short, owners = self._guarantee_shortfall(state, covered)
        if not short:
            return False
        revoked = self._revoke_borrowed(state, owners, covered)
        preempted = False
        for key, missing in short.items():
            preempted |= self._reclaim(state, now, key, missing, owners, preempt)
        if preempted:
            self._refresh(state)
        return preempted or bool(revoked)

    def _reclaim(self, state: SchedulerState, now: float, key: str, short: float, owners: set[str],
                 preempt: Callable[[str], None]) -> bool:
        """Preempt borrowers' jobs until ``short`` GPUs (of type ``key``) become idle; nothing if they cannot.

        What a borrower may give back is counted in GPUs it occupies (``_occupancy``), not in its charges: a GPU
        whose residents request less than all of it is charged less than 1, yet no whole-GPU job may use the rest
        (openb, 1 % of its nodes: ``LS``, guaranteed 19 GPUs, held 20 with fractional pods charged 15.3, so it
        lent nothing while a guaranteed 1-GPU job of another queue waited with no idle GPU). Only for a policy that
        never co-locates: for one that does, the rest of such a GPU is a free slot other jobs may take, and counting
        it made things worse (openb 1 %, horus: worst attainment 0.676 -> 0.642, mean JCT 42.4 -> 47.2 h).

        A borrower is not taken below its guarantee, except by a job larger than the whole guarantee (an 8-GPU
        gang of a queue guaranteed 3): it only ever runs on borrowed GPUs (``guaranteeable_demand`` leaves it out
        too), so it goes back whole. Before, such a gang 5 GPUs beyond its queue's guarantee kept a guaranteed
        1-GPU job of another queue waiting to its end (openb, 1 % of its nodes: worst attainment, ``BE``,
        fifo-exclusive 0.715 -> 0.871, horus 0.665 -> 0.740)."""
        occupied, job_occ = self._occupancy(state, key)
        excess: dict[str, float] = {}
        for name, acc in self.accounts.items():
            if name in owners:
                continue
            qkey = self._quota_key(acc, None if key == ANY_TYPE else key)
            over = occupied.get(name, 0.0) - acc.queue.guaranteed.get(qkey, 0.0)
            if over > EPS:
                excess[name] = over
        if sum(excess.values()) < short - EPS and sum(
                occupied[name] if self._runs_beyond_guarantee(state, name) else over
                for name, over in excess.items()) < short - EPS:
            return False
        left: dict[int, int] = {}  # residents per GPU once the planned victims are gone
        plan: list[RunningJob] = []
        freed = 0
        whole = False  # a job larger than its queue's whole guarantee was planned below that guarantee
        for run in self._victims(state, now, set(excess), key):
            if freed >= short - EPS:
                break
            name = self.queue_name(run.spec.queue)
            c = job_occ.get(run.spec.job_id, 0.0)
            if excess[name] - c < -EPS:
                if not self._larger_than_guarantee(run.spec, name):
                    continue  # would take its queue below its guarantee
                whole = True  # it only ever runs on borrowed GPUs: it goes back whole
            excess[name] -= c
            plan.append(run)
            for g in run.gpus:  # co-runners idle a GPU together: plan them all, count GPUs left with nobody
                left[g] = left.get(g, int(state.load.n_residents[g])) - 1
                freed += left[g] == 0
        if freed < short - EPS:
            return False
        if whole:  # such a gang may free enough alone: spare the victims planned before it that are not needed
            for run in reversed(plan[:-1]):
                back = sum(left[g] == 0 for g in run.gpus)
                if freed - back >= short - EPS:
                    plan.remove(run)
                    for g in run.gpus:
                        left[g] += 1
                    freed -= back
        plan = [run for run in plan if any(left[g] == 0 for g in run.gpus)]  # stopping the rest would idle nothing
        for run in plan:
            preempt(run.spec.job_id)
            self.accounts[self.queue_name(run.spec.queue)].reclaimed += 1
            self.reclaims += 1
        return True

    def _larger_than_guarantee(self, spec: JobSpec, name: str) -> bool:
        """Whether a job of ``spec`` needs more than queue ``name``'s whole guarantee: it only ever runs on borrowed
        GPUs, and ``_reclaim`` may take it back whole, even below that guarantee."""
        return spec_need(spec) > self.accounts[name].guarantee + EPS

    def _runs_beyond_guarantee(self, state: SchedulerState, name: str) -> bool:
        """Whether queue ``name`` runs a job larger than its whole guarantee (``_reclaim`` may take it back)."""
        return any(self._larger_than_guarantee(state.running[j].spec, name)
                   for j in self._queue_jobs[name] if j in state.running)

    def _occupancy(self, state: SchedulerState, key: str) -> tuple[dict[str, float], dict[str, float]]:
        """GPUs (of type ``key``, or any) each queue and each running job occupies: every GPU in use counts 1,
        split among its residents in proportion to their charges; for a policy that co-locates, their charges."""
        per_queue: dict[str, float] = {}
        per_job: dict[str, float] = {}
        if self.slots_per_gpu > 1:
            for name, acc in self.accounts.items():
                per_queue[name] = acc.used(self._quota_key(acc, None if key == ANY_TYPE else key))
            return per_queue, self._job_charge
        for g, entries in enumerate(self._gpu_charges):
            if not entries or (key != ANY_TYPE and state.cluster.gpus[g].gpu_type.name != key):
                continue
            total = math.fsum(c for _, _, c in entries)
            for job_id, q, c in entries:
                share = c / total if total > EPS else 1.0 / len(entries)
                per_queue[q] = per_queue.get(q, 0.0) + share
                per_job[job_id] = per_job.get(job_id, 0.0) + share
        return per_queue, per_job

    def reclaim_for_fair_share(self, state: SchedulerState, now: float, preempt: Callable[[str], None]) -> bool:
        """After the policy ran (and in ``step``), when no guaranteed job waits short of idle GPUs: the first job
        (admitted and waiting, else held) of the queue furthest behind its fair share over time
        (``fair_deficit_gpu_s`` / weight) gets GPUs, when that queue is charged below its weighted max-min fair share
        now, the job is larger than that whole share (a gang no borrowing room is ever kept for: 8 GPUs of a share of
        1.3) and the queue is owed at least the job's request for ``FAIR_RECLAIM_S``. The GPUs it lacks beyond the
        idle ones (less what waiting guaranteed jobs need) come from queues ahead of their share (charged above it
        now and not behind it over time): their borrowed preemptible jobs (``_reclaim``: never below a guarantee);
        other queues' borrowed admissions that have not started go back to held, and a held job is admitted. So
        such a queue runs its gangs about its share of the contended time (weighted max-min fairness over time, as
        Gavel's), instead of waiting for that many GPUs to go idle at once on a cluster kept full. No ping-pong: a
        job so helped is never reclaimed by this rule (guarantees may still take it), and the queues it took from
        were ahead, so they are owed nothing for a while. One job per call. True if anything changed."""
        behind = sorted(((acc.fair_deficit_gpu_s / acc.queue.weight, name) for name, acc in self.accounts.items()
                         if acc.fair_deficit_gpu_s > EPS and (acc.waiting or (
                             acc.held_needs and acc.fair_deficit_gpu_s >= acc.held_needs[0] * FAIR_RECLAIM_S))),
                        reverse=True)
        if not behind:
            return False
        fair = self._contended_fair()
        if fair is None:
            return False
        covered = self._within_guarantee(state)
        guaranteed: dict[str, float] = {}  # GPUs that waiting jobs within their guarantee need, per key
        waiting: dict[str, tuple[QueuedJob, tuple[str, ...]]] = {}  # per queue: its first admitted job not started
        for job_id, (job, q, keys, _) in self._reserved.items():
            if covered.get(job_id):
                guaranteed[keys[-1]] = guaranteed.get(keys[-1], 0.0) + job.spec.num_gpus
            if job_id in covered and q not in waiting:
                waiting[q] = (job, keys)
        idle = by_type(state, state.load.n_residents == 0)
        if any(n > idle.get(key, 0.0) + EPS for key, n in guaranteed.items()):
            return False  # guarantees first (``reclaim_for_guarantees``)
        for job_id in [j for j in self._helped if j not in state.running and j not in state.queue]:
            del self._helped[job_id]  # ended, or preempted by a reclaim for a guarantee
        helped = set(self._helped.values())
        ahead = {name for name, acc in self.accounts.items()
                 if acc.used() > fair[name] + EPS and acc.fair_deficit_gpu_s <= 0.0 and name not in helped}
        for _, name in behind:
            acc = self.accounts[name]
            if acc.used() >= fair[name] - EPS:
                continue  # at its share now (what it is owed from before is not taken from others at once)
            head, keys = waiting.get(name, (None, ()))
            flavor: str | None = None
            if head is None:  # none admitted: its first held job, admitted below
                head = next(self._held_jobs(state, name), None)
                if head is None:
                    continue
                flavor = self._flavors(head, acc.queue)[0]
                keys = self._keys(head) if flavor is None else (ANY_TYPE, flavor)
                qkey = ANY_TYPE if flavor is None else flavor
                if acc.committed(qkey) + spec_need(head.spec) > acc.queue.limit(qkey) + EPS:
                    continue
            elif covered[head.spec.job_id]:
                continue  # within its guarantee: ``reclaim_for_guarantees``' job
            need = spec_need(head.spec)
            if acc.fair_deficit_gpu_s < need * FAIR_RECLAIM_S or need <= fair[name] + EPS:
                continue  # not owed enough, or not beyond its share (it gets room as others' jobs end)
            key = keys[-1]
            short = head.spec.num_gpus - (idle.get(key, 0.0) - guaranteed.get(key, 0.0))
            admitted = state.held.get(head.spec.job_id) is not head
            if admitted and short <= EPS:
                continue  # it has its idle GPUs: where it goes is the policy's choice
            reclaims = self.reclaims
            if short > EPS and (self._lendable(ahead - {name}, key) < short - EPS or not self._reclaim(
                    state, now, key, short, set(self.accounts) - (ahead - {name}), preempt)):
                continue
            self.fair_reclaims += self.reclaims - reclaims
            self._revoke_borrowed(state, {name}, covered)  # the GPUs it gets are not shown to other borrowers
            self._refresh(state)
            if not admitted:
                self._enter(state, head, flavor, need)
            self._helped[head.spec.job_id] = name
            return True
        return False

    def carry_helped(self, old: Admission) -> None:
        """Keep ``old``'s record of the jobs ``reclaim_for_fair_share`` helped, for the queues this admission knows
        (the live service rebuilds its admission when agents join or leave)."""
        self._helped.update({j: q for j, q in old._helped.items() if q in self.accounts})

    def _lendable(self, queues: set[str], key: str) -> float:
        """GPUs (under ``key``) that ``queues`` are charged beyond their guarantees: a quick bound that spares
        ``_reclaim`` its per-GPU occupancy when it could not succeed (exact for whole-GPU jobs and for a policy
        that co-locates; where fractional pods leave part of a GPU unrequested, an exclusive policy's reclaim
        counts such a GPU whole, so this may refuse a reclaim it would have found)."""
        total = 0.0
        for name in queues:
            acc = self.accounts[name]
            qkey = self._quota_key(acc, None if key == ANY_TYPE else key)
            total += max(0.0, acc.used(qkey) - acc.queue.guaranteed.get(qkey, 0.0))
        return total

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
        for name, acc in self.accounts.items():
            used = acc.used()
            g = acc.guarantee
            acc.used_gpu_s += used * dt
            acc.running_job_s += len(self._queue_jobs[name]) * dt
            acc.decayed_gpu_s = acc.decayed_gpu_s * decay + used * (1 - decay) * self.tenancy.half_life_s / math.log(2)
            acc.guaranteed_received_gpu_s += min(used, g) * dt
            acc.guaranteed_demand_gpu_s += min(acc.guaranteeable_demand(), g) * dt
            if any(acc.used(k) > acc.queue.limit(k) + 1e-6 for k in acc.queue.guaranteed):
                acc.over_limit_s += dt
        fair = self._contended_fair()
        if fair is not None:
            self.contended_s += dt
            for name, acc in self.accounts.items():
                acc.contended_fair_gpu_s += fair[name] * dt
                acc.contended_received_gpu_s += acc.used() * dt
        self._integrate_deficit(fair, decay)

    def _contended_fair(self) -> dict[str, float] | None:
        """Each queue's weighted max-min fair share of the cluster by its demand now, or None when the cluster is
        not contended (fewer than two queues with demand, or their demand within its capacity)."""
        demand = {name: acc.demand() for name, acc in self.accounts.items()}
        capacity = self.capacity.get(ANY_TYPE, 0.0)
        if sum(1 for d in demand.values() if d > EPS) < 2 or sum(demand.values()) <= capacity + EPS:
            return None
        return water_fill(demand, {n: a.queue.weight for n, a in self.accounts.items()}, capacity)

    def _integrate_deficit(self, fair: dict[str, float] | None, decay: float) -> None:
        """Each queue's ``fair_deficit_gpu_s``: what its fair share exceeded its charges by while contended,
        decayed with the tenancy's half-life like ``decayed_gpu_s`` (Slurm's decayed usage); it only decays while
        nothing contends."""
        scale = (1 - decay) * self.tenancy.half_life_s / math.log(2)
        for name, acc in self.accounts.items():
            gap = 0.0 if fair is None else fair[name] - acc.used()
            acc.fair_deficit_gpu_s = acc.fair_deficit_gpu_s * decay + gap * scale

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
                "jobs_per_charged_gpu": acc.running_job_s / acc.used_gpu_s if acc.used_gpu_s > 0 else math.nan,
                "guaranteed_demand_gpu_h": gd / 3600,
                "guaranteed_received_gpu_h": acc.guaranteed_received_gpu_s / 3600,
                "guarantee_attainment": acc.guaranteed_received_gpu_s / gd if gd > 0 else math.nan,
                "contended_share_ratio": (acc.contended_received_gpu_s / acc.contended_fair_gpu_s
                                          if acc.contended_fair_gpu_s > 0 else math.nan),
                "over_limit_s": acc.over_limit_s,
                "reclaimed": acc.reclaimed,
                "priority_preempted": acc.priority_preempted,
                "order_preempted": acc.order_preempted,
                "admitted": acc.admitted,
            }
        return out
