"""What a policy concluded about its planned load is trusted only while the load is exactly as planned.

``SchedulerCore`` numbers every policy call (``SchedulerState.begin_step``) and settles a step whose actions were
all carried out; ``PlanMemo`` (the one "nothing changed since" every policy uses) trusts a remembered value only
while that step is settled and no job started or stopped since. A start that fails, a preemption, a finish or a
start by another step make the policy look again; an arrival does not.
"""

from __future__ import annotations

import pytest
from sim_fakes import ConstPredictor

from horus.cluster import Cluster, GPUType, Node
from horus.core import SchedulerCore, create_policy
from horus.jobs import JobSpec
from horus.policies.base import Action, Policy, Preempt, Start
from horus.state import PlanMemo, SchedulerState

V100 = GPUType("v100", 16_000, 1.0)
MEMOISING = ["fifo-exclusive", "sjf-exclusive", "tiresias", "horus-paper", "geng", "horus", "gandiva"]


def spec(job_id: str, gpus: int = 1) -> JobSpec:
    return JobSpec(job_id, 0.0, gpus, "resnet50", 1, 100.0)


def make_state(n_gpus: int = 2) -> SchedulerState:
    # Every job is believed to fill a card (no policy may co-locate two), so a gang of two waits behind any job.
    return SchedulerState(Cluster([Node("n0", V100, n_gpus)]), ConstPredictor(util=0.95, mem_mib=15_000.0))


class FlakyExecutor:
    """Carries out actions on the state at once, except that starts of jobs in ``fail`` fail (the job leaves
    the queue, as a start refused by an agent or out of memory does)."""

    def __init__(self, state: SchedulerState, fail: set[str] | None = None) -> None:
        self.state = state
        self.fail = fail or set()
        self.started: list[tuple[str, tuple[int, ...]]] = []

    def start(self, spec: JobSpec, gpus: tuple[int, ...], now: float) -> None:
        if spec.job_id in self.fail:
            self.state.withdraw(spec.job_id)
            return
        self.state.start(spec.job_id, gpus, now)
        self.started.append((spec.job_id, gpus))

    def preempt(self, job_id: str, now: float) -> None:
        self.state.requeue(job_id, now)


class Scripted(Policy):
    name = "scripted"
    acts_on_running = True  # asked even with an empty queue

    def __init__(self, actions: list[Action]) -> None:
        self.actions = actions

    def schedule(self, state: SchedulerState) -> list[Action]:
        out, self.actions = self.actions, []
        return out


# ---- the state's step protocol ------------------------------------------------------------------------
def test_a_settled_step_is_trusted_until_a_job_starts_or_stops_but_not_after_an_arrival() -> None:
    state = make_state()
    step = state.begin_step()
    assert not state.load_as_planned(step)  # not settled yet
    state.settle(step)
    assert state.load_as_planned(step)
    state.submit(spec("a"), 0.0)
    assert state.load_as_planned(step)  # the queue changed, the load did not
    state.start("a", (0,), 1.0)
    assert not state.load_as_planned(step)
    later = state.begin_step()
    state.settle(later)
    assert state.load_as_planned(later) and not state.load_as_planned(step)
    state.finish("a")
    assert not state.load_as_planned(later)


def test_only_recent_steps_are_kept() -> None:
    state = make_state()
    first = state.begin_step()
    state.settle(first)
    for _ in range(16):
        state.settle(state.begin_step())
    assert not state.load_as_planned(first)  # forgotten: a stale memo is re-derived, never trusted
    assert state.load_as_planned(state.step)


def test_plan_memo_gives_its_empty_value_unless_the_load_is_as_planned() -> None:
    state = make_state()
    memo: PlanMemo[frozenset[str]] = PlanMemo(frozenset())
    state.begin_step()
    memo.remember(state, frozenset({"x"}))
    assert memo.recall(state) == frozenset()  # the step is not settled
    state.settle(state.step)
    assert memo.recall(state) == frozenset({"x"})
    state.submit(spec("a"), 0.0)
    state.start("a", (1,), 0.0)
    assert memo.recall(state) == frozenset()


