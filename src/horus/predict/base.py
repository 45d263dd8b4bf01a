"""Predictor interface: the scheduler's *belief* about a job, computed without running it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from horus.cluster import GPUType
from horus.jobs import JobSpec
from horus.registry import Registry


@dataclass(frozen=True)
class Prediction:
    """Predicted solo behaviour of one worker of a job on one GPU type."""

    util: float  # solo GPU utilization as a fraction (1.0 = 100 % busy)
    mem_mib: float  # peak GPU memory of one worker, MiB
    iter_time_s: float  # solo iteration time of one worker, seconds


def whole_gpu(gpu_type: GPUType) -> Prediction:
    """The conservative belief about a job that names no model: it uses the whole GPU (100 % utilization, 95 %
    of the card's memory), so memory leaves no room for a partner and any partner is predicted to slow it."""
    return Prediction(util=1.0, mem_mib=0.95 * gpu_type.memory_mib, iter_time_s=1.0)


class Predictor(ABC):
    """Maps a job spec to a Prediction. Implementations must never hold a truth model."""

    name: str = "predictor"

    @abstractmethod
    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction: ...

    def describe(self) -> dict[str, object]:
        """JSON-able description for run manifests (name, version, training-data hash...)."""
        return {"name": self.name}


PREDICTORS: Registry[Predictor] = Registry("predictor")
