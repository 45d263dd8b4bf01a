"""Every registered policy returns exactly the actions of the frozen pre-optimisation code.

``tests/reference_policies`` is a verbatim copy of ``horus.policies`` before the speed work of
issue 17. Both versions are driven through the same seeded sequence of scheduler states (arrivals,
finishes, preemptions, out-of-memory requeues, starts that fail out-of-memory and come back as the
engine re-queues them, the planned starts themselves, and a cluster rebuilt
between calls as the live service does when machines join) and must agree on every call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from policies_fakes import TableTruth
from reference_policies.base import POLICIES as REFERENCE
from reference_policies.compose import make_composed as reference_make_composed

from horus.cluster import Cluster, GPUType, Node
from horus.gpu_types import accepted_gpu_types
from horus.jobs import JobSpec
from horus.plugins import load_all
from horus.policies.base import POLICIES, Preempt, Start
from horus.policies.parts.compose import make_composed
from horus.predict.base import Prediction, Predictor
from horus.state import QueuedJob, SchedulerState

load_all("horus.policies")
load_all("reference_policies")

# Renamed since the freeze: current name -> the frozen copy's name.
RENAMED = {"horus-paper": "horus", "gandiva-greedy": "gandiva"}
# Designed after the freeze (no frozen copy to agree with; tested on their own). gandiva: the faithful
# Gandiva of issue 14 (tests/test_gandiva_faithful.py).
NEW = {"horus", "horus-fifo", "horus-las", "gandiva", "oracle-truth"}  # "oracle" is an alias of oracle-truth
COMPARED = [name for name in POLICIES.names() if name not in NEW]

TABLE = {  # catalog models (op mixes and parameter counts exist): (util, mem MiB, iteration s) on a V100
    "resnet50": (0.9, 4000.0, 0.2),
    "a3c": (0.15, 1000.0, 0.2),
    "cyclegan": (0.6, 3000.0, 0.2),
    "bert_base": (0.5, 5000.0, 0.01),
    "transformer": (0.7, 6000.0, 0.05),
    "resnet18_cifar": (0.35, 2000.0, 0.03),
}
MODELS = sorted(TABLE)
TYPES = (GPUType("v100", 16_000, 1.0), GPUType("p100", 12_000, 0.75), GPUType("t4", 15_000, 0.5))


class TypedPredictor(Predictor):
    """Predictions that differ per GPU type (slower cards: higher utilization, longer iterations)."""

    name = "typed-table"

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        util, mem, iter_s = TABLE[job.model]
        scale = 1.0 / gpu_type.speed
        return Prediction(min(util * scale ** 0.5, 1.4), mem * (1.0 + 0.01 * job.batch_size / 64), iter_s * scale)


def random_cluster(rng: np.random.Generator, mixed: bool) -> Cluster:
    nodes = []
    for i in range(int(rng.integers(3, 10))):
        gpu_type = TYPES[int(rng.integers(len(TYPES)))] if mixed else TYPES[0]
        nodes.append(Node(f"n{i}", gpu_type, int(rng.choice([2, 4, 8, 8])), str(rng.choice(["nvlink", "pcie"]))))
    return Cluster(nodes)


def random_spec(rng: np.random.Generator, job_id: str, now: float, n_gpus: int, mixed: bool) -> JobSpec:
    k = int(rng.choice([1, 1, 1, 1, 2, 2, 4, 8, 3, 12]))
    k = min(k, n_gpus)
    fraction = float(rng.choice([0.25, 0.5, 0.7])) if k == 1 and rng.random() < 0.15 else None
    request = None
    if mixed and rng.random() < 0.2:
        request = str(rng.choice(["v100", "p100", "v100|t4", "k80"]))
    return JobSpec(job_id, now - float(rng.integers(0, 50)), k, str(rng.choice(MODELS)),
                   int(rng.choice([32, 64, 128])), float(rng.integers(100, 10_000)),
                   gpu_fraction=fraction, gpu_type_request=request)


def eligible_gpus(cluster: Cluster, request: str | None) -> int:
    accepted = accepted_gpu_types(request)
    return sum(1 for g in cluster.gpus if accepted is None or g.gpu_type.name in accepted)


def rebuild(state: SchedulerState, rng: np.random.Generator) -> SchedulerState:
    """A new Cluster object (one node more) with the same queue and running jobs, as after a join."""
    old = state.cluster
    extra = Node("joined", old.nodes[0].gpu_type, int(rng.choice([2, 4, 8])))
    fresh = SchedulerState(Cluster([*old.nodes, extra]), state.predictor)
    fresh.now = state.now
    for job_id, run in state.running.items():
        fresh.submit(run.spec, run.start_time)
        fresh.queue[job_id].attained_gpu_s = run.attained_gpu_s
        fresh.start(job_id, run.gpus, run.start_time)
    for job_id, queued in state.queue.items():
        fresh.queue[job_id] = queued
    return fresh


def drive(name: str, kwargs: dict[str, object], seed: int, steps: int = 60, mixed: bool = True,
          new: object = None, ref: object = None) -> tuple[int, int]:
    """Run both versions of a policy side by side; returns (calls compared, starts made)."""
    rng = np.random.default_rng(seed)
    state = SchedulerState(random_cluster(rng, mixed), TypedPredictor())
    new = new or POLICIES.create(name, **kwargs)
    ref = ref or REFERENCE.create(RENAMED.get(name, name), **kwargs)
    if getattr(new, "is_oracle", False):
        truth = TableTruth(TABLE)
        new.bind_truth(truth)  # type: ignore[attr-defined]
        ref.bind_truth(truth)  # type: ignore[attr-defined]
    calls = started = 0
    serial = 0
    oom_waiting: list[QueuedJob] = []
    for step in range(steps):
        state.now += float(rng.choice([0.0, 1.0, 30.0, 400.0]))
        burst = int(rng.choice([0, 1, 1, 2, 5, 20])) if step else 40
        for _ in range(burst):
            spec = random_spec(rng, f"j{serial}", state.now, state.cluster.num_gpus, mixed)
            serial += 1
            if spec.num_gpus <= eligible_gpus(state.cluster, spec.gpu_type_request):  # else the engine rejects it
                state.submit(spec, state.now)
        running = list(state.running)
        for job_id in running:
            roll = rng.random()
            if roll < 0.15:
                state.finish(job_id)
            elif roll < 0.18:
                state.requeue(job_id, state.now, oom=bool(rng.random() < 0.5))
        if step == steps // 2:
            state = rebuild(state, rng)
        if not state.queue:
            continue
        got = new.schedule(state)  # type: ignore[attr-defined]
        expected = ref.schedule(state)  # type: ignore[attr-defined]
        assert as_tuples(got) == as_tuples(expected), f"{name} step {step}"
        calls += 1
        for job in oom_waiting:  # back after the restart delay, as the engine re-queues them
            job.queued_since = state.now
            state.queue[job.spec.job_id] = job
        oom_waiting = []
        for action in got:
            if isinstance(action, Start) and rng.random() < 0.05:  # the start fails out-of-memory
                job = state.queue.pop(action.job_id)
                job.oom_failures += 1
                oom_waiting.append(job)
            elif isinstance(action, Start):
                state.start(action.job_id, action.gpus, state.now)
                started += 1
            elif isinstance(action, Preempt):
                state.requeue(action.job_id, state.now)
    return calls, started


def as_tuples(actions: Sequence[object]) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(type(a).__name__, a.job_id, tuple(getattr(a, "gpus", ()))) for a in actions]  # type: ignore[attr-defined]


NEWER = NEW


def test_reference_and_current_register_the_same_policies() -> None:
    assert sorted(RENAMED.get(name, name) for name in COMPARED) == sorted(REFERENCE.names())


@pytest.mark.parametrize("name", COMPARED)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_policy_matches_the_reference(name: str, seed: int) -> None:
    calls, started = drive(name, {}, seed, mixed=seed != 3)
    assert calls >= 30 and started >= 20  # the comparison exercised real decisions


@pytest.mark.parametrize("name", sorted(NEWER))
def test_newer_policies_run_the_same_states_deterministically(name: str) -> None:
    """No frozen copy: two fresh instances must agree on every call (and not fail on any state)."""
    calls, started = drive(name, {}, seed=7, new=POLICIES.create(name), ref=POLICIES.create(name))
    assert calls >= 30 and started >= 20


@pytest.mark.parametrize(("name", "kwargs"), [
    ("horus-paper", {"util_cap": 1.3, "max_residents": 3, "lookahead": 8, "max_bypass": 2}),
    ("horus-paper", {"weights": {"corunners": 0.001, "node_fit": 0.05}}),
    ("sjf-horus", {"max_scan": 4}),
    ("fifo-exclusive", {"backfill": False}),
    ("tiresias", {"thresholds": (100.0, 2000.0), "tick_s": 0.0, "max_preempt_for": 8}),
    ("geng", {"max_residents": 3, "max_subsets": 4}),
    ("horus-iasp", {"util_cap": 1.2, "min_throughput": 0.6}),
    ("oracle-horus-rule", {"shortlist": 2, "min_gain": 0.1}),
])
def test_policy_options_match_the_reference(name: str, kwargs: dict[str, object]) -> None:
    calls, started = drive(name, kwargs, seed=4)
    assert calls >= 30 and started >= 5


@pytest.mark.parametrize(("order", "placement"), [("tiresias", "horus"), ("sjf", "gandiva"), ("fifo", "horus")])
def test_any_composition_matches_the_reference(order: str, placement: str) -> None:
    calls, started = drive(f"{order}-{placement}", {}, seed=5, new=make_composed(order, placement),
                           ref=reference_make_composed(order, placement))
    assert calls >= 30 and started >= 20


@pytest.mark.parametrize("name", ["horus-paper", "sjf-exclusive", "gandiva-greedy"])
def test_large_cluster_node_selection_matches_the_reference(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``select_gpus`` looks only at nodes with a feasible GPU on large clusters: force that path here."""
    import horus.policies.parts.gpu_selection as gpu_selection

    monkeypatch.setattr(gpu_selection, "ALL_NODES_UP_TO", 0)
    calls, started = drive(name, {}, seed=6)
    assert calls >= 30 and started >= 20
