"""The scheduler core's tenancy (horus.core.tenancy) through the simulator: transparency, start checks, ledger."""

from __future__ import annotations

import math

import pytest

from horus.clusterspec import default_cluster
from horus.cluster import Cluster, Node
from horus.core import create_policy
from horus.core.tenancy import Admission, water_fill
from horus.gpu_types import PRESETS
from horus.jobs import JobSpec
from horus.policies.base import POLICIES
from horus.sim.engine import simulate
from horus.sim.world import build_predictor, build_truth
from horus.state import QueuedJob, SchedulerState
from horus.tenancy import Queue, Tenancy, from_demand
from horus.traces import load_default_trace
from horus.traces.materialize import materialize


@pytest.fixture(scope="module")
def default_world() -> tuple[Cluster, list[JobSpec], object, object]:
    cluster = default_cluster()
    truth = build_truth("parametric", None, cluster)
    jobs = materialize(load_default_trace(), truth, reference_gpu=cluster.gpu_types()[0], seed=0)[:160]
    return cluster, jobs, truth, build_predictor("analytic", None)


@pytest.mark.parametrize("policy", ["fifo-exclusive", "tiresias", "sjf-exclusive", "horus-paper", "horus",
                                    "gandiva"])
def test_one_queue_owning_the_cluster_changes_no_decision(default_world, policy: str) -> None:  # type: ignore[no-untyped-def]
    """With a single queue guaranteed the whole cluster, the policy sees every job it would see without a tenancy
    (its own order decides: SJF, LAS, Horus's look-ahead) and makes the same starts."""
    cluster, jobs, truth, predictor = default_world
    tenancy = Tenancy({"all": Queue("all", {"*": float(cluster.num_gpus)}, 0.0)})
    plain = simulate(jobs, cluster, create_policy(policy), truth, predictor)
    gated = simulate(jobs, cluster, create_policy(policy), truth, predictor, tenancy=tenancy)
    assert plain.jobs["first_start"].fillna(-1).tolist() == gated.jobs["first_start"].fillna(-1).tolist()
    assert plain.summary["mean_jct_s"] == gated.summary["mean_jct_s"]
    assert gated.summary["quota_violation_s"] == 0 and gated.summary["reclaim_preemptions"] == 0
    row = gated.queues.iloc[0]
    assert row["jobs"] == len(jobs) and row["guarantee_attainment"] > 0.95


def tiny(gpus: int) -> Cluster:
    return Cluster([Node("n0", PRESETS["V100"], gpus)])


def job(job_id: str, submit: float, queue: str, *, iterations: float = 8_000, gpus: int = 1) -> JobSpec:
    return JobSpec(job_id, submit, gpus, "resnet18", 32, iterations, queue=queue)


def run(jobs: list[JobSpec], cluster: Cluster, tenancy: Tenancy, policy: str = "fifo-exclusive"):  # type: ignore[no-untyped-def]
    return simulate(jobs, cluster, create_policy(policy), build_truth("parametric", None, cluster),
                    build_predictor("physical", None), tenancy=tenancy)


def test_a_borrower_that_has_not_started_yields_to_a_guaranteed_job_without_a_preemption() -> None:
    """Queue b (no guarantee) has jobs admitted, waiting for GPUs held by queue a's borrowed runs; when a's own
    guaranteed job arrives it goes first: b's waiting admissions are revoked (no work lost), nothing of b starts
    only to be preempted in the same instant."""
    jobs = ([job(f"a{i}", 0.0, "a", iterations=4_000) for i in range(2)]
            + [job(f"b{i}", 10.0, "b") for i in range(2)] + [job("a-late", 20.0, "a", iterations=2_000)])
    tenancy = Tenancy({"a": Queue("a", {"*": 2.0}), "b": Queue("b", {"*": 0.0})})
    result = run(jobs, tiny(2), tenancy)
    frame = result.jobs.set_index("job_id")
    assert (frame["preemptions"] == 0).all()
    assert frame.loc["a-late", "first_start"] < frame.loc[["b0", "b1"], "first_start"].min()


def test_a_start_over_the_limit_is_held_back_not_carried_out() -> None:
    """A queue limited to 1 GPU never runs two whole-GPU jobs on two GPUs, whatever the policy plans; its jobs wait
    in held with the quota reason."""
    jobs = [job(f"a{i}", 0.0, "a") for i in range(3)]
    tenancy = Tenancy({"a": Queue("a", {"*": 1.0}, 0.0), "b": Queue("b", {"*": 1.0})})
    result = run(jobs, tiny(2), tenancy)
    starts = sorted(result.jobs["first_start"])
    ends = sorted(result.jobs["end"])
    assert starts[1] >= ends[0] - 1e-6 and starts[2] >= ends[1] - 1e-6  # one at a time
    assert result.summary["quota_violation_s"] == 0
    assert set(result.jobs["wait_reason"]) - {""} == {"queue-over-quota"}


