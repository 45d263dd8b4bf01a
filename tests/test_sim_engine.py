"""Engine behaviour on hand-built scenarios whose outcome is computed by hand."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from sim_fakes import (ConstPredictor, PackingPolicy, ScriptedPolicy, ToyTruth, cluster, job, start_queued_on,
                       toy_catalog_rows)

import horus.catalog
from horus.comm import allreduce_time_s
from horus.policies.base import Policy, Preempt, Start
from horus.sim.engine import InvalidActionError, SimConfig, simulate
from horus.state import SchedulerState
from horus.truth.base import SoloTruth, TruthModel

PARAMS = {"toya": 25_000_000, "toyb": 1_000_000}


@pytest.fixture(autouse=True)
def toy_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    models = toy_catalog_rows(PARAMS)
    monkeypatch.setattr(horus.catalog, "load_catalog", lambda: models)


def truth(util: float = 0.6, mem: float = 4000.0, iter_s: float = 1.0) -> ToyTruth:
    return ToyTruth({"toya/b1": SoloTruth(util, mem, iter_s), "toyb/b1": SoloTruth(0.3, 2000.0, 0.5)})


def by_id(result):
    return result.jobs.set_index("job_id")


def test_two_jobs_sharing_a_gpu_are_rerated_on_arrival_and_departure() -> None:
    # A alone 0-20 s (20 it); both at 1/1.2 speed until A's 80 left are done (96 s, t=116); B did 80, then 20 alone.
    jobs = [job("A", 0.0, 100), job("B", 20.0, 100)]
    res = simulate(jobs, cluster(), PackingPolicy(max_share=2.0), truth(), ConstPredictor())
    j = by_id(res)
    assert j.loc["A", "end"] == pytest.approx(116.0)
    assert j.loc["B", "end"] == pytest.approx(136.0)
    assert j.loc["B", "jct"] == pytest.approx(116.0)
    assert j.loc["A", "slowdown"] == pytest.approx((20 + 96 * 1.2) / 116)
    assert bool(j.loc["A", "colocated"]) and bool(j.loc["B", "colocated"])
    s = res.summary
    assert s["makespan_s"] == pytest.approx(136.0)
    # util: 0.6 alone, min(1, 2 x 0.6 / 1.2) = 1 together, 0.6 alone
    assert s["gpu_util_mean"] == pytest.approx((20 * 0.6 + 96 * 1.0 + 20 * 0.6) / 136)
    assert s["gpu_mem_occupancy_mean"] == pytest.approx((20 * 4000 + 96 * 8000 + 20 * 4000) / (16000 * 136))
    assert s["colocated_share"] == 1.0
    assert res.gpus.loc[0, "allocated_s"] == pytest.approx(136.0)


def test_work_is_conserved_and_every_job_completes_once() -> None:
    rng = np.random.default_rng(7)
    jobs = [job(f"j{i}", float(rng.uniform(0, 500)), float(rng.integers(10, 400)),
                model=str(rng.choice(["toya", "toyb"])), gpus=int(rng.choice([1, 1, 2, 4])))
            for i in range(120)]
    seen: list[float] = []

    def check_state(policy: Policy, state: SchedulerState) -> None:
        seen.append(state.now)
        for run in state.running.values():
            assert len(run.gpus) == run.spec.num_gpus
        assert not set(state.queue) & set(state.running)

    policy = PackingPolicy(max_share=2.0)
    policy.observer = check_state
    res = simulate(jobs, cluster(2, 4), policy, truth(), ConstPredictor())
    assert seen == sorted(seen)
    j = res.jobs
    assert (j["status"] == "completed").all()
    assert res.summary["jobs_completed"] == len(jobs)
    np.testing.assert_allclose(j["iterations_done"], j["iterations"], rtol=1e-9)
    assert j["iterations_done"].sum() == pytest.approx(sum(s.iterations for s in jobs), rel=1e-12)
    assert (j["first_start"] >= j["submit"]).all() and (j["end"] > j["first_start"]).all()
    assert (j["slowdown"] >= 1 - 1e-9).all()


def test_gang_job_waits_for_all_its_gpus() -> None:
    # 1-GPU job holds GPU 0 for 50 s exclusively; the 4-GPU job may only start when all 4 are free.
    jobs = [job("small", 0.0, 50, model="toya"), job("gang", 1.0, 10, model="toyb", gpus=4)]
    res = simulate(jobs, cluster(1, 4), PackingPolicy(max_share=1.0), truth(), ConstPredictor())
    j = by_id(res)
    assert j.loc["gang", "first_start"] == pytest.approx(j.loc["small", "end"])
    assert j.loc["small", "end"] == pytest.approx(50.0)


def test_job_larger_than_the_cluster_is_rejected_not_blocking() -> None:
    # A FIFO policy would wait forever behind the 8-GPU job on a 4-GPU cluster; it is dropped at arrival.
    jobs = [job("huge", 0.0, 10, gpus=8), job("after", 1.0, 10)]
    res = simulate(jobs, cluster(1, 4), PackingPolicy(max_share=1.0), truth(), ConstPredictor())
    j = by_id(res)
    assert j.loc["huge", "status"] == "rejected"
    assert j.loc["after", "status"] == "completed" and j.loc["after", "first_start"] == pytest.approx(1.0)
    assert res.summary["jobs_rejected"] == 1 and res.summary["jobs_unfinished"] == 0


@pytest.mark.parametrize("gpus, message", [((0, 1, 2), "exactly 4"), ((0, 1, 2, 2), "distinct"),
                                           ((0, 1, 2, 9), "distinct")])
def test_bad_gang_start_is_a_policy_error(gpus: tuple[int, ...], message: str) -> None:
    jobs = [job("gang", 0.0, 10, gpus=4)]
    with pytest.raises(InvalidActionError, match=message):
        simulate(jobs, cluster(1, 4), ScriptedPolicy(start_queued_on({"gang": gpus})), truth(), ConstPredictor())


def test_starting_a_job_that_is_not_queued_is_a_policy_error() -> None:
    policy = ScriptedPolicy(lambda state: [Start("ghost", (0,))])
    with pytest.raises(InvalidActionError, match="not queued"):
        simulate([job("A", 0.0, 10)], cluster(), policy, truth(), ConstPredictor())


@pytest.mark.parametrize("retries, status, failures", [(3, "failed", 4), (5, "completed", 4)])
def test_out_of_memory_requeues_then_fails(retries: int, status: str, failures: int) -> None:
    # True memory 10 GB per job on a 16 GB card; the policy (predicting 1 GB) stacks B onto A's GPU.
    # B fails at 0, 30, 60, 90; with 3 retries that is the end, with 5 it starts at 120 once A is gone (t=100).
    jobs = [job("A", 0.0, 100), job("B", 0.0, 10)]
    config = SimConfig(oom_restart_s=30.0, max_oom_retries=retries)
    res = simulate(jobs, cluster(), ScriptedPolicy(start_queued_on({"A": (0,), "B": (0,)})),
                   truth(mem=10_000.0), ConstPredictor(), config)
    j = by_id(res)
    assert j.loc["A", "end"] == pytest.approx(100.0)  # co-runner unaffected by the failures
    assert not bool(j.loc["A", "colocated"])
    assert j.loc["B", "status"] == status
    assert j.loc["B", "oom_failures"] == failures
    assert res.summary["oom_failures"] == failures
    if status == "completed":
        assert j.loc["B", "first_start"] == pytest.approx(120.0)
        assert j.loc["B", "end"] == pytest.approx(130.0)
    else:
        assert res.summary["jobs_failed"] == 1 and j.loc["B", "end"] == pytest.approx(90.0)


def test_preempted_job_keeps_its_progress_and_pays_the_restart_overhead() -> None:
    def script(state: SchedulerState) -> list:
        if "B" in state.queue and "A" in state.running:
            return [Preempt("A"), Start("B", (0,))]
        return [Start(j, (0,)) for j in state.queue if not state.running]

    jobs = [job("A", 0.0, 100), job("B", 40.0, 10)]
    res = simulate(jobs, cluster(), ScriptedPolicy(script), truth(), ConstPredictor(), SimConfig(preempt_overhead_s=30))
    j = by_id(res)
    assert j.loc["B", "end"] == pytest.approx(50.0)
    assert j.loc["A", "end"] == pytest.approx(50.0 + 30.0 + 60.0)
    assert j.loc["A", "preemptions"] == 1 and res.summary["preemptions"] == 1
    assert j.loc["A", "iterations_done"] == pytest.approx(100.0)


def test_cross_node_gang_job_is_slower_than_an_intra_node_one() -> None:
    cl = cluster(2, 2, link="nvlink", inter_gbps=12.5)
    grad = 4.0 * PARAMS["toya"]
    intra = allreduce_time_s(grad, (0, 1), cl)
    inter = allreduce_time_s(grad, (1, 2), cl)
    assert intra == pytest.approx(grad / 300e9) and inter == pytest.approx(grad / 12.5e9)
    ends = {}
    for name, gpus in (("intra", (0, 1)), ("inter", (1, 2))):
        res = simulate([job(name, 0.0, 1000, gpus=2)], cl, ScriptedPolicy(start_queued_on({name: gpus})),
                       truth(), ConstPredictor())
        ends[name] = by_id(res).loc[name, "end"]
    assert ends["intra"] == pytest.approx(1000 * (1.0 + intra))
    assert ends["inter"] == pytest.approx(1000 * (1.0 + inter))
    assert ends["inter"] > ends["intra"]


def test_policy_is_called_on_ticks_while_jobs_wait() -> None:
    jobs = [job("A", 0.0, 55), job("B", 0.0, 5)]
    policy = PackingPolicy(max_share=1.0, tick_s=10.0)
    res = simulate(jobs, cluster(), policy, truth(), ConstPredictor())
    assert [t for t in policy.calls if 0 < t < 55] == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert by_id(res).loc["B", "first_start"] == pytest.approx(55.0)


def _truth_instances_reachable(*roots: object) -> list[object]:
    """Walk the instance graph (not classes, modules or functions) from ``roots``; return TruthModels met."""
    skip = (type, type(gc), type(len), type(lambda: 0))
    seen: set[int] = set()
    stack = list(roots)
    found = []
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        if isinstance(obj, TruthModel):
            found.append(obj)
        stack.extend(gc.get_referents(obj))
    return found


class _OracleProbe(PackingPolicy):
    is_oracle = True

    def bind_truth(self, truth: object) -> None:
        self.truth = truth


@pytest.mark.parametrize("policy_cls, expect_truth", [(PackingPolicy, False), (_OracleProbe, True)])
def test_only_oracles_can_reach_the_truth(policy_cls: type[PackingPolicy], expect_truth: bool) -> None:
    found: list[list[object]] = []
    policy = policy_cls(max_share=2.0)
    policy.observer = lambda p, state: found.append(_truth_instances_reachable(p, state))
    simulate([job("A", 0.0, 10), job("B", 1.0, 10, gpus=2)], cluster(1, 2), policy, truth(), ConstPredictor())
    assert found and all(bool(f) == expect_truth for f in found)


def test_same_inputs_give_identical_results() -> None:
    rng = np.random.default_rng(3)
    jobs = [job(f"j{i}", float(rng.uniform(0, 200)), float(rng.integers(5, 300)), gpus=int(rng.choice([1, 2])))
            for i in range(60)]
    runs = [simulate(jobs, cluster(2, 2), PackingPolicy(max_share=2.0), truth(), ConstPredictor()) for _ in range(2)]
    assert runs[0].jobs.equals(runs[1].jobs)
    assert runs[0].timeline.equals(runs[1].timeline)
    assert runs[0].summary == runs[1].summary  # every job completes: no NaN entries


class _BrokenTruth(TruthModel):
    def solo(self, job_type, gpu_type):  # type: ignore[override]
        return SoloTruth(0.5, 100.0, 1.0)

    def colocated_throughput(self, job_types, gpu_type):  # type: ignore[override]
        return [0.0] * len(job_types)


def test_truth_giving_zero_throughput_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        simulate([job("A", 0.0, 10), job("B", 0.0, 10)], cluster(), PackingPolicy(max_share=2.0), _BrokenTruth(),
                 ConstPredictor())
