"""SchedulerCore: every action a policy returns is checked before a backend carries it out.

A Start must name a queued job, on exactly its gang size of distinct GPU indices in ``[0, n)`` whose
types the job accepts; a Preempt must name a running job; anything else is a policy bug
(``InvalidActionError``). Also: when the policy is asked, admission per GPU-type request, the
step's metrics, the executor seeing the actions in order, and oracles refusing to run without truth.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horus.cluster import Cluster, GPUType, Node
from horus.core import InvalidActionError, OracleNeedsTruthError, SchedulerCore
from horus.jobs import JobSpec
from horus.policies.base import Action, Policy, Preempt, Start
from horus.state import SchedulerState
from sim_fakes import ConstPredictor

V100 = GPUType("v100", 16_000, 1.0)
T4 = GPUType("t4", 16_000, 0.3)
A100 = GPUType("a100", 40_000, 2.0)
TYPES = ["v100", "v100", "t4", "t4", "a100"]  # global GPU index -> type name of the cluster below
N = len(TYPES)


def make_cluster() -> Cluster:
    return Cluster([Node("n0", V100, 2), Node("n1", T4, 2), Node("n2", A100, 1)])


class ScriptPolicy(Policy):
    """Returns the scripted actions (``script(state)``) and records when it was asked."""

    name = "script"

    def __init__(self, script: Callable[[SchedulerState], list[Action]] | list[Action] | None = None, *,
                 acts_on_running: bool = False, pause_s: float = 0.0) -> None:
        self.script = script if callable(script) else (lambda _state, fixed=list(script or []): list(fixed))
        self.acts_on_running = acts_on_running
        self.pause_s = pause_s
        self.calls: list[float] = []

    def schedule(self, state: SchedulerState) -> list[Action]:
        self.calls.append(state.now)
        if self.pause_s:
            time.sleep(self.pause_s)
        return self.script(state)


class OraclePolicy(ScriptPolicy):
    name = "oracle-script"
    is_oracle = True

    def bind_truth(self, truth: object) -> None:
        self.truth = truth


class RecordingExecutor:
    """An ``Executor`` that records every call and applies it to the state at once (as the simulator does)."""

    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self.calls: list[tuple[str, str, tuple[int, ...] | None, float]] = []

    def start(self, spec: JobSpec, gpus: tuple[int, ...], now: float) -> None:
        self.calls.append(("start", spec.job_id, gpus, now))
        self.state.start(spec.job_id, gpus, now)

    def preempt(self, job_id: str, now: float) -> None:
        self.calls.append(("preempt", job_id, None, now))
        self.state.requeue(job_id, now)


def spec(job_id: str, gpus: int = 1, request: str | None = None) -> JobSpec:
    return JobSpec(job_id, 0.0, gpus, "toy", 1, 100.0, gpu_type_request=request)


def make_core(policy: Policy | None = None, queued: Sequence[JobSpec] = (),
              running: Mapping[str, tuple[int, ...]] | None = None) -> tuple[SchedulerCore, RecordingExecutor]:
    """A core over a fresh state with ``queued`` jobs queued and ``running`` jobs started on their GPUs."""
    state = SchedulerState(make_cluster(), ConstPredictor())
    for s in queued:
        state.submit(s, 0.0)
    for job_id, gpus in (running or {}).items():
        state.submit(spec(job_id, len(gpus)), 0.0)
        state.start(job_id, gpus, 0.0)
    executor = RecordingExecutor(state)
    return SchedulerCore(state, policy or ScriptPolicy(), executor), executor


def check(core: SchedulerCore, job_id: str, gpus: object) -> tuple[JobSpec, tuple[int, ...]]:
    return core.check_start(Start(job_id, gpus))  # type: ignore[arg-type]


# ---- Start checks ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("gpus", [(0,), (0, 1, 2), (0, 1, 2, 3)], ids=["fewer", "one-more", "two-more"])
def test_gang_must_get_exactly_its_gpus(gpus: tuple[int, ...]) -> None:
    core, _ = make_core(queued=[spec("j", 2)])
    with pytest.raises(InvalidActionError, match="exactly 2"):
        check(core, "j", gpus)
    assert check(core, "j", (0, 1)) == (core.state.queue["j"].spec, (0, 1))


@pytest.mark.parametrize("gpu", [N, N + 1, -1, -N])
def test_gpu_index_must_be_in_range(gpu: int) -> None:
    core, _ = make_core(queued=[spec("j", 1), spec("k", 2)])
    with pytest.raises(InvalidActionError, match=r"\[0, 5\)"):
        check(core, "j", (gpu,))
    with pytest.raises(InvalidActionError, match=r"\[0, 5\)"):
        check(core, "k", (1, gpu))  # one bad index in a gang is enough
    assert check(core, "j", (0,))[1] == (0,)
    assert check(core, "j", (N - 1,))[1] == (N - 1,)


@pytest.mark.parametrize("gpus", [(1, 1), (0, 0), (3, 3)])
def test_gang_gpus_must_be_distinct(gpus: tuple[int, int]) -> None:
    core, _ = make_core(queued=[spec("j", 2), spec("k", 3)])
    with pytest.raises(InvalidActionError, match="distinct"):
        check(core, "j", gpus)
    with pytest.raises(InvalidActionError, match="distinct"):
        check(core, "k", (2, 4, 2))
    assert check(core, "j", (3, 0))[1] == (3, 0)  # any order of distinct GPUs is fine


@pytest.mark.parametrize(("request_", "ok", "bad"), [
    ("v100", (0, 1), (1, 2)),  # one GPU of the gang is a t4
    ("t4", (2, 3), (0, 3)),
    ("v100|t4", (1, 2), (2, 4)),  # an a100 is neither
    ("a100|t4", (3, 4), (0, 4)),
])
def test_gang_must_stay_on_requested_gpu_types(request_: str, ok: tuple[int, int], bad: tuple[int, int]) -> None:
    core, _ = make_core(queued=[spec("j", 2, request_)])
    assert check(core, "j", ok)[1] == ok
    with pytest.raises(InvalidActionError, match="requested GPU type"):
        check(core, "j", bad)


def test_a_job_without_a_type_request_runs_on_any_type() -> None:
    core, _ = make_core(queued=[spec("j", 3)])
    assert check(core, "j", (1, 2, 4))[1] == (1, 2, 4)


def test_a_gang_larger_than_the_small_int_cache_is_checked_by_value() -> None:
    """Sizes above 256 are distinct int objects in CPython: the checks must compare values, not identities."""
    state = SchedulerState(Cluster([Node("big", V100, 300)]), ConstPredictor())
    state.submit(spec("big", 300), 0.0)
    state.submit(spec("dup", 300), 0.0)
    core = SchedulerCore(state, ScriptPolicy(), RecordingExecutor(state))
    assert core.eligible_gpus(None) == 300 and core.admits(spec("x", 300)) and not core.admits(spec("x", 301))
    gpus = tuple(range(299, -1, -1))
    assert check(core, "big", gpus) == (state.queue["big"].spec, gpus)
    with pytest.raises(InvalidActionError, match="distinct"):
        check(core, "dup", (*range(299), 0))
    with pytest.raises(InvalidActionError, match="exactly 300"):
        check(core, "dup", tuple(range(299)))


def test_start_must_name_a_queued_job() -> None:
    core, _ = make_core(queued=[spec("q")], running={"r": (0,)})
    for job_id in ("r", "nope"):
        with pytest.raises(InvalidActionError, match="not queued"):
            check(core, job_id, (1,))


@pytest.mark.parametrize("bad", [(0.0,), (1.5,), ("1",), (None,), (0, 1.0)])
def test_gpu_indices_must_be_integers(bad: tuple[object, ...]) -> None:
    core, _ = make_core(queued=[spec("j", len(bad))])
    with pytest.raises(InvalidActionError, match="integers"):
        check(core, "j", bad)


def test_numpy_integer_indices_are_accepted_as_plain_ints() -> None:
    core, _ = make_core(queued=[spec("j", 2)])
    _, gpus = check(core, "j", tuple(np.array([4, 2], dtype=np.int64)))
    assert gpus == (4, 2) and all(type(g) is int for g in gpus)


# ---- the decision step ----------------------------------------------------------------------------------
def test_actions_reach_the_executor_in_order_and_last_started_counts_starts() -> None:
    policy = ScriptPolicy([Preempt("r"), Start("b", (2, 3)), Start("a", (0,))])
    core, executor = make_core(policy, queued=[spec("a"), spec("b", 2)], running={"r": (4,)})
    actions = core.schedule(7.0)
    assert actions == policy.script(core.state)
    assert executor.calls == [("preempt", "r", None, 7.0), ("start", "b", (2, 3), 7.0), ("start", "a", (0,), 7.0)]
    assert core.last_started == 2
    assert policy.calls == [7.0] and core.state.now == 7.0
    assert set(core.state.running) == {"a", "b"} and list(core.state.queue) == ["r"]


def test_preempt_must_name_a_running_job() -> None:
    for target in ("q", "gone"):
        policy = ScriptPolicy([Preempt(target)])
        core, executor = make_core(policy, queued=[spec("q")], running={"r": (0,)})
        with pytest.raises(InvalidActionError, match="not running"):
            core.schedule(1.0)
        assert executor.calls == []


@pytest.mark.parametrize("odd", ["start q", ("q", (0,)), None, object()])
def test_an_action_that_is_neither_start_nor_preempt_is_rejected(odd: object) -> None:
    core, executor = make_core(ScriptPolicy([odd]), queued=[spec("q")])  # type: ignore[list-item]
    with pytest.raises(InvalidActionError, match="not a Start or Preempt"):
        core.schedule(1.0)
    assert executor.calls == []


def test_nothing_after_an_invalid_action_is_carried_out() -> None:
    policy = ScriptPolicy([Start("a", (0,)), Start("b", (0, 0)), Start("c", (1,))])
    core, executor = make_core(policy, queued=[spec("a"), spec("b", 2), spec("c")])
    with pytest.raises(InvalidActionError):
        core.schedule(2.0)
    assert [c[1] for c in executor.calls] == ["a"]
    assert set(core.state.queue) == {"b", "c"}


def test_empty_queue_asks_only_a_policy_that_acts_on_running_jobs() -> None:
    idle = ScriptPolicy([Start("a", (0,))])
    core, executor = make_core(idle, queued=[spec("a")])
    core.schedule(1.0)
    assert core.last_started == 1
    assert core.schedule(2.0) == [] and idle.calls == [1.0]  # queue now empty: not asked
    assert core.last_started == 0 and executor.calls == [("start", "a", (0,), 1.0)]
    assert core.state.now == 2.0

    mover = ScriptPolicy(lambda s: [Preempt(j) for j in s.running], acts_on_running=True)
    core, executor = make_core(mover, running={"r": (1,)})
    assert core.schedule(3.0) == [Preempt("r")]
    assert mover.calls == [3.0] and executor.calls == [("preempt", "r", None, 3.0)]
    assert core.last_started == 0


def test_a_queued_job_gets_the_policy_asked_even_if_it_does_not_act_on_running() -> None:
    policy = ScriptPolicy([])
    core, executor = make_core(policy, queued=[spec("a")])
    assert core.schedule(4.0) == [] and policy.calls == [4.0] and executor.calls == []


def test_decision_time_is_the_policy_call_duration() -> None:
    """Bounded by the policy's own work below and by the whole step as the test times it above (no speed target)."""
    core, _ = make_core(ScriptPolicy([], pause_s=0.05), queued=[spec("a")])
    assert core.last_decision_s == 0.0 and core.last_started == 0
    began = time.perf_counter()
    core.schedule(1.0)
    step_s = time.perf_counter() - began
    assert 0.05 <= core.last_decision_s <= step_s
    core.policy = ScriptPolicy([])
    began = time.perf_counter()
    core.schedule(2.0)
    assert 0.0 <= core.last_decision_s <= time.perf_counter() - began


