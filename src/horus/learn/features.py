"""The learned predictors' feature schema: graph features + precision + GPU + derived features.

``FEATURE_SCHEMA`` is the ordered list of columns every model sees; it is stored in the model
directory's sidecar and checked on load. ``build_features`` is the one place derived features are
computed (so training and prediction cannot drift apart).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from horus.catalog import FEATURE_NAMES, OP_KINDS, ModelInfo
from horus.cluster import GPUType
from horus.truth.memory import memory_terms

MIB = 2.0**20

# Columns describing the run configuration beyond the model graph.
CONFIG_FEATURES: tuple[str, ...] = (
    "is_amp",          # 1 for mixed precision (amp), 0 for fp32
    "gpu_memory_mib",  # capacity of the GPU type (horus.gpu_types preset)
    "gpu_speed",       # training throughput of the GPU type relative to a V100
)

DERIVED_FEATURES: tuple[str, ...] = (
    "log_params",             # log10(params + 1)
    "log_train_flops",        # log10(train FLOPs per iteration + 1)
    "log_flops_per_sample",   # log10(train FLOPs / batch + 1)
    "log_flops_per_param",    # log10(train FLOPs / params + 1): compute per weight (reuse)
    "log_activation_mib",     # log10(activation MiB + 1)
    "log_batch",              # log2(batch size)
    "log_intensity",          # log10(train FLOPs / (weight + activation bytes) + 1): arithmetic intensity
    "log_ideal_time",         # log10(train FLOPs / gpu_speed + 1): time on a perfectly efficient GPU, up to a constant
    "weight_mib",             # params x 4 bytes, MiB
    "analytic_mem_mib",       # analytic_memory_mib(): the formula baseline, as a feature
    "mem_fraction",           # analytic_mem_mib / gpu_memory_mib
    *(f"frac_{k}" for k in OP_KINDS),  # op-kind share of all counted ops
)

FEATURE_SCHEMA: tuple[str, ...] = (*FEATURE_NAMES, *CONFIG_FEATURES, *DERIVED_FEATURES)

AMP_ACTIVATION_FACTOR = 0.5  # activations are kept in fp16 under autocast; weights/optimizer stay fp32


def analytic_memory_mib(params: np.ndarray, activation_bytes: np.ndarray, is_amp: np.ndarray) -> np.ndarray:
    """Peak training memory from the project's analytic formula, MiB, per row.

    ``horus.truth.memory.memory_terms`` (weights + gradients + Adam state + activations + CUDA
    context, fp32) with the activation term halved under amp. A formula, not ground truth data.
    """
    out = np.empty(len(params))
    for i, (p, act, amp) in enumerate(zip(params, activation_bytes, is_amp, strict=True)):
        info = ModelInfo(name="row", family="", params=int(p), forward_flops_per_sample=0.0,
                         train_flops_per_sample=0.0, activation_bytes_per_sample=float(act), input_size=0,
                         depth=0, op_counts={}, source="features")
        terms = memory_terms(info, 1)
        out[i] = terms.total - (1.0 - AMP_ACTIVATION_FACTOR) * terms.activations * (amp > 0)
    return out


def config_features(precision: str, gpu: GPUType) -> dict[str, float]:
    """CONFIG_FEATURES of one run configuration."""
    return {"is_amp": 1.0 if precision == "amp" else 0.0, "gpu_memory_mib": float(gpu.memory_mib),
            "gpu_speed": float(gpu.speed)}


def build_features(base: pd.DataFrame) -> pd.DataFrame:
    """Add DERIVED_FEATURES to a frame holding FEATURE_NAMES + CONFIG_FEATURES; return FEATURE_SCHEMA columns."""
    f = base.astype({c: float for c in (*FEATURE_NAMES, *CONFIG_FEATURES)})
    params, flops, act, batch = f["params"], f["train_flops"], f["activation_bytes"], f["batch_size"]
    out = f.loc[:, [*FEATURE_NAMES, *CONFIG_FEATURES]].copy()
    weight_bytes = 4.0 * params
    out["log_params"] = np.log10(params + 1)
    out["log_train_flops"] = np.log10(flops + 1)
    out["log_flops_per_sample"] = np.log10(flops / batch.clip(lower=1) + 1)
    out["log_flops_per_param"] = np.log10(flops / params.clip(lower=1) + 1)
    out["log_activation_mib"] = np.log10(act / MIB + 1)
    out["log_batch"] = np.log2(batch.clip(lower=1))
    out["log_intensity"] = np.log10(flops / (weight_bytes + act).clip(lower=1) + 1)
    out["log_ideal_time"] = np.log10(flops / f["gpu_speed"].clip(lower=1e-6) + 1)
    out["weight_mib"] = weight_bytes / MIB
    out["analytic_mem_mib"] = analytic_memory_mib(params.to_numpy(), act.to_numpy(), f["is_amp"].to_numpy())
    out["mem_fraction"] = out["analytic_mem_mib"] / f["gpu_memory_mib"].clip(lower=1)
    ops = f[[f"n_{k}" for k in OP_KINDS]]
    total = ops.sum(axis=1).clip(lower=1)
    for k in OP_KINDS:
        out[f"frac_{k}"] = f[f"n_{k}"] / total
    return out.loc[:, list(FEATURE_SCHEMA)]
