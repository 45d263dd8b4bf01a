"""Choosing a multi-GPU job's GPUs from one cost per GPU: fewest nodes, then lowest summed cost."""

from __future__ import annotations

import numpy as np

from horus.policies.parts.cluster_index import ClusterIndex

ALL_NODES_UP_TO = 128  # on smaller clusters restricting to nodes with a feasible GPU costs more than it saves


def select_gpus(cost: np.ndarray, k: int, idx: ClusterIndex) -> tuple[tuple[int, ...], float] | None:
    """Choose ``k`` GPUs of one type: fewest nodes first, then the lowest summed cost.

    ``cost`` holds one value per GPU, ``inf`` where the job cannot go. Returns (gpus, summed cost) or
    None. For each node the ``k`` cheapest feasible GPUs are considered; if no node has ``k``, nodes
    with the most feasible GPUs are combined (ties: cheaper first). Only nodes with a feasible GPU are
    looked at, so the work follows the feasible GPUs, not the cluster size.
    """
    if k == 1:
        g = int(np.argmin(cost))
        c = float(cost[g])
        return ((g,), c) if np.isfinite(c) else None
    feasible = np.isfinite(cost)
    if np.count_nonzero(feasible) < k:
        return None
    best: tuple[tuple[int, float], tuple[int, ...]] | None = None
    for t, gpu_type in enumerate(idx.types):
        feasible_t = feasible if len(idx.types) == 1 else feasible & idx.type_masks[gpu_type.name]
        found = _select_one_type(cost, feasible_t, k, idx)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    if best is None:
        return None
    return best[1], best[0][1]


def _select_one_type(cost: np.ndarray, feasible: np.ndarray, k: int,
                     idx: ClusterIndex) -> tuple[tuple[int, float], tuple[int, ...]] | None:
    if np.count_nonzero(feasible) < k:
        return None
    if idx.num_nodes <= ALL_NODES_UP_TO:
        gpus, pad = idx.node_gpus, idx.node_pad
    else:  # large cluster: only the nodes that have a feasible GPU
        of_gpu = idx.node_of_gpu[feasible]  # ascending: GPUs are numbered node by node
        nodes = of_gpu[np.flatnonzero(np.diff(of_gpu, prepend=-1))]  # each node once, in node order
        gpus, pad = idx.node_gpus[nodes], idx.node_pad[nodes]
    padded = np.where(pad | ~feasible[gpus], np.inf, cost[gpus])
    sorted_cost = np.sort(padded, axis=1)  # the values a stable argsort orders (which GPU: below, one row)
    finite = np.isfinite(sorted_cost)
    count = finite.sum(axis=1)
    if k <= sorted_cost.shape[1]:
        fits = count >= k
        if fits.any():
            sums = np.where(fits, sorted_cost[:, :k].sum(axis=1), np.inf)
            row = int(np.argmin(sums))
            chosen = gpus[row, np.argsort(padded[row], kind="stable")[:k]]
            return (1, float(sums[row])), tuple(int(g) for g in chosen)
    order = np.argsort(padded, axis=1, kind="stable")
    # Span several nodes: most feasible GPUs first (fewest nodes), cheaper first on ties.
    feasible_sum = np.where(finite, sorted_cost, 0.0).sum(axis=1)
    rows = np.lexsort((feasible_sum, -count))
    picked: list[int] = []
    total = 0.0
    used = 0
    for row in rows:
        take = min(int(count[row]), k - len(picked))
        picked.extend(int(g) for g in gpus[row, order[row, :take]])
        total += float(sorted_cost[row, :take].sum())
        used += 1
        if len(picked) == k:
            break
    return (used, total), tuple(picked)
