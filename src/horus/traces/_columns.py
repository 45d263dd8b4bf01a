"""Helpers shared by the CSV trace loaders."""

from __future__ import annotations

import numpy as np


def rebase_order(submit: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(row order by submit time (stable), submit times rebased to start at 0, original first submit)."""
    order = np.argsort(submit, kind="stable")
    offset = float(submit[order[0]]) if len(order) else 0.0
    return order, submit - offset, offset


def optional_float(value: float) -> float | None:
    """NaN (an empty cell) -> None."""
    return None if np.isnan(value) else float(value)
