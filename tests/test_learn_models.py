"""Candidates, cross-validation protocols and metrics of the learned predictors (SYNTHETIC fixture)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from horus.learn.candidates import TARGET_SPECS, predict_target, resolve_candidates
from horus.learn.dataset import ProfileDataset, load_profiles
from horus.learn.evaluation import PROTOCOLS, best_candidate, cross_validate, format_table
from horus.learn.metrics import score_all

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "synthetic_profiles" / "SYNTHETIC_profiles.csv"
FAST = ["mean", "analytic_memory", "ridge", "lightgbm"]


@pytest.fixture(scope="module")
def data() -> ProfileDataset:
    return load_profiles(FIXTURE)


@pytest.fixture(scope="module")
def rows(data: ProfileDataset):
    return cross_validate(data, resolve_candidates(FAST), folds=3, seed=0)


def test_metrics_are_finite_for_every_target_candidate_protocol(rows) -> None:
    expected = {(t, c, p) for t in TARGET_SPECS for c in FAST for p in PROTOCOLS
                if c != "analytic_memory" or t == "mem"}
    assert {(r.target, r.candidate, r.protocol) for r in rows} == expected
    for r in rows:
        assert all(np.isfinite(v) for v in r.metrics.values()), r
    assert "leave_family_out" in format_table(rows)


@pytest.mark.parametrize("target", list(TARGET_SPECS))
def test_learned_model_beats_constant_mean_on_kfold(rows, target: str) -> None:
    def score(cand: str) -> float:
        return next(r.metrics["rmse"] for r in rows if r.target == target and r.candidate == cand
                    and r.protocol == "kfold")

    assert min(score("ridge"), score("lightgbm")) < 0.7 * score("mean")
    best = best_candidate(rows, target, exclude=frozenset({"mean"}))
    assert best.candidate != "mean" and best.protocol == "leave_family_out"


def test_leave_family_out_holds_out_whole_families(data: ProfileDataset) -> None:
    families = data.families
    seen: list[str] = []
    for train, test in PROTOCOLS["leave_family_out"](data, 5, 0):
        held = set(families[test])
        assert len(held) == 1
        assert held.isdisjoint(set(families[train]))
        assert len(train) + len(test) == len(data)
        seen.extend(held)
    assert sorted(seen) == sorted(set(families))


def test_kfold_is_seeded_and_partitions_rows(data: ProfileDataset) -> None:
    def tests(seed: int) -> list[list[int]]:
        return [sorted(t.tolist()) for _, t in PROTOCOLS["kfold"](data, 4, seed)]

    assert tests(1) == tests(1)
    assert tests(1) != tests(2)
    assert sorted(i for fold in tests(1) for i in fold) == list(range(len(data)))


@pytest.mark.parametrize("candidate", [c.name for c in resolve_candidates(None)])
def test_every_candidate_fits_and_predicts_in_range(data: ProfileDataset, candidate: str) -> None:
    (cand,) = resolve_candidates([candidate])
    for name, spec in TARGET_SPECS.items():
        if not cand.applies_to(name):
            continue
        model = cand.make(spec, seed=0).fit(data.features, data.targets[name].to_numpy())
        pred = predict_target(model, data.features, spec)
        assert np.isfinite(pred).all() and (pred >= spec.lower).all() and (pred <= spec.upper).all()


def test_metrics_on_known_values() -> None:
    y = np.array([1.0, 2.0, 3.0, 4.0])
    perfect = score_all(y, y)
    assert perfect["mae"] == 0 and perfect["rmse"] == 0 and perfect["r2"] == 1 and perfect["log_rmse"] == 0
    off = score_all(y, y + np.array([1.0, -1.0, 1.0, -1.0]))
    assert off["mae"] == pytest.approx(1.0) and off["rmse"] == pytest.approx(1.0)
    assert off["mape"] == pytest.approx(100 * np.mean([1, 1 / 2, 1 / 3, 1 / 4]))
    assert off["r2"] == pytest.approx(1 - 4 / 5)
    assert score_all(y, 2 * y)["log_rmse"] == pytest.approx(np.log(2))
