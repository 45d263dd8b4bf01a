"""Analytic peak-GPU-memory formula of one data-parallel training worker.

peak MiB = weights + gradients + optimizer state + activations x batch + CUDA context/workspace.

* weights      = params x dtype_bytes
* gradients    = params x dtype_bytes (one gradient per weight)
* optimizer    = params x dtype_bytes x OPTIMIZER_STATE_COPIES[optimizer] (Adam keeps two moments,
                 SGD with momentum one buffer, plain SGD none)
* activations  = activation_bytes_per_sample x batch x dtype_bytes / 4 (the catalog stores fp32 bytes)
* context      = CUDA_CONTEXT_MIB: CUDA context, cuDNN/cuBLAS handles and workspaces and the caching
                 allocator's first blocks; PyTorch on V100-class GPUs shows ~300-500 MiB for the bare
                 context and a few hundred MiB of library workspace once training starts.

This is the weights/gradients/optimizer/activations decomposition used by the Horus line of work
(and e.g. ZeRO, Rajbhandari et al. 2020, Sec. 3); allocator fragmentation is *not* included.
"""

from __future__ import annotations

from dataclasses import dataclass

from horus.catalog import ModelInfo
from horus.errors import HorusInputError

MIB = 1024.0 * 1024.0
CUDA_CONTEXT_MIB = 750.0
OPTIMIZER_STATE_COPIES: dict[str, float] = {"sgd": 0.0, "momentum": 1.0, "adam": 2.0, "adamw": 2.0}
CATALOG_ACTIVATION_DTYPE_BYTES = 4  # catalog activation_bytes are fp32


@dataclass(frozen=True)
class MemoryTerms:
    """The terms of ``training_memory_mib``, each in MiB."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    context: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.context


def memory_terms(info: ModelInfo, batch: int, optimizer: str = "adam", dtype_bytes: int = 4) -> MemoryTerms:
    """Each term of the peak-memory formula (see module docstring)."""
    if optimizer not in OPTIMIZER_STATE_COPIES:
        known = ", ".join(sorted(OPTIMIZER_STATE_COPIES))
        raise HorusInputError("optimizer", f"expected one of {known}, got {optimizer!r}")
    if batch < 1:
        raise HorusInputError("batch_size", f"expected a positive integer, got {batch!r}")
    weight_mib = info.params * dtype_bytes / MIB
    activation_mib = info.activation_bytes_per_sample * batch * dtype_bytes / CATALOG_ACTIVATION_DTYPE_BYTES / MIB
    return MemoryTerms(
        weights=weight_mib,
        gradients=weight_mib,
        optimizer=weight_mib * OPTIMIZER_STATE_COPIES[optimizer],
        activations=activation_mib,
        context=CUDA_CONTEXT_MIB,
    )


def training_memory_mib(info: ModelInfo, batch: int, optimizer: str = "adam", dtype_bytes: int = 4) -> float:
    """Peak GPU memory (MiB) of one training worker of ``info`` at ``batch`` samples per step."""
    return memory_terms(info, batch, optimizer, dtype_bytes).total