def test_the_start_check_charges_co_location_as_the_gpu_splits() -> None:
    cluster = tiny(2)
    state = SchedulerState(cluster, build_predictor("physical", None))
    admission = Admission(Tenancy({"a": Queue("a", {"*": 1.0}, 0.0), "b": Queue("b", {"*": 1.0})}))
    state.gated = True
    first, second = job("a0", 0.0, "a"), job("a1", 0.0, "a")
    for spec in (first, second):
        state.submit(spec, 0.0)
        state.admit(spec.job_id)
    admission.observe(state)
    assert admission.may_start(state, first, (0,))
    state.start("a0", (0,), 0.0)
    admission.observe(state)
    assert admission.charge_of("a0") == 1.0
    assert not admission.may_start(state, second, (1,))  # a second GPU: 2 > its limit of 1
    assert admission.may_start(state, second, (0,))  # beside its own job: the GPU still charges 1 in all


def test_water_fill_is_weighted_max_min() -> None:
    share = water_fill({"a": 2.0, "b": 10.0, "c": 10.0}, {"a": 1.0, "b": 1.0, "c": 2.0}, 10.0)
    assert share["a"] == pytest.approx(2.0)
    assert share["b"] == pytest.approx(8 / 3) and share["c"] == pytest.approx(16 / 3)
    assert math.fsum(share.values()) == pytest.approx(10.0)
    assert water_fill({"a": 1.0}, {"a": 1.0}, 5.0) == {"a": 1.0}


def test_from_demand_shares_whole_gpus_by_demand() -> None:
    tenancy = from_demand({"x": 700.0, "y": 200.0, "z": 100.0, "w": 0.5}, 10)
    guaranteed = {name: q.guaranteed["*"] for name, q in tenancy.queues.items()}
    assert guaranteed == {"w": 0.0, "x": 7.0, "y": 2.0, "z": 1.0}
    assert all(q.borrow_limit is None for q in tenancy.queues.values())
    assert tenancy.queues["w"].weight == 1.0 and tenancy.queues["x"].weight == 7.0


def test_a_guarantee_of_any_type_holds_its_per_type_guarantees() -> None:
    """{'*': 4, 'V100': 2}: 4 GPUs in all, 2 of them V100 (not 6); without '*' the per-type ones add up."""
    admission = Admission(Tenancy({"mixed": Queue("mixed", {"*": 4.0, "V100": 2.0}),
                                   "typed": Queue("typed", {"V100": 2.0, "A100": 1.0})}))
    assert admission.accounts["mixed"].guarantee == 4.0
    assert admission.accounts["typed"].guarantee == 3.0


def test_a_short_job_takes_the_place_of_its_own_queues_long_job_under_tiresias() -> None:
    """Queues a and b, 1 GPU each, both at their guarantee with a long job running, when a short job of a and a
    2-GPU job of b arrive together. a's short job would wait behind a's own long job (no room, a at its fair
    share); under Tiresias (which preempts by its LAS order) the core lets it take the place of a's long job,
    ranked behind it, as the tenant-unaware Tiresias would: it starts at once, a's long job resumes after it, and
    b's GPU is never touched (b's own long job frees too few GPUs for b's gang). A policy that does not preempt
    by its order (FIFO) keeps the short job waiting for a's long job."""
    jobs = [job("a-long", 0.0, "a", iterations=400_000), job("b-long", 0.0, "b", iterations=400_000),
            job("b-next", 7_200.0, "b", iterations=4_000, gpus=2), job("a-short", 7_200.0, "a", iterations=4_000)]
    tenancy = Tenancy({"a": Queue("a", {"*": 1.0}), "b": Queue("b", {"*": 1.0})})
    las = run(jobs, tiny(2), tenancy, "tiresias")
    frame = las.jobs.set_index("job_id")
    assert frame.loc["a-long", "end"] > 7_200.0 * 2  # still running when a-short arrives
    assert frame.loc["a-short", "first_start"] == pytest.approx(7_200.0)
    assert frame.loc["a-long", "end"] > frame.loc["a-short", "end"]  # (later also preempted by Tiresias for b-next)
    assert frame.loc["b-long", "preemptions"] == 0 and frame.loc["b-next", "first_start"] >= frame.loc["a-short", "end"]
    q = las.queues.set_index("queue")
    assert q.loc["a", "order_preempted"] == 1 and q.loc["b", "order_preempted"] == 0
    assert las.summary["quota_violation_s"] == 0 and las.summary["reclaim_preemptions"] == 0
    assert las.summary["order_preemptions"] == 1
    fifo = run(jobs, tiny(2), tenancy, "fifo-exclusive").jobs.set_index("job_id")
    assert fifo.loc["a-short", "first_start"] >= fifo.loc["a-long", "end"]
    assert (fifo["preemptions"] == 0).all()


@pytest.mark.parametrize("policy", ["fifo-exclusive", "tiresias", "horus"])
def test_gangs_larger_than_what_is_left_of_their_fair_share_borrow_idle_gpus(policy: str) -> None:
    """On an idle 8-GPU node, queue a (weight 6) submits an 8-GPU gang and queue b (weight 2) a 4-GPU gang together:
    both wait, and each gang is larger than its queue's weighted fair share (6 and 2 GPUs). The first in fair-share
    order borrows the idle GPUs at once (a queue below its share needs no room up to it, and room beyond it, as any
    queue does); the other gang follows when they free. Before, a queue below its share was bounded by what was
    left of that share, so neither gang was admitted while the other waited: both waited for ever."""
    jobs = [job("a-gang", 0.0, "a", gpus=8), job("b-gang", 0.0, "b", gpus=4)]
    tenancy = Tenancy({"a": Queue("a", {"*": 6.0}, weight=6.0), "b": Queue("b", {"*": 2.0}, weight=2.0)})
    result = run(jobs, tiny(8), tenancy, policy)
    frame = result.jobs.set_index("job_id").sort_values("first_start")
    assert frame["end"].notna().all()
    assert frame["first_start"].iloc[0] == pytest.approx(0.0)
    assert frame["first_start"].iloc[1] == pytest.approx(frame["end"].iloc[0])
    assert result.summary["quota_violation_s"] == 0


