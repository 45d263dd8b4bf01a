"""Intra-node topology: link classes and bandwidths."""

from __future__ import annotations

import numpy as np
import pytest

from horus.cluster import GPUType, Node
from horus.topology import LinkClass, allreduce_time_s, bandwidth_matrix, link_matrix, ring_bandwidth_gbps

V100 = GPUType("v100", 16_000, 1.0)


def test_nvlink_node_is_all_to_all() -> None:
    links = link_matrix(Node("n", V100, 8, "nvlink"))
    off = ~np.eye(8, dtype=bool)
    assert (links[off] == LinkClass.NVLINK).all() and (np.diag(links) == LinkClass.SAME_GPU).all()


def test_pcie_node_has_switches_and_sockets() -> None:
    node = Node("n", V100, 8, "pcie")
    links = link_matrix(node)
    assert links[0, 1] == LinkClass.PCIE_SWITCH
    assert links[0, 2] == LinkClass.SAME_SOCKET
    assert links[0, 4] == LinkClass.CROSS_SOCKET
    assert (links == links.T).all()
    bw = bandwidth_matrix(node)
    assert bw[0, 1] > bw[0, 2] > bw[0, 4]
    assert ring_bandwidth_gbps(node, [0, 1]) > ring_bandwidth_gbps(node, [0, 1, 4])


def test_allreduce_time_is_slower_across_sockets() -> None:
    node = Node("n", V100, 8, "pcie")
    assert allreduce_time_s(1e8, node, [0]) == 0.0
    assert allreduce_time_s(1e8, node, [0, 4]) > allreduce_time_s(1e8, node, [0, 1]) > 0.0
    nv = Node("m", V100, 8, "nvlink")
    assert allreduce_time_s(1e8, nv, [0, 4]) < allreduce_time_s(1e8, node, [0, 1])


def test_unknown_link_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown intra-node link"):
        link_matrix(Node("n", V100, 2, "smoke-signals"))
