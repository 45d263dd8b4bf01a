"""``--interference-scale S``: the same world with co-location made cheaper (S < 1) or dearer (S > 1).

Each co-located job's slowdown term is scaled: x' = 1 / (1 + S * (1/x - 1)). S = 1 is the world
itself, S = 0 removes interference (every co-runner keeps its solo speed), S = 2 doubles each
job's lost time per unit of work. Solo values are unchanged. Works on any truth model, so every
figure can be shown across cheap -> expensive co-location.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from horus.cluster import GPUType
from horus.truth.base import SoloTruth, TruthModel


class ScaledInterference(TruthModel):
    def __init__(self, inner: TruthModel, scale: float) -> None:
        if not (math.isfinite(scale) and scale >= 0):
            raise ValueError(f"interference scale must be a finite number >= 0, got {scale}")
        self.inner = inner
        self.scale = float(scale)
        self.name = inner.name

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        return self.inner.solo(job_type, gpu_type)

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        return [1.0 / (1.0 + self.scale * (1.0 / x - 1.0))
                for x in self.inner.colocated_throughput(job_types, gpu_type)]

    def job_types(self) -> list[str]:
        return self.inner.job_types()

    def knows(self, job_type: str) -> bool:
        return self.inner.knows(job_type)

    def describe(self) -> dict[str, object]:
        return {**self.inner.describe(), "interference_scale": self.scale}
