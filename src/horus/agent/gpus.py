"""This machine's GPUs: NVML discovery and telemetry, or fake GPUs for machines without one.

Without a GPU (or without the NVIDIA driver's NVML library) ``discover`` says why in one line;
``fake_gpus`` then describes N GPUs of a declared type, and jobs run on the CPU.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from horus.gpu_types import PRESETS

log = logging.getLogger("horus.agent")


def _nvml() -> Any:
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


def discover() -> tuple[list[dict[str, Any]], str | None]:
    """(GPU descriptions, None) from NVML, or ([], one-line reason) where there are none."""
    try:
        nvml = _nvml()
    except ImportError:
        return [], "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return [], f"NVML unavailable ({type(exc).__name__}): no NVIDIA driver or GPU on this machine"
    gpus = []
    try:
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            name = nvml.nvmlDeviceGetName(handle)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle).total
            gpus.append({"index": i, "uuid": uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                         "name": name.decode() if isinstance(name, bytes) else str(name),
                         "memory_mib": int(memory // 2**20)})
    except Exception as exc:  # noqa: BLE001
        return [], f"NVML failed while listing GPUs ({type(exc).__name__}: {exc})"
    if not gpus:
        return [], "NVML found no GPU"
    return gpus, None


def fake_gpus(count: int, gpu_type: str, agent: str) -> list[dict[str, Any]]:
    """``count`` fake GPUs of preset ``gpu_type`` (jobs on them run on the CPU)."""
    if gpu_type not in PRESETS:
        raise ValueError(f"unknown GPU type {gpu_type!r}; presets: {', '.join(PRESETS)}")
    memory = PRESETS[gpu_type].memory_mib
    return [{"index": i, "uuid": f"fake-{agent}-{i}", "name": f"fake {gpu_type}", "type": gpu_type,
             "memory_mib": memory, "fake": True} for i in range(count)]


class Telemetry:
    """Per-GPU utilization and the memory of Horus jobs' processes, from NVML (1 Hz at most)."""

    def __init__(self, gpus: list[dict[str, Any]]) -> None:
        self.gpus = gpus
        self.nvml: Any = None
        if gpus and not any(g.get("fake") for g in gpus):
            try:
                self.nvml = _nvml()
            except Exception:  # noqa: BLE001
                self.nvml = None
        if self.nvml is None:
            log.info("no NVML telemetry: jobs report progress only")

    def sample(self, job_pids: dict[int, tuple[str, int]]) -> tuple[list[dict[str, float]], dict[tuple[str, int], float]]:
        """(per-GPU {index, util, mem_mib}, memory MiB per job attempt); empty without NVML."""
        if self.nvml is None:
            return [], {}
        nvml = self.nvml
        per_gpu, per_job = [], {}
        for gpu in self.gpus:
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(gpu["index"])
                util = nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100.0
                used = 0.0
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    try:
                        group = os.getpgid(proc.pid)
                    except OSError:
                        continue
                    key = job_pids.get(group)
                    if key is not None and proc.usedGpuMemory:
                        mib = proc.usedGpuMemory / 2**20
                        per_job[key] = per_job.get(key, 0.0) + mib
                        used += mib
                per_gpu.append({"index": gpu["index"], "util": util, "mem_mib": used})
            except Exception as exc:  # noqa: BLE001 - a GPU that fell off the bus must not stop the agent
                log.warning("NVML sample of GPU %s failed: %s", gpu["index"], exc)
        return per_gpu, per_job
