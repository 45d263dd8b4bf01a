"""Per-set tables for :mod:`horus.colocation.analysis`, from our measured co-location dataset or
from Gavel's V100 pairs (which carry no utilization: see ``GAVEL_PROXIES``).

A per-set table has ``set_id``, ``set_size``, ``summed_util`` (or a proxy), ``slowdown`` and
``mean_normalized``; :func:`member_values` gives the member-level normalized throughputs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from horus.profiling.colocation_schema import COLOC_COLUMNS
from horus.errors import HorusInputError

V100_FP32_PEAK_FLOPS = 15.7e12  # NVIDIA V100 SXM2 datasheet, single precision


def load_coloc(path: str | Path) -> Any:
    """Our co-location dataset (COLOC_COLUMNS; CSV, Parquet or JSON lines)."""
    from horus.profiling.store import read_table

    required = ["set_id", "set_size", "member", "model", "batch_size", "precision", "normalized_throughput",
                "status", "repeat"]
    frame = read_table(path, required).reset_index(drop=True)
    unknown = [c for c in frame.columns if c not in COLOC_COLUMNS]
    if unknown:
        raise HorusInputError(str(path), f"unknown column(s) {', '.join(unknown)}; expected COLOC_COLUMNS")

    def check(bad: Any, column: str, message: Any) -> None:
        bad = np.asarray(bad, dtype=bool)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise HorusInputError(str(path), f"line {row + 2}, column '{column}': {message(row)}")

    size, member = frame["set_size"], frame["member"]
    check(size < 2, "set_size", lambda r: f"a co-located set has at least 2 jobs, got {size.iloc[r]:.0f}")
    check(member >= size, "member",
          lambda r: f"expected an index below set_size ({size.iloc[r]:.0f}), got {member.iloc[r]:.0f}")
    check(frame.duplicated(["set_id", "repeat", "member"]), "member",
          lambda r: f"member {member.iloc[r]:.0f} appears twice in set {frame['set_id'].iloc[r]!r}, repeat "
                    f"{frame['repeat'].iloc[r]:.0f}")
    groups = frame.groupby(["set_id", "repeat"], sort=False)
    check(groups["set_size"].transform("nunique") > 1, "set_size",
          lambda r: f"set {frame['set_id'].iloc[r]!r} gives different sizes in one repeat")
    check(groups["member"].transform("size") != size, "set_size",
          lambda r: f"set {frame['set_id'].iloc[r]!r} has {groups['member'].transform('size').iloc[r]} member rows "
                    f"in repeat {frame['repeat'].iloc[r]:.0f}, but set_size says {size.iloc[r]:.0f}")
    normalized = frame["normalized_throughput"].astype(float)
    check((frame["status"] == "ok") & ~np.isfinite(normalized), "normalized_throughput",
          lambda r: "a measured (status ok) member needs a finite normalized throughput, got "
                    + ("an empty cell" if np.isnan(normalized.iloc[r]) else f"{normalized.iloc[r]:g}"))
    return frame


def sets_from_coloc(coloc: Any, solo: Any | None = None) -> Any:
    """Per-set table from ok measured sets; repeats are averaged. Solo utilization comes from the
    ``solo_util_mean`` column, or from ``solo`` (a PROFILE_COLUMNS table) when given."""
    import pandas as pd

    ok_sets = coloc.groupby(["set_id", "repeat"])["status"].transform(lambda s: (s == "ok").all())
    data = coloc[ok_sets].copy()
    if solo is not None:
        ok = solo[solo["status"] == "ok"].groupby(["model", "batch_size", "precision"])["gpu_util_mean"].mean()
        keys = list(zip(data["model"], data["batch_size"], data.get("precision", "fp32")))
        data["solo_util_mean"] = [ok.get(k, np.nan) for k in keys]
    if "solo_util_mean" not in data:
        data["solo_util_mean"] = np.nan
    per_repeat = data.groupby(["set_id", "repeat"]).agg(
        set_size=("set_size", "first"), summed_util=("solo_util_mean", lambda u: u.sum(min_count=len(u)) / 100.0),
        mean_normalized=("normalized_throughput", "mean")).reset_index()
    sets = per_repeat.groupby("set_id").agg(set_size=("set_size", "first"), summed_util=("summed_util", "mean"),
                                            mean_normalized=("mean_normalized", "mean")).reset_index()
    sets["slowdown"] = 1.0 - sets["mean_normalized"]
    return pd.DataFrame(sets)


def member_values(coloc: Any) -> np.ndarray:
    """Normalized throughput of every member of every ok set (repeats kept)."""
    ok_sets = coloc.groupby(["set_id", "repeat"])["status"].transform(lambda s: (s == "ok").all())
    values = coloc.loc[ok_sets, "normalized_throughput"].to_numpy(float)
    return values[np.isfinite(values)]


def gavel_unordered_pairs(gavel: Any) -> dict[tuple[str, str], tuple[float, float]]:
    """Gavel's normalized pairs keyed by sorted job types; both orders of one pair are averaged."""
    merged: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for a, b in gavel.pairs:
        na, nb = gavel.normalized_pair(a, b)
        key, value = ((a, b), (na, nb)) if a <= b else ((b, a), (nb, na))
        merged.setdefault(key, []).append(value)
    return {k: (float(np.mean([v[0] for v in vs])), float(np.mean([v[1] for v in vs]))) for k, vs in merged.items()}


