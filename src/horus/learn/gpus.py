"""Resolve GPU names (preset names or NVML device names) to ``GPUType`` presets."""

from __future__ import annotations

from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.gpu_types import PRESETS, REQUEST_SEPARATOR

# (substrings that must all appear in the upper-cased NVML name, preset), most specific first.
_NVML_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("H200",), "H200"),
    (("H100", "PCIE"), "H100-PCIe"),
    (("H100",), "H100"),
    (("A100", "80GB"), "A100-80GB"),
    (("A100",), "A100-40GB"),
    (("V100", "32GB"), "V100-32GB"),
    (("V100",), "V100"),
    (("A10",), "A10"),  # after A100 rules
    (("L40",), "L40S"),  # L40 and L40S (as horus.gpu_types.gpu_spec does)
    (("L4",), "L4"),  # after L40
    (("6000", "ADA"), "RTX6000-Ada"),  # before A6000: "RTX 6000 Ada Generation" is not the Ampere RTX A6000
    (("A6000",), "RTX-A6000"),
    (("3090",), "RTX3090"),
    (("4090",), "RTX4090"),
    (("T4",), "T4"),
    (("P100",), "P100"),
    (("K80",), "K80"),
)


def resolve_gpu(name: str, source: str = "gpu") -> GPUType:
    """The preset for ``name``: a preset name (``A100-80GB``) or an NVML name (``NVIDIA A100-SXM4-80GB``)."""
    if name in PRESETS:
        return PRESETS[name]
    if REQUEST_SEPARATOR in name:
        raise HorusInputError(source, f"{name!r} lists several GPU types (a job's request); give one GPU type")
    upper = name.upper()
    for tokens, preset_name in _NVML_RULES:
        if all(t in upper for t in tokens):
            return PRESETS[preset_name]
    raise HorusInputError(source, f"unknown GPU type {name!r}; expected one of {', '.join(PRESETS)} or an NVML name")
