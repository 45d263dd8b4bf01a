"""``parametric`` truth: the embedded default world, computed from catalog features (no shared data).

Per job type ``<model>/b<batch>`` on a GPU type of relative ``speed`` (V100 = 1); a key stating an input size
(``/s<size>``) scales the model's per-sample FLOPs and saved activations with the input's elements (pixels for
image families, the size itself otherwise; ``catalog.ModelInfo.at_input_size``); this synthetic world ignores a
stated precision or optimizer (its time and memory are those of the fp32 / Adam default):

* GPU-busy time   t_gpu  = train_flops x batch / (speed x V100_PEAK_FLOPS x FAMILY_EFFICIENCY[family])
* host time       t_host = FAMILY_HOST_S[family] + HOST_PER_OP_S x (number of ops): data loading, Python
                           and kernel launches, during which the GPU idles (does not scale with speed)
* iteration time  = (t_gpu + t_host) x time deviation
* solo util       = t_gpu / (t_gpu + t_host) x util deviation, clipped to [UTIL_FLOOR, 1]: a saturating
                    function of the work per iteration
* memory          = memory.training_memory_mib(model, batch) x (1 + allocator overhead); with
                    ``memory_overhead=False`` the formula alone (``--memory-truth deviated`` then applies the
                    measured deviation of ``horus.truth.memory_deviation`` instead of this synthetic one)

The *deviations* are SYNTHETIC: deterministic per job type (seeded from a SHA-256 of ``seed`` and the
job-type name): util and time lognormal (sigma UTIL_SIGMA, TIME_SIGMA), allocator/fragmentation overhead
uniform in [MEM_OVERHEAD_MIN, MEM_OVERHEAD_MAX]. They stand for what graph features do not explain, so
that no predictor can be exact by construction.

Co-location uses ``fit.normalized_throughputs`` with the scalars of ``horus/data/truth_params.json``,
fitted on Gavel's measured V100 pairs with *this world's own solo utilization* of each Gavel job type
as the law's input (``horus truth fit --inputs physical``), so the law is fed values on the scale it
was fitted on. Its held-out error and pair-sum calibration are recorded in that file (docs/truth.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from horus.catalog import ModelInfo, load_catalog, model_info
from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.jobs import job_type_key, parse_job_key
from horus.truth.base import TRUTH_MODELS, SoloTruth, TruthModel
from horus.truth.fit import SlowdownParams, load_slowdown_params, normalized_throughputs
from horus.truth.memory import training_memory_mib

V100_PEAK_FLOPS = 15.7e12  # fp32, V100 SXM2 datasheet
# Achieved fraction of fp32 peak while the GPU is busy (assumption, by model family).
FAMILY_EFFICIENCY: dict[str, float] = {"cnn": 0.50, "transformer": 0.45, "recurrent": 0.30, "recommendation": 0.25,
                                       "gan": 0.45, "rl": 0.15, "detector": 0.40}
# Per-iteration host time with the GPU idle (data loading, environment steps for RL), seconds.
FAMILY_HOST_S: dict[str, float] = {"cnn": 0.02, "transformer": 0.02, "recurrent": 0.01, "recommendation": 0.03,
                                   "gan": 0.02, "rl": 0.10, "detector": 0.03}
HOST_PER_OP_S = 60e-6  # Python + kernel-launch cost per op (forward, backward and optimizer together)
DEFAULT_EFFICIENCY, DEFAULT_HOST_S = 0.35, 0.01  # unknown family
UTIL_SIGMA, TIME_SIGMA = 0.15, 0.10
MEM_OVERHEAD_MIN, MEM_OVERHEAD_MAX = 0.05, 0.20
UTIL_FLOOR = 0.02

# Default workload mix: Gavel-like job types plus a few larger models.
DEFAULT_JOB_TYPES: tuple[str, ...] = (
    *(job_type_key("resnet18_cifar", b) for b in (16, 32, 64, 128, 256)),
    *(job_type_key("resnet50", b) for b in (16, 32, 64, 128)),
    *(job_type_key("transformer", b) for b in (16, 32, 64, 128, 256)),
    *(job_type_key("lstm_lm", b) for b in (5, 10, 20, 40, 80)),
    *(job_type_key("recoder", b) for b in (512, 1024, 2048, 4096, 8192)),
    job_type_key("cyclegan", 1), job_type_key("a3c", 4),
    *(job_type_key("vgg16", b) for b in (16, 32, 64)),
    *(job_type_key("bert_base", b) for b in (8, 16, 32)),
    *(job_type_key("gpt2", b) for b in (2, 4, 8)),
)

def _type_rng(seed: int, job_type: str) -> np.random.Generator:
    digest = hashlib.sha256(f"horus-parametric/{seed}/{job_type}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


@TRUTH_MODELS.register("parametric")
class ParametricTruth(TruthModel):
    """Synthetic world from catalog features + fitted co-location scalars; works for any catalog model."""

    name = "parametric"

    def __init__(self, seed: int = 0, slowdown: SlowdownParams | None = None, memory_overhead: bool = True) -> None:
        self.seed = seed
        self.memory_overhead = memory_overhead  # False: memory = the formula (the measured deviation replaces it)
        self.slowdown = slowdown or load_slowdown_params()
        self._solo = lru_cache(maxsize=None)(self._compute_solo)
        self._coloc: dict[tuple[str, tuple[str, ...]], tuple[float, ...]] = {}

    def deviations(self, job_type: str) -> tuple[float, float, float]:
        """Synthetic per-type (util factor, time factor, memory overhead), deterministic in seed."""
        rng = _type_rng(self.seed, job_type)
        util_factor = float(np.exp(rng.normal(0.0, UTIL_SIGMA)))
        time_factor = float(np.exp(rng.normal(0.0, TIME_SIGMA)))
        mem_overhead = float(rng.uniform(MEM_OVERHEAD_MIN, MEM_OVERHEAD_MAX))
        return util_factor, time_factor, mem_overhead

    @staticmethod
    def busy_and_host_time(info: ModelInfo, batch: int, speed: float) -> tuple[float, float]:
        efficiency = FAMILY_EFFICIENCY.get(info.family, DEFAULT_EFFICIENCY)
        t_gpu = info.train_flops_per_sample * batch / (speed * V100_PEAK_FLOPS * efficiency)
        t_host = FAMILY_HOST_S.get(info.family, DEFAULT_HOST_S) + HOST_PER_OP_S * sum(info.op_counts.values())
        return t_gpu, t_host

    def _compute_solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        key = parse_job_key(job_type)
        batch = key.batch_size
        info = model_info(key.model).at_input_size(key.input_size)
        t_gpu, t_host = self.busy_and_host_time(info, batch, gpu_type.speed)
        util_factor, time_factor, mem_overhead = self.deviations(job_type)
        util = min(1.0, max(UTIL_FLOOR, t_gpu / (t_gpu + t_host) * util_factor))
        mem = training_memory_mib(info, batch) * (1.0 + (mem_overhead if self.memory_overhead else 0.0))
        return SoloTruth(util=util, mem_mib=mem, iter_time_s=(t_gpu + t_host) * time_factor)

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        return self._solo(job_type, gpu_type)

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        if len(job_types) <= 1:
            return [1.0] * len(job_types)
        ordered = tuple(sorted(job_types))
        key = (gpu_type.name, ordered)
        values = self._coloc.get(key)
        if values is None:
            utils = [self.solo(t, gpu_type).util for t in ordered]
            values = tuple(normalized_throughputs(utils, self.slowdown))
            self._coloc[key] = values
        by_type = dict(zip(ordered, values))  # equal types get equal values
        return [by_type[t] for t in job_types]

    def colocated_throughputs(self, sets: Sequence[Sequence[str]], gpu_type: GPUType) -> list[list[float]]:
        """As ``colocated_throughput`` per set, the same numbers: a member's value depends only on its own solo
        util and the exact (``fsum``) total, so the members' order does not matter and no sort is needed."""
        utils: dict[str, float] = {}
        out = []
        for members in sets:
            if len(members) <= 1:
                out.append([1.0] * len(members))
                continue
            us = []
            for t in members:
                u = utils.get(t)
                if u is None:
                    u = utils[t] = self.solo(t, gpu_type).util
                us.append(u)
            out.append(normalized_throughputs(us, self.slowdown))
        return out

    def job_types(self) -> list[str]:
        return list(DEFAULT_JOB_TYPES)

    def knows(self, job_type: str) -> bool:
        """Any catalog model at any batch, input size, precision and optimizer (``job_types`` is only what a trace
        without models draws from)."""
        try:
            return parse_job_key(job_type).model in load_catalog()
        except HorusInputError:
            return False

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name, "seed": self.seed,
            "slowdown": {"alpha": self.slowdown.alpha, "beta": self.slowdown.beta, "gamma": self.slowdown.gamma,
                         "source": "horus/data/truth_params.json (fitted on Gavel V100 pairs, inputs: this world's "
                                   "solo utilization)"},
            "v100_peak_flops": V100_PEAK_FLOPS, "family_efficiency": FAMILY_EFFICIENCY,
            "family_host_s": FAMILY_HOST_S, "host_per_op_s": HOST_PER_OP_S,
            "synthetic_deviations": {"util_sigma": UTIL_SIGMA, "time_sigma": TIME_SIGMA,
                                     "mem_overhead": [MEM_OVERHEAD_MIN, MEM_OVERHEAD_MAX]},
            "memory": "horus.truth.memory.training_memory_mib (adam, fp32)"
                      + (" x (1 + overhead)" if self.memory_overhead else " (synthetic overhead off)"),
        }
