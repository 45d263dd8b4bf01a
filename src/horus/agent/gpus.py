"""This machine's GPUs: NVML discovery and telemetry, or fake GPUs for machines without one.

Without a GPU (or without the NVIDIA driver's NVML library) ``discover`` says why in one line;
``fake_gpus`` then describes N GPUs of a declared type, and jobs run on the CPU.
"""

from __future__ import annotations

import logging
import os
import time
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
        self.fake = FakeTelemetry() if gpus and all(g.get("fake") for g in gpus) else None
        if self.nvml is None and self.fake is None:
            log.info("no NVML telemetry: jobs report progress only")

    def sample(self, job_pids: dict[int, tuple[str, int]],
               job_gpus: dict[tuple[str, int], list[int]] | None = None,
               ) -> tuple[list[dict[str, float]], dict[tuple[str, int], float]]:
        """(per-GPU {index, util, mem_mib}, memory MiB per job attempt); empty without NVML. Fake GPUs report
        what their stand-in device, the CPU, does: see ``FakeTelemetry``."""
        if self.nvml is None:
            if self.fake is not None and job_gpus is not None:
                return self.fake.sample(job_pids, job_gpus), {}
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


class FakeTelemetry:
    """Telemetry of fake GPUs: jobs on them run on the CPU, so a fake GPU's utilization is the CPU share its jobs'
    processes used since the last sample (CPU seconds per second, at most 1) and its memory their resident set
    (MiB), read from ``/proc`` per process group. Documented as such; it is never NVML data."""

    def __init__(self) -> None:
        self._ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._page_mib = (os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096) / 2**20
        self._last: dict[int, tuple[float, float]] = {}  # process group -> (CPU seconds, when)

    def _groups(self, wanted: set[int]) -> dict[int, tuple[float, float]]:
        """Process group -> (CPU seconds of its live processes, resident MiB)."""
        out: dict[int, tuple[float, float]] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue  # it ended while we looked
            group = int(fields[2])
            if group in wanted:
                cpu = (int(fields[11]) + int(fields[12])) / self._ticks
                rss = int(fields[21]) * self._page_mib
                old = out.get(group, (0.0, 0.0))
                out[group] = (old[0] + cpu, old[1] + rss)
        return out

    def sample(self, job_pids: dict[int, tuple[str, int]],
               job_gpus: dict[tuple[str, int], list[int]]) -> list[dict[str, float]]:
        if not os.path.isdir("/proc"):
            return []
        now = time.monotonic()
        groups = self._groups(set(job_pids))
        per_gpu: dict[int, list[float]] = {}
        for group, key in job_pids.items():
            cpu, rss = groups.get(group, (0.0, 0.0))
            before = self._last.get(group)
            self._last[group] = (cpu, now)
            gpus = job_gpus.get(key) or []
            if not gpus:
                continue
            util = (max(0.0, cpu - before[0]) / (now - before[1])) if before and now > before[1] else 0.0
            for index in gpus:
                acc = per_gpu.setdefault(index, [0.0, 0.0])
                acc[0] += util / len(gpus)
                acc[1] += rss / len(gpus)
        self._last = {g: v for g, v in self._last.items() if g in job_pids}
        return [{"index": i, "util": min(1.0, u), "mem_mib": m} for i, (u, m) in sorted(per_gpu.items())]
