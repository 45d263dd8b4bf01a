"""The adaptive ``horus`` policy: exclusive first, co-location only where it pays, learning from telemetry,
unpacking and migrating (simulated end to end against hand-written truths it never reads)."""

from __future__ import annotations


import pytest
from policies_fakes import make_state, queue, run_job, starts
from sim_fakes import ConstPredictor, PairTruth, cluster, job, toy_catalog_rows

import horus.catalog
from horus.cluster import GPUType
from horus.interference.slowdown import estimator_for
from horus.policies.base import POLICIES, Preempt, Start
from horus.policies.horus import AdaptiveHorusPolicy
from horus.interference.observed import ObservedThroughput
from horus.sim.engine import simulate
from horus.state import SchedulerState
from horus.truth.base import SoloTruth

PARAMS = {"toya": 25_000_000, "toyb": 1_000_000}


@pytest.fixture(autouse=True)
def toy_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    models = toy_catalog_rows(PARAMS)
    monkeypatch.setattr(horus.catalog, "load_catalog", lambda: models)


def run(jobs, gpus: int, x: float, predictor: ConstPredictor | None = None, **options):
    policy = POLICIES.create("horus", **options)
    result = simulate(jobs, cluster(1, gpus), policy, PairTruth(x), predictor or ConstPredictor())
    return result.jobs.set_index("job_id"), policy


def test_idle_gpus_are_used_before_any_co_location() -> None:
    jobs, _ = run([job("A", 0.0, 1000), job("B", 0.0, 1000)], gpus=2, x=0.8)
    assert not jobs["colocated"].any()
    assert jobs.loc["A", "end"] == pytest.approx(1000.0) and jobs.loc["B", "end"] == pytest.approx(1000.0)


def test_a_waiting_job_joins_a_busy_gpu_when_the_pair_pays() -> None:
    jobs, _ = run([job("A", 0.0, 1000), job("B", 10.0, 1000)], gpus=1, x=0.8)
    assert bool(jobs.loc["B", "colocated"])
    assert jobs.loc["B", "wait"] == pytest.approx(0.0)
    assert jobs.loc["B", "end"] < 2000.0  # exclusive would end it at 2000


def test_no_co_location_when_the_predicted_gain_is_below_the_margin() -> None:
    # Predicted util 0.95 each: the prior says 1.9 summed -> x = 0.53 each, combined 1.05 (< 1 + margin 0.1).
    jobs, _ = run([job("A", 0.0, 1000), job("B", 10.0, 1000)], gpus=1, x=0.8,
                  predictor=ConstPredictor(util=0.95))
    assert not jobs["colocated"].any()
    assert jobs.loc["B", "first_start"] == pytest.approx(1000.0)


def test_a_pair_observed_to_lose_throughput_is_unpacked_and_not_packed_again() -> None:
    # The prior (util 0.5 each) is optimistic; truth: combined 0.6. Observed at the next telemetry tick (<= 60 s),
    # the newer job is stopped.
    jobs, policy = run([job("A", 0.0, 1000), job("B", 10.0, 1000)], gpus=1, x=0.3)
    assert policy.unpacked == 1
    assert jobs.loc["B", "preemptions"] == 1
    assert jobs.loc["B", "first_start"] == pytest.approx(10.0)
    assert jobs.loc["A", "end"] <= 1000.0 + 60 * 0.7 + 1e-6  # slowed for at most one tick
    assert jobs.loc["B", "end"] >= jobs.loc["A", "end"] + 990.0  # ran alone afterwards


def test_co_location_off_is_the_exclusive_ablation() -> None:
    jobs, _ = run([job("A", 0.0, 1000), job("B", 10.0, 1000)], gpus=1, x=0.8, colocate=False)
    assert not jobs["colocated"].any()
    assert jobs.loc["B", "first_start"] == pytest.approx(1000.0)


def test_gangs_never_share_a_gpu_whose_set_was_not_observed() -> None:
    jobs, _ = run([job("A", 0.0, 1000), job("G", 10.0, 1000, gpus=2)], gpus=2, x=0.9)
    assert not jobs["colocated"].any()
    assert jobs.loc["G", "first_start"] == pytest.approx(1000.0)


