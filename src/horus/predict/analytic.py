"""``analytic`` predictor: the default belief, from catalog features only.

* iteration time = train_flops x batch / (speed x ASSUMED_V100_FLOPS) + LAUNCH_OVERHEAD_S
  (one achieved-throughput assumption for every model: 35 % of a V100's 15.7 fp32 TFLOPS)
* utilization    = 1 - exp(-w / UTIL_WORK_SCALE_S), w = train_flops x batch / (speed x ASSUMED_V100_FLOPS):
  a generic saturating curve of the GPU time per iteration (20 ms of work -> 63 %), clipped to [0.05, 1]
* memory         = horus.truth.memory.training_memory_mib (Adam, fp32), no fragmentation allowance

These constants are this predictor's own rough assumptions, not any simulated world's parameters;
the estimate ignores family-specific efficiency, data loading and per-model deviations.
"""

from __future__ import annotations

import math

from horus.catalog import model_info
from horus.cluster import GPUType
from horus.jobs import JobSpec
from horus.predict.base import PREDICTORS, Prediction, Predictor
from horus.truth.memory import training_memory_mib

ASSUMED_V100_FLOPS = 0.35 * 15.7e12  # achieved fp32 FLOP/s on a V100 (speed 1.0)
LAUNCH_OVERHEAD_S = 0.004  # fixed per-iteration cost (optimizer step, launches)
UTIL_WORK_SCALE_S = 0.020
UTIL_MIN, UTIL_MAX = 0.05, 1.0


@PREDICTORS.register("analytic")
class AnalyticPredictor(Predictor):
    name = "analytic"

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        info = model_info(job.model)
        busy_s = info.train_flops_per_sample * job.batch_size / (gpu_type.speed * ASSUMED_V100_FLOPS)
        util = min(UTIL_MAX, max(UTIL_MIN, 1.0 - math.exp(-busy_s / UTIL_WORK_SCALE_S)))
        return Prediction(util=util, mem_mib=training_memory_mib(info, job.batch_size),
                          iter_time_s=busy_s + LAUNCH_OVERHEAD_S)

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "assumed_v100_flops": ASSUMED_V100_FLOPS, "launch_overhead_s": LAUNCH_OVERHEAD_S,
                "util_work_scale_s": UTIL_WORK_SCALE_S, "memory": "horus.truth.memory.training_memory_mib (adam)"}
