"""``Cycle``, ``unpack`` and ``migrate``: the per-call plan and phases that ``horus`` and ``gandiva`` share.

A cycle never changes the state's load (it copies on the first planned change), keeps the planned load and the
actions in step, and tells the policy about every change; ``unpack`` stops the newest resident of each losing
shared GPU; ``migrate`` moves the jobs with the most work left first, one move per shared GPU per call.
"""

from __future__ import annotations

import numpy as np

from horus.cluster import Cluster, GPUType, Node
from horus.jobs import JobSpec
from horus.policies.base import Preempt, Start
from horus.policies.parts.cycle import Cycle, migrate, newest, unpack
from horus.state import GPULoad, RunningJob, SchedulerState
from sim_fakes import ConstPredictor

V100 = GPUType("v100", 16_000, 1.0)


def spec(job_id: str, gpus: int = 1) -> JobSpec:
    return JobSpec(job_id, 0.0, gpus, "resnet50", 1000, 100.0)


def state_with(running: dict[str, tuple[tuple[int, ...], float]], n_gpus: int = 4) -> SchedulerState:
    """``running``: job -> (GPUs, start time), started in the order given."""
    state = SchedulerState(Cluster([Node("n0", V100, n_gpus)]), ConstPredictor(util=0.4, mem_mib=2000.0))
    for job_id, (gpus, start) in running.items():
        state.submit(spec(job_id, len(gpus)), 0.0)
        state.start(job_id, gpus, start)
    return state


def test_the_state_load_is_copied_on_the_first_change_and_never_written() -> None:
    state = state_with({"a": ((0,), 0.0)})
    before = state.load.copy()
    seen: list[tuple[str, tuple[int, ...], int]] = []
    cycle = Cycle(state, lambda s, gpus, sign: seen.append((s.job_id, gpus, sign)))
    assert cycle.load is state.load  # nothing planned: no copy
    state.submit(spec("b"), 0.0)
    cycle.start(state.queue["b"].spec, (1,))
    cycle.stop("a")
    assert state.load.equals(before) and cycle.load is not state.load
    assert cycle.load.n_residents.tolist() == [0, 1, 0, 0]
    assert cycle.actions == [Start("b", (1,)), Preempt("a")]
    assert seen == [("b", (1,), 1), ("a", (0,), -1)]
    assert cycle.idle().tolist() == [True, False, True, True]


def test_on_change_sees_the_load_with_the_change_included() -> None:
    state = state_with({})
    state.submit(spec("g", 2), 0.0)
    loads: list[GPULoad] = []
    cycle = Cycle(state, lambda *_: loads.append(cycle.load.copy()))
    cycle.start(state.queue["g"].spec, (2, 3))
    assert loads[0].n_residents.tolist() == [0, 0, 1, 1]


def test_newest_is_the_last_started_then_the_largest_id() -> None:
    state = state_with({"a": ((0,), 5.0), "c": ((0,), 5.0), "b": ((0,), 1.0)})
    assert newest([state.running[j] for j in ("a", "b", "c")]).spec.job_id == "c"
    assert newest([state.running[j] for j in ("a", "b")]).spec.job_id == "a"


def test_unpack_stops_the_newest_resident_of_each_losing_gpu_only() -> None:
    state = state_with({"a": ((0,), 0.0), "b": ((0,), 10.0), "c": ((1,), 0.0), "d": ((1,), 20.0),
                        "e": ((2,), 0.0)})
    asked: list[tuple[int, list[str]]] = []

    def loses(g: int, runs: list[RunningJob]) -> bool:
        asked.append((g, sorted(r.spec.job_id for r in runs)))
        return g == 1

    cycle = Cycle(state)
    out = [(run.spec.job_id, g) for run, g in unpack(cycle, loses)]
    assert out == [("d", 1)]
    assert asked == [(0, ["a", "b"]), (1, ["c", "d"])]  # only shared GPUs are judged; GPU 2 has one resident
    assert cycle.actions == [Preempt("d")]


def test_unpack_does_not_count_a_gang_stopped_on_an_earlier_gpu() -> None:
    """A gang on GPUs 0 and 1 stopped for GPU 0 no longer shares GPU 1: GPU 1 is not judged again."""
    state = state_with({"x": ((0,), 0.0), "y": ((1,), 0.0), "g": ((0, 1), 30.0)})
    asked: list[int] = []

    def loses(g: int, runs: list[RunningJob]) -> bool:
        asked.append(g)
        return True

    stopped = [run.spec.job_id for run, _ in unpack(Cycle(state), loses)]
    assert stopped == ["g"] and asked == [0]


def test_migrate_moves_most_work_first_one_move_per_gpu_and_restarts_without_a_stop() -> None:
    state = state_with({"a": ((0,), 0.0), "b": ((0,), 1.0), "c": ((1,), 0.0), "d": ((1,), 1.0),
                        "r": ((2,), 0.0), "s": ((2,), 1.0)}, n_gpus=6)
    cycle = Cycle(state)
    cycle.stop("r")  # unpacked earlier in the call: only restarted

    def target(run: RunningJob) -> tuple[int, ...] | None:
        idle = np.flatnonzero(cycle.idle())
        return (int(idle[0]),) if len(idle) else None

    moved = migrate(cycle, [(250.0, "a"), (300.0, "b"), (200.0, "c"), (float("inf"), "r")], target, restart={"r"})
    # r first (restart), then b (most work); a is skipped: GPU 0 already lost b this call; then c
    assert moved == 2
    assert cycle.actions == [Preempt("r"), Start("r", (3,)), Preempt("b"), Start("b", (4,)),
                             Preempt("c"), Start("c", (5,))]


def test_migrate_stops_when_no_room_is_left_and_skips_jobs_without_a_target() -> None:
    state = state_with({"a": ((0,), 0.0), "b": ((0,), 1.0), "c": ((1,), 0.0), "d": ((1,), 1.0)}, n_gpus=3)
    cycle = Cycle(state)
    targets = {"b": None, "d": (2,), "c": (2,)}
    moved = migrate(cycle, [(10.0, "b"), (5.0, "d"), (1.0, "c")], lambda run: targets[run.spec.job_id])
    assert moved == 1 and cycle.actions == [Preempt("d"), Start("d", (2,))]  # then no idle GPU is left