def started_state(gpus: int, placements: dict[str, tuple[int, ...]], rates: dict[str, float]) -> SchedulerState:
    state = SchedulerState(cluster(1, gpus), ConstPredictor())
    for jid, where in placements.items():
        state.submit(job(jid, 0.0, 10_000, gpus=len(where)), 0.0)
        run = state.start(jid, where, 0.0)
        run.observed_rate = rates[jid]
    state.now = 1.0
    return state


def test_a_co_located_job_with_work_left_migrates_to_a_gpu_that_went_idle() -> None:
    state = started_state(2, {"A": (0,), "B": (0,)}, {"A": 0.8, "B": 0.7})
    actions = AdaptiveHorusPolicy().schedule(state)
    assert actions[0] in (Preempt("A"), Preempt("B"))
    assert actions[1] == Start(actions[0].job_id, (1,))


def test_telemetry_gives_set_throughput_relative_to_observed_solo_rates() -> None:
    state = started_state(2, {"A": (0,)}, {"A": 2.0})  # A alone: its solo rate is 2 it/s
    tracker = ObservedThroughput(estimator_for(None, state.predictor))
    tracker.observe(state)
    state.submit(job("B", 0.0, 10_000, model="toyb"), 1.0)
    state.start("B", (0,), 1.0).observed_rate = 0.5  # B's solo rate: predicted 1 it/s (no bias seen yet... )
    state.running["A"].observed_rate = 1.5
    state.now = 2.0
    tracker.observe(state)
    gpu = state.cluster.gpus[0].gpu_type
    est = tracker.estimate(["toya/b1", "toyb/b1"], gpu)
    assert est.observed == 1
    assert est.x[0] == pytest.approx(0.75)  # 1.5 / 2.0
    # B never ran alone: its solo rate is the predicted 1 it/s corrected by the predictor's observed bias (x2)
    assert est.x[1] == pytest.approx(0.25)
    assert tracker.estimate(["toyb/b1", "toya/b1"], gpu).x == pytest.approx([0.25, 0.75])


def test_whole_gpu_jobs_avoid_idle_gpu_types_they_do_not_fit() -> None:
    from horus.cluster import Cluster, Node

    small, big = GPUType("small", 8_000, 1.0), GPUType("big", 32_000, 1.0)
    state = SchedulerState(Cluster([Node("s", small, 2), Node("b", big, 2)]), ConstPredictor(mem_mib=12_000.0))
    state.submit(job("A", 0.0, 1000), 0.0)
    (start,) = AdaptiveHorusPolicy().schedule(state)
    assert state.cluster.gpus[start.gpus[0]].gpu_type.name == "big"  # exclusive best fit alone would not care
    state.start("A", start.gpus, 0.0)
    state.submit(job("B", 0.0, 1000), 0.0)
    state.submit(job("C", 0.0, 1000), 0.0)
    started = AdaptiveHorusPolicy(colocate=False).schedule(state)
    kinds = sorted(state.cluster.gpus[a.gpus[0]].gpu_type.name for a in started)
    assert kinds == ["big", "small"]  # with no big GPU left, an idle GPU still takes the job


class MemoryTruth(PairTruth):
    """``PairTruth`` whose ``toya`` jobs need 10 GB (predicted: 1 GB) and ``toyb`` jobs 4 GB."""

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        return SoloTruth(0.5, 10_000.0 if job_type.startswith("toya") else 4000.0, 1.0)


def test_a_type_seen_to_fail_out_of_memory_shares_no_gpu_again() -> None:
    """B's co-location with A fails out of memory (the prediction is 10x low): afterwards no job of that type shares
    a GPU (C), and no job joins a GPU holding one (D), so no second failure happens."""
    specs = [job("A", 0.0, 5000), job("B", 10.0, 1000), job("C", 100.0, 1000), job("D", 200.0, 1000, model="toyb")]
    policy = POLICIES.create("horus")
    result = simulate(specs, cluster(1, 1), policy, MemoryTruth(0.8), ConstPredictor())
    jobs = result.jobs.set_index("job_id")
    assert jobs.loc["B", "oom_failures"] == 1
    assert jobs.loc["C", "oom_failures"] == 0 and jobs.loc["D", "oom_failures"] == 0
    assert not jobs.loc["C", "colocated"] and jobs.loc["C", "first_start"] >= jobs.loc["A", "end"]
    assert jobs.loc["D", "first_start"] >= jobs.loc["A", "end"]
    assert policy.oom_types == {"toya/b1"}



