"""Evaluate all candidates, pick the best per target, and fit it on all the data.

Selection rule: lowest ``TargetSpec.selection_metric`` (util: MAE, memory: RMSLE, iteration time:
log-RMSE) under leave-one-family-out (k-fold when the data has a single family). Baselines (``mean``) are
reported but never chosen.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning

from horus.learn.candidates import BASELINES, CANDIDATES, TARGET_SPECS, resolve_candidates
from horus.learn.dataset import ProfileDataset
from horus.learn.evaluation import PROTOCOLS, MetricRow, best_candidate, cross_validate


@dataclass
class TrainedPredictors:
    """One fitted model per target plus how it was chosen."""

    models: dict[str, BaseEstimator]
    choices: dict[str, dict[str, object]]  # target -> {candidate, protocol, metric, value}
    metrics: list[MetricRow]
    data_source: str
    data_sha256: str
    n_rows: int
    seed: int
    folds: int
    families: list[str] = field(default_factory=list)


def protocols_for(data: ProfileDataset) -> list[str]:
    """All protocols, minus leave-one-family-out when there is only one family."""
    return [p for p in PROTOCOLS if p != "leave_family_out" or len(set(data.families)) >= 2]


def train_predictors(data: ProfileDataset, seed: int = 0, folds: int = 5,
                     candidate_names: list[str] | None = None) -> TrainedPredictors:
    candidates = resolve_candidates(candidate_names)
    rows = cross_validate(data, candidates, protocols_for(data), folds=folds, seed=seed)
    models: dict[str, BaseEstimator] = {}
    choices: dict[str, dict[str, object]] = {}
    for target, spec in TARGET_SPECS.items():
        best = best_candidate(rows, target, exclude=BASELINES)
        model = CANDIDATES[best.candidate].make(spec, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(data.features, data.targets[target].to_numpy())
        models[target] = model
        choices[target] = {"candidate": best.candidate, "protocol": best.protocol, "metric": spec.selection_metric,
                           "value": best.metrics[spec.selection_metric]}
    return TrainedPredictors(models, choices, rows, data.source, data.sha256, len(data), seed, folds,
                             sorted(set(data.families)))
