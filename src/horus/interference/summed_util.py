"""Baseline of the Horus line: slowdown as a function of the set's summed predicted utilization.

Every job of a set whose predicted solo utilizations sum to U runs at ``min(1, theta / U) ** gamma``
of its solo speed: no slowdown while the GPU is not oversubscribed (U <= theta), then a
fair-share-like decay. With theta = gamma = 1 this is the unfitted rule "share the GPU when
U > 100 %" (the default when no data is given); ``fit`` learns theta and gamma by least squares.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize

from horus.cluster import GPUType
from horus.interference.base import INTERFERENCE_MODELS, InterferenceModel, clip_throughput
from horus.interference.data import JobFeatures, Observation


@INTERFERENCE_MODELS.register("summed-util")
class SummedUtilization(InterferenceModel):
    """Normalized throughput = min(1, theta / summed predicted utilization) ** gamma."""

    name = "summed-util"

    def __init__(self, features: JobFeatures | None = None, seed: int = 0,
                 theta: float = 1.0, gamma: float = 1.0) -> None:
        super().__init__(features if features is not None else JobFeatures(predictor="analytic"), seed)
        self.theta = theta
        self.gamma = gamma
        self.fitted = False

    def util(self, job_type: str, gpu: GPUType | str) -> float:
        return self.features.solo(job_type, gpu)[0]

    @staticmethod
    def curve(total_util: np.ndarray, theta: float, gamma: float) -> np.ndarray:
        return np.minimum(1.0, theta / np.maximum(total_util, 1e-9)) ** gamma

    def fit(self, observations: Sequence[Observation]) -> SummedUtilization:
        obs = [o for o in observations if o.corunners]
        total = np.array([sum(self.util(t, o.gpu) for t in o.job_types) for o in obs])
        y = np.array([o.value for o in obs])

        def loss(x: np.ndarray) -> float:
            return float(np.sum((self.curve(total, np.exp(x[0]), np.exp(x[1])) - y) ** 2))

        starts = [np.log([t, g]) for t in (0.5, 1.0, 1.5) for g in (0.5, 1.0, 2.0)]
        best = min((minimize(loss, s, method="Nelder-Mead") for s in starts), key=lambda r: r.fun)
        self.theta, self.gamma = (float(v) for v in np.exp(best.x))
        self.fitted = True
        return self

    def predict_one(self, target: str, corunners: Sequence[str], gpu: GPUType | str) -> float:
        if not corunners:
            return 1.0
        total = self.util(target, gpu) + sum(self.util(t, gpu) for t in corunners)
        return clip_throughput(float(self.curve(np.array([total]), self.theta, self.gamma)[0]))

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "theta": self.theta, "gamma": self.gamma, "fitted": self.fitted}


@INTERFERENCE_MODELS.register("summed-util-zeroshot")
class ZeroShotSummedUtilization(SummedUtilization):
    """The unfitted rule ``min(1, 1 / summed predicted utilization)`` (theta = gamma = 1): ``fit`` changes nothing."""

    name = "summed-util-zeroshot"

    def fit(self, observations: Sequence[Observation]) -> ZeroShotSummedUtilization:
        return self
