"""GPU type presets and GPU-type requests.

Memory is the vendor spec-sheet capacity (GB on the sheet -> x1024 MiB). ``speed`` is *approximate*
deep-learning training throughput relative to a V100 (= 1.0), rounded; treat it as +-20 %:

- K80, P100: Gavel's measured single-GPU throughputs (``simulation_throughputs.json``, OSDI 2020):
  K80 / V100 is 0.14-0.20 for ResNet-50 and ~0.25 median over its 26 job types; P100 / V100 is
  0.60-0.79 for ResNet-50 and ~0.81 median. We use 0.25 and 0.75.
- T4, A10, A100, H100, H200: ratios of public ResNet-50 training throughputs (NVIDIA Deep Learning
  Performance pages / MLPerf Training, mixed precision) to V100's, rounded: T4 ~0.3, A10 ~0.75,
  A100 ~2 (2.1 for the 80 GB card's faster HBM2e), H100 SXM ~3.3, H200 ~3.6 (H100 compute, more
  memory bandwidth).

Other parts of the simulator (truth models) may know per-job-type speeds; ``speed`` is only the
fallback scalar for types they do not cover.
"""

from __future__ import annotations

from horus.cluster import GPUType

GIB = 1024  # MiB per GiB

PRESETS: dict[str, GPUType] = {
    t.name: t
    for t in (
        GPUType("K80", 12 * GIB, 0.25),  # per GPU die (a K80 board carries two)
        GPUType("P100", 16 * GIB, 0.75),
        GPUType("V100", 16 * GIB, 1.0),
        GPUType("V100-32GB", 32 * GIB, 1.0),
        GPUType("T4", 16 * GIB, 0.3),
        GPUType("A10", 24 * GIB, 0.75),
        GPUType("A100-40GB", 40 * GIB, 2.0),
        GPUType("A100-80GB", 80 * GIB, 2.1),
        GPUType("H100", 80 * GIB, 3.3),
        GPUType("H200", 141 * GIB, 3.6),
    )
}

# A job's ``gpu_type_request`` may list several acceptable types separated by this character
# (Alibaba openb ``gpu_spec`` such as ``V100M16|V100M32``).
REQUEST_SEPARATOR = "|"


def preset(name: str) -> GPUType:
    """The preset GPU type ``name``; KeyError listing the known names otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown GPU type {name!r}; presets: {', '.join(PRESETS)}") from None


def accepted_gpu_types(request: str | None) -> frozenset[str] | None:
    """GPU type names a job accepts: None means any type; ``"V100|V100-32GB"`` -> both names."""
    if not request:
        return None
    return frozenset(part.strip() for part in request.split(REQUEST_SEPARATOR) if part.strip())
