"""Queue order x placement: the one way to build a policy from parts, and the incremental machinery.

* ``QueueOrder``: gives the first ``k`` queued jobs in its order (``head``). ``KeyedOrder`` does it
  incrementally for orders whose key is fixed while a job waits (SJF, Tiresias' LAS): new queue
  entries are found at the end of ``state.queue`` (the state keeps arrival/requeue order) and kept in
  a sorted list; entries that left the queue are dropped when met. A call costs O(k + new entries x
  log(queue)), not O(queue).
* ``Placement``: chooses GPUs for one job given the planned load (``cost_per_gpu`` + ``select_gpus``)
  and keeps a per-call summary of that load (``begin``/``update``) for cheap rejection: ``any_room``
  (can anything fit at all) and ``possible`` (vectorised over a list of jobs: may this job fit? False
  only when it certainly cannot, so skipping it changes no decision).
* ``OrderedPolicy``: walks ``head(max_scan)`` in order and starts what fits (backfill), evaluating
  only jobs that ``possible`` admits, and returns at once when neither the load nor the jobs it
  found unplaceable have changed since its last call.

``ORDERS`` and ``PLACEMENTS`` are registries, so ``compose.make_composed("sjf", "horus")`` builds any pair.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from operator import is_

import numpy as np
from sortedcontainers import SortedList

from horus.policies.base import Action, Policy, Start
from horus.policies.parts.cluster_index import ClusterIndex, cluster_index, job_predictions
from horus.policies.parts.fit_counts import FitCounts
from horus.policies.parts.gpu_selection import select_gpus
from horus.predict.base import Prediction
from horus.registry import Registry
from horus.state import GPULoad, PlanMemo, QueuedJob, SchedulerState, gpu_share

EPS = 1e-9
PROBE = 4  # jobs an ordered walk tries directly before asking ``Placement.possible`` about the rest


def needs_empty_gpu(job: QueuedJob) -> bool:
    """A job that already failed out-of-memory is only placed on GPUs with no residents."""
    return job.oom_failures > 0


# ---- queue orders -----------------------------------------------------------------------------
class QueueOrder(ABC):
    """Orders the queue; ``head(state, k)`` is what policies call (the first ``k`` jobs)."""

    name: str = "order"

    @abstractmethod
    def head(self, state: SchedulerState, k: int) -> list[QueuedJob]:
        """The first ``k`` queued jobs in this order."""

    def order(self, queue: Sequence[QueuedJob], state: SchedulerState) -> list[QueuedJob]:
        """All of ``queue`` in this order (for inspection and tests; policies use ``head``)."""
        raise NotImplementedError


class KeyedOrder(QueueOrder):
    """Smallest ``key`` first, ties in queue order; the key of an entry must not change while it waits.

    Relies on the ``SchedulerState.queue`` contract: entries are appended when a job (re-)enters the
    queue and not modified while queued (a requeue makes a new entry; re-entering with a new
    ``queued_since`` or entry number ``entered`` -- a held job admitted again -- counts as new, ranked after
    equal keys already queued). Any other change of ``state`` or its cluster rebuilds the list. Entries of jobs
    that left are dropped when a head or tail walk passes them.
    """

    def __init__(self) -> None:
        self._state: SchedulerState | None = None
        self._cluster: object = None
        self._sorted: SortedList = SortedList()  # (key, seq, job id)
        # job id -> (entry, queued_since, oom failures, entry number, its item in ``_sorted``)
        self._entries: dict[str, tuple[QueuedJob, float, int, int, tuple[tuple[float, ...], int, str]]] = {}
        self._seq = 0  # discovery order = queue order (ties)
        self._head: tuple[tuple[int, int, int], list[QueuedJob]] | None = None  # (queue mark, k), the head then

    @abstractmethod
    def key(self, job: QueuedJob, state: SchedulerState) -> tuple[float, ...]:
        """The job's priority key (smaller first)."""

    def order(self, queue: Sequence[QueuedJob], state: SchedulerState) -> list[QueuedJob]:
        return sorted(queue, key=lambda job: self.key(job, state))

    def _sync(self, state: SchedulerState) -> None:
        """Add the entries that joined the queue since the last call (they sit at its end)."""
        if state is not self._state or state.cluster is not self._cluster:
            self._state, self._cluster = state, state.cluster
            self._sorted, self._entries = SortedList(), {}
        entries = self._entries
        fresh: list[QueuedJob] = []
        for job in reversed(state.queue.values()):
            known = entries.get(job.spec.job_id)
            if (known is not None and known[0] is job and known[1] == job.queued_since
                    and known[2] == job.oom_failures and known[3] == job.entered):
                break
            fresh.append(job)
        for job in reversed(fresh):
            jid = job.spec.job_id
            old = entries.get(jid)
            if old is not None:
                self._sorted.discard(old[4])
            self._seq += 1
            item = (self.key(job, state), self._seq, jid)
            entries[jid] = (job, job.queued_since, job.oom_failures, job.entered, item)
            self._sorted.add(item)

    def tail(self, state: SchedulerState, k: int) -> list[QueuedJob]:
        """The last ``k`` queued jobs in this order, last first."""
        self._sync(state)
        return self._walk(state, k, reversed(self._sorted))

    def head(self, state: SchedulerState, k: int) -> list[QueuedJob]:
        # Every entry into the queue counts ``state.entries`` up, and leaving it only shortens it: with the same
        # count and length nothing joined or left since, so the head is the one found then (a third of
        # Tiresias' calls on the Philly trace)
        mark = (state.entries, len(state.queue), k)
        kept = self._head
        if kept is not None and kept[0] == mark and state is self._state and state.cluster is self._cluster:
            return list(kept[1])
        out = self._find_head(state, k)
        self._head = (mark, out)
        return list(out)

    def _find_head(self, state: SchedulerState, k: int) -> list[QueuedJob]:
        self._sync(state)
        return self._walk(state, k, iter(self._sorted))

    def _walk(self, state: SchedulerState, k: int,
              items: Iterator[tuple[tuple[float, ...], int, str]]) -> list[QueuedJob]:
        """The first ``k`` live entries of ``items`` (a walk over ``_sorted``); the stale ones passed (their job
        left the queue, or a newer entry superseded them) are dropped."""
        queue, entries = state.queue, self._entries
        out: list[QueuedJob] = []
        gone: list[tuple[tuple[float, ...], int, str]] = []
        for item in items:
            jid = item[2]
            job = queue.get(jid)
            known = entries.get(jid)
            if job is None or known is None or known[4] is not item or known[0] is not job:
                gone.append(item)
                continue
            out.append(job)
            if len(out) == k:
                break
        for item in gone:  # left the queue (started, held) or superseded
            self._sorted.remove(item)
            known = entries.get(item[2])
            if known is not None and known[4] is item:
                del entries[item[2]]
        return out


