"""Queue orders (fifo, sjf, tiresias), Tiresias preemption, the oracle and the registries."""

from __future__ import annotations

import pytest
from policies_fakes import TableTruth, make_state, policy, queue, run_job, spec, starts

from horus.errors import OracleAccessError
from horus.policies.base import POLICIES, Preempt, Start
from horus.policies.parts.compose import make_composed
from horus.policies.parts.ordered import ORDERS, PLACEMENTS
from horus.policies.tiresias import queue_index

TABLE = {
    "short": (0.5, 2000.0, 0.1), "long": (0.5, 2000.0, 10.0), "a": (0.5, 2000.0, 1.0),
    "low_pred_mem": (0.3, 3000.0, 1.0), "res": (0.4, 8000.0, 1.0), "x": (0.3, 2000.0, 1.0), "y": (0.3, 2000.0, 1.0),
}


def test_fifo_orders_by_queue_entry_and_requeued_jobs_go_last() -> None:
    state = make_state(TABLE)
    for t, jid in enumerate(["j0", "j1", "j2"]):
        state.now = float(t)
        queue(state, jid, "a")
    state.start("j0", (0,), 2.0)
    state.requeue("j0", 5.0)
    fifo = ORDERS.create("fifo")
    assert [j.spec.job_id for j in fifo.order(list(state.queue.values()), state)] == ["j1", "j2", "j0"]
    assert [j.spec.job_id for j in fifo.head(state, 2)] == ["j1", "j2"]


def test_sjf_starts_the_shortest_predicted_job_first() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=1)
    queue(state, "long", "long", iterations=100)  # 1,000 s predicted
    queue(state, "short", "short", iterations=1000)  # 100 s predicted
    assert starts(policy("sjf-exclusive").schedule(state)) == {"short": (0,)}
    assert starts(policy("fifo-exclusive").schedule(state)) == {"long": (0,)}


def test_sjf_counts_progress_before_preemption() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=1)
    queue(state, "x", "a", iterations=1000)  # 1,000 s
    queue(state, "y", "a", iterations=600)  # 600 s
    state.start("x", (0,), 0.0)
    state.now = 800.0
    state.requeue("x", 800.0)  # attained 800 GPU-s -> ~200 s left
    order = ORDERS.create("sjf").head(state, 2)
    assert [j.spec.job_id for j in order] == ["x", "y"]


def test_tiresias_queue_index_and_order_by_attained_service() -> None:
    assert [queue_index(s, (3600.0, 36000.0)) for s in (0.0, 3599.0, 3600.0, 40000.0)] == [0, 0, 1, 2]
    state = make_state(TABLE)
    queue(state, "old", "a")
    state.start("old", (0,), 0.0)
    state.requeue("old", 7200.0)  # 7,200 GPU-s attained -> queue 1
    state.now = 7300.0
    queue(state, "fresh", "a")
    order = ORDERS.create("tiresias").head(state, 2)
    assert [j.spec.job_id for j in order] == ["fresh", "old"]


def test_tiresias_preempts_lower_priority_jobs_and_does_not_reuse_their_gpus_in_the_same_call() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    run_job(state, "r0", "a", (0,))
    run_job(state, "r1", "a", (1,))
    state.running["r1"].attained_gpu_s = 50_000.0  # queue 2; r0 will be in queue 1
    state.now = 5000.0
    queue(state, "new", "a")
    pol = policy("tiresias")
    assert pol.tick_s and pol.tick_s > 0
    actions = pol.schedule(state)
    assert actions == [Preempt("r1")]  # least priority first; no Start on the freed GPU yet
    state.requeue("r1", state.now)
    state.now += 1.0
    assert starts(pol.schedule(state)) == {"new": (1,)}


def test_tiresias_does_not_preempt_jobs_of_the_same_queue() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=1)
    run_job(state, "r0", "a", (0,))
    state.now = 100.0  # r0 attained 100 GPU-s: same queue as a fresh job
    queue(state, "new", "a")
    assert policy("tiresias").schedule(state) == []


