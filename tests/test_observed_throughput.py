"""``ObservedThroughput``: what the default ``horus`` policy learns from running jobs' telemetry.

Real ``SchedulerState``s on a small two-type cluster, jobs started by hand, ``observed_rate`` set as a backend
would, ``observe`` called as the policy does at each scheduling call. The prior is a real ``SlowdownEstimator``
over a fixed-table interference model, so every expected number below is worked out by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from horus.cluster import Cluster, GPUType, Node
from horus.interference.base import InterferenceModel
from horus.interference.data import JobFeatures, Observation
from horus.interference.slowdown import SlowdownEstimator
from horus.jobs import JobSpec
from horus.interference.observed import ObservedThroughput
from horus.predict.base import Prediction, Predictor
from horus.state import RunningJob, SchedulerState

V100 = GPUType("v100", 16_000, 1.0)
A100 = GPUType("a100", 40_000, 2.0)
A, B, C, Z = "a/b1", "b/b1", "c/b1", "z/b1"  # job types of models a, b, c, z (batch 1)


class TablePredictor(Predictor):
    """Predicted iteration time and utilization per (model, GPU type name); defaults 1 s and 0.5."""

    name = "table"

    def __init__(self, iter_time: dict[tuple[str, str], float] | None = None,
                 util: dict[str, float] | None = None) -> None:
        self.iter_time = iter_time or {}
        self.util = util or {}

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        return Prediction(self.util.get(job.model, 0.5), 1000.0, self.iter_time.get((job.model, gpu_type.name), 1.0))


class TableModel(InterferenceModel):
    """Prior throughputs per sorted type set (``0.6`` each for a set not in the table)."""

    name = "table-prior"

    def __init__(self, table: dict[tuple[str, ...], list[float]] | None = None) -> None:
        super().__init__(JobFeatures(graph={}))
        self.table = table or {}

    def fit(self, observations: Sequence[Observation]) -> TableModel:
        return self

    def predict_one(self, target: str, corunners: Sequence[str], gpu: GPUType | str) -> float:
        return self.predict([target, *corunners], gpu)[0]

    def predict(self, job_types: Sequence[str], gpu: GPUType | str) -> list[float]:
        return list(self.table.get(tuple(job_types), [0.6] * len(job_types)))


def make_state(v100: int = 3, a100: int = 1, **predictor: dict) -> SchedulerState:
    """GPUs 0..v100-1 are V100s, the next ``a100`` are A100s; ``state.now`` starts at 1."""
    state = SchedulerState(Cluster([Node("v", V100, v100), Node("a", A100, a100)]), TablePredictor(**predictor))
    state.now = 1.0
    return state


def spec(job_id: str, model: str = "a", gpus: int = 1) -> JobSpec:
    return JobSpec(job_id, 0.0, gpus, model, 1, 1e6)


def put(state: SchedulerState, job_id: str, gpus: tuple[int, ...], rate: float, model: str = "a") -> RunningJob:
    """Submit and start a job on ``gpus`` with telemetry ``rate`` (0: no rate reported yet)."""
    state.submit(spec(job_id, model, len(gpus)), state.now)
    run = state.start(job_id, gpus, state.now)
    run.observed_rate = rate
    return run


def tracker(table: dict[tuple[str, ...], list[float]] | None = None, **options: float) -> ObservedThroughput:
    return ObservedThroughput(SlowdownEstimator(TableModel(table), "test table"), **options)


# ---- solo rates ---------------------------------------------------------------------------------------------
def test_solo_samples_of_a_type_average_per_gpu_type_and_count() -> None:
    state = make_state()
    for jid, gpu, rate in (("A1", 0, 2.0), ("A2", 1, 4.0), ("A3", 2, 9.0), ("A4", 3, 20.0)):
        put(state, jid, (gpu,), rate)
    obs = tracker()
    obs.observe(state)
    assert obs.solo[(A, "v100")] == (pytest.approx(5.0), 3)
    assert obs.solo[(A, "a100")] == (pytest.approx(20.0), 1)
    assert obs.job_solo == {("A1", "v100"): 2.0, ("A2", "v100"): 4.0, ("A3", "v100"): 9.0, ("A4", "a100"): 20.0}
    assert obs.solo_rate(spec("A9"), V100, state) == pytest.approx(5.0)  # a job never seen: its type's mean
    assert obs.samples == 0 and obs.sets == {} and obs.residual == {}  # solo runs are no set samples
    # A later sample (after the periodic rescan) joins the running mean.
    state.running["A1"].observed_rate = 6.0
    state.now += obs.rescan_s
    obs.observe(state)
    assert obs.solo[(A, "v100")] == (pytest.approx((5.0 * 3 + 6.0 + 4.0 + 9.0) / 6), 6)
    assert obs.job_solo[("A1", "v100")] == 6.0  # a job's own rate: the latest one


def test_a_jobs_own_solo_rate_comes_before_its_types_and_its_types_before_the_prediction() -> None:
    # Predicted solo iteration times: a 0.25 s and b 0.5 s on V100, b 0.2 s on A100.
    state = make_state(iter_time={("a", "v100"): 0.25, ("b", "v100"): 0.5, ("b", "a100"): 0.2})
    put(state, "A1", (0,), 3.0)
    put(state, "A2", (1,), 5.0)
    obs = tracker()
    obs.observe(state)
    assert obs.solo_rate(spec("A1"), V100, state) == 3.0
    assert obs.solo_rate(spec("A2"), V100, state) == 5.0
    assert obs.solo_rate(spec("A9"), V100, state) == pytest.approx(4.0)
    # Type b never ran: its predicted 1/0.5 it/s times the predictor's observed bias on V100, the geometric mean
    # of observed * predicted iteration time (3 * 0.25 and 5 * 0.25).
    assert obs.log_bias == {"v100": (pytest.approx((math.log(0.75) + math.log(1.25)) / 2), 2)}
    assert obs.solo_rate(spec("B1", "b"), V100, state) == pytest.approx(math.sqrt(0.75 * 1.25) / 0.5)
    assert obs.solo_rate(spec("B1", "b"), A100, state) == pytest.approx(1 / 0.2)  # no bias seen on A100
    assert obs.solo_rate(spec("A1"), A100, state) == pytest.approx(1.0)  # its own rate on V100 is not for A100


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan])
def test_a_predicted_iteration_time_that_is_not_positive_gives_no_bias_and_an_infinite_rate(bad: float) -> None:
    state = make_state(iter_time={("z", "v100"): bad, ("z", "a100"): bad})
    put(state, "Z1", (0,), 2.0, model="z")
    obs = tracker()
    obs.observe(state)
    assert obs.solo[(Z, "v100")] == (2.0, 1) and obs.log_bias == {}
    assert obs.solo_rate(spec("Z2", "z"), A100, state) == math.inf


# ---- co-located sets ----------------------------------------------------------------------------------------
def pair_on_gpu0(state: SchedulerState, obs: ObservedThroughput, rate_a: float, rate_b: float) -> None:
    """A1 alone on GPU 0 at 2 it/s (observed), then B1 joins it; both report the given rates."""
    put(state, "A1", (0,), 2.0)
    obs.observe(state)
    put(state, "B1", (0,), rate_b, model="b")
    state.running["A1"].observed_rate = rate_a
    state.now += 1.0
    obs.observe(state)


def test_a_set_sample_is_each_rate_over_its_solo_rate_capped_at_one() -> None:
    # a: its own solo rate 2; b never ran alone: predicted 1/0.5 = 2 it/s (bias log(2 * 0.5) = 0).
    state = make_state(iter_time={("a", "v100"): 0.5, ("b", "v100"): 0.5})
    obs = tracker()
    pair_on_gpu0(state, obs, rate_a=1.0, rate_b=3.0)
    assert obs.samples == 1
    x, n = obs.sets[("v100", (A, B))]
    assert n == 1 and list(x) == [pytest.approx(0.5), 1.0]  # b: 3 / 2 = 1.5, capped at 1
    est = obs.estimate([A, B], V100)
    assert est.x == [pytest.approx(0.5), 1.0] and est.observed == 1
    assert est.sigma == pytest.approx(obs.obs_sigma) and est.combined == pytest.approx(1.5)
    assert obs.estimate([B, A], V100).x == [1.0, pytest.approx(0.5)]  # the order of the types given
    assert obs.residual == {(A, "v100"): (pytest.approx(0.5 - 0.6), 1), (B, "v100"): (pytest.approx(1.0 - 0.6), 1)}


def test_unseen_sets_take_the_prior_corrected_by_each_types_mean_residual_clipped() -> None:
    prior = {(A, B): [0.6, 0.6], (A, C): [0.95, 0.5], (B, C): [0.1, 0.5]}
    state = make_state(iter_time={("a", "v100"): 0.5, ("b", "v100"): 0.5})
    obs = tracker(prior, prior_sigma=0.2)
    pair_on_gpu0(state, obs, rate_a=1.8, rate_b=0.6)  # x = 0.9 and 0.3: residuals +0.3 (a) and -0.3 (b)
    est = obs.estimate([C, A], V100)
    assert est.x == [pytest.approx(0.5), 1.0]  # c: no residual; a: 0.95 + 0.3 clipped to 1
    assert est.sigma == 0.2 and est.observed == 0
    assert obs.estimate([B, C], V100).x == [0.02, pytest.approx(0.5)]  # b: 0.1 - 0.3 clipped to 0.02
    assert obs.estimate([A, C], A100).x == [pytest.approx(0.95), pytest.approx(0.5)]  # residuals are per GPU type
    # A second set with a: its residual is the mean over the sets it was seen in.
    put(state, "A2", (1,), 1.0)
    put(state, "C1", (1,), 1.0, model="c")  # c predicted 1 it/s alone: x = 1
    state.now += 1.0
    obs.observe(state)  # a: its type's solo rate 2 -> x = 0.5, prior 0.95: residual -0.45
    assert obs.residual[(A, "v100")] == (pytest.approx((0.3 - 0.45) / 2), 2)
    assert obs.estimate([A, B], V100).observed == 1  # seen: the running mean, no prior
    assert obs.estimate([A, A], V100).x == [pytest.approx(0.6 - 0.075)] * 2


def test_set_samples_average_and_an_identical_repeat_is_not_counted() -> None:
    state = make_state(iter_time={("a", "v100"): 0.5, ("b", "v100"): 0.5})
    obs = tracker(rescan_s=100.0, obs_sigma=0.1)
    pair_on_gpu0(state, obs, rate_a=1.0, rate_b=1.6)  # x = 0.5, 0.8
    state.running["A1"].observed_rate = 1.0 + 1e-12
    state.now += 100.0
    obs.observe(state)  # the rescan reads the same rates (up to float noise): nothing new
    assert obs.samples == 1 and obs.sets[("v100", (A, B))][1] == 1
    assert obs.residual[(B, "v100")][1] == 1
    state.running["A1"].observed_rate = 1.4  # x = 0.7
    state.running["B1"].observed_rate = 1.0  # x = 0.5
    state.now += 50.0
    obs.observe(state)  # a repeat left nothing waiting: not read before the next rescan
    assert obs.samples == 1
    state.now += 50.0
    obs.observe(state)
    x, n = obs.sets[("v100", (A, B))]
    assert n == 2 and list(x) == [pytest.approx(0.6), pytest.approx(0.65)]
    est = obs.estimate([B, A], V100)
    assert est.x == [pytest.approx(0.65), pytest.approx(0.6)] and est.observed == 2
    assert est.sigma == pytest.approx(0.1 / math.sqrt(2))
    assert obs.samples == 2 and obs.residual[(B, "v100")] == (pytest.approx(0.65 - 0.6), 2)


def test_estimates_are_cached_until_a_new_sample_arrives() -> None:
    state = make_state(iter_time={("a", "v100"): 0.5, ("b", "v100"): 0.5})
    obs = tracker(rescan_s=100.0)
    pair_on_gpu0(state, obs, rate_a=1.0, rate_b=1.0)
    first = obs.estimate([A, B], V100)
    assert obs.estimate([A, B], V100) is first
    unseen = obs.estimate([A, C], V100)
    assert unseen.x == [pytest.approx(0.6 - 0.1), pytest.approx(0.6)]
    state.running["A1"].observed_rate = 2.0  # x = 1
    state.now += 100.0
    obs.observe(state)
    assert obs.estimate([A, B], V100).x == [pytest.approx(0.75), pytest.approx(0.5)]
    assert obs.estimate([A, C], V100).x == [pytest.approx(0.6 + (-0.1 + 0.4) / 2), pytest.approx(0.6)]


def test_single_type_and_empty_sets_need_no_belief() -> None:
    state = make_state(iter_time={("a", "v100"): 0.5, ("b", "v100"): 0.5})
    obs = tracker()
    pair_on_gpu0(state, obs, rate_a=0.2, rate_b=1.0)  # a's residual -0.5
    one = obs.estimate([A], V100)
    assert (one.x, one.sigma, one.observed) == ([1.0], 0.0, 0)
    none = obs.estimate([], V100)
    assert (none.x, none.sigma, none.observed) == ([], 0.0, 0)


# ---- which GPUs are read when -------------------------------------------------------------------------------
def test_an_unchanged_gpu_is_reread_only_every_rescan_s_of_state_time() -> None:
    state = make_state(v100=299)  # more than 256 GPUs
    state.now = 1000.0
    put(state, "A1", (0,), 2.0)
    obs = tracker()
    assert obs.rescan_s == 1800.0
    obs.observe(state)
    state.running["A1"].observed_rate = 4.0
    for now in (1100.0, 2799.0):  # residents unchanged, rates changed: not read
        state.now = now
        obs.observe(state)
        assert obs.solo[(A, "v100")] == (2.0, 1) and obs.job_solo[("A1", "v100")] == 2.0
    state.now = 2800.0  # rescan_s after the last full read
    obs.observe(state)
    assert obs.solo[(A, "v100")] == (pytest.approx(3.0), 2)
    state.running["A1"].observed_rate = 6.0
    state.now = 4599.0
    obs.observe(state)
    assert obs.solo[(A, "v100")][1] == 2  # the next rescan counts from 2800, not from 1000
    state.now = 4600.0
    obs.observe(state)
    assert obs.solo[(A, "v100")] == (pytest.approx(4.0), 3)
    state.running["A1"].observed_rate = 8.0
    state.now = 6500.0  # a first call later than rescan_s after the last rescan also rescans
    obs.observe(state)
    assert obs.solo[(A, "v100")] == (pytest.approx(5.0), 4)


def test_gpus_whose_residents_changed_are_read_at_once() -> None:
    state = make_state(util={"a": 0.5, "c": 0.3})
    put(state, "A1", (0,), 2.0)
    obs = tracker()
    obs.observe(state)
    state.finish("A1")
    put(state, "C1", (0,), 3.0, model="c")  # same count of residents, lower predicted utilization
    put(state, "A2", (1,), 5.0)
    state.now += 1.0
    obs.observe(state)
    assert obs.solo == {(A, "v100"): (pytest.approx(3.5), 2), (C, "v100"): (3.0, 1)}
    state.finish("C1")
    put(state, "A3", (0,), 8.0)  # same count, higher predicted utilization
    state.now += 1.0
    obs.observe(state)
    assert obs.solo[(A, "v100")] == (pytest.approx(5.0), 3)


def test_a_resident_replaced_by_one_of_the_same_predicted_load_is_read_at_once() -> None:
    state = make_state()
    put(state, "A1", (0,), 2.0)
    obs = tracker()
    obs.observe(state)
    put(state, "A2", (0,), 1.0)  # joins after the call...
    state.finish("A1")  # ...and its co-runner finishes before the next one: A2 alone, same count and load
    state.running["A2"].observed_rate = 4.0
    state.now += 1.0
    obs.observe(state)
    assert obs.job_solo.get(("A2", "v100")) == 4.0


def test_a_change_in_the_number_of_residents_alone_is_seen() -> None:
    # z is predicted to use no compute: it joining or leaving changes only the count of residents.
    state = make_state(util={"z": 0.0})
    put(state, "A1", (0,), 2.0)
    obs = tracker()
    obs.observe(state)
    put(state, "Z1", (0,), 1.0, model="z")
    state.now += 1.0
    obs.observe(state)  # z alone predicted 1 it/s, times the observed bias 2 (a: 2 it/s, predicted 1)
    assert obs.samples == 1 and obs.estimate([A, Z], V100).x == [pytest.approx(1.0), pytest.approx(0.5)]
    state.finish("Z1")
    state.now += 1.0
    obs.observe(state)
    assert obs.solo[(A, "v100")] == (2.0, 2)


def test_a_new_state_object_is_read_whole() -> None:
    first = make_state()
    put(first, "A1", (0,), 2.0)
    obs = tracker()
    obs.observe(first)
    second = make_state()  # same shape and load, another job: everything is read again
    put(second, "A2", (0,), 4.0)
    obs.observe(second)
    assert obs.solo[(A, "v100")] == (pytest.approx(3.0), 2) and obs.job_solo[("A2", "v100")] == 4.0


def test_gpus_whose_jobs_had_no_rate_yet_are_retried_until_they_report() -> None:
    state = make_state()
    put(state, "A1", (0,), 0.0)  # just started: no rate yet
    put(state, "A2", (1,), 2.0)
    obs = tracker()
    obs.observe(state)
    assert obs.solo[(A, "v100")] == (2.0, 1) and ("A1", "v100") not in obs.job_solo
    assert obs._pending == {0}  # idle GPUs and read ones are not kept
    state.now += 1.0
    obs.observe(state)  # still no rate: still waiting
    assert obs.solo[(A, "v100")][1] == 1
    state.running["A1"].observed_rate = 4.0
    state.now += 1.0
    obs.observe(state)  # no resident changed, but GPU 0 waited for a rate
    assert obs.solo[(A, "v100")] == (pytest.approx(3.0), 2) and obs.job_solo[("A1", "v100")] == 4.0
    state.running["A1"].observed_rate = 8.0
    state.now += 1.0
    obs.observe(state)  # read: no longer waiting
    assert obs.solo[(A, "v100")][1] == 2 and obs._pending == set()


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_a_rate_that_is_not_positive_counts_as_no_rate_yet(bad: float) -> None:
    state = make_state()
    put(state, "A1", (0,), bad)
    obs = tracker()
    obs.observe(state)
    assert obs.solo == {} and obs.job_solo == {} and obs.log_bias == {} and obs._pending == {0}
    state.running["A1"].observed_rate = 2.0
    state.now += 1.0
    obs.observe(state)
    assert obs.solo == {(A, "v100"): (2.0, 1)}


def test_a_waiting_gpu_whose_residents_change_is_read_once_its_rates_appear() -> None:
    state = make_state(iter_time={("a", "v100"): 0.5, ("b", "v100"): 0.5})
    put(state, "A1", (0,), 0.0)
    obs = tracker()
    obs.observe(state)
    put(state, "B1", (0,), 1.0, model="b")  # joins while A1 still has no rate: a set without a sample
    state.now += 1.0
    obs.observe(state)
    assert obs.samples == 0
    state.running["A1"].observed_rate = 1.5
    state.now += 1.0
    obs.observe(state)
    assert obs.samples == 1  # a: predicted 2 it/s alone -> 0.75; b: 0.5
    assert obs.estimate([A, B], V100).x == [pytest.approx(0.75), pytest.approx(0.5)]


def test_one_read_per_change_solo_and_set_rates_are_not_reread_early() -> None:
    state = make_state(iter_time={("a", "v100"): 0.5, ("b", "v100"): 0.5})
    obs = tracker()
    pair_on_gpu0(state, obs, rate_a=1.0, rate_b=1.0)
    put(state, "A2", (1,), 3.0)
    state.now += 1.0
    obs.observe(state)
    state.running["A1"].observed_rate = 0.5
    state.running["A2"].observed_rate = 5.0
    state.now += 1.0
    obs.observe(state)
    assert obs.samples == 1 and obs.sets[("v100", (A, B))][1] == 1
    assert obs.solo[(A, "v100")] == (pytest.approx(2.5), 2)


# ---- gangs --------------------------------------------------------------------------------------------------
def test_a_gang_alone_on_all_its_gpus_records_only_its_own_solo_rate() -> None:
    state = make_state()
    put(state, "G", (0, 1), 1.5)
    obs = tracker()
    obs.observe(state)
    assert obs.job_solo == {("G", "v100"): 1.5}
    assert obs.solo == {} and obs.log_bias == {} and obs.sets == {}
    assert obs.solo_rate(spec("G", gpus=2), V100, state) == 1.5
    state.running["G"].observed_rate = 3.0
    state.now += 1.0
    obs.observe(state)  # nothing changed: not read again before the rescan
    assert obs.job_solo == {("G", "v100"): 1.5}


def test_gpus_shared_with_a_gang_give_no_samples() -> None:
    state = make_state(iter_time={("a", "v100"): 0.5})
    put(state, "G", (0, 1), 1.5)
    put(state, "X", (1,), 1.0)  # shares GPU 1 with the gang; the gang is alone on GPU 0 only
    put(state, "Y", (2,), 2.0)
    obs = tracker()
    obs.observe(state)
    assert obs.job_solo == {("Y", "v100"): 2.0}
    assert obs.solo == {(A, "v100"): (2.0, 1)} and obs.sets == {} and obs.samples == 0 and obs.residual == {}


def test_defaults_and_description() -> None:
    obs = tracker()
    assert obs.describe() == {"prior": {"interference_model": "table-prior", "interference_source": "test table"},
                              "prior_sigma": 0.15, "obs_sigma": 0.05, "rescan_s": 1800.0, "min_samples": 3, "max_samples": 32}
    assert obs.samples == 0
    prior = SlowdownEstimator(TableModel(), "test table")
    assert ObservedThroughput(prior=prior, rescan_s=5.0).rescan_s == 5.0
    with pytest.raises(TypeError):
        ObservedThroughput(prior, 0.2)  # the options are keyword-only


def test_jobs_without_a_model_teach_nothing_about_types_and_do_not_fail() -> None:
    """The live service runs jobs without a model (job type '/b0', a placeholder prediction). Two of them sharing
    a GPU by request made every scheduling step fail ('expected <model>/b<batch>, got /b0'); alone, one would
    have skewed the predictor's speed bias on its GPU type. Neither happens: only its own solo rate is kept."""
    from horus.gpu_types import PRESETS
    from horus.interference.slowdown import estimator_for
    from horus.plugins import load_all
    from horus.predict.base import PREDICTORS
    from horus.service.predictor import ServicePredictor
    from horus.state import SchedulerState

    load_all("horus.predict")
    predictor = ServicePredictor(PREDICTORS.create("physical"))
    state = SchedulerState(Cluster([Node("n0", PRESETS["V100"], 2)]), predictor)
    for job_id, gpu in (("a", 0), ("b", 0), ("c", 1)):
        state.submit(JobSpec(job_id, 0.0, 1, "", 0, 100.0, gpu_fraction=0.5 if gpu == 0 else None), 0.0)
        state.start(job_id, (gpu,), 0.0)
        state.running[job_id].observed_rate = 2.0
    tracker = ObservedThroughput(estimator_for(None, predictor))
    tracker.observe(state)
    assert tracker.samples == 0 and tracker.sets == {} and tracker.solo == {} and tracker.log_bias == {}
    assert tracker.job_solo == {("c", "V100"): 2.0}


