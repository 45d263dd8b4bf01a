"""oracle-truth: co-locates only where the true summed completion time falls (gangs, remaining work, waiting)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from policies_fakes import TablePredictor, cluster, make_state, policy, queue, run_job, spec, starts

from horus.cluster import GPUType
from horus.core import OracleNeedsTruthError, SchedulerCore
from horus.errors import OracleAccessError
from horus.policies.oracle_truth import TrueCompletionOracle, TrueWorld
from horus.sim.engine import simulate
from horus.truth.base import SoloTruth, TruthModel

# catalog models (multi-GPU jobs need a gradient size for their all-reduce): (util, mem MiB, iteration s)
TABLE = {"resnet50": (0.5, 4000.0, 1.0), "bert_base": (0.5, 4000.0, 1.0), "a3c": (0.5, 4000.0, 1.0),
         "big": (0.5, 15_000.0, 1.0)}


class PairTruth(TruthModel):
    """Hand-written truth: solo values from ``TABLE``; a listed pair (sorted model names) gets its
    throughputs, every other set ``default`` each."""

    name = "pair-truth"

    def __init__(self, pairs: dict[tuple[str, str], tuple[float, float]], default: float = 0.5) -> None:
        self.pairs = pairs
        self.default = default
        self.reads = 0

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        self.reads += 1
        return SoloTruth(*TABLE[job_type.split("/")[0]])

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        self.reads += 1
        models = [t.split("/")[0] for t in job_types]
        if len(models) == 1:
            return [1.0]
        key = tuple(sorted(models))
        if len(models) == 2 and key in self.pairs:
            values = self.pairs[key]  # type: ignore[index]
            return list(values) if models == list(key) else list(reversed(values))
        return [self.default] * len(models)


def oracle(truth: TruthModel, **kwargs: object) -> TrueCompletionOracle:
    pol = policy("oracle-truth", **kwargs)
    assert isinstance(pol, TrueCompletionOracle)
    pol.bind_truth(truth)
    return pol


def one_gpu_with_resident(iterations: float = 1000.0):
    state = make_state(TABLE, nodes=1, gpus_per_node=1)
    run_job(state, "r", "resnet50", (0,), iterations=iterations)
    queue(state, "j", "a3c", iterations=1000.0)
    return state


# ---- the objective on hand-computed numbers --------------------------------------------------------
def test_true_delta_matches_the_hand_computed_completion_times() -> None:
    state = one_gpu_with_resident()
    world = TrueWorld(PairTruth({("a3c", "resnet50"): (0.7, 0.7)}), state.cluster, 0.0)
    world.sync(state)
    # together: both at 0.7 -> both end at 1000 / 0.7; apart: r ends at 1000, j runs 1000..2000
    delta = world.completion_sum(state.queue["j"].spec, (0,), 1000.0, wait_until=1000.0)
    assert delta == pytest.approx(2 * 1000 / 0.7 - (1000 + 2000))


def test_the_replica_follows_finishes_it_was_not_called_for() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=1)
    run_job(state, "r1", "resnet50", (0,), iterations=100.0)
    run_job(state, "r2", "a3c", (0,), iterations=1000.0)
    world = TrueWorld(PairTruth({("a3c", "resnet50"): (0.8, 0.5)}), state.cluster, 0.0)
    world.sync(state)
    state.finish("r1")  # truly at 100 / 0.5 = 200 s, while r2 ran at 0.8
    state.now = 1000.0
    world.sync(state)
    assert world.jobs["r2"].rem == pytest.approx(1000.0 - 200 * 0.8 - 800 * 1.0)


# ---- decisions -----------------------------------------------------------------------------------
def test_colocates_a_pair_whose_true_combined_throughput_exceeds_one_when_a_job_waits() -> None:
    state = one_gpu_with_resident()
    assert starts(oracle(PairTruth({("a3c", "resnet50"): (0.7, 0.7)})).schedule(state)) == {"j": (0,)}


def test_refuses_a_pair_whose_true_combined_throughput_is_below_one() -> None:
    state = one_gpu_with_resident()
    assert oracle(PairTruth({("a3c", "resnet50"): (0.45, 0.45)})).schedule(state) == []


def test_refuses_a_good_pair_when_the_resident_is_about_to_finish() -> None:
    # Combined throughput 1.2, but the resident ends in 10 s: waiting costs the newcomer 10 s, sharing
    # slows both; the summed completion time would grow.
    state = one_gpu_with_resident(iterations=10.0)
    assert oracle(PairTruth({("a3c", "resnet50"): (0.6, 0.6)})).schedule(state) == []


def test_refuses_to_slow_a_gang_when_the_gain_does_not_pay() -> None:
    # A 2-GPU gang with 10,000 s left on GPUs 0-1; GPUs 2-3 free up in 100 s. Joining a gang GPU raises
    # that GPU's summed throughput (0.55 + 0.9 = 1.45) but slows the whole gang to 0.55 for 8,000+ s
    # to save the newcomer ~100 s: refused. It waits for GPU 2 or 3 instead.
    state = make_state(TABLE, nodes=1, gpus_per_node=4)
    run_job(state, "gang", "resnet50", (0, 1), iterations=10_000.0)
    run_job(state, "s2", "bert_base", (2,), iterations=100.0)
    run_job(state, "s3", "bert_base", (3,), iterations=100.0)
    queue(state, "j", "a3c", iterations=1000.0)
    truth = PairTruth({("a3c", "resnet50"): (0.9, 0.55)}, default=0.4)
    assert oracle(truth).schedule(state) == []


def test_a_gang_is_only_as_slow_as_its_slowest_worker() -> None:
    # The gang already runs at the pace of GPU 1 (x = 0.5 beside s1): a newcomer on GPU 0 that leaves
    # the gang's worker there x = 0.5 too costs the gang nothing, so sharing pays even against a short wait.
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    run_job(state, "gang", "resnet50", (0, 1), iterations=10_000.0)
    run_job(state, "s1", "bert_base", (1,), iterations=10_000.0)
    queue(state, "j", "a3c", iterations=1000.0)
    truth = PairTruth({("a3c", "resnet50"): (0.9, 0.5), ("bert_base", "resnet50"): (0.9, 0.5)})
    assert starts(oracle(truth).schedule(state)) == {"j": (0,)}
    j = state.queue["j"].spec
    world = TrueWorld(truth, state.cluster, state.now)
    world.sync(state)
    assert world.completion_sum(j, (0,), 1000.0, wait_until=500.0) == pytest.approx(1000 / 0.9 - 1500)
    # With GPU 1 to itself the gang would run at 0.5 on all its GPUs while the newcomer runs (1,111 s):
    # ~555 s lost by the gang against 389 s saved by the newcomer.
    state.finish("s1")
    world = TrueWorld(truth, state.cluster, state.now)
    world.sync(state)
    assert world.completion_sum(j, (0,), 1000.0, wait_until=500.0) > 100


def test_a_gang_newcomer_shares_only_when_it_pays() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    run_job(state, "r", "resnet50", (0,), iterations=5000.0)
    queue(state, "g", "bert_base", gpus=2, iterations=1000.0)  # GPU 1 idle, GPU 0 busy for 5,000 s
    assert starts(oracle(PairTruth({("bert_base", "resnet50"): (0.8, 0.8)})).schedule(state)) == {"g": (1, 0)}  # idle GPU first
    assert oracle(PairTruth({("bert_base", "resnet50"): (0.3, 0.6)})).schedule(state) == []


def test_true_memory_is_a_hard_limit() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=1)
    run_job(state, "r", "resnet50", (0,), iterations=1000.0)
    queue(state, "j", "big", iterations=1000.0)  # 4,000 + 15,000 MiB > 16,000
    assert oracle(PairTruth({("big", "resnet50"): (0.9, 0.9)})).schedule(state) == []


def test_idle_gpus_are_used_before_any_sharing() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    run_job(state, "r", "resnet50", (0,), iterations=1000.0)
    queue(state, "j", "a3c", iterations=1000.0)
    assert starts(oracle(PairTruth({("a3c", "resnet50"): (0.9, 0.9)})).schedule(state)) == {"j": (1,)}


# ---- the truth stays behind bind_truth ---------------------------------------------------------
def test_never_reads_the_truth_without_bind_truth() -> None:
    state = one_gpu_with_resident()
    pol = policy("oracle-truth")
    assert pol.is_oracle and pol.describe()["reads_truth"] is True and pol.describe()["upper_bound"] is False
    with pytest.raises(OracleAccessError):
        pol.schedule(state)
    with pytest.raises(OracleNeedsTruthError, match="truth"):
        SchedulerCore(state, pol, executor=None, truth=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pol.bind_truth(object())


def test_oracle_is_the_name_kept_for_oracle_truth() -> None:
    pol = policy("oracle")
    assert isinstance(pol, TrueCompletionOracle) and pol.name == "oracle-truth" and pol.is_oracle
    old = policy("oracle-horus-rule")
    assert old.is_oracle and not isinstance(old, TrueCompletionOracle)


# ---- end to end in the simulator -----------------------------------------------------------------
def burst(n: int) -> list:
    return [spec(f"j{i}", ("resnet50", "a3c")[i % 2], iterations=1000.0 + 100 * i) for i in range(n)]


def test_never_colocates_where_every_pair_loses_and_then_matches_fifo_exclusive() -> None:
    truth = PairTruth({}, default=0.45)
    jobs, cl = burst(12), cluster(1, 2)
    result = simulate(jobs, cl, oracle(truth), truth, TablePredictor(TABLE))
    fifo = simulate(jobs, cl, policy("fifo-exclusive"), truth, TablePredictor(TABLE))
    assert not result.jobs["colocated"].any()
    assert result.summary["mean_jct_s"] == pytest.approx(fifo.summary["mean_jct_s"])


def test_colocation_that_truly_pays_beats_fifo_exclusive_on_a_congested_queue() -> None:
    truth = PairTruth({("a3c", "resnet50"): (0.8, 0.8)}, default=0.45)
    jobs, cl = burst(12), cluster(1, 2)
    result = simulate(jobs, cl, oracle(truth), truth, TablePredictor(TABLE))
    fifo = simulate(jobs, cl, policy("fifo-exclusive"), truth, TablePredictor(TABLE))
    assert result.jobs["colocated"].any()
    assert result.summary["mean_jct_s"] < 0.9 * fifo.summary["mean_jct_s"]


def test_counts_the_jobs_waiting_behind() -> None:
    # Sharing at combined throughput 1.1 costs the pair 636 s (both end at 1,818 s instead of 1,000 and
    # 2,000) but frees the GPU 182 s earlier for each of the five jobs queued behind: 910 s saved.
    state = one_gpu_with_resident()
    for n in range(5):
        queue(state, f"later{n}", "bert_base", iterations=1000.0)
    truth = PairTruth({("a3c", "resnet50"): (0.55, 0.55)}, default=0.3)
    assert oracle(truth, queue_effect=False).schedule(state) == []
    assert starts(oracle(truth).schedule(state)) == {"j": (0,)}
