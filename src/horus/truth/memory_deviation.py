"""``--memory-truth deviated``: the world's true peak memory off the analytic formula by a measured deviation.

Each job type's model-dependent memory (the total less ``horus.truth.memory.CUDA_CONTEXT_MIB``) is multiplied
by ``d``, drawn once per (job type, seed) from a SHA-256 of both: ``ln d`` follows the quantiles in
``horus/data/memory_deviation.json`` (linear between them), fitted on GPUMemNet's measured MLP trainings against
the formula (``horus truth fit-memory``, ``horus.truth.memory_fit``; docs/truth.md, "Memory deviation").

Only the truth changes: predictors keep their own memory model, so a policy that packs memory to the predicted
limit now meets out-of-memory starts. Utilization, iteration time and co-location pass through unchanged. A
truth whose memory was measured (``TruthModel.memory_measured``) is refused: it is already the real thing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

import numpy as np

from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.truth.base import SoloTruth, TruthModel
from horus.truth.memory import CUDA_CONTEXT_MIB

PARAMS_FILE = "memory_deviation.json"


@dataclass(frozen=True)
class DeviationDistribution:
    """Quantiles of ``ln d`` at ``probs`` (increasing), and the fitted data's mean and std of ``ln d``."""

    probs: tuple[float, ...]
    log_quantiles: tuple[float, ...]
    log_mean: float
    log_std: float
    provenance: dict[str, object]

    def log_deviation(self, u: float) -> float:
        """``ln d`` at cumulative probability ``u`` in [0, 1) (inverse CDF, linear between the quantiles)."""
        return float(np.interp(u, self.probs, self.log_quantiles))


@lru_cache(maxsize=1)
def load_deviation() -> DeviationDistribution:
    """The distribution shipped in ``horus/data/memory_deviation.json`` (written by ``--write-params``)."""
    try:
        data = json.loads(resources.files("horus.data").joinpath(PARAMS_FILE).read_text())
        dist = DeviationDistribution(tuple(float(p) for p in data["probs"]),
                                     tuple(float(q) for q in data["log_quantiles"]), float(data["log_mean"]),
                                     float(data["log_std"]), dict(data.get("provenance", {})))
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise HorusInputError(f"horus/data/{PARAMS_FILE}", f"expected probs, log_quantiles, log_mean, log_std "
                                                           f"({exc})") from None
    if len(dist.probs) != len(dist.log_quantiles) or len(dist.probs) < 2 or list(dist.probs) != sorted(dist.probs) \
            or list(dist.log_quantiles) != sorted(dist.log_quantiles):
        raise HorusInputError(f"horus/data/{PARAMS_FILE}", "probs and log_quantiles must be increasing, same length")
    return dist


def _uniform(seed: int, job_type: str) -> float:
    digest = hashlib.sha256(f"horus-memory-deviation/{seed}/{job_type}".encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2.0**64


class MemoryDeviation(TruthModel):
    """``inner`` with each job type's model-dependent peak memory multiplied by its deviation ``d``."""

    def __init__(self, inner: TruthModel, seed: int = 0, distribution: DeviationDistribution | None = None) -> None:
        if inner.memory_measured:
            raise HorusInputError("--memory-truth deviated", f"truth {inner.name!r} measured its memory on real GPUs; "
                                                             "it is not deviated")
        self.inner = inner
        self.seed = seed
        self.distribution = distribution or load_deviation()
        self.name = inner.name
        self._factor: dict[str, float] = {}

    def deviation(self, job_type: str) -> float:
        """``d`` of ``job_type`` (deterministic in the seed)."""
        value = self._factor.get(job_type)
        if value is None:
            value = self._factor[job_type] = float(np.exp(self.distribution.log_deviation(_uniform(self.seed, job_type))))
        return value

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        solo = self.inner.solo(job_type, gpu_type)
        model = max(0.0, solo.mem_mib - CUDA_CONTEXT_MIB)
        return replace(solo, mem_mib=solo.mem_mib + model * (self.deviation(job_type) - 1.0))

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        return self.inner.colocated_throughput(job_types, gpu_type)

    def colocated_throughputs(self, sets: Sequence[Sequence[str]], gpu_type: GPUType) -> list[list[float]]:
        return self.inner.colocated_throughputs(sets, gpu_type)

    def job_types(self) -> list[str]:
        return self.inner.job_types()

    def knows(self, job_type: str) -> bool:
        return self.inner.knows(job_type)

    def describe(self) -> dict[str, object]:
        d = self.distribution
        return {**self.inner.describe(), "memory_truth": {
            "form": f"mem' = {CUDA_CONTEXT_MIB:g} + (mem - {CUDA_CONTEXT_MIB:g}) x d per job type, ln d from "
                    f"horus/data/{PARAMS_FILE}", "seed": self.seed, "log_mean": d.log_mean, "log_std": d.log_std,
            "probs": list(d.probs), "log_quantiles": list(d.log_quantiles),
            "source": d.provenance.get("command"), "data_sha256": d.provenance.get("data_sha256")}}
