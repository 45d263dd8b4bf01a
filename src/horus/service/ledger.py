"""The co-location ledger of the live service, and the recent telemetry of each job.

A *set* opens when a GPU gets a second resident and closes when its residents change; it is written
to the store when it opens and when it closes (``colocations`` table). While it runs, every
heartbeat that brings a rate for all its members adds one sample of its observed combined
normalized throughput ``sum_i min(1, rate_i / solo_i)``, where ``solo_i`` is the job's own rate
when it was last seen alone on a GPU, else its predicted solo rate ``1 / iter_time_s``. The
predicted value is what the untrained summed-utilization rule says of the set's predicted
utilizations (``horus.interference.summed_util``) - the same prior the adaptive policy starts from.

How a set ended (``outcome``): ``kept`` (a member finished or another job joined), ``unpacked`` (the
policy preempted a member), ``oom``, ``lost`` (a machine or process was lost), ``cancelled``,
``failed``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from horus.service.store import Store
    from horus.state import SchedulerState

HISTORY_PERIOD_S = 2.0  # a job's telemetry is sampled at most this often
HISTORY_POINTS = 300
HISTORY_JOBS = 2000  # jobs whose recent telemetry is kept (least recently sampled forgotten first)
MARK_S = 600.0  # a GPU carries an unpack / OOM mark this long


@dataclass
class OpenSet:
    set_id: int
    jobs: tuple[str, ...]
    started: float
    predicted: float | None
    total: float = 0.0
    samples: int = 0

    @property
    def observed(self) -> float | None:
        return self.total / self.samples if self.samples else None


class Ledger:
    """Open co-located sets, per-job telemetry history and recent GPU marks (see module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.open: dict[tuple[str, int], OpenSet] = {}
        self.solo: dict[str, float] = {}  # job id -> its rate when last seen alone
        self.departures: dict[str, str] = {}  # job id -> why it left its GPU (until the next sync)
        self.marks: dict[tuple[str, int], tuple[str, float, str]] = {}  # GPU -> (kind, time, job id)
        self.history: OrderedDict[str, deque[tuple[float, float, float | None, float | None]]] = OrderedDict()
        self._estimator: Any = None
        self._changes: np.ndarray | None = None
        for row in store.sets(limit=100_000, open_only=True):  # sets left open by a stopped server
            self.open[(row["agent"], int(row["local_index"]))] = OpenSet(
                int(row["id"]), tuple(str(j) for j in row["jobs"]), float(row["started"]), row["predicted"])

    # ---- transitions -------------------------------------------------------------------------------
    def departed(self, job_id: str, why: str) -> None:
        """Record why a job is leaving its GPUs (before the state forgets it)."""
        self.departures[job_id] = why

    def note(self, gpus: list[tuple[str, int]], kind: str, now: float, job_id: str) -> None:
        """Mark GPUs (e.g. where a job, alone or not, ran out of memory)."""
        for key in gpus:
            self.marks[key] = (kind, now, job_id)

    def rescan(self) -> None:
        """The next ``sync`` looks at every GPU (the state was rebuilt)."""
        self._changes = None

    def sync(self, state: SchedulerState, gpu_map: list[tuple[str, int]], now: float) -> None:
        """Open and close sets where residents changed since the last call."""
        changes = state.gpu_changes
        if self._changes is None or len(self._changes) != len(changes):
            changed = range(len(changes))
            live = set(gpu_map)
            for key in [k for k in self.open if k not in live]:  # the machine is gone
                self._close(key, now, "lost")
        else:
            changed = np.flatnonzero(changes != self._changes).tolist()
        self._changes = changes.copy()
        for g in changed:
            key = gpu_map[g]
            jobs = tuple(sorted(state.residents[g], key=int))
            current = self.open.get(key)
            if current is not None and current.jobs == jobs:
                continue
            if current is not None:
                left = [j for j in current.jobs if j not in jobs]
                whys = [self.departures.get(j, "kept") for j in left]
                why = next((w for w in ("oom", "unpacked", "lost", "failed", "cancelled") if w in whys), "kept")
                self._close(key, now, why, left[0] if left else "")
            if len(jobs) >= 2:
                predicted = self._predict(state, jobs, g)
                set_id = self.store.open_set(key[0], key[1], state.cluster.gpus[g].gpu_type.name, jobs, now,
                                             predicted)
                self.open[key] = OpenSet(set_id, jobs, now, predicted)
        self.departures.clear()

    def _close(self, key: tuple[str, int], now: float, outcome: str, job_id: str = "") -> None:
        current = self.open.pop(key)
        self.store.close_set(current.set_id, now, outcome, current.observed, current.samples)
        if outcome in ("unpacked", "oom"):
            self.marks[key] = (outcome, now, job_id)

    def _predict(self, state: SchedulerState, jobs: tuple[str, ...], g: int) -> float | None:
        specs = [state.running[j].spec for j in jobs]
        if any(not s.model or s.num_gpus > 1 for s in specs):
            return None
        if self._estimator is None:
            from horus.interference.slowdown import estimator_for

            self._estimator = estimator_for(None, state.predictor)
        return float(sum(self._estimator.throughputs([s.job_type for s in specs], state.cluster.gpus[g].gpu_type)))

    # ---- telemetry -----------------------------------------------------------------------------------
    def sample(self, state: SchedulerState, gpus: dict[int, tuple[str, int]],
               gpu_telemetry: dict[int, dict[str, float]], now: float) -> None:
        """One heartbeat of an agent whose GPUs are ``gpus`` (global index -> (agent, local index)): job
        histories, solo rates and samples of its open sets."""
        for g, (name, local) in gpus.items():
            residents = state.residents[g]
            observed = gpu_telemetry.get(local, {})
            for j in residents:
                run = state.running[j]
                if run.gpus[0] == g:
                    self._remember(j, now, run.observed_rate, observed.get("util"), observed.get("mem_mib"))
            if len(residents) == 1 and len(state.running[residents[0]].gpus) == 1:
                rate = state.running[residents[0]].observed_rate
                if rate > 0:
                    self.solo[residents[0]] = rate
            current = self.open.get((name, local))
            if current is None:
                continue
            runs = [state.running[j] for j in current.jobs if j in state.running]
            if len(runs) != len(current.jobs) or any(not r.observed_rate > 0 for r in runs):
                continue
            total = 0.0
            for run in runs:
                solo = self.solo.get(run.spec.job_id)
                if solo is None:
                    pred = state.predict(run.spec, state.cluster.gpus[g].gpu_type)
                    solo = 1.0 / pred.iter_time_s if pred.iter_time_s > 0 else None
                if not solo:
                    break
                total += min(1.0, run.observed_rate / solo)
            else:
                current.total += total
                current.samples += 1

    def _remember(self, job_id: str, now: float, rate: float, util: float | None, mem: float | None) -> None:
        points = self.history.get(job_id)
        if points is None:
            points = self.history[job_id] = deque(maxlen=HISTORY_POINTS)
            while len(self.history) > HISTORY_JOBS:
                self.history.popitem(last=False)
        elif points and now - points[-1][0] < HISTORY_PERIOD_S:
            return
        self.history.move_to_end(job_id)
        points.append((now, rate, util, mem))

    # ---- views ---------------------------------------------------------------------------------------
    def job_history(self, job_id: str) -> list[dict[str, float | None]]:
        return [{"time": t, "rate": r, "gpu_util": u, "gpu_mem_mib": m} for t, r, u, m in self.history.get(job_id, ())]

    def mark(self, key: tuple[str, int], now: float) -> dict[str, Any] | None:
        found = self.marks.get(key)
        if found is None or now - found[1] > MARK_S:
            return None
        return {"kind": found[0], "time": found[1], "job": found[2]}

    def view(self, limit: int, now: float) -> list[dict[str, Any]]:
        rows = self.store.sets(limit=limit)
        for row in rows:
            current = self.open.get((row["agent"], int(row["local_index"])))
            if row["ended"] is None and current is not None and current.set_id == row["id"]:
                row["observed"], row["samples"] = current.observed, current.samples
            row["duration_s"] = (row["ended"] if row["ended"] is not None else now) - row["started"]
        return rows
