"""geng (CLWP + NLWP) and horus-iasp placement decisions."""

from __future__ import annotations

from collections.abc import Sequence

from policies_fakes import V100, TablePredictor, policy, queue, run_job, starts

from horus.cluster import Cluster, GPUType, Node
from horus.interference.base import InterferenceModel
from horus.interference.data import Observation
from horus.state import SchedulerState

# (util, mem MiB, iteration s). Real catalog names so the communication model finds parameters.
TABLE = {
    "resnet50": (0.9, 4000.0, 0.2),  # heavy
    "a3c": (0.15, 1000.0, 0.2),  # light
    "cyclegan": (0.6, 3000.0, 0.2),  # incoming, moderate
    "bert_base": (0.5, 5000.0, 0.01),  # 110 M parameters, short iterations: communication-heavy
}


class PairTable(InterferenceModel):
    """Stub model: throughput of a target next to one co-runner from a table (default 0.95)."""

    name = "pair-table"

    def __init__(self, pairs: dict[tuple[str, str], float]) -> None:
        super().__init__()
        self.pairs = pairs

    def fit(self, observations: Sequence[Observation]) -> PairTable:
        return self

    def predict_one(self, target: str, corunners: Sequence[str], gpu: object) -> float:
        value = 1.0
        for other in corunners:
            value *= self.pairs.get((target, other), 0.95)
        return value


def state_of(nodes: list[Node]) -> SchedulerState:
    return SchedulerState(Cluster(nodes), TablePredictor(TABLE))


def test_clwp_avoids_node_whose_corunners_interfere() -> None:
    state = state_of([Node("n0", V100, 1), Node("n1", V100, 1)])
    run_job(state, "heavy", "resnet50", (0,))
    run_job(state, "light", "a3c", (1,))
    queue(state, "new", "cyclegan")
    assert starts(policy("geng").schedule(state)) == {"new": (1,)}


def test_clwp_uses_the_trained_model_not_utilization() -> None:
    state = state_of([Node("n0", V100, 1), Node("n1", V100, 1)])
    run_job(state, "heavy", "resnet50", (0,))
    run_job(state, "light", "a3c", (1,))
    queue(state, "new", "cyclegan")
    model = PairTable({("cyclegan/b1", "a3c/b1"): 0.5, ("a3c/b1", "cyclegan/b1"): 0.5})
    assert starts(policy("geng", model=model, min_throughput=0.3).schedule(state)) == {"new": (0,)}


def test_nlwp_spreads_an_interfering_pair_over_gpus() -> None:
    state = state_of([Node("n0", V100, 2)])
    queue(state, "a", "resnet50")
    queue(state, "b", "resnet50")
    placed = starts(policy("geng").schedule(state))
    assert sorted(placed.values()) == [(0,), (1,)]


def test_nlwp_puts_communication_heavy_job_under_one_pcie_switch() -> None:
    state = state_of([Node("n0", V100, 8, "pcie")])
    for g in (1, 4, 5, 6, 7):  # idle: 0 (switch 0), 2 and 3 (switch 1), all on socket 0
        run_job(state, f"busy{g}", "resnet50", (g,))
    queue(state, "comm", "bert_base", gpus=2)
    assert starts(policy("geng").schedule(state)) == {"comm": (2, 3)}
    assert starts(policy("geng", comm_weight=0.0).schedule(state))["comm"] != (2, 3)  # ties broken by index


def test_clwp_prefers_nvlink_node_for_communication_heavy_job() -> None:
    state = state_of([Node("pcie", V100, 4, "pcie"), Node("nv", V100, 4, "nvlink")])
    queue(state, "comm", "bert_base", gpus=4)
    assert starts(policy("geng").schedule(state)) == {"comm": (4, 5, 6, 7)}


def test_geng_describes_its_fallback_and_waits_when_nothing_fits() -> None:
    state = state_of([Node("n0", GPUType("small", 6000, 1.0), 1)])
    run_job(state, "big", "bert_base", (0,))
    queue(state, "new", "resnet50")  # memory would not fit beside bert_base
    geng = policy("geng")
    assert geng.schedule(state) == []
    assert "summed-util" in str(geng.describe()["interference_model"])


def test_horus_iasp_adds_predicted_interference_to_horus_cost() -> None:
    state = state_of([Node("n0", V100, 2)])
    run_job(state, "light", "a3c", (0,))  # lower utilization: plain Horus picks GPU 0
    run_job(state, "mid", "cyclegan", (1,))
    queue(state, "new", "a3c")
    assert starts(policy("horus-paper").schedule(state)) == {"new": (0,)}
    model = PairTable({("a3c/b1", "a3c/b1"): 0.5})
    assert starts(policy("horus-iasp", model=model).schedule(state)) == {"new": (1,)}
