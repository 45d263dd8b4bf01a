"""Choose co-located sets to measure from solo profiles, spanning light/heavy summed utilization and
small/large summed memory (stratified sampling, seeded; no torch).

Strata: summed solo utilization (fraction) in [0, 0.6), [0.6, 1.0), [1.0, 1.4), [1.4, inf) crossed
with summed solo memory / capacity in [0, 0.35), [0.35, 0.7), [0.7, 1.2]. Sets above 1.2 x capacity
are left out (certain OOM teaches little); sets between 1.0 and 1.2 x are kept on purpose to record
OOM behaviour. Sets are drawn round-robin over non-empty strata, so each stratum gets an equal share
until it runs out.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

UTIL_EDGES: tuple[float, ...] = (0.0, 0.6, 1.0, 1.4, np.inf)
MEM_EDGES: tuple[float, ...] = (0.0, 0.35, 0.7, 1.2)


def _configs(solo: Any) -> list[tuple[str, float, float]]:
    """(member spec 'model:batch:precision', util fraction, memory MiB) of each ok configuration."""
    ok = solo[solo["status"] == "ok"]
    grouped = ok.groupby(["model", "batch_size", "precision"], as_index=False)[
        ["gpu_util_mean", "torch_max_reserved_mib"]].mean()
    grouped = grouped.dropna()
    return [(f"{r.model}:{int(r.batch_size)}:{r.precision}", r.gpu_util_mean / 100.0, r.torch_max_reserved_mib)
            for r in grouped.itertuples()]


def _stratum(util: float, mem_frac: float) -> tuple[int, int] | None:
    if mem_frac > MEM_EDGES[-1]:
        return None
    u = int(np.searchsorted(UTIL_EDGES, util, side="right")) - 1
    m = min(int(np.searchsorted(MEM_EDGES, mem_frac, side="right")) - 1, len(MEM_EDGES) - 2)
    return u, m


def _draw(candidates: list[tuple[tuple[str, ...], float, float]], capacity: float, n: int,
          rng: np.random.Generator) -> list[tuple[str, ...]]:
    strata: dict[tuple[int, int], list[tuple[str, ...]]] = {}
    for members, util, mem in candidates:
        key = _stratum(util, mem / capacity)
        if key is not None:
            strata.setdefault(key, []).append(members)
    pools = [list(np.array(strata[k], dtype=object)[rng.permutation(len(strata[k]))]) for k in sorted(strata)]
    chosen: list[tuple[str, ...]] = []
    while len(chosen) < n and any(pools):
        for pool in pools:
            if pool and len(chosen) < n:
                chosen.append(tuple(pool.pop()))
    return chosen


def plan_sets(solo: Any, capacity_mib: float, n_pairs: int, n_triples: int, seed: int = 0,
              repeats: int = 1) -> dict[str, Any]:
    """A campaign document ``{"colocate": [{"set": "a:64:fp32,b:8:fp32", "repeats": r}, ...]}``."""
    rng = np.random.default_rng(seed)
    configs = _configs(solo)
    out: list[dict[str, Any]] = []
    for size, n in ((2, n_pairs), (3, n_triples)):
        combos = list(itertools.combinations_with_replacement(range(len(configs)), size))
        if size == 3 and len(combos) > 20000:
            combos = [combos[i] for i in rng.choice(len(combos), 20000, replace=False)]
        candidates = [(tuple(configs[i][0] for i in c), sum(configs[i][1] for i in c), sum(configs[i][2] for i in c))
                      for c in combos]
        out += [{"set": ",".join(members), "repeats": repeats} for members in _draw(candidates, capacity_mib, n, rng)]
    return {"colocate": out}
