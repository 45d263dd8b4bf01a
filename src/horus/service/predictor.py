"""The live service's belief: the configured predictor, with fallbacks for jobs it cannot predict."""

from __future__ import annotations

from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.jobs import JobSpec
from horus.predict.base import Prediction, Predictor, whole_gpu


class ServicePredictor(Predictor):
    """The configured predictor for jobs that name a model, ``analytic`` for a catalog model it cannot
    handle (e.g. an uploaded ONNX graph has no per-operator rows for ``physical``), and for a job without a
    model a conservative belief: the whole GPU (100 % utilization, 95 % of the card's memory)."""

    def __init__(self, inner: Predictor) -> None:
        from horus.predict.analytic import AnalyticPredictor

        self.inner = inner
        self.fallback = AnalyticPredictor()
        self.name = inner.name

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        if not job.model:
            return whole_gpu(gpu_type)
        try:
            return self.inner.predict(job, gpu_type)
        except HorusInputError:
            if self.inner.name == self.fallback.name:
                raise
            return self.fallback.predict(job, gpu_type)  # raises too for a model the catalog lacks

    def describe(self) -> dict[str, object]:
        return {**self.inner.describe(), "fallback": self.fallback.name,
                "without_model": "exclusive (util 1.0, 95 % of the card's memory)"}
