"""Small hand-made truth, predictor and policies for the simulator tests (real subclasses of the ABCs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from horus.catalog import parse_catalog
from horus.cluster import Cluster, GPUType, Node
from horus.jobs import JobSpec
from horus.policies.base import Action, Policy, Start
from horus.predict.base import Prediction, Predictor
from horus.state import SchedulerState, gpu_share
from horus.truth.base import SoloTruth, TruthModel

V100 = GPUType("v100", 16_000, 1.0)


def cluster(nodes: int = 1, gpus_per_node: int = 1, link: str = "nvlink", inter_gbps: float = 12.5) -> Cluster:
    return Cluster([Node(f"n{i}", V100, gpus_per_node, link) for i in range(nodes)], inter_node_gbps=inter_gbps)


def job(job_id: str, submit: float, iterations: float, model: str = "toya", batch: int = 1, gpus: int = 1) -> JobSpec:
    return JobSpec(job_id, submit, gpus, model, batch, iterations)


class ToyTruth(TruthModel):
    """Per job type: fixed solo numbers; co-located throughput of everyone = 1 / max(1, sum of utils)."""

    name = "toy-truth"

    def __init__(self, table: dict[str, SoloTruth]) -> None:
        self.table = table

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        return self.table[job_type]

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        x = 1.0 / max(1.0, sum(self.table[t].util for t in job_types))
        return [x] * len(job_types)


class PairTruth(TruthModel):
    """Every job: util 0.5, 4 GB, 1 s per iteration alone; any set of n shares the GPU at ``x`` each."""

    name = "pair-truth"

    def __init__(self, x: float) -> None:
        self.x = x

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        return SoloTruth(0.5, 4000.0, 1.0)

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        return [self.x] * len(job_types)


class ConstPredictor(Predictor):
    """Believes every job is the same small job (never looks at any truth)."""

    name = "const"

    def __init__(self, util: float = 0.5, mem_mib: float = 1000.0, iter_time_s: float = 1.0) -> None:
        self.pred = Prediction(util, mem_mib, iter_time_s)

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        return self.pred


class PackingPolicy(Policy):
    """FIFO, lowest-index GPUs whose requested share stays <= ``max_share`` (2.0 = two jobs per GPU)."""

    name = "packing"

    def __init__(self, max_share: float = 1.0, tick_s: float | None = None) -> None:
        self.max_share = max_share
        self.tick_s = tick_s
        self.calls: list[float] = []
        self.observer: Callable[[Policy, SchedulerState], None] | None = None

    def schedule(self, state: SchedulerState) -> list[Action]:
        self.calls.append(state.now)
        if self.observer is not None:
            self.observer(self, state)
        load = state.tentative()
        actions: list[Action] = []
        for queued in list(state.queue.values()):
            spec = queued.spec
            free = np.flatnonzero(load.alloc_share + gpu_share(spec) <= self.max_share + 1e-9)
            if len(free) < spec.num_gpus:
                continue
            gpus = tuple(int(g) for g in free[: spec.num_gpus])
            load.add(gpus, state.predict(spec, state.cluster.gpus[gpus[0]].gpu_type), gpu_share(spec))
            actions.append(Start(spec.job_id, gpus))
        return actions


class ScriptedPolicy(Policy):
    """Returns whatever ``script(state)`` says (for hand-built scenarios and bad-action tests)."""

    name = "scripted"

    def __init__(self, script: Callable[[SchedulerState], list[Action]]) -> None:
        self.script = script

    def schedule(self, state: SchedulerState) -> list[Action]:
        return self.script(state)


def start_queued_on(plan: dict[str, tuple[int, ...]]) -> Callable[[SchedulerState], list[Action]]:
    """A script starting each queued job of ``plan`` on its planned GPUs."""
    return lambda state: [Start(j, plan[j]) for j in list(state.queue) if j in plan]


def toy_catalog_rows(params: dict[str, int]) -> dict:
    """A model catalog with the given models (only ``params`` matters to the simulator)."""
    rows = []
    for name, p in params.items():
        row = {"name": name, "family": "cnn", "params": str(p), "forward_flops_per_sample": "1",
               "train_flops_per_sample": "3", "activation_bytes_per_sample": "1", "input_size": "1", "depth": "1",
               "source": "test"}
        row.update({k: "0" for k in ("n_conv", "n_linear", "n_attention", "n_norm", "n_activation", "n_pooling",
                                     "n_embedding", "n_recurrent", "n_elementwise")})
        rows.append(row)
    return parse_catalog(rows, "test-catalog")

