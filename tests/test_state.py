"""SchedulerState: the queue, running jobs, residents and per-GPU load that every backend maintains the same way.

Each transition (submit, start, finish, requeue) is checked against what it documents: who is queued or running,
the telemetry carried across (attained GPU-seconds, OOM failures, preemptions), the residents of each GPU and the
load arrays (sums of predictions and shares over residents), which must return exactly to zero when all leave.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horus.cluster import Cluster, GPUType, Node
from horus.jobs import JobSpec
from horus.predict.base import Prediction, Predictor
from horus.state import GPULoad, QueuedJob, RunningJob, SchedulerState, gpu_share

SMALL = GPUType("small", 8_000, 1.0)
BIG = GPUType("big", 40_000, 2.0)
# (util, mem MiB, iteration time) per (model, GPU type): dyadic values, so sums and differences are exact
TABLE = {("a", "small"): (0.5, 2_000.0, 0.25), ("a", "big"): (0.25, 3_000.0, 0.125),
         ("b", "small"): (0.75, 1_000.0, 0.5), ("b", "big"): (0.375, 1_500.0, 0.25)}


class CountingPredictor(Predictor):
    """Predicts from ``TABLE`` and counts its calls (to observe the per-(job type, GPU type) cache)."""

    name = "counting"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        self.calls.append((job.job_type, gpu_type.name))
        return Prediction(*TABLE[(job.model, gpu_type.name)])


def job(job_id: str, model: str = "a", *, gpus: int = 1, batch: int = 32, iterations: float = 100.0,
        fraction: float | None = None) -> JobSpec:
    return JobSpec(job_id, 0.0, gpus, model, batch, iterations, gpu_fraction=fraction)


def new_state() -> SchedulerState:
    """Node 0: two small GPUs (global 0, 1); node 1: three big GPUs (global 2, 3, 4)."""
    return SchedulerState(Cluster([Node("s", SMALL, 2), Node("b", BIG, 3)]), CountingPredictor())


def assert_empty(state: SchedulerState) -> None:
    assert state.residents == [[] for _ in range(state.cluster.num_gpus)]
    assert state.load.equals(GPULoad.zeros(state.cluster.num_gpus))
    assert state.load.n_residents.dtype == np.int64


# ---- helpers of the module --------------------------------------------------------------------------------
def test_gpu_share_is_the_fraction_or_one_whole_gpu() -> None:
    assert gpu_share(job("w")) == 1.0
    assert gpu_share(job("f", fraction=0.25)) == 0.25
    assert gpu_share(job("g", fraction=1.0)) == 1.0


def test_running_job_iterations_left_and_attained() -> None:
    run = RunningJob(job("r", iterations=100.0), (0, 2, 3), start_time=10.0, attained_gpu_s=7.0)
    assert run.iterations_left == 100.0
    run.iterations_done = 40.0
    assert run.iterations_left == 60.0
    run.iterations_done = 100.0
    assert run.iterations_left == 0.0
    run.iterations_done = 130.0  # telemetry overshoot: never negative
    assert run.iterations_left == 0.0
    assert run.attained(10.0) == 7.0
    assert run.attained(14.0) == 7.0 + 3 * 4.0  # three GPUs for four seconds on top of earlier service


def test_queued_and_running_defaults_are_zero() -> None:
    q = QueuedJob(job("q"), queued_since=3.0)
    assert (q.attained_gpu_s, q.oom_failures, q.preemptions) == (0.0, 0, 0)
    r = RunningJob(job("r"), (0,), 1.0)
    assert (r.attained_gpu_s, r.iterations_done, r.observed_rate, r.oom_failures, r.preemptions) == (0.0, 0.0, 0.0,
                                                                                                      0, 0)


# ---- GPULoad ---------------------------------------------------------------------------------------------
def test_zeros_copy_and_equals() -> None:
    load = GPULoad.zeros(3)
    for arr in (load.pred_util, load.pred_mem_mib, load.n_residents, load.alloc_share):
        assert arr.shape == (3,) and not arr.any()
    assert load.n_residents.dtype == np.int64 and load.pred_util.dtype == float
    assert load.equals(GPULoad.zeros(3))
    assert not load.equals(None)
    assert not load.equals(GPULoad.zeros(4)) and not GPULoad.zeros(4).equals(load)
    assert not load.equals(GPULoad.zeros(2))
    for field in ("pred_util", "pred_mem_mib", "n_residents", "alloc_share"):
        other = load.copy()
        getattr(other, field)[1] = 1
        assert not load.equals(other) and not other.equals(load), field
        assert not getattr(load, field).any(), f"copy shares {field} with the original"
    twin = load.copy()
    assert twin.equals(load) and twin is not load
    big = GPULoad.zeros(300)  # a large cluster compares equal to its copy too
    assert big.equals(big.copy()) and not big.equals(GPULoad.zeros(301))


def test_add_and_remove_workers() -> None:
    load = GPULoad.zeros(4)
    pred = Prediction(0.5, 2_000.0, 0.1)
    load.add([1, 3], pred, 0.25)
    assert load.pred_util.tolist() == [0.0, 0.5, 0.0, 0.5]
    assert load.pred_mem_mib.tolist() == [0.0, 2_000.0, 0.0, 2_000.0]
    assert load.n_residents.tolist() == [0, 1, 0, 1]
    assert load.alloc_share.tolist() == [0.0, 0.25, 0.0, 0.25]
    load.add((3,), Prediction(0.25, 500.0, 0.1), 1.0, sign=+1)
    assert load.pred_util.tolist() == [0.0, 0.5, 0.0, 0.75]
    assert load.n_residents.tolist() == [0, 1, 0, 2] and load.alloc_share.tolist() == [0.0, 0.25, 0.0, 1.25]
    load.add([1, 3], pred, 0.25, sign=-1)
    assert load.pred_util.tolist() == [0.0, 0.0, 0.0, 0.25]
    assert load.pred_mem_mib.tolist() == [0.0, 0.0, 0.0, 500.0]
    assert load.n_residents.tolist() == [0, 0, 0, 1] and load.alloc_share.tolist() == [0.0, 0.0, 0.0, 1.0]


# ---- SchedulerState ----------------------------------------------------------------------------------------
def test_new_state_describes_the_cluster() -> None:
    state = new_state()
    assert state.now == 0.0 and state.queue == {} and state.running == {}
    assert_empty(state)
    assert state.mem_capacity_mib.tolist() == [8_000.0] * 2 + [40_000.0] * 3
    assert state.mem_capacity_mib.dtype == float
    assert state.node_of_gpu.tolist() == [0, 0, 1, 1, 1] and state.node_of_gpu.dtype == np.int64
    assert state.gpu_type_names.tolist() == ["small", "small", "big", "big", "big"]
    assert len(state.load.pred_util) == 5


def test_predict_caches_per_job_type_and_gpu_type() -> None:
    state = new_state()
    predictor = state.predictor
    assert isinstance(predictor, CountingPredictor)
    assert state.predict(job("x"), SMALL) == Prediction(0.5, 2_000.0, 0.25)
    assert state.predict(job("y"), SMALL) == Prediction(0.5, 2_000.0, 0.25)  # same type: cached
    assert predictor.calls == [("a/b32", "small")]
    assert state.predict(job("z"), BIG) == Prediction(0.25, 3_000.0, 0.125)  # other GPU type
    assert state.predict(job("w", batch=64), SMALL) == Prediction(0.5, 2_000.0, 0.25)  # other job type
    assert state.predict(job("v", "b"), SMALL) == Prediction(0.75, 1_000.0, 0.5)
    assert predictor.calls == [("a/b32", "small"), ("a/b32", "big"), ("a/b64", "small"), ("b/b32", "small")]
    state.predict(job("u", "b"), SMALL)
    state.predict(job("t"), BIG)
    assert len(predictor.calls) == 4


def test_submit_queues_in_arrival_order() -> None:
    state = new_state()
    state.submit(job("j2"), 5.0)
    state.submit(job("j1"), 7.0)
    assert list(state.queue) == ["j2", "j1"]
    queued = state.queue["j2"]
    assert queued.spec.job_id == "j2" and queued.queued_since == 5.0
    assert (queued.attained_gpu_s, queued.oom_failures, queued.preemptions) == (0.0, 0, 0)
    assert state.queue["j1"].queued_since == 7.0 and state.running == {}
    assert_empty(state)


def test_start_moves_the_job_and_adds_its_load_on_each_gpu() -> None:
    state = new_state()
    spec = job("j", gpus=2)
    state.submit(spec, 1.0)
    run = state.start("j", (2, 4), 3.0)
    assert state.queue == {} and state.running == {"j": run}
    assert run.spec is spec and run.gpus == (2, 4) and run.start_time == 3.0
    assert (run.attained_gpu_s, run.iterations_done, run.oom_failures, run.preemptions) == (0.0, 0.0, 0, 0)
    assert state.residents == [[], [], ["j"], [], ["j"]]
    assert state.load.pred_util.tolist() == [0.0, 0.0, 0.25, 0.0, 0.25]  # predicted on the big GPUs' type
    assert state.load.pred_mem_mib.tolist() == [0.0, 0.0, 3_000.0, 0.0, 3_000.0]
    assert state.load.n_residents.tolist() == [0, 0, 1, 0, 1]
    assert state.load.alloc_share.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0]


def test_colocated_residents_add_up_and_leave_in_any_order() -> None:
    state = new_state()
    for spec in (job("a1", "a"), job("b1", "b", fraction=0.5), job("a2", "a", fraction=0.25)):
        state.submit(spec, 0.0)
    state.start("a1", (0,), 1.0)
    state.start("b1", (0,), 1.0)
    state.start("a2", (0,), 2.0)
    assert state.residents[0] == ["a1", "b1", "a2"]
    assert state.load.pred_util[0] == 0.5 + 0.75 + 0.5
    assert state.load.pred_mem_mib[0] == 2_000.0 + 1_000.0 + 2_000.0
    assert state.load.n_residents[0] == 3 and state.load.alloc_share[0] == 1.0 + 0.5 + 0.25
    done = state.finish("b1")
    assert done.spec.job_id == "b1" and "b1" not in state.running
    assert state.residents[0] == ["a1", "a2"]
    assert state.load.pred_util[0] == 1.0 and state.load.pred_mem_mib[0] == 4_000.0
    assert state.load.n_residents[0] == 2 and state.load.alloc_share[0] == 1.25
    state.finish("a1")
    assert state.residents[0] == ["a2"] and state.load.alloc_share[0] == 0.25
    state.finish("a2")
    assert state.running == {} and state.queue == {}
    assert_empty(state)


def test_finish_unknown_job_raises_and_changes_nothing() -> None:
    state = new_state()
    state.submit(job("j"), 0.0)
    state.start("j", (1,), 0.0)
    before = state.load.copy()
    with pytest.raises(KeyError):
        state.finish("nope")
    with pytest.raises(KeyError):
        state.start("nope", (0,), 0.0)
    assert state.load.equals(before) and list(state.running) == ["j"]


def test_requeue_after_preemption_keeps_attained_service() -> None:
    state = new_state()
    state.submit(job("j", gpus=2), 0.0)
    state.start("j", (0, 1), 10.0)
    queued = state.requeue("j", 25.0)
    assert state.running == {} and state.queue == {"j": queued}
    assert queued.queued_since == 25.0
    assert queued.attained_gpu_s == 2 * 15.0
    assert (queued.preemptions, queued.oom_failures) == (1, 0)
    assert_empty(state)
    # the next run starts from the kept service and counts; a second requeue adds the new run's service
    run = state.start("j", (3, 4), 30.0)
    assert run.attained_gpu_s == 30.0 and (run.preemptions, run.oom_failures) == (1, 0)
    assert run.attained(31.0) == 32.0
    again = state.requeue("j", 40.0, oom=True)
    assert again.attained_gpu_s == 30.0 + 2 * 10.0
    assert (again.preemptions, again.oom_failures) == (1, 1)
    assert_empty(state)


def test_requeue_after_oom_counts_a_failure_not_a_preemption() -> None:
    state = new_state()
    state.submit(job("j"), 0.0)
    state.start("j", (2,), 4.0)
    queued = state.requeue("j", 4.0, oom=True)
    assert (queued.oom_failures, queued.preemptions) == (1, 0)
    assert queued.attained_gpu_s == 0.0 and queued.queued_since == 4.0
    run = state.start("j", (2,), 5.0)
    assert (run.oom_failures, run.preemptions) == (1, 0)
    assert state.requeue("j", 6.0, oom=True).oom_failures == 2


def test_preemptions_and_oom_failures_accumulate() -> None:
    state = new_state()
    state.submit(job("j"), 0.0)
    for n, oom in enumerate([False, False, True, False, True, True], start=1):
        state.start("j", (n % 5,), float(n))
        queued = state.requeue("j", n + 0.5, oom=oom)
        assert queued.attained_gpu_s == 0.5 * n
    assert (queued.preemptions, queued.oom_failures) == (3, 3)
    assert_empty(state)


def test_requeued_job_goes_to_the_back_of_the_queue() -> None:
    state = new_state()
    state.submit(job("first"), 0.0)
    state.submit(job("second"), 0.0)
    state.start("first", (0,), 1.0)
    state.requeue("first", 2.0)
    assert list(state.queue) == ["second", "first"]


def test_tentative_is_a_private_copy() -> None:
    state = new_state()
    state.submit(job("j"), 0.0)
    state.start("j", (1,), 0.0)
    plan = state.tentative()
    assert plan.equals(state.load) and plan is not state.load
    plan.add([0, 1], Prediction(0.5, 100.0, 1.0), 1.0)
    assert state.load.n_residents.tolist() == [0, 1, 0, 0, 0]
    assert state.load.pred_util.tolist() == [0.0, 0.5, 0.0, 0.0, 0.0]
    assert not plan.equals(state.load)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_transitions_keep_load_equal_to_the_residents(data: st.DataObject) -> None:
    """After any sequence of transitions, each GPU's load is the sum over its residents, and residents are the
    running jobs on it; when every job has left, the load is exactly zero again."""
    state = new_state()
    models = ["a", "b"]
    for n in range(data.draw(st.integers(1, 12), label="jobs")):
        fraction = data.draw(st.sampled_from([None, 0.5, 0.25]))
        gpus = 1 if fraction is not None else data.draw(st.integers(1, 3))
        state.submit(job(f"j{n}", data.draw(st.sampled_from(models)), gpus=gpus, fraction=fraction), float(n))
    now = 0.0
    for _ in range(data.draw(st.integers(0, 30), label="steps")):
        now += 1.0
        action = data.draw(st.sampled_from(["start", "finish", "requeue"]))
        if action == "start" and state.queue:
            job_id = data.draw(st.sampled_from(sorted(state.queue)))
            k = state.queue[job_id].spec.num_gpus
            node = data.draw(st.sampled_from([[0, 1], [2, 3, 4]]))
            if k <= len(node):
                state.start(job_id, tuple(data.draw(st.permutations(node))[:k]), now)
        elif action in ("finish", "requeue") and state.running:
            job_id = data.draw(st.sampled_from(sorted(state.running)))
            if action == "finish":
                state.finish(job_id)
            else:
                state.requeue(job_id, now, oom=data.draw(st.booleans()))
        expected = GPULoad.zeros(5)
        for run in state.running.values():
            gpu_type = state.cluster.gpus[run.gpus[0]].gpu_type
            expected.add(run.gpus, Prediction(*TABLE[(run.spec.model, gpu_type.name)]), gpu_share(run.spec))
        assert np.allclose(state.load.pred_util, expected.pred_util)
        assert np.allclose(state.load.pred_mem_mib, expected.pred_mem_mib)
        assert np.allclose(state.load.alloc_share, expected.alloc_share)
        assert state.load.n_residents.tolist() == expected.n_residents.tolist()
        for g in range(5):
            assert sorted(state.residents[g]) == sorted(j for j, r in state.running.items() if g in r.gpus)
        assert not set(state.queue) & set(state.running)
    for job_id in list(state.running):
        state.finish(job_id)
    assert state.residents == [[] for _ in range(5)]
    assert state.load.n_residents.tolist() == [0] * 5
    assert np.allclose(state.load.pred_util, 0) and np.allclose(state.load.alloc_share, 0)
