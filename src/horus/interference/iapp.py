"""IAPP: a small neural net from (job, pooled co-runners) features to the job's normalized throughput.

Input = standardized features of the target job ++ sum and max of its co-runners' features ++
co-runner count. Pooling with sum/max makes the input size independent of the set size, so one
net predicts pairs, triples and larger sets (trained on whatever set sizes the data holds).
sklearn ``MLPRegressor`` (ReLU, Adam, L2 ``alpha``, early stopping off for determinism).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor

from horus.cluster import GPUType
from horus.interference.base import INTERFERENCE_MODELS, InterferenceModel, clip_throughput
from horus.interference.data import JobFeatures, Observation


@INTERFERENCE_MODELS.register("iapp")
class IAPP(InterferenceModel):
    """MLP over target features + sum/max-pooled co-runner features + count."""

    name = "iapp"

    def __init__(self, features: JobFeatures | None = None, seed: int = 0,
                 hidden: tuple[int, ...] = (32, 16), alpha: float = 1e-2, max_iter: int = 1500) -> None:
        super().__init__(features, seed)
        self.hidden = tuple(hidden)
        self.alpha = alpha
        self.max_iter = max_iter
        self.feat_mean = np.zeros(0)
        self.feat_std = np.ones(0)
        self.net: MLPRegressor | None = None

    def _job(self, job_type: str, gpu: GPUType | str) -> np.ndarray:
        return (self.features.vector(job_type, gpu) - self.feat_mean) / self.feat_std

    def input_vector(self, target: str, corunners: Sequence[str], gpu: GPUType | str) -> np.ndarray:
        """Network input for ``target`` among ``corunners`` (at least one)."""
        others = np.vstack([self._job(t, gpu) for t in corunners])
        return np.concatenate([self._job(target, gpu), others.sum(axis=0), others.max(axis=0), [len(corunners)]])

    def fit(self, observations: Sequence[Observation]) -> IAPP:
        obs = [o for o in observations if o.corunners]
        if not obs:
            raise ValueError("IAPP needs at least one co-located observation")
        raw = np.vstack([self.features.vector(t, o.gpu) for o in obs for t in o.job_types])
        self.feat_mean = raw.mean(axis=0)
        std = raw.std(axis=0)
        self.feat_std = np.where(std > 1e-9, std, 1.0)
        x = np.vstack([self.input_vector(o.target, o.corunners, o.gpu) for o in obs])
        y = np.array([o.value for o in obs])
        self.net = MLPRegressor(hidden_layer_sizes=self.hidden, alpha=self.alpha, max_iter=self.max_iter,
                                learning_rate_init=3e-3, random_state=self.seed, tol=1e-6, n_iter_no_change=50)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.net.fit(x, y)
        return self

    def predict_one(self, target: str, corunners: Sequence[str], gpu: GPUType | str) -> float:
        if not corunners:
            return 1.0
        if self.net is None:
            raise RuntimeError("iapp model is not trained")
        x = self.input_vector(target, corunners, gpu)[None, :]
        return clip_throughput(float(self.net.predict(x)[0]))

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "hidden": list(self.hidden), "alpha": self.alpha, "max_iter": self.max_iter}
