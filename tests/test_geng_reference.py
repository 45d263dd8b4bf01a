"""The optimised geng policy picks the same GPUs as a straightforward per-GPU / per-node computation."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pytest
from policies_fakes import TablePredictor, policy, queue, run_job, starts

from horus.catalog import OP_KINDS, load_catalog
from horus.cluster import Cluster, GPUType, Node
from horus.comm import gradient_bytes
from horus.interference.base import InterferenceModel
from horus.interference.data import Observation
from horus.interference.slowdown import SlowdownEstimator
from horus.policies.base import Start
from horus.state import GPULoad, QueuedJob, SchedulerState, gpu_share
from horus.topology import allreduce_time_s

TABLE = {  # (util, mem MiB, iteration s); catalog names so op mixes and parameter counts exist
    "resnet50": (0.9, 4000.0, 0.2),
    "a3c": (0.15, 1000.0, 0.2),
    "cyclegan": (0.6, 3000.0, 0.2),
    "bert_base": (0.5, 5000.0, 0.01),
    "transformer": (0.7, 6000.0, 0.05),
}
MODELS = sorted(TABLE)
V100 = GPUType("v100", 16_000, 1.0)
P100 = GPUType("p100", 12_000, 0.75)


class HashedPairs(InterferenceModel):
    """Deterministic, varied stub: throughput of a target = product of per-pair factors in [0.35, 1]."""

    name = "hashed-pairs"

    def fit(self, observations: Sequence[Observation]) -> HashedPairs:
        return self

    def predict_one(self, target: str, corunners: Sequence[str], gpu: object) -> float:
        value = 1.0
        for other in corunners:
            a, b = MODELS.index(target.split("/")[0]), MODELS.index(other.split("/")[0])
            value *= 0.35 + 0.65 * ((7 * a + 3 * b + len(str(getattr(gpu, "name", gpu)))) % 11) / 10
        return value


# ---- the reference: the rule of docs/two-level-placement.md, written the plain way ----------------
def op_mix(model: str) -> np.ndarray:
    info = load_catalog().get(model)
    if info is None:
        return np.zeros(len(OP_KINDS))
    v = np.array([info.op_counts.get(k, 0) for k in OP_KINDS], dtype=float)
    return v / np.linalg.norm(v) if np.linalg.norm(v) > 0 else v


def reference_schedule(state: SchedulerState, estimator: SlowdownEstimator, max_subsets: int = 512,
                       comm_weight: float = 1.0) -> list[Start]:
    load = state.tentative()
    types_on = [[state.running[j].spec.job_type for j in jobs] for jobs in state.residents]
    actions = []
    for job in list(state.queue.values())[:64]:
        gpus = reference_place(job, load, types_on, state, estimator, max_subsets, comm_weight)
        if gpus is None:
            continue
        load.add(gpus, state.predict(job.spec, state.cluster.gpus[gpus[0]].gpu_type), gpu_share(job.spec))
        for g in gpus:
            types_on[g].append(job.spec.job_type)
        actions.append(Start(job.spec.job_id, gpus))
    return actions


def reference_place(job: QueuedJob, load: GPULoad, types_on: list[list[str]], state: SchedulerState,
                    estimator: SlowdownEstimator, max_subsets: int, comm_weight: float) -> tuple[int, ...] | None:
    spec, cluster = job.spec, state.cluster
    k = spec.num_gpus
    accepted = None if spec.gpu_type_request is None else set(spec.gpu_type_request.split("|"))
    loss = np.full(cluster.num_gpus, np.inf)
    for gpu in cluster.gpus:
        g = gpu.index
        if accepted is not None and gpu.gpu_type.name not in accepted:
            continue
        if load.n_residents[g] == 0:
            loss[g] = 0.0
            continue
        if load.n_residents[g] >= 2 or job.oom_failures > 0:
            continue
        if load.pred_mem_mib[g] + state.predict(spec, gpu.gpu_type).mem_mib > 0.95 * state.mem_capacity_mib[g]:
            continue
        if spec.gpu_fraction is not None and load.alloc_share[g] + gpu_share(spec) > 1.0:
            continue
        lost, own = estimator.added_loss(spec.job_type, types_on[g], gpu.gpu_type)
        if own >= 0.5:
            loss[g] = lost + 0.02 * load.n_residents[g]
    best = None
    for n, node in enumerate(cluster.nodes):
        gpus = cluster.gpus_of_node(n)
        local_loss = loss[gpus]
        candidates = [i for i in range(len(gpus)) if np.isfinite(local_loss[i])]
        if k > len(gpus) or len(candidates) < k:
            continue

        def cost(subset: tuple[int, ...]) -> float:
            comm = 0.0
            if len(subset) > 1:
                iter_s = max(state.predict(spec, node.gpu_type).iter_time_s, 1e-6)
                comm = allreduce_time_s(gradient_bytes(spec.model), node, subset) / iter_s
            return float(local_loss[list(subset)].sum()) + comm_weight * comm

        n_subsets = 1.0
        for i in range(k):
            n_subsets *= (len(candidates) - i) / (i + 1)
        if n_subsets <= max_subsets:
            subset = min(combinations(candidates, k), key=cost)
        else:
            chosen = [min(candidates, key=lambda i: local_loss[i])]
            while len(chosen) < k:
                chosen.append(min((i for i in candidates if i not in chosen), key=lambda i: cost((*chosen, i))))
            subset = tuple(chosen)
        corunners = {t for g in gpus for t in types_on[g]}
        mix = op_mix(spec.model)
        similarity = float(np.mean([mix @ op_mix(t.split("/")[0]) for t in corunners])) if corunners else 0.0
        score = (cost(subset) / k + 0.2 * similarity - 0.1 * np.mean(load.n_residents[gpus] == 0)
                 + 0.05 * np.mean(load.pred_mem_mib[gpus] / state.mem_capacity_mib[gpus]))
        if best is None or score < best[0] - 1e-12:
            best = (score, tuple(gpus[0] + i for i in sorted(subset)))
    if best is not None:
        return best[1]
    if k > max(node.num_gpus for node in cluster.nodes):
        feasible = np.flatnonzero(np.isfinite(loss))
        if len(feasible) >= k:
            return tuple(int(g) for g in feasible[np.argsort(loss[feasible], kind="stable")[:k]])
    return None


# ---- the comparison ----------------------------------------------------------------------------------
def random_state(rng: np.random.Generator) -> SchedulerState:
    nodes = [Node("nv", V100, 4, "nvlink"), Node("pc", V100, 8, "pcie"), Node("p1", P100, 2, "pcie"),
             Node("p2", P100, 4, "pcie4"), Node("solo", V100, 1)]
    state = SchedulerState(Cluster(nodes), TablePredictor(TABLE))
    n_gpus = state.cluster.num_gpus
    for i in range(int(rng.integers(0, 2 * n_gpus))):
        width = int(rng.choice([1, 1, 1, 2]))
        free = [g for g in range(n_gpus) if state.load.n_residents[g] < 2]
        node = int(rng.integers(len(nodes)))
        here = [g for g in free if state.cluster.gpus[g].node == node]
        if len(here) < width:
            continue
        gpus = tuple(int(g) for g in rng.choice(here, size=width, replace=False))
        run_job(state, f"r{i}", str(rng.choice(MODELS)), gpus)
    for i in range(int(rng.integers(1, 12))):
        kwargs: dict[str, object] = {"gpus": int(rng.choice([1, 1, 1, 2, 3, 4, 8, 10]))}
        if kwargs["gpus"] == 1 and rng.random() < 0.2:
            kwargs["fraction"] = float(rng.choice([0.3, 0.5]))
        if rng.random() < 0.2:
            kwargs["gpu_type"] = str(rng.choice(["p100", "v100", "p100|v100"]))
        queue(state, f"q{i}", str(rng.choice(MODELS)), **kwargs)
        if rng.random() < 0.1:
            state.queue[f"q{i}"].oom_failures = 1
    return state


@pytest.mark.parametrize("max_subsets", [512, 4])  # 4: the greedy branch on most multi-GPU jobs
def test_optimised_geng_matches_the_reference_on_random_clusters(max_subsets: int) -> None:
    rng = np.random.default_rng(7)
    model = HashedPairs()
    compared = placed = 0
    for _ in range(60):
        state = random_state(rng)
        geng = policy("geng", model=model, max_subsets=max_subsets)
        expected = reference_schedule(state, SlowdownEstimator(model, "test"), max_subsets=max_subsets)
        got = geng.schedule(state)
        assert [(a.job_id, a.gpus) for a in got] == [(a.job_id, a.gpus) for a in expected]
        compared += 1
        placed += len(got)
    assert compared == 60 and placed > 100  # the comparison exercised many placements


def test_geng_state_tracking_matches_the_reference_across_calls() -> None:
    """Residents change between calls (finishes, starts of planned jobs): decisions still match."""
    rng = np.random.default_rng(11)
    model = HashedPairs()
    state = random_state(rng)
    geng = policy("geng", model=model)
    estimator = SlowdownEstimator(model, "test")
    for step in range(40):
        expected = reference_schedule(state, estimator)
        got = geng.schedule(state)
        assert [(a.job_id, a.gpus) for a in got] == [(a.job_id, a.gpus) for a in expected]
        for action in got:
            state.start(action.job_id, action.gpus, state.now)
        for job_id in list(state.running)[: int(rng.integers(0, 3))]:
            state.finish(job_id)
        for i in range(int(rng.integers(0, 3))):
            queue(state, f"s{step}-{i}", str(rng.choice(MODELS)), gpus=int(rng.choice([1, 1, 2, 4])))


def test_geng_waits_then_places_once_the_blocking_job_finishes() -> None:
    state = SchedulerState(Cluster([Node("n", GPUType("small", 6000, 1.0), 1)]), TablePredictor(TABLE))
    run_job(state, "big", "bert_base", (0,))
    queue(state, "new", "resnet50")
    geng = policy("geng")
    assert geng.schedule(state) == [] and geng.schedule(state) == []  # second call: remembered as blocked
    state.finish("big")
    assert starts(geng.schedule(state)) == {"new": (0,)}


# ---- horus-iasp: the vectorised interference term equals the per-GPU loop --------------------------
def loop_iasp(model: InterferenceModel) -> object:
    """horus-iasp with its interference term computed GPU by GPU (the straightforward reference)."""
    from horus.policies.parts.gpu_selection import select_gpus
    from horus.policies.horus_iasp import HorusIASPPolicy

    class Reference(HorusIASPPolicy):
        def planning_load(self, state: SchedulerState) -> GPULoad:
            self.estimator = SlowdownEstimator(model, "test")
            self.planned: dict[int, list[str]] = {}
            return state.load

        def note_start(self, job: QueuedJob, gpus: tuple[int, ...], state: SchedulerState) -> None:
            for g in gpus:
                self.planned.setdefault(g, []).append(job.spec.job_type)

        def choose(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> object:
            placement = self.placement
            cost = placement.cost_per_gpu(job, load, state)
            if cost is None:
                return None
            cost = np.array(cost, dtype=float)
            for g in np.flatnonzero(np.isfinite(cost) & (load.n_residents > 0)):
                residents = [state.running[j].spec.job_type for j in state.residents[g]] + self.planned.get(g, [])
                lost, own = self.estimator.added_loss(job.spec.job_type, residents, state.cluster.gpus[g].gpu_type)
                cost[g] = np.inf if own < self.min_throughput else cost[g] + self.interference_weight * lost
            return select_gpus(cost, job.spec.num_gpus, placement.idx)

    return Reference(model=model)


def test_horus_iasp_matches_the_per_gpu_loop_across_calls() -> None:
    rng = np.random.default_rng(5)
    model = HashedPairs()
    for _ in range(6):
        state = random_state(rng)
        fast, slow = policy("horus-iasp", model=model), loop_iasp(model)
        for step in range(10):
            got, expected = fast.schedule(state), slow.schedule(state)  # type: ignore[attr-defined]
            assert [(a.job_id, a.gpus) for a in got] == [(a.job_id, a.gpus) for a in expected]
            for action in got:
                state.start(action.job_id, action.gpus, state.now)
            for job_id in list(state.running)[: int(rng.integers(0, 4))]:
                state.finish(job_id)
            queue(state, f"s{step}", str(rng.choice(MODELS)), gpus=int(rng.choice([1, 1, 2])))


def test_mean_as_numpy_is_numpys_mean_bit_for_bit() -> None:
    """The similarity mean sums short lists in Python; it must be the float ``np.mean`` gives (any length)."""
    from horus.policies.parts.geng_cluster_level import mean_as_numpy

    rng = np.random.default_rng(7)
    for n in list(range(1, 20)) + [64, 200]:
        for _ in range(300):
            values = (rng.random(n) * 10.0 ** rng.integers(-3, 3, n) * rng.choice([1, -1], n)).tolist()
            assert mean_as_numpy(values) == float(np.mean(values)), (n, values)