# ---- admission ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("request_", "eligible"), [
    (None, 5), ("", 5), ("v100", 2), ("t4", 2), ("a100", 1), ("v100|t4", 4), ("t4 | a100", 3), ("h100", 0),
    ("V100", 0),
])
def test_eligible_gpus_and_admission_per_type_request(request_: str | None, eligible: int) -> None:
    core, _ = make_core()
    assert core.eligible_gpus(request_) == eligible
    assert core.eligible_gpus(request_) == eligible  # cached answer is the same
    assert not core.admits(spec("zero", 0, request_))
    for gpus in range(1, 7):
        assert core.admits(spec("j", gpus, request_)) == (gpus <= eligible), gpus


# ---- oracles --------------------------------------------------------------------------------------------
def test_an_oracle_needs_truth_and_receives_it() -> None:
    state = SchedulerState(make_cluster(), ConstPredictor())
    with pytest.raises(OracleNeedsTruthError, match="oracle"):
        SchedulerCore(state, OraclePolicy(), RecordingExecutor(state))
    truth = object()
    oracle = OraclePolicy()
    SchedulerCore(state, oracle, RecordingExecutor(state), truth=truth)
    assert oracle.truth is truth
    # a non-oracle is never handed the truth (the base class would raise TypeError if it were)
    SchedulerCore(state, ScriptPolicy(), RecordingExecutor(state), truth=truth)