def test_a_gang_beyond_its_queues_share_is_not_shown_to_a_co_locating_policy_without_idle_gpus() -> None:
    """Horus co-locates: queue a's two long jobs hold both GPUs and a third waits (a alone waited, so it borrowed
    b's GPU), then b's 2-GPU gang arrives, larger than b's fair share (1 GPU). The free worker slots beside a's
    jobs are room for a's 1-GPU job but not for a gang beyond its queue's share (only GPUs nobody is charged for or
    has reserved are): b's gang stays held at its quota until GPUs free, instead of being admitted to wait in the
    policy's queue with a reservation."""
    jobs = [job(f"a{i}", 0.0, "a", iterations=40_000) for i in range(3)]
    jobs.append(job("b-gang", 10.0, "b", iterations=4_000, gpus=2))
    tenancy = Tenancy({"a": Queue("a", {"*": 1.0}), "b": Queue("b", {"*": 1.0})})
    result = run(jobs, tiny(2), tenancy, "horus")
    frame = result.jobs.set_index("job_id")
    assert frame.loc["b-gang", "wait_reason"] == "queue-over-quota"
    assert frame.loc["a2", "wait_reason"] != "queue-over-quota"  # admitted into a free slot (the policy declined)
    assert frame.loc["b-gang", "first_start"] >= frame.loc[["a0", "a1"], "end"].min() - 1e-6
    assert frame["end"].notna().all() and result.summary["quota_violation_s"] == 0


def test_a_queue_charged_beyond_its_guarantee_reclaims_nothing_and_lends_for_another_guarantee() -> None:
    """Queue a's 2-GPU gang is admitted within its guarantee (2) but waits while a's later borrowed 1-GPU jobs
    start on four GPUs: a is charged 4, beyond its guarantee, so its gang is no longer covered by it. When b's job
    arrives within b's guarantee on a full cluster, a's borrowed GPUs are reclaimed for it. Before, the gang kept
    counting as guaranteed: a counted as an owner (not a borrower) and its 2 GPUs as wanted, so the 3 GPUs asked
    for could not be found among the other borrowers (none) and nothing was reclaimed: b waited (Philly, adaptive
    Horus, 30k jobs: such stale owners were over their guarantee by 95 GPUs in all at a failed reclaim)."""
    cluster = tiny(6)
    state = SchedulerState(cluster, build_predictor("physical", None))
    state.gated = True
    admission = Admission(Tenancy({"a": Queue("a", {"*": 2.0}), "b": Queue("b", {"*": 2.0}),
                                   "c": Queue("c", {"*": 2.0})}))
    preempted: list[str] = []

    def preempt(job_id: str) -> None:
        preempted.append(job_id)
        state.requeue(job_id, state.now)  # back to held (the state is gated)

    for spec in [job("a-gang", 0.0, "a", gpus=2), job("a1", 0.0, "a"), job("a2", 0.0, "a"), job("c0", 0.0, "c"),
                 job("c1", 0.0, "c")]:
        state.submit(spec, 0.0)
    admission.step(state, 0.0, preempt)
    assert {"a-gang", "a1", "a2", "c0", "c1"} <= set(state.queue)  # the gang within a's guarantee, a1-a2 borrowed
    for job_id, gpu in [("a1", 0), ("a2", 1), ("c0", 4), ("c1", 5)]:
        state.start(job_id, (gpu,), 0.0)
    admission.settle(state)
    for spec in [job("a3", 1.0, "a"), job("a4", 1.0, "a")]:
        state.submit(spec, 1.0)
    state.now = 1.0
    admission.step(state, 1.0, preempt)  # only a waits: its jobs are admitted
    for job_id, gpu in [("a3", 2), ("a4", 3)]:
        state.start(job_id, (gpu,), 1.0)
    admission.settle(state)
    assert admission.accounts["a"].used() == pytest.approx(4.0) and "a-gang" in state.queue
    state.submit(job("b0", 2.0, "b"), 2.0)
    state.now = 2.0
    admission.step(state, 2.0, preempt)
    assert "b0" in state.queue  # within b's guarantee
    assert admission.reclaim_for_guarantees(state, 2.0, preempt)
    assert len(preempted) == 1 and preempted[0].startswith("a")  # one of a's borrowed GPUs, for b's job
    assert admission.accounts["a"].reclaimed == 1


