"""``horus-las``: Horus's non-clairvoyant form, with Tiresias' order and preemption and no job sizes read.

Simulated end to end against hand-written truths the policy never reads, plus the shared victim selection
(``parts.las_preemption``) and the size-free expectation (``parts.attained_service``) on hand-built states.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from golden_workload import RecordingPolicy, Workload
from sim_fakes import ConstPredictor, PairTruth, cluster, job, toy_catalog_rows

import horus.catalog
from horus.jobs import JobSpec
from horus.policies.base import POLICIES
from horus.policies.parts.attained_service import ServiceHistory
from horus.policies.parts.las_preemption import las_victims
from horus.predict.analytic import AnalyticPredictor
from horus.sim.engine import SimConfig, simulate
from horus.state import QueuedJob, SchedulerState

GOLDEN = Path(__file__).parent / "golden" / "decisions"
STREAM = Workload("stream-load2.5", "stream", 2.5, 60, 4, 4, 3)  # the golden stream workload


@pytest.fixture
def toy_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    models = toy_catalog_rows({"toya": 25_000_000})
    monkeypatch.setattr(horus.catalog, "load_catalog", lambda: models)


def full_cluster_then_a_newcomer(name: str, util: float, x: float, **options: object):
    """Two long jobs fill both GPUs from t=0 (past the first 3600 GPU-s threshold at t=4000); a short one arrives."""
    jobs = [job("A", 0.0, 10_000), job("B", 0.0, 10_000), job("C", 4000.0, 100)]
    policy = RecordingPolicy(POLICIES.create(name, **options))
    result = simulate(jobs, cluster(1, 2), policy, PairTruth(x), ConstPredictor(util=util))
    return result.jobs.set_index("job_id"), policy


@pytest.mark.usefixtures("toy_catalog")
def test_a_newcomer_preempts_a_lower_priority_long_job_when_sharing_does_not_pay() -> None:
    # Predicted util 0.95 each: sharing is predicted to lose, so C is still blocked after placing.
    jobs, policy = full_cluster_then_a_newcomer("horus-las", util=0.95, x=0.5)
    preempts = [line for line in policy.log if " P " in line]
    assert len(preempts) == 1 and preempts[0].startswith("4000.000 P ") and preempts[0].split()[2] in ("A", "B")
    assert jobs.loc["C", "first_start"] <= 4000.0 + 60.0 and not bool(jobs.loc["C", "colocated"])
    assert jobs.loc["C", "end"] == pytest.approx(jobs.loc["C", "first_start"] + 100.0)
    fifo, _ = full_cluster_then_a_newcomer("horus-fifo", util=0.95, x=0.5)
    assert fifo.loc["C", "first_start"] == pytest.approx(10_000.0)  # without preemption it waits for A or B


@pytest.mark.usefixtures("toy_catalog")
def test_sharing_is_tried_before_preempting() -> None:
    # Predicted util 0.3 each: joining a busy GPU pays, which costs no preemption.
    jobs, policy = full_cluster_then_a_newcomer("horus-las", util=0.3, x=0.9)
    assert bool(jobs.loc["C", "colocated"]) and jobs.loc["C", "first_start"] == pytest.approx(4000.0)
    assert not [line for line in policy.log if " P " in line]
    # co-location off (horus-las-solo): the same newcomer preempts, as in tiresias
    solo, solo_policy = full_cluster_then_a_newcomer("horus-las", util=0.3, x=0.9, colocate=False)
    assert len([line for line in solo_policy.log if " P " in line]) == 1
    assert not solo["colocated"].any() and solo.loc["C", "first_start"] <= 4000.0 + 60.0


# ---- no job size is read --------------------------------------------------------------------------
class Disguised(JobSpec):
    """A spec whose ``iterations`` reads as ``told`` from policy code (any ``horus.policies`` frame on the stack;
    ``None``: the read fails) and as the true length from the simulator."""

    told: float | None

    @classmethod
    def of(cls, spec: JobSpec, told: float | None) -> Disguised:
        out = cls(spec.job_id, spec.submit_time, spec.num_gpus, spec.model, spec.batch_size, spec.iterations,
                  spec.gpu_fraction, spec.gpu_type_request)
        object.__setattr__(out, "told", told)
        return out

    def __getattribute__(self, name: str) -> object:
        if name == "iterations":
            frame = sys._getframe(1)
            while frame is not None:
                if frame.f_globals.get("__name__", "").startswith("horus.policies"):
                    told = object.__getattribute__(self, "told")
                    if told is None:
                        raise AssertionError(f"a policy read the size of a job ({frame.f_code.co_name})")
                    return told
                frame = frame.f_back
        return object.__getattribute__(self, name)


def misjudged(spec: JobSpec) -> float:
    """A seeded factor in [0.1, 10] per job (by id)."""
    u = int.from_bytes(hashlib.sha256(spec.job_id.encode()).digest()[:8], "little") / 2.0 ** 64
    return spec.iterations * 10.0 ** (2.0 * u - 1.0)


def decisions(name: str, told, **options: object) -> list[str]:
    jobs, cluster_, truth = STREAM.build()
    policy = RecordingPolicy(POLICIES.create(name, **options))
    simulate([Disguised.of(s, told(s)) for s in jobs], cluster_, policy, truth, AnalyticPredictor(), SimConfig())
    return policy.log


@pytest.mark.parametrize(("name", "options"), [("horus-las", {}), ("horus-las", {"colocate": False}),
                                               ("tiresias", {})])
def test_decisions_do_not_depend_on_the_announced_sizes(name: str, options: dict[str, object]) -> None:
    """The true work is the same in every run; only what a policy would read in ``iterations`` differs."""
    truthful = decisions(name, lambda s: s.iterations, **options)
    assert any(" P " in line for line in truthful)  # preemptions by priority happened
    assert decisions(name, misjudged, **options) == truthful
    assert decisions(name, lambda s: math.inf, **options) == truthful  # no size at all


@pytest.mark.parametrize("colocate", [True, False])
def test_horus_las_never_reads_a_size(colocate: bool) -> None:
    """Not even to compare: ``tiresias`` does, in equality tests of queue entries (no decision depends on it)."""
    assert decisions("horus-las", lambda s: None, colocate=colocate)


def test_the_disguise_is_seen_by_a_policy_that_reads_sizes() -> None:
    """The harness works: ``horus`` (SJF by predicted remaining time) decides differently when misinformed."""
    assert decisions("horus", misjudged) != decisions("horus", lambda s: s.iterations)


def test_without_co_location_it_is_tiresias_with_horus_placement() -> None:
    """On the golden batch (one GPU type), with Tiresias' 300 s tick, every decision is tiresias'."""
    batch = Workload("batch", "batch", 1.0, 48, 4, 4, 5)
    jobs, cluster_, truth = batch.build()
    logs = []
    for policy in (POLICIES.create("tiresias"), POLICIES.create("horus-las", colocate=False)):
        policy.tick_s = 300.0
        recorded = RecordingPolicy(policy)
        simulate(jobs, cluster_, recorded, truth, AnalyticPredictor(), SimConfig())
        logs.append(recorded.log)
    assert logs[0] == logs[1] and any(" P " in line for line in logs[0])


def test_horus_las_is_no_longer_horus_fifo_on_a_congested_stream() -> None:
    """The pinned decisions (tests/golden/decisions) differ, and LAS preempts more than FIFO unpacks."""
    las, fifo = (json.loads((GOLDEN / f"{n}.json").read_text())["workloads"]["stream-load2.5"]
                 for n in ("horus-las", "horus-fifo"))
    assert las["actions"] != fifo["actions"]
    assert las["summary"]["preemptions"] > fifo["summary"]["preemptions"]


def test_horus_las_options() -> None:
    policy = POLICIES.create("horus-las")
    described = policy.describe()
    assert described["use_sizes"] is False and described["critical_path"] is False
    assert described["preempt_s"] == 300.0 and described["thresholds_gpu_s"] == [3600.0, 36000.0]
    assert POLICIES.create("horus-las", thresholds=(100.0, 200.0)).describe()["thresholds_gpu_s"] == [100.0, 200.0]
    with pytest.raises(ValueError, match="sjf"):
        POLICIES.create("horus", use_sizes=False)
    with pytest.raises(ValueError, match="tiresias"):
        POLICIES.create("horus-fifo", preempt_s=300.0)
    with pytest.raises(ValueError, match="tiresias"):
        POLICIES.create("horus-fifo", thresholds=(100.0,))


# ---- the shared victim selection ----------------------------------------------------------------------
def running_state(placed: dict[str, tuple[tuple[int, ...], float]], gpus: int = 2) -> SchedulerState:
    """Jobs started at the given times on the given GPUs; the state's clock at t=10000."""
    state = SchedulerState(cluster(1, gpus), ConstPredictor())
    for jid, (where, start) in placed.items():
        state.submit(job(jid, 0.0, 1000, gpus=len(where)), 0.0)
        state.start(jid, where, start)
    state.now = 10_000.0
    return state


