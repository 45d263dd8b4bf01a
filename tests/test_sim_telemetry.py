"""Simulated telemetry (``horus.sim.telemetry``): the exact model as before, the noisy model's warm-up, report
period and noise, and ``ObservedThroughput`` learning a set from many noisy reports (docs/simulator.md,
"Telemetry")."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable

import pandas as pd
import pytest
from sim_fakes import ConstPredictor, ToyTruth, cluster, job, toy_catalog_rows

import horus.catalog
from horus.cluster import Cluster, GPUType, Node
from horus.core import create_policy
from horus.interference.observed import ObservedThroughput
from horus.interference.slowdown import estimator_for
from horus.policies.base import Action, Policy, Preempt, Start
from horus.sim.engine import SimConfig, _Engine, simulate
from horus.sim.telemetry import TELEMETRY_MODELS, Attempt, NoisyTelemetry, Reads, ReportedRun, create_telemetry
from horus.state import SchedulerState
from horus.truth.base import SoloTruth

PARAMS = {"toya": 25_000_000, "toyb": 1_000_000}


@pytest.fixture(autouse=True)
def toy_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    models = toy_catalog_rows(PARAMS)
    monkeypatch.setattr(horus.catalog, "load_catalog", lambda: models)


def truth() -> ToyTruth:
    """toya: 1 s per iteration alone (util 0.6); toyb: 0.5 s (util 0.3); together both run at 1 / 0.9 -> 1."""
    return ToyTruth({"toya/b1": SoloTruth(0.6, 4000.0, 1.0), "toyb/b1": SoloTruth(0.3, 2000.0, 0.5)})


class Recorder(Policy):
    """Asked every ``tick_s`` while jobs run; records what each running job reports at every call, before acting:
    (now, job, rate, iterations done, reported at). Starts queued jobs on GPU 0: one at a time, ``B`` preempting
    ``A`` (``share=False``), or all of them sharing it (``share=True``)."""

    name = "recorder"
    acts_on_running = True

    def __init__(self, tick_s: float = 10.0, share: bool = False) -> None:
        self.tick_s = tick_s
        self.share = share
        self.seen: list[tuple[float, str, float, float, float | None]] = []

    def schedule(self, state: SchedulerState) -> list[Action]:
        for job_id, run in state.running.items():
            self.seen.append((state.now, job_id, run.observed_rate, run.iterations_done, run.reported_at))
        if self.share:
            return [Start(j, (0,)) for j in list(state.queue)]
        if "B" in state.queue and "A" in state.running:
            return [Preempt("A"), Start("B", (0,))]
        if state.running:
            return []
        return [Start(j, (0,)) for j in list(state.queue)[:1]]

    def at(self, now: float, job_id: str) -> tuple[float, float, float | None]:
        found = [s[2:] for s in self.seen if s[0] == now and s[1] == job_id]
        assert found, f"no call at {now} with {job_id} running"
        return found[0]


def preemption_run(config: SimConfig) -> Recorder:
    """A (100 it at 1 it/s) from 0; B (10 it at 2 it/s) arrives at 40 and preempts it; B ends at 45 and A
    restarts there with a 30 s restore stall (until 75): 60 iterations left, A ends at 135. The policy is asked
    at 0, 10, 20, 30, 40, 45, 50, 60, ... (its tick and the events)."""
    policy = Recorder()
    result = simulate([job("A", 0.0, 100), job("B", 40.0, 10, model="toyb")], cluster(), policy, truth(),
                      ConstPredictor(), config)
    assert result.jobs.set_index("job_id").loc["A", "end"] == pytest.approx(135.0)  # telemetry changes no truth
    return policy


NOISELESS = {"period_s": 10.0, "sigma": 0.0, "warmup_iterations": 20.0}


# ---- exact: today's behaviour --------------------------------------------------------------------------------
def test_exact_telemetry_is_the_true_rate_at_once_even_during_the_restore_stall() -> None:
    policy = preemption_run(SimConfig())
    assert policy.at(10.0, "A") == (1.0, 0.0, None)  # progress as of the last rate change (the start), not now
    assert policy.at(40.0, "A") == (1.0, 0.0, None)
    assert policy.at(50.0, "A") == (1.0, 40.0, None)  # inside the restore stall: the rate after it, at once
    assert policy.at(130.0, "A") == (1.0, 40.0, None)
    assert SimConfig(telemetry="exact").describe() == SimConfig().describe()


def test_the_default_config_is_exact_and_described_as_json() -> None:
    config = SimConfig()
    assert config.telemetry == "exact" and config.telemetry_model().instant
    assert json.loads(json.dumps(config.describe()))["telemetry"] == "exact"
    noisy = SimConfig(telemetry="noisy", telemetry_options={"sigma": 0.1}).describe()
    assert json.loads(json.dumps(noisy))["telemetry_options"] == {"period_s": 60.0, "sigma": 0.1,
                                                                  "warmup_iterations": 50.0, "seed": 0}
    assert set(TELEMETRY_MODELS.names()) >= {"exact", "noisy"}


def test_bad_models_and_options_are_refused() -> None:
    with pytest.raises(KeyError, match="unknown telemetry model"):
        create_telemetry("perfect")
    for bad in ({"period_s": 0.0}, {"sigma": -0.1}, {"sigma": math.nan}, {"warmup_iterations": -1.0}):
        with pytest.raises(ValueError):
            create_telemetry("noisy", bad)
    with pytest.raises(TypeError):
        create_telemetry("noisy", {"jitter": 0.1})
    with pytest.raises(KeyError):
        simulate([job("A", 0.0, 10)], cluster(), Recorder(), truth(), ConstPredictor(), SimConfig(telemetry="nope"))


# ---- noisy: warm-up, stall, period ---------------------------------------------------------------------------
def test_no_rate_before_the_warm_up_iterations_and_the_stall_is_not_counted() -> None:
    policy = preemption_run(SimConfig(telemetry="noisy", telemetry_options=NOISELESS))
    # First attempt: reports at 10, 20, 30, 40; 20 iterations are done at 20 s.
    assert policy.at(10.0, "A") == (0.0, 10.0, 10.0)
    assert policy.at(20.0, "A") == (1.0, 20.0, 20.0)
    assert policy.at(40.0, "A") == (1.0, 40.0, 40.0)
    # Restarted at 45, stalled until 75: reports at 55, 65, 75 carry no progress; 20 iterations after the stall
    # are done at 95 (a warm-up counted from the restart, 20 s at 1 it/s, would be over at 65).
    assert policy.at(50.0, "A") == (0.0, 40.0, 45.0)  # no report yet: its checkpoint's progress, no rate
    assert policy.at(60.0, "A") == (0.0, 40.0, 55.0)
    assert policy.at(70.0, "A") == (0.0, 40.0, 65.0)
    assert policy.at(80.0, "A") == (0.0, 40.0, 75.0)
    assert policy.at(90.0, "A") == (0.0, 50.0, 85.0)
    assert policy.at(100.0, "A") == (1.0, 60.0, 95.0)


def test_a_new_job_reports_nothing_before_its_first_period() -> None:
    policy = preemption_run(SimConfig(telemetry="noisy", telemetry_options={**NOISELESS, "period_s": 20.0}))
    assert policy.at(10.0, "A") == (0.0, 0.0, 0.0)
    assert policy.at(20.0, "A") == (1.0, 20.0, 20.0)


def test_reports_lag_by_up_to_a_period() -> None:
    # B arrives at 25 and shares A's GPU, which halves both rates (utilization 1 each); reports every 20 s.
    slow = ToyTruth({"toya/b1": SoloTruth(1.0, 4000.0, 1.0), "toyb/b1": SoloTruth(1.0, 2000.0, 1.0)})
    policy = Recorder(tick_s=5.0, share=True)
    config = SimConfig(telemetry="noisy", telemetry_options={"period_s": 20.0, "sigma": 0.0, "warmup_iterations": 5.0})
    simulate([job("A", 0.0, 200), job("B", 25.0, 200, model="toyb")], cluster(), policy, slow, ConstPredictor(), config)
    assert policy.at(25.0, "A") == (1.0, 20.0, 20.0)  # B joined at 25: the report of 20 still says 1 it/s
    assert policy.at(35.0, "A") == (1.0, 20.0, 20.0)
    assert policy.at(40.0, "A") == (0.5, 32.5, 40.0)  # 25 it at 25 s, then 0.5 it/s
    assert policy.at(40.0, "B") == (0.0, 0.0, 25.0)  # B's first report is due at 45


def test_noise_is_deterministic_by_seed_and_within_its_spread() -> None:
    config = {"period_s": 10.0, "sigma": 0.05, "warmup_iterations": 20.0}
    runs = {seed: preemption_run(SimConfig(telemetry="noisy", telemetry_options={**config, "seed": seed})).seen
            for seed in (1, 2)}
    assert runs[1] == preemption_run(SimConfig(telemetry="noisy", telemetry_options={**config, "seed": 1})).seen
    rates = {seed: [s[2] for s in seen if s[1] == "A" and s[2] > 0] for seed, seen in runs.items()}
    assert rates[1] != rates[2]
    assert all(abs(math.log(r)) < 4 * 0.05 for r in rates[1] + rates[2])  # the true rate is 1 it/s
    assert [s[3] for s in runs[1]] == [s[3] for s in runs[2]]  # progress is a counter: never noisy

    model = NoisyTelemetry(sigma=0.05, seed=7)
    logs = [math.log(model.noise("j", 0, i)) for i in range(1, 4001)]
    assert abs(statistics.fmean(logs)) < 4 * 0.05 / math.sqrt(len(logs))
    assert statistics.stdev(logs) == pytest.approx(0.05, rel=0.05)
    assert model.noise("j", 0, 5) == NoisyTelemetry(sigma=0.05, seed=7).noise("j", 0, 5)
    others = {model.noise("k", 0, 5), model.noise("j", 1, 5), model.noise("j", 0, 6),
              NoisyTelemetry(sigma=0.05, seed=8).noise("j", 0, 5)}
    assert model.noise("j", 0, 5) not in others and len(others) == 4
    assert NoisyTelemetry(sigma=0.0).noise("j", 0, 5) == 1.0


def test_an_attempt_answers_the_rate_and_progress_in_effect_at_any_later_time() -> None:
    run = Attempt("j", 0, started=100.0, stall_until=130.0, progress=40.0)
    run.change(100.0, 2.0, 40.0)
    run.change(150.0, 1.0, 80.0)
    assert run.at(120.0) == (2.0, 40.0)  # stalled: no progress yet
    assert run.at(140.0) == (2.0, 60.0)
    assert run.at(160.0) == (1.0, 90.0)
    assert len(run.changes) == 1  # the change before the one in effect is no longer needed


# ---- ObservedThroughput under noisy reports ------------------------------------------------------------------
V100 = GPUType("v100", 16_000, 1.0)
A, B = "toya/b1", "toyb/b1"


def reporting_state() -> SchedulerState:
    state = SchedulerState(Cluster([Node("n", V100, 3)]), ConstPredictor())
    state.now = 1.0
    return state


def report(state: SchedulerState, rates: dict[str, float], noise: NoisyTelemetry, index: int) -> None:
    """Every job in ``rates`` reports its true rate times the model's noise of report ``index``, at ``state.now``."""
    for job_id, rate in rates.items():
        run = state.running[job_id]
        run.observed_rate = rate * noise.noise(job_id, 0, index)
        run.reported_at = state.now


