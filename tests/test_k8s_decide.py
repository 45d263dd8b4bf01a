"""The extender's decisions (horus.k8s.decide) in process, on nodes and pods parsed from dicts as the extender does.

Per node: the verdict (unknown node, unusable node, too few GPUs, wrong GPU type, no fit, ok) with its message and
whether preempting would help; the GPUs and cost per worker the policy's placement picks; the 0..10 scores
(cheapest feasible node 10, one point lost per 0.1 of extra cost per worker, infeasible 0; on the policy path the
node the policy picks 10 and the other feasible ones 5); the cache that must follow the model's load.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
import pytest

from horus.errors import HorusInputError
from horus.k8s.decide import (COST_PER_POINT, NO_FIT, OK, Decider, NodeChoice, PreemptionUnsupported, Verdicts,
                              _NodeTable, scores)
from horus.k8s.model import ClusterModel
from horus.k8s.protocol import host_prefix, host_priority_json
from horus.k8s.predictor import PodPredictor
from horus.k8s.resources import pod_job_spec
from horus.predict.analytic import AnalyticPredictor
from horus.state import QueuedJob
from k8s_helpers import cpu_node, gpu_node, gpu_pod

PREDICTOR = PodPredictor(AnalyticPredictor())
NAMES = ["a", "b", "t4", "cpu", "ghost"]


def running(name: str, node: str, gpu_ids: str, **kw: Any) -> dict[str, Any]:
    return gpu_pod(name, node=node, phase="Running", annotations={"horus.io/gpu-ids": gpu_ids}, **kw)


def world(*extra: dict[str, Any]) -> ClusterModel:
    """a: 2 V100 (GPU 0 busy); b: 4 V100 (GPU 1 busy with vgg16); t4: 2 T4, idle; cpu: no GPUs."""
    nodes = [gpu_node("a", 2), gpu_node("b", 4), gpu_node("t4", 2, product="Tesla-T4", memory=15360), cpu_node("cpu")]
    pods = [running("r0", "a", "0"), running("r1", "b", "1", model="vgg16"), *extra]
    return ClusterModel(nodes, pods, PREDICTOR)


def pending(gpus: int = 1, *, gpu_type: str | None = None, name: str = "p") -> Any:
    pod = gpu_pod(name, gpus=gpus, model="resnet18", batch=16)
    if gpu_type is not None:
        pod["metadata"]["annotations"]["horus.io/gpu-type"] = gpu_type
    return pod_job_spec(pod)


# ---- construction -------------------------------------------------------------------------------------------
def test_unknown_policy_is_an_input_error_listing_the_known_ones() -> None:
    with pytest.raises(HorusInputError) as info:
        Decider("no-such-policy")
    assert info.value.source == "--policy"
    assert "unknown policy 'no-such-policy'" in info.value.message
    assert "horus-paper" in info.value.message and "gandiva" in info.value.message


def test_oracle_policies_are_refused() -> None:
    with pytest.raises(HorusInputError, match="'oracle-truth' is an oracle") as info:
        Decider("oracle-truth")
    assert info.value.source == "--policy"


@pytest.mark.parametrize("policy,path", [("horus-paper", "placement"), ("fifo-exclusive", "placement"),
                                         ("tiresias", "placement"), ("sjf-horus", "placement"),
                                         ("gandiva-greedy", "placement"), ("gandiva", "policy"), ("geng", "policy"),
                                         ("horus-iasp", "policy"), ("horus", "policy")])
def test_path_follows_whether_the_policy_decides_by_its_placement(policy: str, path: str) -> None:
    decider = Decider(policy)
    assert decider.path == path and (decider.placement is not None) == (path == "placement")
    described = decider.describe()
    assert described["path"] == path and described["policy"] == decider.new_policy().describe()
    assert decider.new_policy() is not decider.new_policy()  # a fresh policy per question


def test_policy_args_reach_the_policy() -> None:
    spec = pending()
    shared = Decider("horus-paper").evaluate(world(), spec, ["a"])["a"]
    alone = Decider("horus-paper", {"max_residents": 1}).evaluate(world(), spec, ["a"])["a"]
    assert shared.gpus is not None and alone.gpus == (1,)  # GPU 0 of "a" already holds one resident
    busy = world(running("r2", "a", "1"))
    assert Decider("horus-paper", {"max_residents": 1}).evaluate(busy, spec, ["a"])["a"].gpus is None


# ---- verdicts and their messages -----------------------------------------------------------------------------
def test_each_verdict_has_its_reason_and_resolvability() -> None:
    model = world()
    verdicts = Decider("horus-paper").evaluate(model, pending(2, gpu_type="V100"), ["a", "b", "t4", "cpu", "ghost"])
    assert verdicts.passed() == ["b"]
    a, b, t4, cpu, ghost = verdicts.values()
    assert a == NodeChoice(None, math.inf, "[colocation-would-not-pay] Horus policy 'horus-paper': no 2 GPU(s) here "
                                           "fit the pod's predicted load", False)
    assert b.gpus == (0, 2) and b.reason == "" and not b.unresolvable and math.isfinite(b.cost)
    assert t4 == NodeChoice(None, math.inf, "[no-gpu-of-type] Horus: GPU type T4 not in the pod's request 'V100'", True)
    assert cpu.gpus is None and cpu.unresolvable
    assert cpu.reason == f"[node-problem] Horus: {model.nodes['cpu'].problem}"
    assert "no GPUs" in cpu.reason
    assert ghost == NodeChoice(None, math.inf, "[node-unknown] node not (yet) known to the Horus extender", False)
    four = Decider("horus-paper").evaluate(model, pending(4), ["a", "t4", "cpu", "ghost"])
    too_few = "[gang-too-large] Horus: node has 2 GPUs, pod needs 4 on one node"
    assert four["a"] == NodeChoice(None, math.inf, too_few, True)
    assert four["t4"].reason == too_few
    assert four["cpu"].reason == cpu.reason and four["ghost"].reason == ghost.reason  # the first problem is named


def test_failed_splits_nodes_by_whether_preemption_would_help() -> None:
    model = world(running("r2", "a", "1"), running("r3", "b", "0,2,3", gpus=3))
    verdicts = Decider("fifo-exclusive").evaluate(model, pending(1, gpu_type="V100|T4"), ["ghost", "a", "cpu", "b",
                                                                                          "t4"])
    assert verdicts.passed() == ["t4"]
    failed, unresolvable = verdicts.failed()
    no_fit = "[waiting-for-gpus] Horus policy 'fifo-exclusive': no 1 GPU(s) here fit the pod's predicted load"
    unknown = "[node-unknown] node not (yet) known to the Horus extender"
    assert failed == {"ghost": unknown, "a": no_fit, "b": no_fit}
    assert list(unresolvable) == ["cpu"]
    wrong = Decider("fifo-exclusive").evaluate(model, pending(1, gpu_type="T4"), ["a", "t4", "b"])
    failed, unresolvable = wrong.failed()
    assert failed == {} and wrong.passed() == ["t4"]
    assert unresolvable == {n: "[no-gpu-of-type] Horus: GPU type V100 not in the pod's request 'T4'" for n in ("a", "b")}
    nothing = Decider("fifo-exclusive").evaluate(model, pending(1), ["t4"])
    assert nothing.failed() == ({}, {})
    no_fit_first = Decider("fifo-exclusive").evaluate(model, pending(1), ["a", "ghost", "cpu"])
    assert no_fit_first.failed() == ({"a": no_fit, "ghost": unknown},
                                     {"cpu": no_fit_first["cpu"].reason})


def test_gpu_type_request_accepts_any_listed_type() -> None:
    model = world()
    both = Decider("horus-paper").evaluate(model, pending(1, gpu_type="V100 | T4"), ["a", "t4"])
    assert both.passed() == ["a", "t4"]
    anything = Decider("horus-paper").evaluate(model, pending(1), ["a", "t4"])
    assert anything.passed() == ["a", "t4"]


# ---- placement path: GPUs and cost per worker -----------------------------------------------------------------
@pytest.mark.parametrize("policy", ["horus-paper", "fifo-exclusive"])
@pytest.mark.parametrize("k", [1, 2, 4])
def test_placement_path_picks_the_cheapest_gpus_of_each_node(policy: str, k: int) -> None:
    """On each node the k cheapest feasible GPUs of the placement's cost (ties: lowest index), and their mean cost
    as the cost per worker; a node without k feasible GPUs does not pass."""
    model = world(running("r2", "b", "3", model="resnet50"))
    spec = pending(k)
    decider = Decider(policy)
    verdicts = decider.evaluate(model, spec, ["a", "b", "t4"])
    placement = decider.new_policy().placement
    placement.begin(model.state.load, model.state)
    cost = placement.cost_per_gpu(QueuedJob(spec, queued_since=0.0), model.state.load, model.state)
    for name in ("a", "b", "t4"):
        first = int(model.first_gpu[model.node_index[name]])
        local = cost[first:first + model.nodes[name].num_gpus]
        order = sorted(range(len(local)), key=lambda g: (local[g], g))[:k]
        choice = verdicts[name]
        if len(order) < k or not np.isfinite(local[order]).all():
            assert choice.gpus is None and choice.cost == math.inf, name
        else:
            assert choice.gpus == tuple(order), name
            assert choice.cost == pytest.approx(float(np.mean(local[order])), rel=1e-12), name
            assert choice.gpus == decider.ask(model.restricted([name]), spec)  # one node: its own indices


def test_placement_cache_follows_the_model_and_the_pod() -> None:
    model = world()
    decider = Decider("fifo-exclusive")
    assert decider.evaluate(model, pending(1), ["a"])["a"].gpus == (1,)
    assert decider.evaluate(model, pending(2), ["t4"])["t4"].gpus == (0, 1)  # another pod shape: not the cache
    assert decider.evaluate(model, pending(2, gpu_type="T4"), ["t4"])["t4"].gpus == (0, 1)
    model.add_pod(running("r2", "a", "1"))  # the load changed: the cached answer is stale
    assert decider.evaluate(model, pending(1), ["a"])["a"].gpus is None
    model.remove_pod("uid-r0")
    assert decider.evaluate(model, pending(1), ["a"])["a"].gpus == (0,)
    other = world()  # another model, same version number: a new generation
    assert decider.evaluate(other, pending(1), ["a"])["a"].gpus == (1,)


def test_model_without_usable_nodes_passes_nothing() -> None:
    model = ClusterModel([cpu_node("cpu")], [], PREDICTOR)
    for policy in ("horus-paper", "gandiva"):
        verdicts = Decider(policy).evaluate(model, pending(1), ["cpu", "ghost"])
        assert verdicts.passed() == [] and verdicts.scores().tolist() == [0, 0]


def test_full_cluster_is_no_fit_everywhere() -> None:
    model = ClusterModel([gpu_node("x", 1), gpu_node("y", 1)],
                         [running("r0", "x", "0"), running("r1", "y", "0")], PREDICTOR)
    verdicts = Decider("fifo-exclusive").evaluate(model, pending(1), ["x", "y"])
    assert verdicts.code.tolist() == [NO_FIT, NO_FIT] and scores(verdicts) == {"x": 0, "y": 0}


def test_node_set_change_rebuilds_the_table() -> None:
    decider = Decider("horus-paper")
    assert decider.evaluate(world(), pending(1), ["z"])["z"].reason.startswith("[node-unknown] node not (yet) known")
    bigger = ClusterModel([gpu_node("z", 2)], [], PREDICTOR)
    assert decider.evaluate(bigger, pending(1), ["z"]).passed() == ["z"]
    assert decider.evaluate(bigger, pending(2), ["z"])["z"].gpus == (0, 1)  # the pod takes the whole largest node


def test_node_table_keeps_a_bounded_set_of_recent_name_lists() -> None:
    model = world()
    table = _NodeTable(model)
    assert table.rows(["ghost", "t4", "a"]).tolist() == [-1, 3, 0]  # rows in sorted node order
    first = table.rows(["a", "b"])
    assert table.rows(["a", "b"]) is first  # resent list: the same array
    for n in range(20):
        table.rows(["a"] * n)
        assert len(table._rows) <= 8
    table = _NodeTable(model)
    recent = [table.rows(["b"] * n) for n in range(1, 9)]
    assert all(table.rows(["b"] * n) is recent[n - 1] for n in range(1, 9))  # eight recent lists are kept
    assert table.rows(["b", "a"]).tolist() == [1, 0]
    assert table.usable.tolist() == [0, 1, -1, 2] and table.num_gpus.tolist() == [2, 4, 0, 2]
    assert table.type_name.tolist() == ["V100", "V100", "", "T4"]


def test_passing_list_is_kept_for_prioritize_and_recent_lists_stay() -> None:
    decider = Decider("horus-paper")
    model = world()
    verdicts = decider.evaluate(model, pending(1), NAMES)
    passed = verdicts.passed()
    table = decider._table(model)
    kept = table._rows[tuple(passed)]  # filter's answer: prioritize's next list
    assert kept.rows.tolist() == [table.row_of[n] for n in passed]
    assert decider.evaluate(model, pending(1), passed).scores().tolist() == verdicts.scores()[verdicts.ok].tolist()
    assert table.entry(passed) is kept
    for n in range(1, 12):  # the full list is resent between others: least recently used ones go first
        table.rows(["b"] * n)
        table.rows(NAMES)
        assert len(table._rows) <= _NodeTable.RECENT and tuple(NAMES) in table._rows


def test_load_independent_verdicts_are_kept_per_gpu_count_and_type_request() -> None:
    decider = Decider("horus-paper")
    model = world()
    first = decider.evaluate(model, pending(2, gpu_type="V100"), NAMES)
    first.code[:] = OK  # a caller's change does not reach the kept arrays
    again = decider.evaluate(model, pending(2, gpu_type="V100"), NAMES)
    assert again.passed() == ["b"] and again["t4"].reason.startswith("[no-gpu-of-type]")
    assert again["cpu"].reason.startswith("[node-problem]") and again["ghost"].reason.startswith("[node-unknown]")
    assert decider.evaluate(model, pending(2), NAMES).passed() == ["b", "t4"]  # another type request
    four = decider.evaluate(model, pending(4), NAMES)  # another GPU count
    assert four["a"].reason.startswith("[gang-too-large]") and four["b"].reason.startswith("[colocation-would-not-pay]")
    entry = decider._table(model).entry(NAMES)
    assert set(entry._static) == {(2, None), (2, "V100"), (4, None)}
    assert not any(array.flags.writeable for found in entry._static.values() for array in found)


def test_priority_json_is_the_host_priority_list() -> None:
    names = ["b", "a", "t4", "ghost \"q\" é", "cpu", "b"]  # an unknown name needing escapes; a repeated node
    verdicts = Decider("horus-paper").evaluate(world(), pending(1), names)
    expected = [{"Host": n, "Score": s} for n, s in zip(names, verdicts.scores().tolist())]
    assert orjson.loads(verdicts.priority_json()) == expected
    known = names[:3]
    verdicts = Decider("horus-paper").evaluate(world(), pending(1), known)  # the per-node encoded entries
    assert verdicts.priority_json() == orjson.dumps([{"Host": n, "Score": s}
                                                     for n, s in zip(known, verdicts.scores().tolist())])
    assert Decider("horus-paper").evaluate(world(), pending(1), []).priority_json() == b"[]"
    lone = "\ud800"  # a lone surrogate (JSON may carry one): escaped as the standard library does
    assert host_priority_json(np.array([host_prefix(lone)], dtype=object), np.array([7])) == \
        b'[{"Host":"\\ud800","Score":7}]'


# ---- scores ------------------------------------------------------------------------------------------------------
def synthetic(cost: list[float]) -> Verdicts:
    """Verdicts with the given cost per worker per node (inf = no fit)."""
    model = ClusterModel([gpu_node(f"n{i}", 1) for i in range(len(cost))], [], PREDICTOR)
    names = list(model.nodes)
    table = _NodeTable(model)
    arr = np.array(cost, dtype=float)
    code = np.where(np.isfinite(arr), OK, NO_FIT)
    return Verdicts(names, code, arr, np.zeros((len(cost), 1), dtype=np.int64), table.rows(names), table,
                    pending(1), "test")


def test_scores_lose_one_point_per_tenth_of_extra_cost() -> None:
    assert COST_PER_POINT == 0.1
    verdicts = synthetic([0.5, 0.5, 0.54, 0.75, 1.0, math.inf, 0.875, 3.0, 1.5])
    # cheapest (both) 10; +0.04 -> at least one point; +0.25 -> 2.5 rounds to 2; +0.5 -> 5; inf -> 0;
    # +0.375 -> 3.75 rounds to 4; +2.5 -> never below 0; +1.0 -> exactly 0
    assert verdicts.scores().tolist() == [10, 10, 9, 8, 5, 0, 6, 0, 0]
    assert verdicts.scores().dtype == np.int64
    assert scores(verdicts) == dict(zip(verdicts.names, [10, 10, 9, 8, 5, 0, 6, 0, 0]))
    assert synthetic([-0.25, 0.0]).scores().tolist() == [10, 8]  # negative costs rank the same way
    assert synthetic([math.inf, math.inf]).scores().tolist() == [0, 0]
    assert synthetic([0.3]).scores().tolist() == [10]
    assert synthetic([]).scores().tolist() == []


def test_placement_scores_follow_the_costs() -> None:
    verdicts = Decider("horus-paper").evaluate(world(), pending(1), NAMES)
    cost = np.array([c.cost for c in verdicts.values()])
    got = verdicts.scores()
    ok = np.isfinite(cost)
    assert got[~ok].tolist() == [0, 0] and got[ok].max() == 10
    assert got[int(np.argmin(cost))] == 10
    for i in np.flatnonzero(ok):
        if cost[i] > cost[ok].min():
            assert got[i] == max(0, 10 - max(1, round((cost[i] - cost[ok].min()) / 0.1)))


# ---- policy path -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["gandiva", "geng", "horus-iasp"])
def test_policy_path_scores_the_policys_pick_10_and_other_feasible_nodes_5(policy: str) -> None:
    model = world()
    decider = Decider(policy)
    for k in (1, 2, 4):
        spec = pending(k)
        verdicts = decider.evaluate(model, spec, NAMES)
        feasible = verdicts.passed()
        for name in ("a", "b", "t4"):
            alone = decider.ask(model.restricted([name]), spec)
            assert (name in feasible) == (alone is not None), (policy, k, name)
            if alone is not None:
                assert verdicts[name].gpus == alone and len(alone) == k
        got = scores(verdicts)
        assert got["cpu"] == got["ghost"] == 0
        if not feasible:
            continue
        together = model.restricted(feasible)
        picked_gpus = decider.ask(together, spec)
        picked = together.cluster.nodes[together.cluster.gpus[picked_gpus[0]].node].name
        assert got == {n: (10 if n == picked else 5 if n in feasible else 0) for n in NAMES}, (policy, k)
        assert {n: verdicts[n].cost for n in feasible} == {n: (0.0 if n == picked else 0.5) for n in feasible}


def test_policy_path_single_feasible_node_scores_10() -> None:
    model = world(running("r2", "a", "1"))
    verdicts = Decider("gandiva").evaluate(model, pending(2), ["a", "t4"])
    assert verdicts.passed() == ["t4"] and scores(verdicts) == {"a": 0, "t4": 10}
    assert verdicts["t4"].cost == 0.0


# ---- ask ------------------------------------------------------------------------------------------------------------
class Executed:
    def __init__(self) -> None:
        self.starts: list[tuple[str, tuple[int, ...]]] = []

    def start(self, spec: Any, gpus: tuple[int, ...], now: float) -> None:
        self.starts.append((spec.job_id, tuple(gpus)))

    def preempt(self, job_id: str, now: float) -> None:
        raise AssertionError("no preemption expected")


def test_ask_runs_the_policy_once_and_leaves_the_queue_empty() -> None:
    model = world()
    spec = pending(2)
    before = model.state.load.copy()
    decider = Decider("horus-paper")
    gpus = decider.ask(model.restricted(["t4"]), spec)
    assert gpus == (0, 1)
    executed = Executed()
    one = model.restricted(["t4"])
    assert decider.ask(one, spec, executed) == (0, 1)
    assert executed.starts == [(spec.job_id, (0, 1))]
    assert one.state.queue == {}
    assert decider.ask(model.restricted(["a"]), spec) is None
    assert model.state.queue == {} and model.state.load.equals(before)


def test_ask_refuses_a_policy_that_preempts() -> None:
    """Preempting a running pod raises PreemptionUnsupported (the extender never evicts); the queue is cleaned up."""
    from horus.policies.base import POLICIES, Policy, Preempt

    class Evicts(Policy):
        name = "test-evicts"

        def schedule(self, state: Any) -> list[Any]:
            return [Preempt(job_id) for job_id in state.running]

    POLICIES.register("test-evicts")(Evicts)
    try:
        model = world()
        decider = Decider("test-evicts")
        assert decider.path == "policy"
        with pytest.raises(PreemptionUnsupported):
            decider.ask(model, pending(1))
        assert model.state.queue == {} and set(model.state.running) == {"uid-r0", "uid-r1"}
    finally:
        POLICIES.unregister("test-evicts")


def test_each_policy_declares_whether_it_has_a_per_node_score() -> None:
    """Placement path exactly for the policies whose one-job decision is their placement's ``evaluate``."""
    paths = {name: Decider(name).path for name in ("horus-paper", "sjf-horus", "fifo-exclusive", "gandiva-greedy",
                                                   "tiresias", "horus", "horus-iasp", "geng", "gandiva")}
    assert {n for n, p in paths.items() if p == "placement"} == {"horus-paper", "sjf-horus", "fifo-exclusive",
                                                                  "gandiva-greedy", "tiresias"}
