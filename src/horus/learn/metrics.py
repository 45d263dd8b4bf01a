"""Regression metrics on the target's own scale (%, MiB, s)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def mae(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(np.abs(p - y)))


def rmse(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.sqrt(np.mean((p - y) ** 2)))


def rmsle(y: np.ndarray, p: np.ndarray) -> float:
    """Root mean squared error of log1p values (negative predictions clipped to 0)."""
    return float(np.sqrt(np.mean((np.log1p(np.clip(p, 0, None)) - np.log1p(np.clip(y, 0, None))) ** 2)))


def log_rmse(y: np.ndarray, p: np.ndarray) -> float:
    """RMS of ln(prediction / truth): scale-free (0.1 ~ 10 % typical error); values floored at 1e-9."""
    return float(np.sqrt(np.mean((np.log(np.clip(p, 1e-9, None)) - np.log(np.clip(y, 1e-9, None))) ** 2)))


def mape(y: np.ndarray, p: np.ndarray) -> float:
    """Mean absolute percentage error, percent (rows with y == 0 ignored)."""
    nz = y != 0
    return float(100.0 * np.mean(np.abs((p[nz] - y[nz]) / y[nz]))) if nz.any() else float("nan")


def r2(y: np.ndarray, p: np.ndarray) -> float:
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - p) ** 2)) / ss_tot if ss_tot > 0 else float("nan")


METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "mae": mae, "rmse": rmse, "rmsle": rmsle, "log_rmse": log_rmse, "mape": mape, "r2": r2,
}


def score_all(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    y, p = np.asarray(y, dtype=float), np.asarray(p, dtype=float)
    return {name: fn(y, p) for name, fn in METRICS.items()}
