"""The agents the live service knows: what each reported (GPUs, telemetry, when it was last seen), and the
cluster their alive GPUs make (nodes in registration order; one node per GPU type of a machine)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from horus.cluster import Cluster, GPUType, Node
from horus.gpu_types import PRESETS


def gpu_type_of(desc: Mapping[str, Any]) -> GPUType:
    """Horus GPU type of an agent's GPU description: a preset by ``type`` (or NVML ``name``), else a
    type named after the card with its reported memory and V100-relative speed 1.0."""
    for key in ("type", "name"):
        name = str(desc.get(key) or "")
        if name in PRESETS:
            return PRESETS[name]
    name = str(desc.get("type") or desc.get("name") or "unknown")
    for preset in sorted(PRESETS.values(), key=lambda t: -len(t.name)):  # "NVIDIA A100-SXM4-80GB" -> A100-80GB
        short = preset.name.split("-")[0]
        if short in name and (preset.name == short or preset.name.split("-")[-1] in name):
            return preset
    return GPUType(name, int(desc.get("memory_mib") or 16 * 1024), 1.0)


@dataclass
class AgentInfo:
    """An alive agent as the scheduler tracks it in memory."""

    name: str
    seq: int
    hostname: str
    gpus: list[dict[str, Any]]
    last_seen: float
    wake: Callable[[], None] | None = None  # in-process agents: called when their desired state changes
    telemetry: dict[int, dict[str, float]] = field(default_factory=dict)  # local GPU index -> observed
    progress_saved: float = 0.0  # when this agent's reported progress was last written to the store

    by_index: dict[int, dict[str, Any]] = field(init=False, repr=False)  # local GPU index -> description

    def __post_init__(self) -> None:
        self.by_index = {int(d["index"]): d for d in self.gpus}

    def gpu(self, local: int) -> dict[str, Any]:
        """The description of local GPU ``local`` (empty if the agent did not describe it)."""
        return self.by_index.get(local, {})


def cluster_of(agents: Mapping[str, AgentInfo]) -> tuple[Cluster, list[tuple[str, int]]]:
    """The cluster the agents' GPUs make, and each global GPU index's (agent, local index)."""
    nodes: list[Node] = []
    gpu_map: list[tuple[str, int]] = []
    for agent in sorted(agents.values(), key=lambda a: a.seq):
        by_type: dict[str, tuple[GPUType, list[int]]] = {}
        for desc in agent.gpus:
            gpu_type = gpu_type_of(desc)
            by_type.setdefault(gpu_type.name, (gpu_type, []))[1].append(int(desc["index"]))
        for type_name, (gpu_type, indices) in by_type.items():
            node_name = agent.name if len(by_type) == 1 else f"{agent.name}/{type_name}"
            nodes.append(Node(node_name, gpu_type, len(indices)))
            gpu_map += [(agent.name, i) for i in indices]
    return Cluster(nodes), gpu_map


def expired(agents: Mapping[str, AgentInfo], now: float, lease_s: float) -> list[str]:
    """Agents not heard from for longer than their lease."""
    return [a.name for a in agents.values() if now - a.last_seen > lease_s]