def test_reclaim_takes_the_job_the_policys_order_ranks_last() -> None:
    """Under SJF, queue b borrowed a GPU for a short job next to its long one; a's job within its guarantee
    reclaims one GPU. The victim is the job SJF ranks last, b's long job (its work is kept: checkpoint semantics),
    not the least attained one, b's short job, which would wait again with little left to run. Before, victims
    went least attained first whatever the policy's order (Philly 30k, adaptive Horus: mean JCT 12.4 -> 10.4 h)."""
    jobs = [job("b-long", 0.0, "b", iterations=400_000), job("b-short", 10.0, "b", iterations=20_000),
            job("a0", 20.0, "a", iterations=4_000)]
    tenancy = Tenancy({"a": Queue("a", {"*": 1.0}), "b": Queue("b", {"*": 1.0})})
    result = run(jobs, tiny(2), tenancy, "sjf-exclusive")
    frame = result.jobs.set_index("job_id")
    assert frame.loc["a0", "first_start"] == pytest.approx(20.0)
    assert frame.loc["b-long", "preemptions"] == 1 and frame.loc["b-short", "preemptions"] == 0
    assert result.summary["reclaim_preemptions"] == 1 and result.summary["quota_violation_s"] == 0


def driven(gpus: int, guarantees: dict[str, float]):  # type: ignore[no-untyped-def]
    """An admission over ``gpus`` GPUs with 2 worker slots each (a policy that co-locates) and a queue per entry of
    ``guarantees``, driven by hand: ``at(t, submit, start, finish=())`` finishes jobs, submits, steps the admission
    (nothing may be preempted), starts each ``(job, GPU)`` and settles. Returns (state, admission, at)."""
    state = SchedulerState(tiny(gpus), build_predictor("physical", None))
    state.gated = True
    admission = Admission(Tenancy({q: Queue(q, {"*": g}) for q, g in guarantees.items()}))
    admission.slots_per_gpu = 2

    def preempt(job_id: str) -> None:
        raise AssertionError(f"nothing is preempted here, got {job_id}")

    def at(t: float, submit: list[JobSpec], start: list[tuple[str, int]], finish: tuple[str, ...] = ()) -> None:
        state.now = t
        for job_id in finish:
            state.finish(job_id)
        for spec in submit:
            state.submit(spec, t)
        admission.step(state, t, preempt)
        for job_id, gpu in start:
            state.start(job_id, (gpu,), t)
        admission.settle(state)

    return state, admission, at


def test_a_borrowed_admission_whose_queue_fell_below_its_guarantee_goes_first() -> None:
    """Queue a's 2-GPU gang was admitted as a borrower (a alone waited, and ran its 2 guaranteed GPUs) and waits;
    b borrows 4 more GPUs on a co-locating policy's free slots. a's jobs end: a is charged nothing, and its waiting
    gang is within its guarantee now, so b's borrowed admissions that have not started go back to held and the 2
    idle GPUs are the gang's. Before, the gang kept counting as borrowed: b's jobs stayed admitted, the policy
    (SJF) could start them first, and no reclaim was due (Philly 30k, adaptive Horus: worst attainment 0.947 ->
    0.982)."""
    state, admission, at = driven(6, {"a": 2.0, "b": 2.0, "c": 2.0})  # a policy that co-locates (2 workers per GPU)

    at(0.0, [job("a1", 0.0, "a"), job("a2", 0.0, "a"), job("a-gang", 0.0, "a", gpus=2)], [("a1", 0), ("a2", 1)])
    at(1.0, [job("b1", 1.0, "b"), job("b2", 1.0, "b")], [("b1", 2), ("b2", 3)])
    at(2.0, [job(f"b{i}", 2.0, "b") for i in range(3, 7)], [("b3", 4), ("b4", 5)])
    assert {"a-gang", "b5", "b6"} == set(state.queue)  # a's gang admitted as a borrower, b5-b6 borrowing too
    at(3.0, [], [], finish=("a1", "a2"))
    assert admission.accounts["a"].used() == 0.0
    assert set(state.queue) == {"a-gang"} and {"b5", "b6"} <= set(state.held)


def test_reclaim_counts_the_gpus_a_borrower_occupies_not_its_fractional_charges() -> None:
    """Queue b (guaranteed 1 GPU) runs two 0.6-GPU jobs on the 2 GPUs (they cannot share one), charged 1.2; a's
    whole-GPU job within its guarantee finds no idle GPU. b occupies 2 GPUs, 1 beyond its guarantee, so one of its
    jobs is reclaimed and a's job starts at once. Before, b's excess was counted in charges (0.2 GPUs), too little
    for a whole GPU, and a's job waited for b's to end (openb, 1 % of its nodes: ``LS`` held 20 GPUs with
    fractional pods charged 15.3 against a guarantee of 19)."""
    jobs = [JobSpec(f"b{i}", 0.0, 1, "resnet18", 32, 400_000, 0.6, queue="b") for i in range(2)]
    jobs.append(job("a0", 20.0, "a", iterations=4_000))
    tenancy = Tenancy({"a": Queue("a", {"*": 1.0}), "b": Queue("b", {"*": 1.0})})
    result = run(jobs, tiny(2), tenancy)
    frame = result.jobs.set_index("job_id")
    assert frame.loc["b0", "first_start"] == 0.0 and frame.loc["b1", "first_start"] == 0.0
    assert frame.loc["a0", "first_start"] == pytest.approx(20.0)
    assert result.summary["reclaim_preemptions"] == 1 and result.summary["quota_violation_s"] == 0


