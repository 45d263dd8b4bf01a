"""The pod's declared limits on top of a registered predictor (the belief about a pod).

* A pod naming a catalog model is predicted by the base predictor (default ``physical``; ``analytic`` for a
  model the base cannot handle, e.g. an ONNX graph without per-operator rows); a declared
  ``nvidia.com/gpumem`` replaces the predicted memory (HAMi enforces it: it is what the pod may hold)
  and ``nvidia.com/gpucores`` caps the predicted utilization (HAMi throttles the pod to it).
* A pod naming no model (``OPAQUE_MODEL``) is assumed to fill its GPUs: utilization 1.0 (or its
  declared cores) and the whole card's memory (or its declared gpumem). Horus then never co-locates
  with it beyond what its declared limits allow.
"""

from __future__ import annotations

from dataclasses import replace

from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.jobs import JobSpec
from horus.k8s.resources import OPAQUE_MODEL, PodJobSpec
from horus.predict.base import Prediction, Predictor

OPAQUE_ITER_TIME_S = 1.0  # placeholder: placement does not read iteration time for a lone pending pod


class PodPredictor(Predictor):
    def __init__(self, base: Predictor) -> None:
        from horus.predict.analytic import AnalyticPredictor

        self.base = base
        self.fallback = AnalyticPredictor()
        self.name = f"k8s({base.name})"

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        mem = getattr(job, "gpumem_mib", None)
        cores = getattr(job, "gpucores", None)
        if job.model == OPAQUE_MODEL:
            pred = Prediction(util=1.0, mem_mib=float(gpu_type.memory_mib), iter_time_s=OPAQUE_ITER_TIME_S)
        else:
            try:
                pred = self.base.predict(job, gpu_type)
            except HorusInputError:
                if self.base.name == self.fallback.name:
                    raise
                pred = self.fallback.predict(job, gpu_type)
        if mem is not None:
            pred = replace(pred, mem_mib=float(mem))
        if cores is not None and cores > 0:
            pred = replace(pred, util=min(pred.util, cores / 100.0))
        return pred

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "base": self.base.describe(), "fallback": self.fallback.name,
                "declared_limits": "nvidia.com/gpumem replaces memory, nvidia.com/gpucores caps utilization",
                "opaque_pods": "utilization 1.0 and the whole card unless limits are declared"}


__all__ = ["PodPredictor", "PodJobSpec"]
