"""Schema of the co-location dataset: one row per member of a co-located set per repeat."""

from __future__ import annotations

# column -> (dtype, description)
COLOC_COLUMNS: dict[str, tuple[str, str]] = {
    "set_id": ("str", "order-independent id of the set: '+'-joined sorted <model>-b<batch>-<precision>"),
    "set_size": ("int", "number of jobs sharing the GPU"),
    "member": ("int", "index of this job within the set (order of the spec)"),
    "model": ("str", "zoo model name"),
    "batch_size": ("int", "per-GPU batch size"),
    "precision": ("str", "fp32 or amp"),
    "throughput_samples_s": ("float", "this job's samples/s in the common window"),
    "solo_throughput_samples_s": ("float", "the same configuration's solo samples/s (mean over ok repeats)"),
    "normalized_throughput": ("float", "throughput / solo throughput"),
    "status": ("str", "ok, oom, error, or partner_failed (this job ran but a partner did not)"),
    "error": ("str", "error message when status != ok, else empty"),
    "combined_util_mean": ("float", "mean NVML GPU utilization of the device over the window, percent"),
    "combined_mem_used_mib_peak": ("float", "peak NVML memory used on the device over the window, MiB"),
    "repeat": ("int", "repeat index of the set"),
    "gpu_name": ("str", "NVML device name"),
    # extras (after the columns named in the brief)
    "solo_util_mean": ("float", "the configuration's solo NVML utilization, percent (from the solo data)"),
    "solo_mem_mib": ("float", "the configuration's solo torch_max_reserved_mib (from the solo data)"),
    "torch_max_reserved_mib": ("float", "this job's torch.cuda.max_memory_reserved while co-located, MiB"),
    "iter_time_s_mean": ("float", "this job's mean iteration time in the window, seconds"),
    "n_iters": ("int", "this job's iterations in the window"),
    "window_s": ("float", "this job's measured window length, seconds"),
}

STATUSES: tuple[str, ...] = ("ok", "oom", "error", "partner_failed")