# ---- the core settles only steps carried out as planned ----------------------------------------------
def test_the_core_settles_a_step_whose_actions_were_all_carried_out() -> None:
    state = make_state()
    state.submit(spec("a"), 0.0)
    core = SchedulerCore(state, Scripted([Start("a", (0,))]), FlakyExecutor(state))
    core.schedule(1.0)
    assert state.step == 1 and state.load_as_planned(1)


@pytest.mark.parametrize("case", ["failed start", "preempted job still running"])
def test_the_core_does_not_settle_a_step_that_went_other_than_planned(case: str) -> None:
    state = make_state()
    state.submit(spec("a"), 0.0)
    if case == "failed start":
        core = SchedulerCore(state, Scripted([Start("a", (0,))]), FlakyExecutor(state, fail={"a"}))
    else:
        state.start("a", (0,), 0.0)

        class Stubborn(FlakyExecutor):
            def preempt(self, job_id: str, now: float) -> None:  # the backend could not stop it yet
                pass

        core = SchedulerCore(state, Scripted([Preempt("a")]), Stubborn(state))
    core.schedule(1.0)
    assert state.step == 1 and not state.load_as_planned(1)


# ---- every policy with a memo looks again when the load is not what it planned -----------------------
@pytest.mark.parametrize("name", MEMOISING)
def test_a_gang_blocked_behind_a_start_that_failed_starts_at_the_next_call(name: str) -> None:
    """Step 1 starts ``a`` on one of two GPUs and finds the 2-GPU gang ``g`` blocked; ``a``'s start fails. On the
    empty cluster the next call must start ``g`` (a policy trusting its memo would wait for ever)."""
    state = make_state()
    state.submit(spec("a"), 0.0)
    state.submit(spec("g", 2), 1.0)
    executor = FlakyExecutor(state, fail={"a"})
    core = SchedulerCore(state, create_policy(name), executor)
    core.schedule(2.0)
    assert "a" not in state.queue and "g" in state.queue and executor.started == []
    core.schedule(3.0)
    assert executor.started == [("g", (0, 1))]


@pytest.mark.parametrize("name", MEMOISING)
def test_a_job_waiting_on_a_full_cluster_starts_once_a_job_finishes_and_not_before(name: str) -> None:
    state = make_state(n_gpus=1)
    state.submit(spec("r"), 0.0)
    state.start("r", (0,), 0.0)
    state.submit(spec("w"), 1.0)
    executor = FlakyExecutor(state)
    core = SchedulerCore(state, create_policy(name), executor)
    for now in (2.0, 3.0):  # the second call may answer from the memo: still nothing
        core.schedule(now)
        assert executor.started == []
    state.submit(spec("late"), 3.5)  # an arrival alone changes nothing for the jobs ahead
    core.schedule(4.0)
    assert executor.started == []
    state.finish("r")
    core.schedule(5.0)
    assert [gpus for _, gpus in executor.started] == [(0,)]  # w or late (sjf orders equal jobs its own way)


def test_a_memo_renewed_by_calls_that_return_nothing_outlives_the_window_of_settled_steps() -> None:
    """A policy that answers 40 calls in a row from its memo (no action, nothing started or stopped) keeps
    trusting it; without ``renew`` it would be re-derived after 16 steps (a decision change for a policy whose
    answer also depends on time, as the adaptive ``horus``'s does)."""
    state = make_state()
    renewed: PlanMemo[str | None] = PlanMemo(None)
    forgotten: PlanMemo[str | None] = PlanMemo(None)
    state.begin_step()
    renewed.remember(state, "quiet")
    forgotten.remember(state, "quiet")
    state.settle(state.step)
    for _ in range(40):
        state.begin_step()
        assert renewed.recall(state) == "quiet"
        renewed.renew(state)
        state.settle(state.step)
    assert renewed.recall(state) == "quiet" and forgotten.recall(state) is None


def test_renew_never_revives_a_memo_the_load_has_outdated() -> None:
    state = make_state()
    memo: PlanMemo[str | None] = PlanMemo(None)
    state.begin_step()
    memo.remember(state, "blocked")
    state.settle(state.step)
    state.submit(spec("a"), 0.0)
    state.start("a", (0,), 0.0)
    state.begin_step()
    memo.renew(state)
    state.settle(state.step)
    assert memo.recall(state) is None