# ---- what each queued job asks for, cached per queue entry ------------------------------------------
class RequestTable:
    """Rows (GPUs, least memory MiB, least utilization over GPU types, GPU share, needs an empty GPU) per queue
    entry, computed once from ``loads(job, state)`` and kept while the entry waits: the cache of a placement's
    summary tests, apart from its scoring (``Placement.cost_per_gpu``)."""

    WIDTH = 5

    def __init__(self, loads: Callable[[QueuedJob, SchedulerState], list[Prediction]]) -> None:
        self.loads = loads
        self._index: dict[str, tuple[QueuedJob, int, int]] = {}  # job id -> (entry, oom failures, row)
        self._table = np.zeros((0, self.WIDTH))
        self._next_row = 0
        self._last_jobs: list[QueuedJob] = []
        self._last_rows = np.zeros((0, self.WIDTH))

    def rows(self, jobs: Sequence[QueuedJob], state: SchedulerState) -> np.ndarray:
        """The rows of ``jobs`` in order (read-only)."""
        # the same scan as last time: the same entry objects, compared by identity only (a list comparison also
        # calls the dataclass ``__eq__`` on the first entry that differs; another entry equal in every field would
        # have the same row, its slot is looked up below)
        kept = self.last(jobs)
        if kept is not None:
            return kept
        index = self._index
        if self._next_row > 4 * len(state.queue) + 1024:  # forget entries that left the queue
            index.clear()
            self._next_row = 0
        slots = []
        get = index.get
        for job in jobs:
            hit = get(job.spec.job_id)
            if hit is None or hit[0] is not job or hit[1] != job.oom_failures:
                hit = self._add(job, state)
            slots.append(hit[2])
        rows = self._table[slots]
        rows.setflags(write=False)
        self._last_jobs, self._last_rows = list(jobs), rows
        return rows

    def last(self, jobs: Sequence[QueuedJob]) -> np.ndarray | None:
        """The rows ``rows`` gives for ``jobs`` when they are the entries of its last call (by identity; read-only),
        else None; changes nothing."""
        last = self._last_jobs
        return self._last_rows if len(jobs) == len(last) and all(map(is_, jobs, last)) else None

    def row(self, job: QueuedJob, state: SchedulerState) -> np.ndarray:
        """The row of one job (``rows`` of one job without the list bookkeeping; a copy)."""
        hit = self._index.get(job.spec.job_id)
        if hit is None or hit[0] is not job or hit[1] != job.oom_failures:
            if self._next_row > 4 * len(state.queue) + 1024:  # forget entries that left the queue
                self._index.clear()
                self._next_row = 0
            hit = self._add(job, state)
        return self._table[hit[2]].copy()

    def _add(self, job: QueuedJob, state: SchedulerState) -> tuple[QueuedJob, int, int]:
        slot = self._next_row
        self._next_row += 1
        if slot >= len(self._table):
            grown = np.zeros((max(64, 2 * len(self._table)), self.WIDTH))
            grown[:len(self._table)] = self._table
            self._table = grown
        loads = self.loads(job, state)
        self._table[slot] = (job.spec.num_gpus, min(p.mem_mib for p in loads), min(p.util for p in loads),
                             gpu_share(job.spec), float(needs_empty_gpu(job)))
        hit = self._index[job.spec.job_id] = (job, job.oom_failures, slot)
        return hit


