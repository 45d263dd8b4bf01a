"""Analysis recovers a planted relation; Gavel pairs (when present) and shape comparison."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from horus.colocation.analysis import analyze, compare_shapes, fit_knee, pairwise_ranking_accuracy


def _planted(seed: int = 0, n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.3, 2.0, n)
    y = 0.02 + 0.05 * x + 0.55 * np.maximum(0.0, x - 1.0) + rng.normal(0, 0.02, n)
    return pd.DataFrame({"set_id": [f"s{i}" for i in range(n)], "set_size": 2, "summed_util": x, "slowdown": y})


def test_planted_knee_is_recovered() -> None:
    report = analyze(_planted())
    fit = report["fit"]
    assert fit["knee"] == pytest.approx(1.0, abs=0.08)
    assert fit["slope_below"] == pytest.approx(0.05, abs=0.05)
    assert fit["slope_above"] == pytest.approx(0.60, abs=0.07)
    assert fit["r2"] > 0.9 and report["spearman"] > 0.8 and report["pairwise_accuracy"] > 0.8


def test_largest_residuals_find_the_planted_outlier() -> None:
    data = _planted(1)
    data.loc[17, "slowdown"] += 0.6
    report = analyze(data, top=3)
    assert report["largest_residuals"][0]["set_id"] == "s17"
    assert report["largest_residuals"][0]["residual"] > 0.4


def test_pairwise_accuracy_extremes_and_ties() -> None:
    x = [1.0, 2.0, 3.0, 4.0]
    assert pairwise_ranking_accuracy(x, [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert pairwise_ranking_accuracy(x, [0.4, 0.3, 0.2, 0.1]) == 0.0
    assert pairwise_ranking_accuracy(x, [0.1, 0.1, 0.3, 0.3]) == 1.0  # ties in y are not counted


def test_fit_knee_needs_points() -> None:
    with pytest.raises(ValueError):
        fit_knee([1.0, 2.0], [0.0, 1.0])


def test_compare_shapes_identical_and_shifted() -> None:
    rng = np.random.default_rng(2)
    a = rng.uniform(0.3, 1.0, 300)
    same = compare_shapes(a, a)
    assert same["ks_statistic"] == 0.0 and same["median_difference"] == 0.0
    shifted = compare_shapes(a, a - 0.3)
    assert shifted["ks_statistic"] > 0.3 and shifted["median_difference"] == pytest.approx(0.3)


def test_gavel_pairs_analysis(gavel_path) -> None:
    from horus.colocation.datasets import gavel_member_values, gavel_unordered_pairs, sets_from_gavel
    from horus.sources.gavel import load_gavel

    gavel = load_gavel(gavel_path)
    sets, _ = sets_from_gavel(gavel, "pressure")
    pairs = gavel_unordered_pairs(gavel)
    assert len(sets) == len(pairs) and all(a <= b for a, b in pairs)
    report = analyze(sets)
    assert -1.0 <= report["spearman"] <= 1.0 and 0.0 <= report["pairwise_accuracy"] <= 1.0
    assert len(gavel_member_values(gavel)) == 2 * len(pairs)


def test_pressure_proxy_is_leave_pair_out(gavel_path) -> None:
    """A pair's own slowdown must not enter its x (otherwise the correlation is circular)."""
    from horus.colocation.datasets import _pressure_loo, gavel_unordered_pairs
    from horus.sources.gavel import load_gavel

    pairs = gavel_unordered_pairs(load_gavel(gavel_path))
    key = next(k for k in pairs if k[0] != k[1])
    changed = dict(pairs)
    changed[key] = (0.01, 0.01)
    assert _pressure_loo(changed)[key] == pytest.approx(_pressure_loo(pairs)[key])
    other = next(k for k in pairs if key[0] in k and k != key and k[0] != k[1])
    assert _pressure_loo(changed)[other] != pytest.approx(_pressure_loo(pairs)[other])
