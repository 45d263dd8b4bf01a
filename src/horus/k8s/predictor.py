"""The pod's declared limits on top of a registered predictor (the belief about a pod).

* A pod naming a catalog model is predicted by the base predictor (default ``analytic``); a declared
  ``nvidia.com/gpumem`` replaces the predicted memory (HAMi enforces it: it is what the pod may hold)
  and ``nvidia.com/gpucores`` caps the predicted utilization (HAMi throttles the pod to it).
* A pod naming no model (``OPAQUE_MODEL``) is assumed to fill its GPUs: utilization 1.0 (or its
  declared cores) and the whole card's memory (or its declared gpumem). Horus then never co-locates
  with it beyond what its declared limits allow.
"""

from __future__ import annotations

from dataclasses import replace

from horus.cluster import GPUType
from horus.jobs import JobSpec
from horus.k8s.resources import OPAQUE_MODEL, PodJobSpec
from horus.predict.base import Prediction, Predictor

OPAQUE_ITER_TIME_S = 1.0  # placeholder: placement does not read iteration time for a lone pending pod


class PodPredictor(Predictor):
    def __init__(self, base: Predictor) -> None:
        self.base = base
        self.name = f"k8s({base.name})"

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        mem = getattr(job, "gpumem_mib", None)
        cores = getattr(job, "gpucores", None)
        if job.model == OPAQUE_MODEL:
            pred = Prediction(util=1.0, mem_mib=float(gpu_type.memory_mib), iter_time_s=OPAQUE_ITER_TIME_S)
        else:
            pred = self.base.predict(job, gpu_type)
        if mem is not None:
            pred = replace(pred, mem_mib=float(mem))
        if cores is not None and cores > 0:
            pred = replace(pred, util=min(pred.util, cores / 100.0))
        return pred

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "base": self.base.describe(),
                "declared_limits": "nvidia.com/gpumem replaces memory, nvidia.com/gpucores caps utilization",
                "opaque_pods": "utilization 1.0 and the whole card unless limits are declared"}


__all__ = ["PodPredictor", "PodJobSpec"]
