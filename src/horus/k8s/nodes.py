"""A Kubernetes node's GPUs as Horus sees them, from labels NVIDIA's GPU Feature Discovery sets.

* type: label ``horus.io/gpu-type`` (a preset name) if set, else ``nvidia.com/gpu.product`` matched to a
  preset of ``horus.gpu_types`` (``Tesla-V100-SXM2-16GB`` -> V100, ``NVIDIA-A100-SXM4-80GB`` ->
  A100-80GB...); an unknown product becomes its own type with speed 1.0 (unknown) and the labelled memory;
* memory: ``nvidia.com/gpu.memory`` (MiB) when labelled, else the preset's;
* count: ``nvidia.com/gpu.count`` when labelled, else ``status.capacity["nvidia.com/gpu"]`` (with HAMi
  the capacity counts virtual GPUs: label the count);
* UUIDs (optional, index order): annotation ``horus.io/gpu-uuids``, comma-separated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from horus.cluster import GPUType
from horus.gpu_types import GIB, PRESETS
from horus.k8s.resources import GPU, ascii_count

PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
COUNT_LABEL = "nvidia.com/gpu.count"
TYPE_LABEL = "horus.io/gpu-type"
UUIDS_ANNOTATION = "horus.io/gpu-uuids"
MAX_NODE_GPUS = 1024  # more GPUs than any machine (or HAMi split of one) has: a bad label, not a node


@dataclass(frozen=True)
class NodeGPUs:
    """The GPUs of one node, or why Horus cannot use it (``problem``)."""

    name: str
    gpu_type: GPUType | None
    num_gpus: int
    uuids: tuple[str, ...] | None
    problem: str | None = None
    signature: tuple[Any, ...] = ()  # what the cluster model depends on (rebuild when it changes)


def preset_for_product(product: str, memory_mib: int | None) -> GPUType | None:
    """The preset a GFD product string names, or None."""
    tokens = set(re.split(r"[^A-Z0-9]+", product.upper()))
    big = memory_mib is not None and memory_mib > 48 * GIB
    if "H200" in tokens:
        return PRESETS["H200"]
    if "H100" in tokens:
        return PRESETS["H100-PCIe" if "PCIE" in tokens else "H100"]
    if "A100" in tokens:
        return PRESETS["A100-80GB" if ("80GB" in tokens or big) else "A100-40GB"]
    if tokens & {"A10", "A10G"}:
        return PRESETS["A10"]
    if "V100" in tokens:
        return PRESETS["V100-32GB" if ("32GB" in tokens or (memory_mib or 0) > 20 * GIB) else "V100"]
    for name in ("T4", "P100", "K80", "L4", "L40S"):
        if name in tokens:
            return PRESETS[name]
    if {"6000", "ADA"} <= tokens:  # RTX 6000 Ada Generation, not the Ampere RTX A6000
        return PRESETS["RTX6000-Ada"]
    for token, name in (("3090", "RTX3090"), ("4090", "RTX4090"), ("A6000", "RTX-A6000")):
        if token in tokens:
            return PRESETS[name]
    return None


def node_gpus(node: dict[str, Any]) -> NodeGPUs:
    meta = node.get("metadata") or {}
    name = str(meta.get("name"))
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    status = node.get("status") or {}
    if not isinstance(labels, dict) or not isinstance(annotations, dict) or not isinstance(status, dict):
        return NodeGPUs(name, None, 0, None, "metadata.labels/annotations or status is not an object")
    count = ascii_count(labels.get(COUNT_LABEL))
    if count is None:
        capacity = status.get("capacity") or {}
        count = ascii_count(str(capacity.get(GPU, ""))) if isinstance(capacity, dict) else None
    memory = ascii_count(labels.get(MEMORY_LABEL))
    product = labels.get(PRODUCT_LABEL)
    uuids_raw = annotations.get(UUIDS_ANNOTATION)
    uuids = tuple(u.strip() for u in uuids_raw.split(",")) if isinstance(uuids_raw, str) and uuids_raw else None
    signature = (labels.get(TYPE_LABEL), product, memory, count, uuids)
    if count is not None and count > MAX_NODE_GPUS:
        return NodeGPUs(name, None, 0, None, f"{count} GPUs is more than {MAX_NODE_GPUS} (label {COUNT_LABEL} / "
                        f"capacity {GPU}): not believed", signature)
    if not count:
        return NodeGPUs(name, None, 0, None, f"no GPUs (label {COUNT_LABEL} / capacity {GPU} absent or 0)",
                        signature)
    explicit = labels.get(TYPE_LABEL)
    if explicit:
        gpu_type = PRESETS.get(explicit)
        if gpu_type is None:
            return NodeGPUs(name, None, 0, None, f"label {TYPE_LABEL}={explicit!r} is not a preset "
                            f"({', '.join(PRESETS)})", signature)
    elif isinstance(product, str) and product:
        gpu_type = preset_for_product(product, memory)
        if gpu_type is None:
            if memory is None:
                return NodeGPUs(name, None, 0, None, f"GPU product {product!r} is not a preset and label "
                                f"{MEMORY_LABEL} is absent", signature)
            gpu_type = GPUType(product, memory, 1.0)
    else:
        return NodeGPUs(name, None, 0, None, f"no GPU type (labels {TYPE_LABEL} and {PRODUCT_LABEL} absent)",
                        signature)
    if memory is not None and memory != gpu_type.memory_mib:
        gpu_type = GPUType(gpu_type.name, memory, gpu_type.speed)
    if uuids is not None and len(uuids) != count:
        uuids = None  # a partial list cannot be trusted: fall back to indices
    return NodeGPUs(name, gpu_type, count, uuids, None, signature)