def _pressure_loo(pairs: dict[tuple[str, str], tuple[float, float]]) -> dict[tuple[str, str], float]:
    """Leave-pair-out 'pressure': a job's mean slowdown inflicted on its partners, excluding the pair itself."""
    inflicted: dict[str, list[tuple[tuple[str, str], float]]] = {}
    for (a, b), (na, nb) in pairs.items():
        inflicted.setdefault(a, []).append(((a, b), 1.0 - nb))
        inflicted.setdefault(b, []).append(((a, b), 1.0 - na))

    def pressure(job: str, exclude: tuple[str, str]) -> float:
        values = [v for key, v in inflicted[job] if key != exclude]
        return float(np.mean(values)) if values else np.nan

    return {(a, b): pressure(a, (a, b)) + pressure(b, (a, b)) for (a, b) in pairs}


def _mfu(pairs: dict[tuple[str, str], tuple[float, float]], gavel: Any) -> dict[tuple[str, str], float]:
    """Achieved fraction of V100 fp32 peak FLOP/s: catalog train FLOPs x batch x solo steps/s / peak."""
    from horus.catalog import load_catalog

    catalog = load_catalog()

    def util(job_type: str) -> float:
        model, _, batch = job_type.partition("/b")
        info = catalog.get(model)
        if info is None:
            return np.nan
        return info.train_flops_per_sample * int(batch) * gavel.solo[job_type] / V100_FP32_PEAK_FLOPS

    return {(a, b): util(a) + util(b) for (a, b) in pairs}


GavelProxy = Callable[[dict[tuple[str, str], tuple[float, float]], Any], dict[tuple[str, str], float]]
GAVEL_PROXIES: dict[str, tuple[GavelProxy, str]] = {
    "pressure": (lambda pairs, gavel: _pressure_loo(pairs),
                 "summed leave-pair-out pressure: each job's mean slowdown inflicted on its other partners"),
    "mfu": (_mfu, "summed model-FLOP utilization: catalog train FLOPs x batch x solo steps/s / V100 fp32 peak"),
}


def sets_from_gavel(gavel: Any, proxy: str = "pressure") -> tuple[Any, str]:
    """Per-set table of Gavel's pairs with ``summed_util`` = the named proxy; returns (table, proxy text)."""
    import pandas as pd

    if proxy not in GAVEL_PROXIES:
        raise HorusInputError("--proxy", f"unknown utilization proxy {proxy!r}; known: {', '.join(GAVEL_PROXIES)}")
    pairs = gavel_unordered_pairs(gavel)
    func, text = GAVEL_PROXIES[proxy]
    x = func(pairs, gavel)
    rows = [{"set_id": f"{a}+{b}", "set_size": 2, "summed_util": x[(a, b)], "mean_normalized": (na + nb) / 2}
            for (a, b), (na, nb) in sorted(pairs.items())]
    frame = pd.DataFrame(rows, columns=["set_id", "set_size", "summed_util", "mean_normalized"])
    frame["slowdown"] = 1.0 - frame["mean_normalized"]
    return frame, text


def gavel_member_values(gavel: Any) -> np.ndarray:
    return np.array([v for pair in gavel_unordered_pairs(gavel).values() for v in pair], dtype=float)
