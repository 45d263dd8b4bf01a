"""nvidia-smi-style GPU busy time: restore stalls and barrier waits are not busy; co-location raises the share."""

from __future__ import annotations

import pytest
from sim_fakes import ConstPredictor, ScriptedPolicy, ToyTruth, cluster, job, start_queued_on, toy_catalog_rows

import horus.catalog
from horus.cluster import Cluster, GPUType, Node
from horus.comm import allreduce_time_s
from horus.policies.base import Preempt, Start
from horus.sim.engine import SimConfig, simulate
from horus.sim.metrics import busy_integral
from horus.state import SchedulerState
from horus.truth.base import SoloTruth

FAST, SLOW = GPUType("fast", 16_000, 1.0), GPUType("slow", 16_000, 0.5)
TABLE = {"toya/b1": SoloTruth(0.6, 4000.0, 1.0)}


class SpeedTruth(ToyTruth):
    """ToyTruth whose iteration time scales with 1 / GPU speed."""

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        s = self.table[job_type]
        return SoloTruth(s.util, s.mem_mib, s.iter_time_s / gpu_type.speed)


@pytest.fixture(autouse=True)
def toy_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    models = toy_catalog_rows({"toya": 25_000_000})
    monkeypatch.setattr(horus.catalog, "load_catalog", lambda: models)


def test_busy_integral_is_piecewise_exact_and_capped() -> None:
    parts = [(0.6, 0.0), (0.7, 10.0), (0.2, 30.0)]
    # [0,10): 0.6; [10,30): min(1, 1.3) = 1; [30,40): 1
    assert busy_integral(parts, 0.0, 40.0) == pytest.approx(6.0 + 20.0 + 10.0)
    assert busy_integral(parts, 5.0, 12.0) == pytest.approx(5 * 0.6 + 2 * 1.0)
    assert busy_integral([(0.3, 50.0)], 0.0, 40.0) == 0.0  # stalled the whole interval
    assert busy_integral(parts, 40.0, 40.0) == 0.0


def test_a_job_restoring_its_checkpoint_is_not_busy() -> None:
    def script(state: SchedulerState) -> list:
        if "B" in state.queue and "A" in state.running:
            return [Preempt("A"), Start("B", (0,))]
        return [Start(j, (0,)) for j in state.queue if not state.running]

    # A runs 0-40, B 40-50, A restarts at 50, restores until 80 and runs its last 60 iterations until 140.
    jobs = [job("A", 0.0, 100), job("B", 40.0, 10)]
    res = simulate(jobs, cluster(), ScriptedPolicy(script), ToyTruth(TABLE), ConstPredictor(),
                   SimConfig(preempt_overhead_s=30))
    gpu = res.gpus.iloc[0]
    assert res.summary["makespan_s"] == pytest.approx(140.0)
    assert gpu["allocated_s"] == pytest.approx(140.0)
    assert gpu["kernel_busy_s"] == pytest.approx(0.6 * (40 + 10 + 60))  # not during the 30 s stall
    assert gpu["util_integral"] == pytest.approx(0.6 * 140)  # the old integral counts the stall
    assert res.summary["gpu_busy_mean"] == pytest.approx(0.6 * 110 / 140)
    assert res.summary["gpu_busy_allocated_mean"] == pytest.approx(0.6 * 110 / 140)


def test_a_gang_waits_at_the_barrier_on_its_fast_gpu() -> None:
    cl = Cluster([Node("n0", FAST, 1, "nvlink"), Node("n1", SLOW, 1, "nvlink")], inter_node_gbps=12.5)
    comm = allreduce_time_s(4.0 * 25_000_000, (0, 1), cl)
    res = simulate([job("G", 0.0, 100, gpus=2)], cl, ScriptedPolicy(start_queued_on({"G": (0, 1)})),
                   SpeedTruth(TABLE), ConstPredictor())
    span = 100 * (2.0 + comm)  # the slow worker's 2 s per iteration plus the all-reduce
    assert res.summary["makespan_s"] == pytest.approx(span)
    fast, slow = res.gpus.iloc[0], res.gpus.iloc[1]
    assert fast["kernel_busy_s"] == pytest.approx(0.6 * 100 * 1.0)  # runs 1 s of kernels, then waits
    assert slow["kernel_busy_s"] == pytest.approx(0.6 * 100 * 2.0)
    assert fast["mean_busy"] == pytest.approx(0.6 / (2.0 + comm)) and fast["mean_busy"] < 0.31
    assert fast["mean_util"] == pytest.approx(0.6)  # the old metric counts the barrier wait as busy


