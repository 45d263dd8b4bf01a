"""Truth-model interface: the simulated world's ground truth. Only the engine and oracles read it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from horus.cluster import GPUType
from horus.registry import Registry


@dataclass(frozen=True)
class SoloTruth:
    """True behaviour of one worker of a job type running alone on a GPU type."""

    util: float  # GPU utilization as a fraction (1.0 = 100 %)
    mem_mib: float  # peak GPU memory, MiB
    iter_time_s: float  # iteration time, seconds


class TruthModel(ABC):
    """Ground truth for job types (``JobSpec.job_type`` keys) on GPU types."""

    name: str = "truth"
    memory_measured: bool = False  # True when solo().mem_mib was measured on real GPUs (never deviated)

    @abstractmethod
    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth: ...

    @abstractmethod
    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        """Normalized throughput (co-located / solo, in (0, 1]) of each job sharing one GPU.

        ``job_types`` lists every job on the GPU (repeats allowed); a single job gets ``[1.0]``.
        """

    def colocated_throughputs(self, sets: Sequence[Sequence[str]], gpu_type: GPUType) -> list[list[float]]:
        """``colocated_throughput`` of each of many sets on one GPU type (``horus.sim.bounds`` asks for thousands);
        a truth may answer faster than one call per set, never with other numbers."""
        return [list(self.colocated_throughput(members, gpu_type)) for members in sets]

    def job_types(self) -> list[str]:
        """Job types this truth knows (used by workload samplers); empty means 'any catalog model'."""
        return []

    def knows(self, job_type: str) -> bool:
        """Whether this truth can replay ``job_type`` (a trace naming another is refused before it runs)."""
        known = self.job_types()
        return not known or job_type in known

    def describe(self) -> dict[str, object]:
        """JSON-able description for run manifests (source, parameters, fit quality, data hash)."""
        return {"name": self.name}


TRUTH_MODELS: Registry[TruthModel] = Registry("truth model")