def test_noisy_samples_of_a_set_converge_to_the_true_x_and_sigma_shrinks_with_them() -> None:
    # A (2 it/s alone) and B (4 it/s alone) first report alone on GPUs 0 and 1 (noise 5 %), then share GPU 2 at
    # x = 0.6 and 0.3 (noise 20 %, so that the spread of the samples, not the obs_sigma floor, sets sigma).
    solo_noise, pair_noise = NoisyTelemetry(sigma=0.05, seed=3), NoisyTelemetry(sigma=0.2, seed=4)
    state = reporting_state()
    for job_id, model, gpu in (("A", "toya", 0), ("B", "toyb", 1)):
        state.submit(job(job_id, 0.0, 1e6, model=model), 1.0)
        state.start(job_id, (gpu,), 1.0)
    tracker = ObservedThroughput(estimator_for(None, state.predictor), max_samples=1000)
    for i in range(1, 31):
        report(state, {"A": 2.0, "B": 4.0}, solo_noise, i)
        tracker.observe(state)
        state.now += 60.0
    solo = {j: tracker.job_solo[(j, "v100")] for j in ("A", "B")}
    assert solo == {"A": pytest.approx(2.0, rel=0.03), "B": pytest.approx(4.0, rel=0.03)}  # means of 30 reports
    assert tracker.estimate([A, B], V100).observed == 0
    for job_id, model in (("A", "toya"), ("B", "toyb")):
        state.finish(job_id)
        state.submit(job(job_id, 0.0, 1e6, model=model), state.now)
        state.start(job_id, (2,), state.now)
    sigmas, settled, combined = [], [], []
    for i in range(1, 101):
        state.now += 60.0
        report(state, {"A": 1.2, "B": 1.2}, pair_noise, i)
        tracker.observe(state)
        combined.append(state.running["A"].observed_rate / solo["A"] + state.running["B"].observed_rate / solo["B"])
        est = tracker.estimate([A, B], V100)
        assert est.observed == i
        sigmas.append(est.sigma)
        settled.append(est.settled)
    assert settled[:2] == [False, False] and all(settled[2:])  # min_samples = 3
    assert sigmas[0] == pytest.approx(tracker.prior_sigma)  # one report says nothing of the noise
    assert sigmas[0] > sigmas[4] > sigmas[24] > sigmas[99]
    spread = math.sqrt((tracker.prior_sigma ** 2 + 99 * statistics.variance(combined)) / 100)
    assert spread > tracker.obs_sigma and sigmas[99] == pytest.approx(spread / 10)
    est = tracker.estimate([A, B], V100)
    assert est.x == [pytest.approx(0.6, abs=0.03), pytest.approx(0.3, abs=0.015)]
    assert est.combined == pytest.approx(statistics.fmean(combined))


