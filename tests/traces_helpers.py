"""Small helpers shared by the trace tests (a toy truth model)."""

from __future__ import annotations

from collections.abc import Sequence

from horus.cluster import GPUType
from horus.jobs import parse_job_type
from horus.truth.base import SoloTruth, TruthModel


class ToyTruth(TruthModel):
    """Iteration time = batch / 1000 s on any GPU type; knows only ``types``."""

    name = "toy"

    def __init__(self, types: Sequence[str] = ()) -> None:
        self.types = list(types)

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        _, batch = parse_job_type(job_type)  # any key, with input size / precision / optimizer too
        return SoloTruth(util=0.5, mem_mib=1000.0, iter_time_s=batch / 1000.0)

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        return [1.0] * len(job_types)

    def job_types(self) -> list[str]:
        return list(self.types)