def newcomer(gpus: int = 1) -> QueuedJob:
    return QueuedJob(job("new", 10_000.0, 10, gpus=gpus), queued_since=10_000.0)


def victims(state: SchedulerState, need: int = 1, exclude: Sequence[str] = ()) -> list[str]:
    return las_victims([newcomer(need)], state, state.load.n_residents, (3600.0,), 4, exclude)


def test_exclusive_victims_lowest_priority_most_service_first() -> None:
    state = running_state({"old": ((0,), 0.0), "older": ((1,), -5000.0)})
    assert victims(state) == ["older"]
    assert victims(state, need=2) == ["older", "old"]
    assert victims(state, exclude=["older"]) == ["old"]


def test_a_shared_gpu_is_freed_only_with_all_its_residents() -> None:
    both_low = running_state({"L1": ((0,), 0.0), "L2": ((0,), 1000.0), "H": ((1,), 9000.0)})
    assert victims(both_low) == ["L1", "L2"]  # H attained 1000 GPU-s: same queue as the newcomer
    with_high = running_state({"L1": ((0,), 0.0), "H": ((0,), 9000.0), "L2": ((1,), 1000.0)})
    assert victims(with_high) == ["L2"]  # L1 alone would free nothing: dropped
    gang = running_state({"G": ((0, 1), 0.0)})
    assert victims(gang, need=2) == ["G"]
    assert victims(running_state({"H": ((0,), 9000.0), "L": ((1,), 0.0)}), need=2) == []  # not enough: nothing


# ---- the size-free expectation ------------------------------------------------------------------------
def test_service_history_mean_residual_and_fallbacks() -> None:
    history = ServiceHistory(prior_s=500.0, min_tail=2)
    assert history.remaining_s(0.0, 1) == 500.0 and history.remaining_s(2000.0, 2) == 1000.0  # max(t, prior)
    state = running_state({"a": ((0,), 0.0), "b": ((1,), 0.0)})
    state.now = 0.0
    history.observe(state)
    state.now = 100.0
    state.finish("a")
    history.observe(state)
    state.now = 300.0
    state.requeue("b", 300.0)  # preempted, not completed
    history.observe(state)
    state.start("b", (1,), 300.0)
    history.observe(state)
    state.now = 400.0
    state.finish("b")  # 300 + 100 seconds of service
    history.observe(state)
    assert len(history) == 2
    assert history.remaining_s(0.0, 1) == pytest.approx(250.0)  # mean of (100, 400)
    assert history.remaining_s(150.0, 1) == pytest.approx(500.0)  # one run longer than 150 s: max(t, prior)