def test_a_fractional_guaranteed_job_leaves_borrowed_admissions_for_free_slots() -> None:
    """A co-locating policy: each of the 2 GPUs runs one 0.5-GPU pod (a's, b's), so none is idle but each has a
    free worker slot. a's next 0.5-GPU pod (within its guarantee) and b's (borrowing) are admitted: both fit the
    2 free slots, so b's admission stays at the end of the step and is not made again at the next. Before, a's
    pod counted a whole idle GPU: b's admission was revoked at the end of every step and made again at the next
    (openb, 1 % of its nodes, horus: 751k admissions for 6,203 pods)."""
    state, admission, at = driven(2, {"a": 1.0, "b": 0.0})

    def pod(job_id: str, t: float, queue: str) -> JobSpec:
        return JobSpec(job_id, t, 1, "resnet18", 32, 400_000, 0.5, queue=queue)

    at(0.0, [pod("a1", 0.0, "a"), pod("b1", 0.0, "b")], [("a1", 0), ("b1", 1)])
    at(1.0, [pod("a2", 1.0, "a"), pod("b2", 1.0, "b")], [])
    assert set(state.queue) == {"a2", "b2"}
    at(2.0, [], [])
    assert set(state.queue) == {"a2", "b2"} and admission.accounts["b"].admitted == 2
    # the policy is told which admitted jobs their queue's guarantee covers (``horus`` places those by request)
    assert state.queue["a2"].within_guarantee and not state.queue["b2"].within_guarantee


def pod(job_id: str, t: float, queue: str, share: float) -> JobSpec:
    """A one-GPU pod of ``queue`` requesting ``share`` of a GPU."""
    return JobSpec(job_id, t, 1, "resnet18", 32, 400_000, share, queue=queue)


def reclaim_at(state: SchedulerState, admission: Admission, t: float) -> tuple[bool, list[str]]:
    """``reclaim_for_guarantees`` at ``t``, each preempted job requeued: (whether it changed anything, the jobs)."""
    preempted: list[str] = []

    def preempt(job_id: str) -> None:
        preempted.append(job_id)
        state.requeue(job_id, t)

    return admission.reclaim_for_guarantees(state, t, preempt), preempted


def test_a_guaranteed_fractional_pod_gets_a_reclaim_when_no_free_slot_has_room_for_its_request() -> None:
    """A co-locating policy: b (guaranteed 1 of 2 GPUs) runs a whole-GPU job on each GPU, so each GPU has a free
    worker slot but its requests already sum to 1. a's half-GPU pod within its guarantee cannot go to either by
    request: reclaim preempts b's borrowed job and a GPU goes idle for it. Before, any free slot of a busy GPU
    counted as room for the pod and no reclaim was made (openb, 1 % of its nodes, horus: 53 of the 103 GPU-h of
    ``BE``'s guarantee gap)."""
    state, admission, at = driven(2, {"a": 1.0, "b": 1.0})
    at(0.0, [job("b1", 0.0, "b"), job("b2", 0.0, "b")], [("b1", 0), ("b2", 1)])
    at(1.0, [pod("a1", 1.0, "a", 0.5)], [])
    assert set(state.queue) == {"a1"} and state.queue["a1"].within_guarantee
    changed, preempted = reclaim_at(state, admission, 1.0)
    assert changed and len(preempted) == 1 and preempted[0] in {"b1", "b2"}
    assert int((state.load.n_residents == 0).sum()) == 1
    # a busy GPU whose requests leave room for the pod's is room: no reclaim (a 0.5 pod of b's on a GPU of its own)
    state2, admission2, at2 = driven(2, {"a": 1.0, "b": 1.0})
    at2(0.0, [job("b1", 0.0, "b"), pod("b2", 0.0, "b", 0.5)], [("b1", 0), ("b2", 1)])
    at2(1.0, [pod("a1", 1.0, "a", 0.5)], [])
    assert set(state2.queue) == {"a1"}
    assert reclaim_at(state2, admission2, 1.0) == (False, [])


def test_a_guaranteed_pod_the_policy_keeps_off_shared_gpus_counts_a_whole_gpu_to_free() -> None:
    """b (no guarantee) runs a whole-GPU job and a half-GPU pod alone on the other GPU (both borrowed); a's half-GPU
    pod within its guarantee (1 GPU) would fit by request beside b's pod, but the policy may not share a GPU with it
    (its type failed out of memory: ``Policy.may_share`` is False, ``Admission.shares_gpu``): the free slots are no
    room for it, reclaim frees a whole GPU. Before, the slots counted and no reclaim was made (openb 1 %, horus,
    seed 2: 50 of the 89 GPU-h of ``BE``'s guarantee gap were such pods waiting while a slot with room by request
    was free)."""
    for may_share, reclaims in ((True, False), (False, True)):
        state, admission, at = driven(2, {"a": 1.0, "b": 0.0})
        admission.shares_gpu = lambda job, may=may_share: may or job.spec.queue != "a"
        at(0.0, [job("b1", 0.0, "b"), pod("b2", 0.0, "b", 0.5)], [("b1", 0), ("b2", 1)])
        at(1.0, [pod("a1", 1.0, "a", 0.5)], [])
        assert set(state.queue) == {"a1"} and state.queue["a1"].within_guarantee
        changed, preempted = reclaim_at(state, admission, 1.0)
        assert changed is reclaims and len(preempted) == (1 if reclaims else 0)
        assert int((state.load.n_residents == 0).sum()) == (1 if reclaims else 0)