def test_a_report_older_than_the_residents_change_is_not_a_sample_of_the_new_set() -> None:
    state = reporting_state()
    state.submit(job("A", 0.0, 1e6), 1.0)
    state.start("A", (0,), 1.0)
    state.running["A"].observed_rate, state.running["A"].reported_at = 2.0, 1.0
    tracker = ObservedThroughput(estimator_for(None, state.predictor))
    tracker.observe(state)
    state.now = 30.0
    state.submit(job("B", 0.0, 1e6, model="toyb"), 30.0)
    state.start("B", (0,), 30.0)
    state.running["B"].observed_rate, state.running["B"].reported_at = 1.0, 30.0
    tracker.observe(state)  # A's latest report (at 1) was made alone: no sample of the pair from it
    assert tracker.samples == 0
    state.now = 61.0
    state.running["A"].observed_rate, state.running["A"].reported_at = 1.0, 61.0
    tracker.observe(state)
    assert tracker.samples == 1 and tracker.estimate([A, B], V100).x[0] == pytest.approx(0.5)
    state.now = 70.0
    state.running["A"].observed_rate, state.running["A"].reported_at = 1.2, 70.0
    tracker.observe(state)  # B has not reported anew since: samples stay independent
    assert tracker.samples == 1


def test_reported_means_stop_moving_after_max_samples_reports() -> None:
    # A (single-GPU) alone on GPU 0 and the gang G alone on GPUs 1 and 2 report a new rate every minute; with
    # max_samples = 4, A's own solo rate keeps the mean of its first 4 reports, G's own rate the mean of its first 2
    # (one per GPU read), and A's type's solo rate and the speed bias take those 4 reports of A and no more.
    state = reporting_state()
    state.submit(job("A", 0.0, 1e6), 1.0)
    state.start("A", (0,), 1.0)
    state.submit(job("G", 0.0, 1e6, model="toyb", gpus=2), 1.0)
    state.start("G", (1, 2), 1.0)
    tracker = ObservedThroughput(estimator_for(None, state.predictor), max_samples=4)
    for i in range(1, 11):
        for job_id in ("A", "G"):
            state.running[job_id].observed_rate, state.running[job_id].reported_at = float(i), state.now
        tracker.observe(state)
        state.now += 60.0
    assert tracker.job_solo[("A", "v100")] == pytest.approx(2.5) and tracker._job_solo_n[("A", "v100")] == 4
    assert tracker.solo[(A, "v100")] == (pytest.approx(2.5), 4)
    bias = sum(math.log(i) for i in range(1, 5)) / 4  # predicted 1 s per iteration
    assert tracker.log_bias["v100"] == (pytest.approx(bias), 4)
    assert tracker.job_solo[("G", "v100")] == pytest.approx(1.5) and tracker._job_solo_n[("G", "v100")] == 4
    # Another job of A's type, alone on G's GPU once G ends: its reports still move the type's mean and the bias.
    state.finish("G")
    state.submit(job("A2", 0.0, 1e6), state.now)
    state.start("A2", (1,), state.now)
    for _ in range(2):
        state.now += 60.0
        for job_id in ("A", "A2"):
            state.running[job_id].observed_rate, state.running[job_id].reported_at = 8.0, state.now
        tracker.observe(state)
    assert tracker.job_solo[("A", "v100")] == pytest.approx(2.5)
    assert tracker.solo[(A, "v100")] == (pytest.approx((4 * 2.5 + 2 * 8.0) / 6), 6)
    assert tracker.log_bias["v100"] == (pytest.approx((4 * bias + 2 * math.log(8.0)) / 6), 6)