# ---- placements -------------------------------------------------------------------------------
class Placement(ABC):
    """Chooses GPUs for one job on the planned load, with a per-call summary for cheap rejection.

    The scorer is ``cost_per_gpu`` (one cost per GPU, ``inf`` = infeasible; the Kubernetes extender's filter and
    prioritize map onto it); the summary (``begin``/``update``/``any_room``/``possible``) only rules jobs out
    early, and what each queued job asks for is cached in a ``RequestTable``. Callers call
    ``begin(load, state)`` once per scheduling call and ``update(load, state)`` after each planned start;
    ``place``/``evaluate`` then work on that load.
    """

    name: str = "placement"
    colocates: bool = True  # may put a job on a GPU that already has residents

    def begin(self, load: GPULoad, state: SchedulerState) -> None:
        if not self.begun_on(state):
            self.idx: ClusterIndex = cluster_index(state.cluster)
            self._seen = state
            self.table = RequestTable(self.job_loads)
        self.update(load, state)

    def begun_on(self, state: SchedulerState) -> bool:
        """Whether ``begin`` last bound this placement to ``state`` (and its cluster): its index and request table
        are that state's."""
        return (getattr(self, "idx", None) is not None and self.idx.cluster is state.cluster
                and getattr(self, "_seen", None) is state)

    @abstractmethod
    def update(self, load: GPULoad, state: SchedulerState) -> None:
        """Recompute the summary after ``load`` changed."""

    def update_added(self, load: GPULoad, state: SchedulerState, gpus: Sequence[int]) -> None:
        """``update`` after ``load.add`` put one worker on each of ``gpus`` (only they changed); placements that
        keep their summary per GPU or per node override this to redo just those."""
        self.update(load, state)

    @abstractmethod
    def any_room(self) -> bool:
        """False when, per the summary, no job at all can be placed (the caller stops)."""

    @abstractmethod
    def cost_per_gpu(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> np.ndarray | None:
        """One cost per GPU (``inf`` = infeasible), or None when the summary already rules the job out."""

    def possible(self, jobs: Sequence[QueuedJob], load: GPULoad, state: SchedulerState) -> np.ndarray:
        """Per job, False only if it certainly cannot be placed on ``load`` (so skipping it changes nothing)."""
        return self.possible_rows(self.requests(jobs, state), load, state)

    def possible_rows(self, rows: np.ndarray, load: GPULoad, state: SchedulerState) -> np.ndarray:
        """``possible`` given the jobs' ``requests`` rows (default: all True)."""
        return np.ones(len(rows), dtype=bool)

    def fit_counts(self) -> FitCounts | None:
        """A new ``FitCounts`` that admits what this placement's ``possible_rows`` admits, where one does (default:
        none)."""
        return None

    def job_loads(self, job: QueuedJob, state: SchedulerState) -> list[Prediction]:
        """The job's per-worker load on each GPU type of the cluster (predicted; the oracle: true)."""
        return job_predictions(job.spec, state, self.idx)

    def requests(self, jobs: Sequence[QueuedJob], state: SchedulerState) -> np.ndarray:
        """``RequestTable.rows`` of ``jobs`` (the table lives as long as the state)."""
        return self.table.rows(jobs, state)

    def evaluate(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> tuple[tuple[int, ...], float] | None:
        """Best GPUs for the job and their mean cost per worker, or None."""
        if getattr(self, "idx", None) is None or self.idx.cluster is not state.cluster:
            self.begin(load, state)
        cost = self.cost_per_gpu(job, load, state)
        if cost is None:
            return None
        found = select_gpus(cost, job.spec.num_gpus, self.idx)
        if found is None:
            return None
        return found[0], found[1] / job.spec.num_gpus

    def place(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> tuple[int, ...] | None:
        found = self.evaluate(job, load, state)
        return None if found is None else found[0]


def count_at_least(values: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """For each threshold, how many ``values`` are >= it (sorted search, O((n + m) log n))."""
    ordered = np.sort(values)
    return len(ordered) - np.searchsorted(ordered, thresholds, side="left")


# ---- the composed policy ----------------------------------------------------------------------
class OrderedPolicy(Policy):
    """Queue order x placement. Walks ``order.head(max_scan)`` and places what fits.

    ``backfill=False`` stops at the first job that cannot be placed (strict order). Jobs that
    ``placement.possible`` rules out are not evaluated; a call on the same load as the last call's
    plan, whose jobs were all found unplaceable then, returns at once.
    """

    def __init__(self, order: QueueOrder, placement: Placement, *, backfill: bool = True, max_scan: int = 64,
                 name: str | None = None) -> None:
        self.order_rule = order
        self.placement = placement
        self.backfill = backfill
        self.max_scan = max_scan
        self.name = name or f"{order.name}-{placement.name}"
        self._unplaced: PlanMemo[list[QueuedJob]] = PlanMemo([])  # found unplaceable under the planned load, in order

    def schedule(self, state: SchedulerState) -> list[Action]:
        if not state.queue:
            return []
        jobs = self.order_rule.head(state, self.max_scan)
        self.placement.begin(state.load, state)  # read-only until the first planned start (copy on write)
        if not self.placement.any_room() or self._all_blocked(jobs, state):
            self._unplaced.renew(state)
            return []
        return self.place_in_order(jobs, state.load, state)

    def _all_blocked(self, jobs: list[QueuedJob], state: SchedulerState) -> bool:
        """True when exactly these jobs were all found unplaceable on the load, and it has not changed since.

        (List equality compares entries by identity first, then by value; equal entries are placed alike.)
        """
        return bool(jobs) and jobs == self._unplaced.recall(state)

    def _remember(self, state: SchedulerState, unplaced: list[QueuedJob]) -> None:
        """``unplaced``: jobs that cannot be placed under the load this call's actions leave."""
        self._unplaced.remember(state, unplaced)

    def place_in_order(self, jobs: list[QueuedJob], load: GPULoad, state: SchedulerState) -> list[Action]:
        """Place ``jobs`` in order on ``load`` (updated as jobs are placed; ``state.load`` is copied
        before the first start); skip or stop at misfits.

        Placement is monotone (more load never makes a job fit that did not), so jobs found unplaceable
        are remembered with the final planned load and not retried while nothing else changes.
        """
        if not self.backfill:
            return self._place_strictly(jobs, load, state)
        placement = self.placement
        actions: list[Action] = []
        started: set[int] = set()
        n = len(jobs)
        probe_end = min(PROBE, n)  # the first jobs are tried directly: often one of them fits
        mask: list[bool] | None = None  # ``possible`` of jobs[base:], computed once probing failed
        rows: np.ndarray | None = None  # ``requests`` of all of ``jobs`` (a job's row does not depend on the others)
        base = 0
        complete = True  # every job was looked at
        i = 0
        while i < n:
            if mask is None and i >= probe_end:
                base = i
                if rows is None:
                    rows = placement.requests(jobs, state)
                mask = placement.possible_rows(rows[i:], load, state).tolist()
            if mask is not None and not mask[i - base]:
                i += 1
                continue
            job = jobs[i]
            i += 1
            gpus = placement.place(job, load, state)
            if gpus is None:
                continue
            pred = state.predict(job.spec, state.cluster.gpus[gpus[0]].gpu_type)
            if load is state.load:
                load = load.copy()
            load.add(gpus, pred, gpu_share(job.spec))
            actions.append(Start(job.spec.job_id, gpus))
            started.add(i - 1)
            placement.update_added(load, state, gpus)
            if not placement.any_room():
                complete = i == n
                break
            mask, probe_end = None, min(i + PROBE, n)
        if not complete:
            self._remember(state, [])
        elif started:
            self._remember(state, [job for i, job in enumerate(jobs) if i not in started])
        else:
            self._remember(state, jobs)
        return actions

    def _place_strictly(self, jobs: list[QueuedJob], load: GPULoad, state: SchedulerState) -> list[Action]:
        """Without backfill: stop at the first job that cannot be placed."""
        placement = self.placement
        actions: list[Action] = []
        possible = placement.possible(jobs, load, state)
        for i, job in enumerate(jobs):
            gpus = placement.place(job, load, state) if possible[i] else None
            if gpus is None:
                break
            pred = state.predict(job.spec, state.cluster.gpus[gpus[0]].gpu_type)
            if load is state.load:
                load = load.copy()
            load.add(gpus, pred, gpu_share(job.spec))
            actions.append(Start(job.spec.job_id, gpus))
            placement.update(load, state)
            if not placement.any_room():
                break
            possible[i + 1:] = placement.possible(jobs[i + 1:], load, state)
        self._remember(state, [])
        return actions

    @property
    def colocates(self) -> bool:  # type: ignore[override]
        return self.placement.colocates

    def node_placement(self) -> Placement | None:
        """The placement, unless it overrides ``place`` (then one job's decision is not ``evaluate``)."""
        return self.placement if type(self.placement).place is Placement.place else None

    def queue_position(self, job_id: str, state: SchedulerState) -> int:
        try:
            ordered = self.order_rule.order(list(state.queue.values()), state)
        except NotImplementedError:
            return super().queue_position(job_id, state)
        return next((i for i, job in enumerate(ordered) if job.spec.job_id == job_id), len(ordered))

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "oracle": self.is_oracle, "order": self.order_rule.name,
                "placement": self.placement.name, "backfill": self.backfill, "max_scan": self.max_scan}


ORDERS: Registry[QueueOrder] = Registry("queue order")
PLACEMENTS: Registry[Placement] = Registry("placement")


def fifo_head(state: SchedulerState, k: int) -> list[QueuedJob]:
    """First ``k`` queued jobs in FIFO order.

    ``SchedulerState.queue`` is kept in insertion order = arrival/requeue order, i.e. ascending
    ``queued_since`` (state.py contract), so no sort is needed.
    """
    return list(islice(state.queue.values(), k))