def test_the_core_hands_the_admission_the_policys_may_share() -> None:
    """``SchedulerCore`` wires ``Admission.shares_gpu`` to the policy's ``may_share``: a pod whose type failed out of
    memory under horus is no sharer for the admission either."""
    from horus.core import SchedulerCore

    state = SchedulerState(tiny(2), build_predictor("physical", None))
    policy = create_policy("horus")
    core = SchedulerCore(state, policy, None, tenancy=Tenancy({"a": Queue("a", {"*": 1.0})}))  # type: ignore[arg-type]
    assert core.admission is not None
    spec = pod("p", 0.0, "a", 0.5)
    assert core.admission.shares_gpu(QueuedJob(spec, 0.0))
    policy.oom_types.add(spec.job_type)
    assert not core.admission.shares_gpu(QueuedJob(spec, 0.0))


def test_the_admission_counts_as_many_slots_per_gpu_as_the_policy_places() -> None:
    """horus-paper places up to its placement's ``max_residents`` (4) jobs on a GPU; the core gives a tenancy's
    admission that many worker slots (before: the base class's None, read as 2)."""
    from horus.core import SchedulerCore

    for name, slots in (("horus-paper", 4), ("horus", 3), ("fifo-exclusive", 1)):
        state = SchedulerState(tiny(2), build_predictor("physical", None))
        core = SchedulerCore(state, create_policy(name), None,  # type: ignore[arg-type]
                             tenancy=Tenancy({"a": Queue("a", {"*": 1.0})}))
        assert core.admission is not None and core.admission.slots_per_gpu == slots, name


def test_horus_keeps_a_type_that_failed_out_of_memory_off_shared_gpus() -> None:
    """The adaptive policy's ``may_share`` (what the admission and wait reasons read) says no for a job that, or whose
    type, failed out of memory, as its placement does."""
    policy = create_policy("horus")
    spec = JobSpec("p", 0.0, 1, "resnet18", 32, 400_000, 0.5)
    assert policy.may_share(QueuedJob(spec, 0.0))
    assert not policy.may_share(QueuedJob(spec, 0.0, oom_failures=1))
    policy.oom_types.add(spec.job_type)
    assert not policy.may_share(QueuedJob(spec, 0.0))
    solo = POLICIES.create("horus", colocate=False)
    assert not solo.may_share(QueuedJob(JobSpec("q", 0.0, 1, "vgg16", 32, 400_000), 0.0))


def test_an_admitted_gang_larger_than_its_queues_whole_guarantee_is_no_guaranteed_demand() -> None:
    """a (guaranteed 1 of 2 GPUs) alone waits, with a 2-GPU gang: admitted, it waits for b's jobs to end. No
    guarantee of a can cover it (reclaim takes such a gang back whole), so while it waits it is no guaranteed demand,
    as it is while held (``fill``). Before, the admitted gang counted its queue's whole guarantee as demanded and
    missed (openb, 1 % of its nodes, horus: 268 of the 277 GPU-h of ``Burstable``'s gap, its 8-GPU gangs against a
    guarantee of 3)."""
    state, admission, at = driven(2, {"a": 1.0, "b": 1.0})
    at(0.0, [job("b1", 0.0, "b"), job("b2", 0.0, "b")], [("b1", 0), ("b2", 1)])
    at(1.0, [job("a-gang", 1.0, "a", gpus=2), job("a1", 1.0, "a")], [])
    assert set(state.queue) == {"a-gang", "a1"}
    at(3.0, [], [])
    acc = admission.accounts["a"]
    assert acc.guaranteed_demand_gpu_s == pytest.approx(2.0)  # a1 alone: 1 GPU for 2 s
    at(4.0, [], [("a1", 0)], finish=("b1",))
    at(5.0, [], [], finish=("a1",))
    assert set(state.queue) == {"a-gang"} and acc.guaranteed_demand_gpu_s == pytest.approx(4.0)
    at(8.0, [], [])  # the gang alone waits: nothing demanded of a's guarantee
    assert acc.guaranteed_demand_gpu_s == pytest.approx(4.0)
    assert acc.guaranteed_received_gpu_s == pytest.approx(1.0)


def test_a_job_within_its_guarantee_is_admitted_behind_more_than_32_larger_held_jobs() -> None:
    """a (guaranteed 1 of 2 GPUs) runs pods requesting 0.9 of it; 40 pods requesting 0.6 are held ahead of one
    requesting 0.05, and no GPU has a free slot (b borrows). The small pod fits what is left of a's guarantee: the
    guaranteed phase looks past the larger ones and admits it. Before, 32 larger ones ended the scan and it stayed
    held, while the ledger counted it as guaranteed demand (openb, 1 % of its nodes, fifo-exclusive: 150 of the 174
    GPU-h of ``BE``'s guarantee gap)."""
    state, admission, at = driven(2, {"a": 1.0, "b": 1.0})
    at(0.0, [pod("a0", 0.0, "a", 0.5), pod("a00", 0.0, "a", 0.4), job("b1", 0.0, "b"), job("b2", 0.0, "b")],
       [("a0", 0), ("a00", 0), ("b1", 1), ("b2", 1)])
    at(1.0, [pod(f"a{i}", 1.0, "a", 0.6) for i in range(1, 41)] + [pod("a-small", 1.0, "a", 0.05),
                                                                     job("b3", 1.0, "b")], [])
    assert "a-small" in state.queue and state.queue["a-small"].within_guarantee
    assert not any(f"a{i}" in state.queue for i in range(1, 41))