def test_a_gang_slowed_by_a_co_runner_elsewhere_is_re_recorded_on_its_other_gpu() -> None:
    """A job joining one GPU of a gang slows the gang, so the gang's other GPU waits more (and is re-recorded)."""
    cl = cluster(1, 2)
    comm = allreduce_time_s(4.0 * 25_000_000, (0, 1), cl)
    plan = {"G": (0, 1), "S": (1,)}
    res = simulate([job("G", 0.0, 100, gpus=2), job("S", 0.0, 1000)], cl, ScriptedPolicy(start_queued_on(plan)),
                   ToyTruth(TABLE), ConstPredictor())
    g_end = res.jobs.set_index("job_id").loc["G", "end"]
    assert g_end == pytest.approx(100 * (1.2 + comm))  # x = 1 / 1.2 on GPU 1
    # GPU 0 holds only G's worker: 1 s of kernels per iteration, whatever the wait
    assert res.gpus.iloc[0]["kernel_busy_s"] == pytest.approx(0.6 * 100)


def test_co_locating_two_jobs_raises_the_busy_share_and_conserves_kernel_time() -> None:
    jobs = [job("A", 0.0, 100), job("B", 0.0, 100)]
    alone = simulate(jobs[:1], cluster(), ScriptedPolicy(start_queued_on({"A": (0,)})), ToyTruth(TABLE),
                     ConstPredictor())
    shared = simulate(jobs, cluster(), ScriptedPolicy(start_queued_on({"A": (0,), "B": (0,)})), ToyTruth(TABLE),
                      ConstPredictor())
    apart = simulate(jobs, cluster(1, 2), ScriptedPolicy(start_queued_on({"A": (0,), "B": (1,)})), ToyTruth(TABLE),
                     ConstPredictor())
    assert alone.summary["gpu_busy_mean"] == pytest.approx(0.6)
    # together each runs at 1/1.2: min(1, 2 x 0.6 / 1.2) = 1
    assert shared.summary["gpu_busy_mean"] == pytest.approx(1.0)
    assert shared.summary["gpu_busy_allocated_mean"] > apart.summary["gpu_busy_allocated_mean"] == pytest.approx(0.6)
    # the kernel time itself is the same for every schedule (docs/metrics.md)
    assert shared.gpus["kernel_busy_s"].sum() == pytest.approx(apart.gpus["kernel_busy_s"].sum())


def test_a_co_runner_starting_during_a_stall_counts_alone_until_the_stall_ends() -> None:
    def script(state: SchedulerState) -> list:
        if state.now == 10.0 and "A" in state.running:
            return [Preempt("A"), Start("A", (0,)), Start("B", (0,))]
        return [Start(j, (0,)) for j in state.queue if j == "A" and not state.running]

    jobs = [job("A", 0.0, 50), job("B", 10.0, 30)]
    res = simulate(jobs, cluster(), ScriptedPolicy(script), ToyTruth(TABLE), ConstPredictor(),
                   SimConfig(preempt_overhead_s=20))
    # 0-10 A alone (0.6); 10-30 B runs at 1/1.2 while A restores: busy 0.6/1.2 = 0.5; from 30 both run: 1.0
    # B did 20/1.2 it by 30, its last 30 - 16.67 it take 16 s -> ends at 46; A then runs alone at 0.6
    j = res.jobs.set_index("job_id")
    b_end = 30.0 + (30 - 20 / 1.2) * 1.2
    assert j.loc["B", "end"] == pytest.approx(b_end)
    a_left = 40 - (b_end - 30.0) / 1.2
    expected = 10 * 0.6 + 20 * 0.5 + (b_end - 30.0) * 1.0 + a_left * 0.6
    assert res.gpus.iloc[0]["kernel_busy_s"] == pytest.approx(expected)
