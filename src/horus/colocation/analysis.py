"""How well does summed solo utilization explain co-location slowdown?

Input: one row per co-located set with ``summed_util`` (sum of the members' solo GPU utilization,
fraction; or a documented proxy for data without utilization, e.g. Gavel's) and ``slowdown``
(1 - mean normalized throughput of the members). Output: a fitted hinge curve (piecewise linear
with a knee), Spearman / Kendall rank correlation, pairwise ranking accuracy, the largest residuals,
and :func:`compare_shapes` for the distributions of normalized throughput of two datasets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

QUANTILES: tuple[float, ...] = (0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95)


@dataclass(frozen=True)
class KneeFit:
    """``y = intercept + slope_below * x + (slope_above - slope_below) * max(0, x - knee)``."""

    knee: float
    intercept: float
    slope_below: float
    slope_above: float
    r2: float
    rmse: float
    n: int

    def predict(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return self.intercept + self.slope_below * x + (self.slope_above - self.slope_below) * np.maximum(0.0, x - self.knee)


def fit_knee(x: Sequence[float], y: Sequence[float], grid: int = 200) -> KneeFit:
    """Least-squares hinge fit; the knee is searched on a grid between the 5th and 95th percentile of x."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 4:
        raise ValueError(f"need at least 4 points to fit a knee, got {len(x)}")
    best: tuple[float, float, np.ndarray] | None = None
    for knee in np.linspace(*np.quantile(x, [0.05, 0.95]), grid):
        design = np.column_stack([np.ones_like(x), x, np.maximum(0.0, x - knee)])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        sse = float(np.sum((design @ coef - y) ** 2))
        if best is None or sse < best[0]:
            best = (sse, float(knee), coef)
    assert best is not None
    sse, knee, coef = best
    total = float(np.sum((y - y.mean()) ** 2))
    return KneeFit(knee=knee, intercept=float(coef[0]), slope_below=float(coef[1]),
                   slope_above=float(coef[1] + coef[2]), r2=1.0 - sse / total if total > 0 else float("nan"),
                   rmse=float(np.sqrt(sse / len(x))), n=len(x))


def pairwise_ranking_accuracy(x: Sequence[float], y: Sequence[float], tol: float = 1e-9) -> float:
    """Among pairs of sets whose x and y both differ, the fraction where higher x has higher y."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    dx, dy = np.subtract.outer(x, x), np.subtract.outer(y, y)
    upper = np.triu(np.ones_like(dx, dtype=bool), k=1)
    comparable = upper & (np.abs(dx) > tol) & (np.abs(dy) > tol)
    if not comparable.any():
        return float("nan")
    return float(np.mean(np.sign(dx[comparable]) == np.sign(dy[comparable])))


def rank_correlations(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    from scipy import stats

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:  # a constant side ranks nothing: NaN, said so in the text
        nan = float("nan")
        return {"spearman": nan, "spearman_p": nan, "kendall": nan, "kendall_p": nan,
                "pairwise_accuracy": pairwise_ranking_accuracy(x, y)}
    spearman = stats.spearmanr(x, y)
    kendall = stats.kendalltau(x, y)
    return {"spearman": float(spearman.statistic), "spearman_p": float(spearman.pvalue),
            "kendall": float(kendall.statistic), "kendall_p": float(kendall.pvalue),
            "pairwise_accuracy": pairwise_ranking_accuracy(x, y)}


def analyze(sets: Any, x_col: str = "summed_util", y_col: str = "slowdown", top: int = 5,
            x_label: str = "summed solo utilization (fraction)") -> dict[str, Any]:
    """Report on a per-set table (pandas) with ``set_id``, ``x_col`` and ``y_col``."""
    data = sets.dropna(subset=[x_col, y_col])
    x, y = data[x_col].to_numpy(float), data[y_col].to_numpy(float)
    fit = fit_knee(x, y)
    residual = y - fit.predict(x)
    order = np.argsort(-np.abs(residual))[:top]
    worst = [{"set_id": str(data["set_id"].iloc[i]), "x": float(x[i]), "y": float(y[i]),
              "predicted": float(y[i] - residual[i]), "residual": float(residual[i])} for i in order]
    by_size = {int(k): int(v) for k, v in data["set_size"].value_counts().items()} if "set_size" in data else {}
    return {"n_sets": len(data), "sets_by_size": by_size, "x": x_label, "y": "slowdown = 1 - mean normalized throughput",
            "fit": asdict(fit), **rank_correlations(x, y), "largest_residuals": worst}


def quantiles(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    return {f"q{int(q * 100):02d}": float(np.quantile(v, q)) for q in QUANTILES} | {"mean": float(v.mean()), "n": len(v)}


def compare_shapes(ours: Sequence[float], gavel: Sequence[float]) -> dict[str, Any]:
    """Compare two samples of member normalized throughput: quantiles and the two-sample KS test."""
    from scipy import stats

    a, b = np.asarray(ours, dtype=float), np.asarray(gavel, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) == 0 or len(b) == 0:
        raise ValueError("compare_shapes needs finite values on both sides")
    ks = stats.ks_2samp(a, b)
    qa, qb = quantiles(a), quantiles(b)
    return {"ours": qa, "gavel": qb, "ks_statistic": float(ks.statistic), "ks_pvalue": float(ks.pvalue),
            "median_difference": qa["q50"] - qb["q50"]}


def format_report(report: dict[str, Any]) -> str:
    """Human-readable text of :func:`analyze` (plus an optional ``shape`` entry)."""
    fit = report["fit"]
    lines = [
        f"sets: {report['n_sets']} {report.get('sets_by_size', '')}  source: {report.get('source', '')}",
        f"x: {report['x']}   y: {report['y']}",
        f"hinge fit: knee at x={fit['knee']:.3f}, slope {fit['slope_below']:.3f} below / {fit['slope_above']:.3f} "
        f"above, intercept {fit['intercept']:.3f}, R2 {fit['r2']:.3f}, RMSE {fit['rmse']:.3f}",
        f"rank correlation: Spearman {report['spearman']:.3f} (p={report['spearman_p']:.2g}), "
        f"Kendall {report['kendall']:.3f} (p={report['kendall_p']:.2g})",
        f"pairwise ranking accuracy (higher x -> more slowdown): {report['pairwise_accuracy']:.3f}",
        "largest residuals:",
    ]
    for r in report["largest_residuals"]:
        lines.append(f"  {r['set_id']}: x={r['x']:.3f} slowdown={r['y']:.3f} "
                     f"predicted={r['predicted']:.3f} residual={r['residual']:+.3f}")
    for key, value in report.get("notes", {}).items():
        lines.append(f"note ({key}): {value}")
    if "shape" in report:
        s = report["shape"]
        lines.append(f"normalized-throughput shape vs Gavel: KS {s['ks_statistic']:.3f} (p={s['ks_pvalue']:.2g}), "
                     f"median ours {s['ours']['q50']:.3f} vs Gavel {s['gavel']['q50']:.3f}")
    return "\n".join(lines)