def test_a_job_with_nothing_left_to_teach_is_not_asked_for_its_report_until_a_co_runner_arrives() -> None:
    # Simulated reports (``ReportedRun``: read when looked at), one a minute; A alone on GPU 0, max_samples = 3.
    noise = NoisyTelemetry(period_s=60.0, sigma=0.05, warmup_iterations=0.0, seed=1)
    reads = Reads(noise)
    state = reporting_state()
    state.running_type = ReportedRun

    def start(job_id: str, model: str) -> None:
        state.submit(job(job_id, 0.0, 1e9, model=model), state.now)
        run = state.start(job_id, (0,), state.now)
        attempt = Attempt(job_id, 0, state.now, state.now, 0.0)
        attempt.change(state.now, 2.0, 0.0)
        assert isinstance(run, ReportedRun)
        run.watch(reads, attempt)

    tracker = ObservedThroughput(estimator_for(None, state.predictor), max_samples=3)
    start("A", "toya")
    counts = []
    for _ in range(12):
        state.now += 60.0
        reads.now = state.now
        tracker.observe(state)
        counts.append(reads.count)
    assert tracker._job_solo_n[("A", "v100")] == 3 and tracker.solo[(A, "v100")][1] == 3
    assert counts == [1, 2, 3] + [3] * 9  # one report a call until its 3 reports cap its means, then none
    at = state.running["A"].__dict__["reported_at"]
    start("B", "toyb")  # a co-runner: A's reports teach about the pair again
    for _ in range(2):
        state.now += 60.0
        reads.now = state.now
        tracker.observe(state)
    assert reads.count > counts[-1] and state.running["A"].__dict__["reported_at"] > at
    assert tracker.sets[("v100", (A, B))][1] >= 1


