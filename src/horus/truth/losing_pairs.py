"""``--losing-pairs F``: the same world where a share F of job-type pairs loses throughput when co-located.

Measured pairs mostly gain (Gavel's V100 pairs sum to ~1.8 on median), and a world where sharing almost always
pays cannot show what interference-aware placement is for. Here a seeded share ``F`` of unordered type pairs
(``(a, a)`` included) is *losing*: any set on one GPU that contains a losing pair delivers a combined normalized
throughput ``sum x`` of at most ``T``, drawn per set in ``[low, high]`` (default 0.6-0.95: the GPU does less work
than one job alone), every member scaled by the same factor (their ratios kept). Other sets are unchanged; solo
values are unchanged. Which pairs lose and the targets are deterministic by (seed, types), not by job.

This is a stress world in the style of measured contention (memory-bandwidth or PCIe-bound pairs that thrash
each other), not a measurement: its purpose is that placing by predicted interference is tested where a wrong
co-location costs more than it gains.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from horus.cluster import GPUType
from horus.truth.base import SoloTruth, TruthModel


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from ``parts``."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2.0 ** 64


class LosingPairs(TruthModel):
    """Wraps a truth: a seeded share of type pairs sums below ``high`` (module docstring)."""

    def __init__(self, inner: TruthModel, share: float, *, seed: int = 0, low: float = 0.6,
                 high: float = 0.95) -> None:
        if not (math.isfinite(share) and 0.0 <= share <= 1.0):
            raise ValueError(f"losing-pair share must be in [0, 1], got {share}")
        if not 0.0 < low <= high <= 1.0:
            raise ValueError(f"losing-pair targets need 0 < low <= high <= 1, got {low}, {high}")
        self.inner = inner
        self.share = float(share)
        self.seed = int(seed)
        self.low, self.high = float(low), float(high)
        self.name = inner.name

    def losing(self, a: str, b: str) -> bool:
        """Whether the type pair (a, b) loses when sharing a GPU (symmetric)."""
        first, second = sorted((a, b))
        return _unit("pair", self.seed, first, second) < self.share

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        return self.inner.solo(job_type, gpu_type)

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        xs = [float(x) for x in self.inner.colocated_throughput(job_types, gpu_type)]
        types = list(job_types)
        if len(types) < 2 or not any(self.losing(types[i], types[j])
                                     for i in range(len(types)) for j in range(i + 1, len(types))):
            return xs
        target = self.low + (self.high - self.low) * _unit("set", self.seed, gpu_type.name, *sorted(types))
        total = sum(xs)
        return xs if total <= target else [x * target / total for x in xs]

    def job_types(self) -> list[str]:
        return self.inner.job_types()

    def knows(self, job_type: str) -> bool:
        return self.inner.knows(job_type)

    def describe(self) -> dict[str, object]:
        return {**self.inner.describe(), "losing_pairs": {"share": self.share, "seed": self.seed,
                                                          "combined_range": [self.low, self.high]}}
