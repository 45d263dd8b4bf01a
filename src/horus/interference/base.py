"""Interference-model interface and registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from horus.cluster import GPUType
from horus.interference.data import JobFeatures, Observation
from horus.registry import Registry

# Predictions are clipped into this range: a job never speeds up when sharing, never stops.
MIN_THROUGHPUT = 0.02


class InterferenceModel(ABC):
    """Predicts each co-located job's normalized throughput (co-located / solo, in (0, 1])."""

    name: str = "interference"

    def __init__(self, features: JobFeatures | None = None, seed: int = 0) -> None:
        self.features = features if features is not None else JobFeatures()
        self.seed = seed

    @abstractmethod
    def fit(self, observations: Sequence[Observation]) -> InterferenceModel: ...

    @abstractmethod
    def predict_one(self, target: str, corunners: Sequence[str], gpu: GPUType | str) -> float:
        """Normalized throughput of ``target`` sharing a GPU with ``corunners`` (1.0 when alone)."""

    def predict(self, job_types: Sequence[str], gpu: GPUType | str) -> list[float]:
        """Normalized throughput of every job of a co-located set (repeats allowed)."""
        types = list(job_types)
        return [self.predict_one(t, types[:i] + types[i + 1:], gpu) for i, t in enumerate(types)]

    def predict_observations(self, observations: Sequence[Observation]) -> np.ndarray:
        return np.array([self.predict_one(o.target, o.corunners, o.gpu) for o in observations])

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "feature_names": list(self.features.names),
                "solo_predictor": self.features.predictor_name, "seed": self.seed}


def clip_throughput(value: float) -> float:
    return float(min(1.0, max(MIN_THROUGHPUT, value)))


INTERFERENCE_MODELS: Registry[InterferenceModel] = Registry("interference model")