def test_pending_gpus_of_a_larger_cluster_are_dropped_when_the_state_is_rebuilt_smaller() -> None:
    """The live service rebuilds its state when a machine is lost: GPUs that waited for a rate on the old, larger
    cluster must not be looked up in the new one (an IndexError failed every scheduling step for a while)."""
    big = make_state(v100=3, a100=1)
    put(big, "A1", (3,), 0.0)  # no rate yet: GPU 3 stays pending
    obs = tracker()
    obs.observe(big)
    assert obs._pending == {3}
    small = make_state(v100=2, a100=0)
    put(small, "A2", (1,), 2.0)
    obs.observe(small)
    assert obs._pending == set() and obs.job_solo[("A2", "v100")] == 2.0


def test_a_set_with_a_job_without_a_model_gets_the_whole_gpu_belief() -> None:
    """Regression (issue 28): the live service's jobs without a model have type ``/b0``; the summed-utilization
    prior raised on it ("expected '<model>/b<batch>', got '/b0'"), failing every scheduling step while such a job
    shared a GPU. It now gets the service predictor's whole-GPU belief (utilization 1, 95 % of the memory)."""
    from horus.gpu_types import preset
    from horus.interference.slowdown import estimator_for
    from horus.predict.analytic import AnalyticPredictor
    from horus.service.predictor import ServicePredictor

    tracker = ObservedThroughput(estimator_for(None, ServicePredictor(AnalyticPredictor())))
    v100 = preset("V100")
    pair = tracker.estimate(["/b0", "resnet50/b64"], v100)
    assert 0 < min(pair.x) and max(pair.x) <= 1 / (1 + 1e-3)  # summed utilization above 1: each member slowed
    two = tracker.estimate(["/b0", "/b0"], v100)
    assert two.x == pytest.approx([0.5, 0.5])