@pytest.mark.parametrize("name", ["horus", "gandiva"])
def test_a_pair_is_unpacked_only_once_its_set_is_settled(name: str) -> None:
    # Both report 0.45 it/s against a predicted 1 it/s alone: combined 0.9 < 1 at every report.
    state = reporting_state()
    for job_id in ("A", "B"):
        state.submit(job(job_id, 0.0, 1e6), 1.0)
        state.start(job_id, (0,), 1.0)
    for job_id, gpu in (("C", 1), ("D", 2)):  # the other GPUs are busy: no idle GPU to migrate to
        state.submit(job(job_id, 0.0, 1e6), 1.0)
        state.start(job_id, (gpu,), 1.0)
    policy = create_policy(name)
    decisions = []
    for i in range(3):
        for job_id, rate in (("A", 0.45), ("B", 0.45), ("C", 1.0), ("D", 1.0)):
            state.running[job_id].observed_rate, state.running[job_id].reported_at = rate, state.now
        decisions.append(policy.schedule(state))
        state.now += 60.0
    assert decisions == [[], [], [Preempt("B")]]
    # continuous telemetry (reported_at None): one reading is exact and settles the set at once
    for run in state.running.values():
        run.reported_at = None
    assert create_policy(name).schedule(state) == [Preempt("B")]


