"""Ray's node table as Horus machines, and the check of a pin against it before anything is submitted.

A Ray node becomes one Horus agent. Its GPUs are, in order of preference:

* the per-GPU custom resources ``horus_gpu_<tag>_<i>`` (capacity 1.0) the operator declared with
  ``ray start --resources``; the agent is named ``<tag>`` and every worker requests its share of
  the GPU's resource, so Ray itself keeps co-located workers within the GPU;
* else ``GPU`` resource's count; the agent is named ``ray-<first 8 hex digits of the node id>``
  and workers are pinned by node only.

GPU model and memory come from the node's NVML when a probe finds it (``probe_nvml``), else from
the GPU type declared to ``horus serve`` (``--gpu-type``). Nodes are told apart by node id, never by
``node:<ip>`` (all the nodes of a one-machine test cluster share one IP).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from horus.gpu_types import PRESETS

log = logging.getLogger("horus.ray")

GPU_RESOURCE = re.compile(r"^horus_gpu_(?P<tag>[A-Za-z0-9][A-Za-z0-9_.-]*?)_(?P<index>\d+)$")
EPS = 1e-9


class InfeasiblePinError(ValueError):
    """A placement Ray could never satisfy on its current node table (it would wait forever, silently)."""


def gpu_resource(tag: str, index: int) -> str:
    """The per-GPU custom resource of GPU ``index`` of the node tagged ``tag``."""
    return f"horus_gpu_{tag}_{index}"


@dataclass
class RayNode:
    """One entry of ``ray.nodes()``, as Horus sees it."""

    node_id: str
    address: str
    alive: bool
    resources: dict[str, float]
    agent: str
    gpu_indices: list[int]
    tag: str | None = None  # set when the node declares per-GPU resources
    gpus: list[dict[str, Any]] = field(default_factory=list)  # filled by describe_gpus

    def resource_of(self, index: int) -> str | None:
        return gpu_resource(self.tag, index) if self.tag is not None else None


def parse_node(entry: Mapping[str, Any]) -> RayNode:
    """One ``ray.nodes()`` entry (keys NodeID, Alive, NodeManagerAddress, Resources)."""
    node_id = str(entry["NodeID"])
    resources = {str(k): float(v) for k, v in (entry.get("Resources") or {}).items()}
    per_gpu: dict[str, list[int]] = {}
    for name in resources:
        match = GPU_RESOURCE.match(name)
        if match:
            per_gpu.setdefault(match["tag"], []).append(int(match["index"]))
    tag = None
    if per_gpu:
        tag = sorted(per_gpu)[0]
        if len(per_gpu) > 1:
            log.warning("Ray node %s declares GPUs under several tags %s; using %r", node_id[:8], sorted(per_gpu), tag)
        indices = sorted(per_gpu[tag])
    else:
        indices = list(range(int(resources.get("GPU", 0.0) + EPS)))
    return RayNode(node_id=node_id, address=str(entry.get("NodeManagerAddress") or ""), alive=bool(entry.get("Alive")),
                   resources=resources, agent=tag or f"ray-{node_id[:8]}", gpu_indices=indices, tag=tag)


def parse_nodes(table: Iterable[Mapping[str, Any]]) -> dict[str, RayNode]:
    """Alive nodes with at least one GPU, by agent name (a tag declared twice keeps its first node)."""
    out: dict[str, RayNode] = {}
    for entry in table:
        node = parse_node(entry)
        if not node.alive or not node.gpu_indices:
            continue
        if node.agent in out:
            log.warning("Ray nodes %s and %s both declare GPUs tagged %r; ignoring the second",
                        out[node.agent].node_id[:8], node.node_id[:8], node.agent)
            continue
        out[node.agent] = node
    return out


def describe_gpus(node: RayNode, gpu_type: str, nvml: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """GPU descriptions for ``LiveScheduler.register_agent``: NVML's where the node has it, else the declared type.

    Each carries ``resource`` (the per-GPU resource, or None) so the backend can pin workers.
    """
    by_index = {int(d["index"]): d for d in nvml or []}
    if by_index:
        return [{**by_index[i], "resource": node.resource_of(i)} for i in node.gpu_indices if i in by_index]
    if gpu_type not in PRESETS:
        raise ValueError(f"unknown GPU type {gpu_type!r}; presets: {', '.join(PRESETS)}")
    memory = PRESETS[gpu_type].memory_mib
    return [{"index": i, "uuid": str(i), "name": f"declared {gpu_type}", "type": gpu_type, "memory_mib": memory,
             "declared": True, "resource": node.resource_of(i)} for i in node.gpu_indices]


def check_pin(table: Mapping[str, RayNode], node_id: str, request: Mapping[str, float], what: str,
              in_use: Mapping[str, float] | None = None) -> None:
    """InfeasiblePinError (one line) unless node ``node_id`` is alive and each resource in ``request``
    exists there with at least the requested capacity, beyond what ``in_use`` (held by other workers) takes."""
    node = next((n for n in table.values() if n.node_id == node_id), None)
    if node is None or not node.alive:
        raise InfeasiblePinError(f"{what}: Ray node {node_id[:8]} is not alive in Ray's node table")
    for name, amount in request.items():
        total = node.resources.get(name)
        if total is None:
            have = sorted(r for r in node.resources if GPU_RESOURCE.match(r)) or ["no horus_gpu_* resource"]
            raise InfeasiblePinError(f"{what}: Ray node {node_id[:8]} ({node.agent}) has no resource {name!r} "
                                     f"(it has {', '.join(have)}); Ray would keep the worker pending forever")
        if amount > total + EPS:
            raise InfeasiblePinError(f"{what}: asks {amount:g} of {name!r} on Ray node {node_id[:8]} "
                                     f"({node.agent}), which has {total:g}")
        held = (in_use or {}).get(name, 0.0)
        if held + amount > total + EPS:
            raise InfeasiblePinError(f"{what}: {name!r} on Ray node {node_id[:8]} ({node.agent}) would be "
                                     f"over-committed ({held:g} held + {amount:g} asked > {total:g}): more workers "
                                     f"on one GPU than the backend's gpu_slots")
