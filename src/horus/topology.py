"""Intra-node GPU topology: the link class between every pair of a node's GPUs, and its bandwidth.

Nodes only declare ``intra_link`` and ``num_gpus``; the layout is derived, as a plausible default:

* ``nvlink``: every pair NVLink-connected (DGX A100/H100-like all-to-all through NVSwitch; DGX-1's
  hybrid cube mesh is approximated as all-to-all).
* ``pcie`` / ``pcie4``: 2 GPUs per PCIe switch, 2 switches (4 GPUs) per CPU socket, sockets joined by
  the CPU interconnect (QPI/UPI), the common 8-GPU PCIe server layout.

Bandwidths (GB/s, per direction): NVLink and "same PCIe switch" use ``LINK_BANDWIDTH_GBPS``;
peer traffic through the CPU root complex ("same socket") is taken at 75 % of the PCIe link and
across sockets at 50 % (P2P across the CPU interconnect is typically staged through host memory).
These fractions are assumptions of this module, in the range reported by NCCL/p2pBandwidthLatencyTest
runs on such servers, not measurements of any particular machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

import numpy as np

from horus.cluster import LINK_BANDWIDTH_GBPS, Node

GPUS_PER_PCIE_SWITCH = 2
GPUS_PER_SOCKET = 4
SAME_SOCKET_FRACTION = 0.75
CROSS_SOCKET_FRACTION = 0.5
SAME_GPU_GBPS = 900.0  # device memory (V100 HBM2 ~ 900 GB/s): workers on one GPU exchange through it


class LinkClass(IntEnum):
    """Pairwise link classes, fastest first."""

    SAME_GPU = 0
    NVLINK = 1
    PCIE_SWITCH = 2
    SAME_SOCKET = 3
    CROSS_SOCKET = 4


def link_matrix(node: Node) -> np.ndarray:
    """``(num_gpus, num_gpus)`` int matrix of ``LinkClass`` values between local GPUs."""
    n = node.num_gpus
    local = np.arange(n)
    if node.intra_link == "nvlink":
        links = np.full((n, n), LinkClass.NVLINK, dtype=np.int64)
    elif node.intra_link in LINK_BANDWIDTH_GBPS:
        switch = local // GPUS_PER_PCIE_SWITCH
        socket = local // GPUS_PER_SOCKET
        links = np.where(socket[:, None] == socket[None, :], LinkClass.SAME_SOCKET, LinkClass.CROSS_SOCKET)
        links = np.where(switch[:, None] == switch[None, :], LinkClass.PCIE_SWITCH, links).astype(np.int64)
    else:
        known = ", ".join(sorted(LINK_BANDWIDTH_GBPS))
        raise ValueError(f"node {node.name!r}: unknown intra-node link {node.intra_link!r}; known: {known}")
    np.fill_diagonal(links, LinkClass.SAME_GPU)
    return links


def class_bandwidth_gbps(node: Node) -> dict[LinkClass, float]:
    """Bandwidth (GB/s) of each link class on this node."""
    link = LINK_BANDWIDTH_GBPS[node.intra_link]
    pcie = link if node.intra_link != "nvlink" else LINK_BANDWIDTH_GBPS["pcie"]
    return {
        LinkClass.SAME_GPU: SAME_GPU_GBPS,
        LinkClass.NVLINK: LINK_BANDWIDTH_GBPS["nvlink"],
        LinkClass.PCIE_SWITCH: pcie,
        LinkClass.SAME_SOCKET: SAME_SOCKET_FRACTION * pcie,
        LinkClass.CROSS_SOCKET: CROSS_SOCKET_FRACTION * pcie,
    }


def bandwidth_matrix(node: Node) -> np.ndarray:
    """``(num_gpus, num_gpus)`` GB/s between local GPUs."""
    table = class_bandwidth_gbps(node)
    lookup = np.array([table[LinkClass(c)] for c in range(len(LinkClass))])
    return lookup[link_matrix(node)]


def ring_bandwidth_gbps(node: Node, local_gpus: Sequence[int]) -> float:
    """Bottleneck bandwidth of a ring over distinct ``local_gpus``: the slowest pair (conservative)."""
    gpus = np.asarray(sorted(set(local_gpus)), dtype=np.int64)
    if len(gpus) <= 1:
        return SAME_GPU_GBPS
    bw = bandwidth_matrix(node)[np.ix_(gpus, gpus)]
    return float(bw[~np.eye(len(gpus), dtype=bool)].min())


def allreduce_time_s(param_bytes: float, node: Node, local_gpus: Sequence[int]) -> float:
    """Ring all-reduce seconds per iteration inside one node: 2 (n-1)/n x bytes over the bottleneck."""
    n = len(local_gpus)
    if n <= 1 or param_bytes <= 0:
        return 0.0
    return 2.0 * (n - 1) / n * param_bytes / (ring_bandwidth_gbps(node, local_gpus) * 1e9)
