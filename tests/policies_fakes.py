"""Hand-built clusters, predictors and truths for the policy tests (real subclasses of the ABCs)."""

from __future__ import annotations

from collections.abc import Sequence

from horus.cluster import Cluster, GPUType, Node
from horus.jobs import JobSpec
from horus.plugins import load_all
from horus.policies.base import POLICIES, Policy
from horus.predict.base import Prediction, Predictor
from horus.state import SchedulerState
from horus.truth.base import SoloTruth, TruthModel

load_all("horus.policies")

V100 = GPUType("v100", 16_000, 1.0)


def cluster(nodes: int = 1, gpus_per_node: int = 4, gpu: GPUType = V100) -> Cluster:
    return Cluster([Node(f"n{i}", gpu, gpus_per_node) for i in range(nodes)])


class TablePredictor(Predictor):
    """Predicts from a hand-written table keyed by model name: (util, mem MiB, iteration time s)."""

    name = "table"

    def __init__(self, table: dict[str, tuple[float, float, float]]) -> None:
        self.table = table

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        return Prediction(*self.table[job.model])


class TableTruth(TruthModel):
    """Truth from a table; co-located throughput of each job = 1 / max(1, sum of utils) unless a
    pair is listed in ``pairs`` (sorted model names -> throughput of each, in that order)."""

    name = "table-truth"

    def __init__(self, table: dict[str, tuple[float, float, float]],
                 pairs: dict[tuple[str, str], tuple[float, float]] | None = None) -> None:
        self.table = table
        self.pairs = pairs or {}

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        return SoloTruth(*self.table[job_type.split("/")[0]])

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        models = [t.split("/")[0] for t in job_types]
        if len(models) == 2 and tuple(sorted(models)) in self.pairs:
            values = self.pairs[tuple(sorted(models))]  # type: ignore[index]
            return list(values) if models == sorted(models) else list(reversed(values))
        x = 1.0 / max(1.0, sum(self.table[m][0] for m in models))
        return [x] * len(models)


def spec(job_id: str, model: str, *, gpus: int = 1, submit: float = 0.0, iterations: float = 1000.0,
         fraction: float | None = None, gpu_type: str | None = None) -> JobSpec:
    return JobSpec(job_id, submit, gpus, model, 1, iterations, gpu_fraction=fraction, gpu_type_request=gpu_type)


def make_state(table: dict[str, tuple[float, float, float]], nodes: int = 1, gpus_per_node: int = 4) -> SchedulerState:
    return SchedulerState(cluster(nodes, gpus_per_node), TablePredictor(table))


def run_job(state: SchedulerState, job_id: str, model: str, gpus: tuple[int, ...], **kwargs: object) -> None:
    """Submit and start a job on the given GPUs (as a backend would)."""
    state.submit(spec(job_id, model, gpus=len(gpus), **kwargs), state.now)  # type: ignore[arg-type]
    state.start(job_id, gpus, state.now)


def queue(state: SchedulerState, job_id: str, model: str, **kwargs: object) -> None:
    state.submit(spec(job_id, model, submit=state.now, **kwargs), state.now)  # type: ignore[arg-type]


def policy(name: str, **kwargs: object) -> Policy:
    return POLICIES.create(name, **kwargs)


def starts(actions: list[object]) -> dict[str, tuple[int, ...]]:
    return {a.job_id: a.gpus for a in actions if hasattr(a, "gpus")}  # type: ignore[attr-defined]