def test_the_next_report_is_the_first_time_the_report_index_moves() -> None:
    model = NoisyTelemetry(period_s=0.1, sigma=0.0)
    attempt = Attempt("j", 0, 1.7, 1.7, 0.0)
    now = 1.7
    for _ in range(200):
        due = model.next_report_s(attempt, now)
        before = math.floor((math.nextafter(due, -math.inf) - 1.7) / 0.1)
        assert math.floor((due - 1.7) / 0.1) == before + 1  # the index moves exactly at ``due``
        now = due


# ---- lazy reads ----------------------------------------------------------------------------------------------
def lazy_and_eager(policy_for: Callable[[], Policy]) -> tuple[_Engine, _Engine]:
    """The same noisy run with reports read when looked at (lazy) and all due ones before each call (eager)."""
    jobs = [job(f"j{i}", 7.0 * i + (i % 3) * 0.5, 60 + 57 * (i % 5), model="toya" if i % 2 else "toyb")
            for i in range(24)]
    config = SimConfig(telemetry="noisy", telemetry_options={"period_s": 10.0, "sigma": 0.05,
                                                             "warmup_iterations": 5.0, "seed": 3})
    engines = []
    for lazy in (True, False):
        engine = _Engine(jobs, cluster(nodes=2, gpus_per_node=2), policy_for(), truth(), ConstPredictor(), config,
                         lazy_reads=lazy)
        engine.run(progress=False)
        engines.append(engine)
    assert engines[0].lazy and not engines[1].lazy
    return engines[0], engines[1]


@pytest.mark.parametrize("name", ["fifo-exclusive", "tiresias", "gandiva", "horus"])
def test_lazy_reads_decide_as_eager_ones(name: str) -> None:
    lazy, eager = lazy_and_eager(lambda: create_policy(name))
    assert lazy.result(0.0).summary == eager.result(0.0).summary
    pd.testing.assert_frame_equal(lazy.result(0.0).placements, eager.result(0.0).placements)
    assert 0 < lazy.reads.count <= eager.reads.count


def test_lazy_reads_show_a_policy_what_eager_ones_do_and_skip_reports_nobody_reads() -> None:
    lazy, eager = lazy_and_eager(lambda: Recorder(tick_s=3.0, share=True))
    assert isinstance(lazy.policy, Recorder) and isinstance(eager.policy, Recorder)
    assert lazy.policy.seen == eager.policy.seen and len(lazy.policy.seen) > 100
    lazy, eager = lazy_and_eager(lambda: create_policy("fifo-exclusive"))  # never looks at running jobs
    assert lazy.reads.count <= 24 and 4 * lazy.reads.count < eager.reads.count  # lazy: at most one read as a job ends
