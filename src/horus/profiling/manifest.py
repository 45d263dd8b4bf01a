"""The campaign manifest: software, device and measurement settings (no host names)."""

from __future__ import annotations

import datetime as dt
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

import horus
from horus.profiling.loop import LoopSettings
from horus.profiling.nvml import NvmlDevice

HARNESS_VERSION = "1"


def git_commit() -> str | None:
    """The checkout's commit when git and a repository are available, else None."""
    repo = Path(horus.__file__).resolve().parents[2]
    try:
        done = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def build_manifest(settings: LoopSettings, device: NvmlDevice | None, extra: dict[str, Any] | None = None) -> dict:
    import torch

    manifest: dict[str, Any] = {
        "harness_version": HARNESS_VERSION,
        "horus_version": horus.__version__,
        "git_commit": git_commit(),
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device": settings.device,
        "gpu_name": device.name() if device else None,
        "gpu_memory_mib": device.memory_total_mib() if device else None,
        "driver_version": device.driver_version() if device else None,
        "nvml": settings.use_nvml,
        "nvml_note": None if settings.use_nvml else "run with --no-nvml: NVML columns (util, memory used, SM clock, "
                                                     "power, combined util/memory) are NaN",
        "sampling_period_s": settings.nvml_period_s,
        "window_s": settings.window_s,
        "warmup_iters": settings.warmup_iters,
        "warmup_s": settings.warmup_s,
        "optimizer": settings.optimizer,
        "lr": settings.lr,
        "seed": settings.seed,
        "timing": "wall clock per iteration with torch.cuda.synchronize after each optimizer step",
    }
    manifest.update(extra or {})
    return manifest


def write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
