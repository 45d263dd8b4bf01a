"""The diagnostic bound of ``scripts/iter_time_breakdown.py`` (oracle constant factor per group)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_SPEC = importlib.util.spec_from_file_location(
    "iter_time_breakdown", Path(__file__).resolve().parents[1] / "scripts" / "iter_time_breakdown.py")
assert _SPEC is not None and _SPEC.loader is not None
breakdown = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(breakdown)


def test_oracle_scale_removes_a_constant_ratio() -> None:
    assert breakdown.oracle_scale_mape([2.0, 2.0, 2.0]) == pytest.approx(0.0)


def test_oracle_scale_finds_the_best_factor() -> None:
    # ratios 1 and 2: c = 1 gives (0 + 1) / 2 = 50 %, c = 0.5 gives (0.5 + 0) / 2 = 25 %, the minimum
    assert breakdown.oracle_scale_mape([1.0, 2.0]) == pytest.approx(25.0)


def test_oracle_scale_never_exceeds_the_raw_error() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        r = np.exp(rng.normal(0.0, 0.6, size=int(rng.integers(1, 12))))
        grid = min(np.mean(np.abs(c * r - 1.0)) for c in np.exp(np.linspace(-3, 3, 4001))) * 100.0
        best = breakdown.oracle_scale_mape(r)
        assert best <= np.mean(np.abs(r - 1.0)) * 100.0 + 1e-9
        assert best <= grid + 1e-9  # no factor on a fine grid does better