def test_no_borrowed_admission_is_made_only_to_be_revoked_in_the_same_step() -> None:
    """A co-locating policy: b borrows both GPUs; a's whole-GPU job within its guarantee waits for one of them.
    b's next job would fit a free worker slot, but the end of the step revokes every borrowed admission of another
    queue while a guaranteed job waits for more than the idle GPUs: it is not admitted at all, step after step.
    Before, it was admitted and revoked at every step (openb, 1 % of its nodes, horus: 751k admissions for 6,203
    pods), going behind its queue's other held jobs each time."""
    state, admission, at = driven(2, {"a": 2.0, "b": 0.0})

    at(0.0, [job("b1", 0.0, "b"), job("b2", 0.0, "b")], [("b1", 0), ("b2", 1)])
    for t in (1.0, 2.0, 3.0):
        at(t, [job("a1", 1.0, "a"), job("b3", 1.0, "b")] if t == 1.0 else [], [])
        assert set(state.queue) == {"a1"} and "b3" in state.held
    assert admission.accounts["b"].admitted == 2


def test_reclaim_takes_back_a_gang_larger_than_its_queues_whole_guarantee() -> None:
    """b (guaranteed 2 of 4 GPUs) runs a 4-GPU gang, 2 GPUs beyond its guarantee; a's 1-GPU job within its
    guarantee arrives. The gang only ever runs on borrowed GPUs (larger than b's whole guarantee), so reclaim
    preempts it although b falls below its guarantee, and a's job starts at once. Before, reclaim never took a
    borrower below its guarantee and a's job waited for the gang to end (openb, 1 % of its nodes: ``Burstable``,
    guaranteed 3, ran an 8-GPU gang while ``BE``'s guaranteed pods waited; worst attainment, fifo-exclusive,
    0.715 -> 0.871)."""
    jobs = [job("b-gang", 0.0, "b", gpus=4, iterations=40_000), job("a0", 20.0, "a", iterations=4_000)]
    tenancy = Tenancy({"a": Queue("a", {"*": 2.0}), "b": Queue("b", {"*": 2.0})})
    result = run(jobs, tiny(4), tenancy)
    frame = result.jobs.set_index("job_id")
    assert frame.loc["a0", "first_start"] == pytest.approx(20.0)
    assert frame.loc["b-gang", "preemptions"] == 1 and frame.loc["b-gang", "end"] > frame.loc["a0", "end"]
    assert result.summary["reclaim_preemptions"] == 1 and result.summary["quota_violation_s"] == 0


def test_reclaim_of_a_gang_beyond_its_queues_guarantee_spares_that_queues_jobs_it_does_not_need() -> None:
    """b (guaranteed 2 of 6 GPUs) runs two 1-GPU jobs and a 4-GPU gang; a's 3-GPU gang within its guarantee
    arrives. The 1-GPU jobs rank first as victims but free only 2 GPUs; the gang, larger than b's whole guarantee,
    is taken whole and frees 4 alone. Only the gang is preempted: b keeps its 1-GPU jobs (its guarantee). Before,
    the 1-GPU jobs planned ahead of the gang stayed in the plan: 3 preemptions, b left with nothing (found in
    review)."""
    jobs = [job("b1", 0.0, "b", iterations=40_000), job("b2", 0.0, "b", iterations=40_000),
            job("b-gang", 0.0, "b", gpus=4, iterations=40_000), job("a-gang", 20.0, "a", gpus=3, iterations=4_000)]
    tenancy = Tenancy({"a": Queue("a", {"*": 4.0}), "b": Queue("b", {"*": 2.0})})
    result = run(jobs, tiny(6), tenancy)
    frame = result.jobs.set_index("job_id")
    assert frame.loc["a-gang", "first_start"] == pytest.approx(20.0)
    assert frame.loc["b-gang", "preemptions"] == 1
    assert frame.loc["b1", "preemptions"] == 0 and frame.loc["b2", "preemptions"] == 0
    assert result.summary["reclaim_preemptions"] == 1 and result.summary["quota_violation_s"] == 0


