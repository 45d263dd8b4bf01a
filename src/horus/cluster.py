"""Cluster model: GPU types, nodes and a flat, indexed list of GPUs.

GPUs are addressed by a global integer index (``Cluster.gpus[i].index == i``); every per-GPU
array in the simulator and the policies is indexed the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Intra-node link kinds, fastest first. Bandwidths are nominal per-direction GB/s used by the
# communication-cost model (NVLink 3 on A100/H100-class ~ 300, PCIe 4 x16 ~ 32, PCIe 3 x16 ~ 16).
LINK_BANDWIDTH_GBPS: dict[str, float] = {"nvlink": 300.0, "pcie4": 32.0, "pcie": 16.0}


@dataclass(frozen=True)
class GPUType:
    """A GPU model. ``speed`` is throughput relative to a V100 (V100 = 1.0) for a typical DL job."""

    name: str
    memory_mib: int
    speed: float = 1.0


@dataclass(frozen=True)
class Node:
    """A machine with ``num_gpus`` GPUs of one type and one intra-node interconnect."""

    name: str
    gpu_type: GPUType
    num_gpus: int
    intra_link: str = "nvlink"  # key of LINK_BANDWIDTH_GBPS


@dataclass(frozen=True)
class GPU:
    index: int  # global index in Cluster.gpus
    node: int  # index in Cluster.nodes
    local: int  # index within its node
    gpu_type: GPUType


@dataclass
class Cluster:
    """Nodes plus the inter-node network. Build with ``Cluster(nodes, inter_node_gbps)``."""

    nodes: list[Node]
    inter_node_gbps: float = 12.5  # 100 Gb/s Ethernet/InfiniBand EDR ~ 12.5 GB/s
    gpus: list[GPU] = field(init=False)

    def __post_init__(self) -> None:
        gpus: list[GPU] = []
        for n, node in enumerate(self.nodes):
            for local in range(node.num_gpus):
                gpus.append(GPU(len(gpus), n, local, node.gpu_type))
        self.gpus = gpus

    @property
    def num_gpus(self) -> int:
        return len(self.gpus)

    def gpus_of_node(self, node: int) -> list[int]:
        first = sum(n.num_gpus for n in self.nodes[:node])
        return list(range(first, first + self.nodes[node].num_gpus))

    def gpu_types(self) -> list[GPUType]:
        seen: dict[str, GPUType] = {}
        for node in self.nodes:
            seen.setdefault(node.gpu_type.name, node.gpu_type)
        return list(seen.values())

    def describe(self) -> dict[str, object]:
        """A JSON-able summary for run manifests."""
        return {
            "num_nodes": len(self.nodes),
            "num_gpus": self.num_gpus,
            "inter_node_gbps": self.inter_node_gbps,
            "gpu_types": {t.name: {"memory_mib": t.memory_mib, "speed": t.speed} for t in self.gpu_types()},
        }
