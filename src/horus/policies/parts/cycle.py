"""One scheduling call's plan, and the phases built on it that ``horus`` and ``gandiva`` share.

``Cycle`` is the planned load (``state.load`` until the first change, then a private copy) with the actions
that lead to it: every planned start and stop goes through ``start`` / ``stop``, so load and actions never
disagree. ``unpack`` stops the newest resident of each shared GPU whose residents lose by a policy's
judgement; ``migrate`` moves running jobs onto GPUs that went idle, one move per shared GPU per call. The
policies differ in what loses, which jobs move and where to; that is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from horus.jobs import JobSpec
from horus.policies.base import Action, Preempt, Start
from horus.state import RunningJob, SchedulerState, gpu_share

Change = Callable[[JobSpec, tuple[int, ...], int], None]  # (job, its GPUs, +1 start / -1 stop)


class Cycle:
    """The plan of one call: ``load`` as planned, ``actions`` in order. ``on_change(spec, gpus, sign)`` runs
    after every planned start (+1) or stop (-1), once ``load`` includes it (e.g. a placement's ``update``)."""

    def __init__(self, state: SchedulerState, on_change: Change | None = None) -> None:
        self.state = state
        self.load = state.load
        self.actions: list[Action] = []
        self.on_change = on_change

    def _change(self, gpus: tuple[int, ...], spec: JobSpec, sign: int) -> None:
        state = self.state
        if self.load is state.load:
            self.load = self.load.copy()  # copy on first write: the state's load is never changed by a policy
        self.load.add(gpus, state.predict(spec, state.cluster.gpus[gpus[0]].gpu_type), gpu_share(spec), sign)
        if self.on_change is not None:
            self.on_change(spec, gpus, sign)

    def start(self, spec: JobSpec, gpus: tuple[int, ...]) -> None:
        """Plan to start ``spec`` (queued, or stopped earlier in this call) on ``gpus``."""
        self._change(gpus, spec, +1)
        self.actions.append(Start(spec.job_id, gpus))

    def stop(self, job_id: str) -> RunningJob:
        """Plan to preempt the running job ``job_id`` (it re-enters the queue)."""
        run = self.state.running[job_id]
        self._change(run.gpus, run.spec, -1)
        self.actions.append(Preempt(job_id))
        return run

    def idle(self) -> np.ndarray:
        return self.load.n_residents == 0


def newest(runs: Sequence[RunningJob]) -> RunningJob:
    """The resident that started last (ties: largest job id): the one an unpack stops."""
    return max(runs, key=lambda r: (r.start_time, r.spec.job_id))


def unpack(cycle: Cycle, loses: Callable[[int, list[RunningJob]], bool]) -> Iterator[tuple[RunningJob, int]]:
    """For every GPU shared when the call began, in index order: if ``loses(gpu, residents)`` (residents not
    stopped earlier in the call), stop the newest resident and yield it with the GPU it leaves (the caller may
    restart it at once)."""
    state = cycle.state
    stopped: set[str] = set()
    for g in np.flatnonzero(state.load.n_residents >= 2).tolist():
        runs = [state.running[j] for j in state.residents[g] if j not in stopped]
        if len(runs) < 2 or not loses(g, runs):
            continue
        run = cycle.stop(newest(runs).spec.job_id)
        stopped.add(run.spec.job_id)
        yield run, g


def migrate(cycle: Cycle, movers: Sequence[tuple[float, str]], target: Callable[[RunningJob], tuple[int, ...] | None],
            *, restart: frozenset[str] | set[str] = frozenset(), room: Callable[[], bool] | None = None) -> int:
    """Move running jobs onto idle GPUs, the most work left first (``movers``: (seconds left, job id); ties by
    id). A job is stopped and started on ``target(run)`` (None: it stays); jobs in ``restart`` were stopped
    earlier in the call and are only started. After a job leaves its GPUs, no other job leaves them in the
    same call (their rates change). Stops when ``room()`` (default: an idle GPU is left) is False. Returns the
    number of moves (restarts not counted)."""
    state = cycle.state
    has_room = room or (lambda: bool(cycle.idle().any()))
    touched: set[int] = set()
    moved = 0
    for _, jid in sorted(movers, key=lambda m: (-m[0], m[1])):
        if not has_room():
            break
        run = state.running[jid]
        if jid not in restart and touched.intersection(run.gpus):
            continue
        gpus = target(run)
        if gpus is None:
            continue
        if jid not in restart:
            cycle.stop(jid)
            touched.update(run.gpus)
            moved += 1
        cycle.start(run.spec, gpus)
    return moved
