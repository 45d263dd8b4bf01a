"""Schema of the solo profiling dataset (one row per configuration), shared by the harness and the
learned predictors. Written as Parquet (``data/profiles/<gpu>-<date>.parquet``) plus a manifest JSON.
"""

from __future__ import annotations

# column -> (dtype, description)
PROFILE_COLUMNS: dict[str, tuple[str, str]] = {
    "config_id": ("str", "unique id: <model>-b<batch>-<precision>[-r<repeat>]"),
    "model": ("str", "zoo model name"),
    "family": ("str", "model family (cnn, recurrent, transformer, recommendation, gan, rl, detector)"),
    "batch_size": ("int", "per-GPU batch size"),
    "input_size": ("int", "image side / sequence length / feature count"),
    "precision": ("str", "fp32 or amp"),
    "repeat": ("int", "repeat index of the same configuration (0 for the first)"),
    "gpu_name": ("str", "NVML device name"),
    "status": ("str", "ok, oom or error"),
    "error": ("str", "error message when status != ok, else empty"),
    "gpu_util_mean": ("float", "mean NVML GPU utilization over the window, percent"),
    "gpu_util_p50": ("float", "median NVML GPU utilization, percent"),
    "mem_used_mib_peak": ("float", "peak NVML memory used by the device, MiB"),
    "torch_max_allocated_mib": ("float", "torch.cuda.max_memory_allocated, MiB"),
    "torch_max_reserved_mib": ("float", "torch.cuda.max_memory_reserved, MiB"),
    "iter_time_s_mean": ("float", "mean training-iteration time in the window, seconds"),
    "iter_time_s_std": ("float", "standard deviation of iteration time, seconds"),
    "throughput_samples_s": ("float", "samples per second in the window"),
    "sm_clock_mhz_mean": ("float", "mean SM clock, MHz"),
    "power_w_mean": ("float", "mean board power, W"),
    "n_iters": ("int", "iterations in the measuring window"),
    "window_s": ("float", "measuring window length, seconds"),
}

TARGETS: dict[str, str] = {
    "util": "gpu_util_mean",
    "mem": "torch_max_reserved_mib",
    "iter_time": "iter_time_s_mean",
}