def owed_gang_run(policy: str):  # type: ignore[no-untyped-def]
    """8 GPUs: queue a (guaranteed 2, weight 2) keeps them full with 48 long 1-GPU jobs admitted at once (it alone
    waited), borrowing 4-6 GPUs; queue b (guaranteed 0, weight 1; fair share 2 GPUs while contended) submits a
    4-GPU gang at 60 s; queue c (guaranteed 2) runs two jobs from 0 (ended by 10 h) and submits two more at 10 h."""
    jobs = [job(f"a{i}", 0.0, "a", iterations=200_000) for i in range(48)]
    jobs += [job("c0", 0.0, "c", iterations=100_000), job("c1", 0.0, "c", iterations=100_000)]
    jobs += [job("b-gang", 60.0, "b", iterations=200_000, gpus=4)]
    jobs += [job(f"c-late{i}", 36_000.0, "c", iterations=50_000) for i in range(2)]
    tenancy = Tenancy({"a": Queue("a", {"*": 2.0}, weight=2.0), "b": Queue("b", {"*": 0.0}, weight=1.0),
                       "c": Queue("c", {"*": 2.0}, weight=1.0)})
    return run(jobs, tiny(8), tenancy, policy)


@pytest.mark.parametrize("policy", ["fifo-exclusive", "horus", "horus-paper", "tiresias"])
def test_a_zero_guarantee_gang_owed_its_fair_share_reclaims_borrowed_gpus(policy: str) -> None:
    """Fair-share reclaim by accumulated deficit: b's gang, beyond its share, never finds 4 idle GPUs while a's
    backlog lasts (a's admitted jobs take every GPU that frees; a co-locating policy leaves none idle). Once b has
    been owed its gang's request for ``FAIR_RECLAIM_S`` (2 GPUs x 2 h), a's borrowed jobs are preempted for it and
    it runs, long before a's backlog drains (before: after a's last job had started; Tiresias' own LAS order
    starts it when c's jobs end). Guarantees hold: a never
    goes below its 2 GPUs, c's late jobs start at their arrival (reclaim for guarantees goes first), c's jobs are
    never preempted."""
    result = owed_gang_run(policy)
    frame = result.jobs.set_index("job_id")
    a_jobs = frame[frame.index.str.startswith("a")]
    gang = frame.loc["b-gang"]
    assert 7_200.0 <= gang["first_start"] < a_jobs["first_start"].max()
    assert gang["first_start"] < 36_000.0
    assert (frame.loc[["c0", "c1", "c-late0", "c-late1"], "preemptions"] == 0).all()
    assert (frame.loc[["c-late0", "c-late1"], "first_start"] - 36_000.0 < 120.0).all()
    queues = result.queues.set_index("queue")
    assert queues.loc["a", "guarantee_attainment"] > 0.999 and queues.loc["c", "guarantee_attainment"] > 0.999
    assert result.summary["quota_violation_s"] == 0 and frame["end"].notna().all()
    if policy != "tiresias":  # Tiresias' LAS starts it when c's jobs end
        assert result.summary["fair_reclaim_preemptions"] >= 1  # the gang got GPUs by fair-share reclaim, and says so


@pytest.mark.parametrize("policy", ["fifo-exclusive", "horus"])
def test_a_queue_helped_toward_its_fair_share_is_not_reclaimed_from_at_once(policy: str) -> None:
    """No ping-pong: x's 8-GPU gang holds the cluster when y's arrives (x, y, z guaranteed 0; z's small jobs arrive
    every 30 min); once y is owed 8 GPUs x 1 h, x's gang is reclaimed for y's. Then x is owed more and more while y's long gang runs
    beyond its share, yet y's gang is never taken back (a job given GPUs by fair-share reclaim is not reclaimed by
    it): x's gang is preempted once and resumes when y's ends."""
    jobs = [job("x-gang", 0.0, "x", iterations=3_000_000, gpus=8),
            job("y-gang", 60.0, "y", iterations=3_000_000, gpus=8)]
    jobs += [job(f"z{i}", 1_800.0 * (i + 1), "z", iterations=1_000) for i in range(200)]  # steps (events) for reclaim
    tenancy = Tenancy({"x": Queue("x", {"*": 0.0}), "y": Queue("y", {"*": 0.0}), "z": Queue("z", {"*": 0.0})})
    result = run(jobs, tiny(8), tenancy, policy)
    frame = result.jobs.set_index("job_id")
    assert frame.loc["y-gang", "preemptions"] == 0 and frame.loc["x-gang", "preemptions"] == 1
    assert frame.loc["y-gang", "first_start"] < frame.loc["x-gang", "end"]
    assert frame["end"].notna().all() and result.summary["quota_violation_s"] == 0


def test_a_rebuilt_admission_keeps_the_fair_share_ledger_and_the_jobs_it_helped() -> None:
    """The live service rebuilds its admission when agents join or leave (``carry_ledger``): the fair-share deficit
    and the record of jobs the fair-share reclaim helped (never reclaimed by it again) carry over for the queues
    both know; a queue the new tenancy dropped takes its record with it."""
    from horus.service.tenants import carry_ledger

    old = Admission(Tenancy({"a": Queue("a", {"*": 1.0}), "b": Queue("b", {"*": 0.0})}))
    old.accounts["b"].fair_deficit_gpu_s = 7_200.0
    old._helped.update({"b-gang": "b", "a-job": "a"})
    new = Admission(Tenancy({"b": Queue("b", {"*": 0.0}), "c": Queue("c", {"*": 1.0})}))
    carry_ledger(old, new)
    assert new.accounts["b"].fair_deficit_gpu_s == 7_200.0 and new.accounts["c"].fair_deficit_gpu_s == 0.0
    assert new._helped == {"b-gang": "b"}