# ---- oracle -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["oracle", "oracle-truth", "oracle-horus-rule"])
def test_oracle_is_an_oracle_and_requires_the_truth(name: str) -> None:
    oracle = policy(name)
    described = oracle.describe()
    assert oracle.is_oracle and described["reads_truth"] is True and described["upper_bound"] is False
    state = make_state(TABLE)
    queue(state, "j", "a")
    with pytest.raises(OracleAccessError):
        oracle.schedule(state)


@pytest.mark.parametrize("name", ["fifo-exclusive", "sjf-exclusive", "gandiva", "horus", "tiresias"])
def test_non_oracle_policies_refuse_the_truth(name: str) -> None:
    pol = policy(name)
    assert not pol.is_oracle
    with pytest.raises(TypeError):
        pol.bind_truth(TableTruth(TABLE))


@pytest.mark.parametrize("name", ["oracle", "oracle-horus-rule"])
def test_oracle_uses_true_memory_where_horus_trusts_the_prediction(name: str) -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=1)
    run_job(state, "r", "res", (0,))
    queue(state, "j", "low_pred_mem")  # predicted 3,000 MiB: fits beside 8,000 MiB
    assert starts(policy("horus-paper").schedule(state)) == {"j": (0,)}
    truth_table = {**TABLE, "low_pred_mem": (0.3, 9000.0, 1.0)}  # truly 9,000 MiB: 17,000 > 16,000
    oracle = policy(name)
    oracle.bind_truth(TableTruth(truth_table))
    assert oracle.schedule(state) == []


@pytest.mark.parametrize("name", ["oracle", "oracle-horus-rule"])
def test_oracle_picks_the_gpu_with_the_best_true_colocated_throughput(name: str) -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    run_job(state, "rx", "x", (0,))
    run_job(state, "ry", "y", (1,))
    queue(state, "j", "a")
    # Predictions tie (GPU 0 wins by index); the truth says "a" pairs much better with "y".
    assert starts(policy("horus-paper").schedule(state)) == {"j": (0,)}
    truth = TableTruth(TABLE, pairs={("a", "x"): (0.5, 0.5), ("a", "y"): (0.9, 0.9)})
    oracle = policy(name)
    oracle.bind_truth(truth)
    assert starts(oracle.schedule(state)) == {"j": (1,)}


# ---- registries ---------------------------------------------------------------------------------
def test_registered_names_and_composition_by_name() -> None:
    assert {"fifo-exclusive", "sjf-exclusive", "tiresias", "gandiva", "horus", "oracle-truth",
            "oracle-horus-rule"} <= set(POLICIES.names())
    assert "oracle" in POLICIES and "oracle" not in POLICIES.names()  # an alias: runs once in "every policy"
    assert {"fifo", "sjf", "tiresias"} <= set(ORDERS.names())
    assert {"exclusive", "gandiva", "horus"} <= set(PLACEMENTS.names())
    combo = make_composed("sjf", "horus", placement_args={"util_cap": 1.0})
    assert combo.name == "sjf-horus"
    state = make_state(TABLE, nodes=1, gpus_per_node=1)
    state.submit(spec("l", "long"), 0.0)
    state.submit(spec("s", "short"), 0.0)
    actions = combo.schedule(state)
    assert isinstance(actions[0], Start) and actions[0].job_id == "s"


def test_keyed_order_sees_a_job_that_joined_before_a_readmitted_one_and_ranks_the_readmitted_last() -> None:
    """A held job admitted again is a new queue entry (``SchedulerState.admit``): it must not hide the entries
    that joined before it, and among equal keys it ranks after the jobs already queued."""
    from horus.policies.orders.sjf import SjfOrder

    state = make_state({"m": (0.5, 1000.0, 0.1)})
    order = SjfOrder()
    queue(state, "a", "m")
    queue(state, "b", "m")
    assert [j.spec.job_id for j in order.head(state, 10)] == ["a", "b"]
    state.hold("a")
    queue(state, "c", "m")
    state.admit("a")
    assert [j.spec.job_id for j in order.head(state, 10)] == ["b", "c", "a"]
    assert [j.spec.job_id for j in order.tail(state, 10)] == ["a", "c", "b"]
    state.withdraw("c")
    assert [j.spec.job_id for j in order.tail(state, 10)] == ["a", "b"]
    assert [j.spec.job_id for j in order.head(state, 10)] == ["b", "a"]
