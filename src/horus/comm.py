"""Communication cost of data-parallel training: one ring all-reduce of the gradients per iteration.

A pure function of (gradient bytes, GPUs, cluster) so that the simulator engine and any policy
compute the same number. Model (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms
for clusters of workstations"; the form NCCL's ring uses): each of ``n`` workers sends and
receives ``2 (n - 1) / n x bytes``, so the time is that volume over the slowest link of the ring.
Within one node the link is ``LINK_BANDWIDTH_GBPS[node.intra_link]``; a ring spanning nodes is
limited by ``cluster.inter_node_gbps``. Latency terms and compute/communication overlap are
ignored (a conservative, bandwidth-only estimate).
"""

from __future__ import annotations

from collections.abc import Sequence

from horus.catalog import model_info
from horus.cluster import LINK_BANDWIDTH_GBPS, Cluster

BYTES_PER_PARAM = 4  # fp32 gradients


def gradient_bytes(model: str) -> float:
    """Bytes of one full gradient of catalog model ``model`` (fp32: 4 bytes x parameters)."""
    return float(BYTES_PER_PARAM * model_info(model).params)


def ring_bandwidth_gbps(gpus: Sequence[int], cluster: Cluster) -> float:
    """Bandwidth (GB/s) of the slowest link of a ring over ``gpus``: intra-node link or the network."""
    nodes = {cluster.gpus[g].node for g in gpus}
    if len(nodes) > 1:
        return cluster.inter_node_gbps
    links = [cluster.nodes[n].intra_link for n in nodes]
    try:
        return min(LINK_BANDWIDTH_GBPS[link] for link in links)
    except KeyError as exc:
        known = ", ".join(sorted(LINK_BANDWIDTH_GBPS))
        raise ValueError(f"unknown intra-node link {exc.args[0]!r}; known: {known}") from None


def allreduce_time_s(param_bytes: float, gpus: Sequence[int], cluster: Cluster) -> float:
    """Seconds per iteration spent in a ring all-reduce of ``param_bytes`` over ``gpus`` (0 for one GPU)."""
    n = len(gpus)
    if n <= 1 or param_bytes <= 0:
        return 0.0
    volume = 2.0 * (n - 1) / n * param_bytes
    return volume / (ring_bandwidth_gbps(gpus, cluster) * 1e9)