@pytest.mark.parametrize("name", ["horus", "horus-paper"])
def test_a_fractional_pod_within_its_guarantee_is_placed_where_its_requested_share_fits(name: str) -> None:
    # GPU 0 holds a pod requesting half of it (predicted util 0.8); a second half-GPU pod (util 0.5) would bring the
    # summed predicted utilization to 1.3, above the paper's cap (1.0), but requests sum to 1. Within its queue's
    # guarantee (a tenancy's mark) it is placed by request, as device sharing grants it (before: it waited for GPU 0
    # to free; horus-paper until it shared ``parts/by_request.py``); without the mark the paper's rule still refuses it.
    state = make_state({"a": (0.8, 2_000, 0.1), "b": (0.5, 2_000, 0.1)}, gpus_per_node=1)
    run_job(state, "A", "a", (0,), fraction=0.5)
    queue(state, "B", "b", fraction=0.5)
    assert starts(POLICIES.create(name).schedule(state)) == {}
    state.queue["B"].within_guarantee = True
    assert starts(POLICIES.create(name).schedule(state)) == {"B": (0,)}


@pytest.mark.parametrize("name", ["horus", "horus-paper"])
def test_a_fractional_pod_whose_requested_share_does_not_fit_waits_even_within_its_guarantee(name: str) -> None:
    state = make_state({"a": (0.8, 2_000, 0.1), "b": (0.5, 2_000, 0.1)}, gpus_per_node=1)
    run_job(state, "A", "a", (0,), fraction=0.6)
    queue(state, "B", "b", fraction=0.5)
    state.queue["B"].within_guarantee = True
    assert starts(POLICIES.create(name).schedule(state)) == {}


def test_horus_paper_places_by_request_only_after_its_rule_and_in_queue_order() -> None:
    # Two half-GPU pods within their guarantee, both refused by the rule (summed utilization above the cap) on GPU 0:
    # the first in queue order takes the room its request leaves; the second no longer fits by request and waits.
    state = make_state({"a": (0.8, 2_000, 0.1), "b": (0.5, 2_000, 0.1)}, gpus_per_node=1)
    run_job(state, "A", "a", (0,), fraction=0.5)
    queue(state, "B", "b", fraction=0.5)
    queue(state, "C", "b", fraction=0.5)
    for jid in ("B", "C"):
        state.queue[jid].within_guarantee = True
    assert starts(POLICIES.create("horus-paper").schedule(state)) == {"B": (0,)}


def test_a_kinds_kept_offer_is_dropped_when_a_type_fails_out_of_memory_in_the_same_call() -> None:
    """X (type c) is refused only by the wait test and its GPUs are kept for kind c on this planned load; then a
    background job of type t that failed out of memory makes t an out-of-memory type, so GPU 0 (running a t job)
    takes no joins. Z (type c, same kind as X) must not take the offer kept before that: it joins GPU 1 or waits.
    (A review found the kept offer reused GPU 0.)"""
    s = make_state({"t": (0.6, 2000, 0.1), "a": (0.6, 2000, 0.1), "c": (0.6, 2000, 0.1), "g": (0.6, 2000, 0.1)},
                   nodes=2, gpus_per_node=1)
    run_job(s, "R0", "t", (0,), iterations=1e5)  # ~1e4 s left on GPU 0
    run_job(s, "R1", "a", (1,), iterations=1e3)  # ~100 s left on GPU 1
    queue(s, "X", "c", iterations=1e5)  # head: refused by the wait test
    queue(s, "B", "g", gpus=2, iterations=2e5)  # head: a blocked gang
    queue(s, "Z", "c", iterations=1e6)  # background tail, X's kind
    queue(s, "Y", "t", iterations=1e7)  # background tail, the longest: failed out of memory
    s.queue["Y"].oom_failures = 1
    failed_type = s.queue["Y"].spec.job_type
    policy = POLICIES.create("horus", max_scan=2, critical_path=False, migrate=False)
    started = starts(policy.schedule(s))
    assert failed_type in policy.oom_types
    assert started.get("Z") != (0,)