def test_truth_is_keyword_only_and_the_rest_may_be_named() -> None:
    state = SchedulerState(make_cluster(), ConstPredictor())
    oracle = OraclePolicy()
    with pytest.raises(TypeError):
        SchedulerCore(state, oracle, RecordingExecutor(state), object())  # type: ignore[misc]
    core = SchedulerCore(state=state, policy=oracle, executor=RecordingExecutor(state), truth="t")
    assert core.state is state and core.policy is oracle and oracle.truth == "t"


# ---- property: check_start accepts exactly the documented starts ---------------------------------------
REQUESTS = [None, "v100", "t4", "a100", "v100|t4", "t4|a100", "h100"]
index = st.one_of(st.integers(-2, N + 1), st.integers(-2, N + 1).map(np.int64))
odd = st.one_of(st.floats(-2, N + 1, allow_nan=False), st.text(max_size=2), st.none(),
                st.integers(0, N - 1).map(float), st.integers(0, N - 1).map(str))


def expected_ok(queued: dict[str, JobSpec], job_id: str, gpus: tuple[object, ...]) -> bool:
    """The documented conditions, written independently of the core."""
    job = queued.get(job_id)
    if job is None or len(gpus) != job.num_gpus:
        return False
    if not all(isinstance(g, (int, np.integer)) and not isinstance(g, bool) for g in gpus):
        return False
    if not all(0 <= int(g) < N for g in gpus) or len({int(g) for g in gpus}) != len(gpus):
        return False
    allowed = {p.strip() for p in (job.gpu_type_request or "").split("|") if p.strip()}
    return not allowed or all(TYPES[int(g)] in allowed for g in gpus)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(st.tuples(st.integers(1, 3), st.sampled_from(REQUESTS)), min_size=1, max_size=4),
       pick=st.integers(0, 5), running=st.booleans(),
       gpus=st.lists(st.one_of(index, index, index, odd), max_size=4).map(tuple))
def test_check_start_accepts_iff_documented_conditions_hold(jobs: list[tuple[int, str | None]], pick: int,
                                                            running: bool, gpus: tuple[object, ...]) -> None:
    specs = [spec(f"j{i}", n, req) for i, (n, req) in enumerate(jobs)]
    core, _ = make_core(queued=specs, running={"r": (0,)} if running else {})
    queued = {s.job_id: s for s in specs}
    job_id = f"j{pick}" if pick < len(specs) else ("r" if running else "missing")
    if expected_ok(queued, job_id, gpus):
        got_spec, got = check(core, job_id, gpus)
        assert got_spec is queued[job_id] and got == tuple(int(g) for g in gpus)  # type: ignore[call-overload]
        assert all(type(g) is int for g in got)
    else:
        with pytest.raises(InvalidActionError):
            check(core, job_id, gpus)
