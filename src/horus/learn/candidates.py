"""Candidate regressors and the targets they predict, registered by name.

Every candidate maps a FEATURE_SCHEMA frame to one target on its own scale. Learned candidates fit
on log-targets for memory and iteration time (multiplicative errors, values spanning decades).
LightGBM and xgboost are imported lazily and skipped when not installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.dummy import DummyRegressor
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import RidgeCV
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from horus.profiling.schema import TARGETS


@dataclass(frozen=True)
class TargetSpec:
    """A prediction target: its profile column, log-space fitting, valid range and selection metric."""

    name: str
    column: str
    log: bool
    lower: float
    upper: float = float("inf")
    unit: str = ""
    selection_metric: str = "rmsle"


TARGET_SPECS: dict[str, TargetSpec] = {
    "util": TargetSpec("util", TARGETS["util"], log=False, lower=0.0, upper=100.0, unit="%", selection_metric="mae"),
    "mem": TargetSpec("mem", TARGETS["mem"], log=True, lower=1.0, unit="MiB"),
    "iter_time": TargetSpec("iter_time", TARGETS["iter_time"], log=True, lower=1e-6, unit="s",
                            selection_metric="log_rmse"),
}


class AnalyticMemory(RegressorMixin, BaseEstimator):
    """The analytic memory formula (feature ``analytic_mem_mib``); fitting does nothing."""

    def fit(self, X: pd.DataFrame, y: np.ndarray) -> AnalyticMemory:
        self.fitted_ = True
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(X["analytic_mem_mib"], dtype=float)


# The few memory-related features the formula's correction may depend on (a small set extrapolates
# more safely to unseen model families than the full schema).
RESIDUAL_COLUMNS: tuple[str, ...] = ("analytic_mem_mib", "weight_mib", "log_activation_mib", "is_amp",
                                     "gpu_memory_mib")


class AnalyticResidual(RegressorMixin, BaseEstimator):
    """The analytic memory formula times a learned correction: fits ln(y / formula) with ``regressor``.

    The correction is clipped to a factor of ``MAX_CORRECTION`` either way, so extrapolating to an
    unseen family can never move far from the formula.
    """

    MAX_CORRECTION = 4.0

    def __init__(self, regressor: BaseEstimator | None = None, columns: tuple[str, ...] = RESIDUAL_COLUMNS) -> None:
        self.regressor = regressor
        self.columns = columns

    def fit(self, X: pd.DataFrame, y: np.ndarray) -> AnalyticResidual:
        base = np.asarray(X["analytic_mem_mib"], dtype=float)
        target = np.log(np.asarray(y, dtype=float) / base)
        self.regressor_ = clone(self.regressor).fit(X.loc[:, list(self.columns)], target)
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        bound = np.log(self.MAX_CORRECTION)
        correction = np.clip(self.regressor_.predict(X.loc[:, list(self.columns)]), -bound, bound)
        return np.asarray(X["analytic_mem_mib"], dtype=float) * np.exp(correction)


def log1p_nonneg(X: np.ndarray) -> np.ndarray:
    """log1p of features clipped at 0 (all FEATURE_SCHEMA columns are non-negative or logs of such)."""
    return np.log1p(np.clip(np.asarray(X, dtype=float), 0.0, None))


def _log_scaled(estimator: BaseEstimator) -> Pipeline:
    return make_pipeline(FunctionTransformer(log1p_nonneg), StandardScaler(), estimator)


def _lightgbm(seed: int) -> BaseEstimator:
    from lightgbm import LGBMRegressor

    return LGBMRegressor(n_estimators=300, learning_rate=0.05, num_leaves=15, min_child_samples=5,
                         subsample=0.8, subsample_freq=1, colsample_bytree=0.8, random_state=seed,
                         n_jobs=1, verbose=-1)


def _xgboost(seed: int) -> BaseEstimator:
    from xgboost import XGBRegressor

    return XGBRegressor(n_estimators=300, learning_rate=0.05, max_depth=4, subsample=0.8,
                        colsample_bytree=0.8, random_state=seed, n_jobs=1, verbosity=0)


@dataclass(frozen=True)
class Candidate:
    """A named model family. ``learned`` ones get the target transform; ``targets`` None means all."""

    name: str
    build: Callable[[int], BaseEstimator]
    learned: bool = True
    targets: frozenset[str] | None = None
    requires: str | None = None  # optional module that must be importable

    def available(self) -> bool:
        return self.requires is None or importlib.util.find_spec(self.requires) is not None

    def applies_to(self, target: str) -> bool:
        return self.targets is None or target in self.targets

    def make(self, target: TargetSpec, seed: int) -> BaseEstimator:
        """A fresh, unfitted estimator for ``target`` (target transform included)."""
        estimator = self.build(seed)
        if not self.learned:
            return estimator
        if target.log:
            return TransformedTargetRegressor(regressor=estimator, func=np.log, inverse_func=np.exp,
                                              check_inverse=False)
        return TransformedTargetRegressor(regressor=estimator, transformer=StandardScaler())


CANDIDATES: dict[str, Candidate] = {
    c.name: c
    for c in (
        Candidate("mean", lambda seed: DummyRegressor(strategy="mean"), learned=False),
        Candidate("analytic_memory", lambda seed: AnalyticMemory(), learned=False, targets=frozenset({"mem"})),
        Candidate("analytic_ridge", lambda seed: AnalyticResidual(_log_scaled(RidgeCV(alphas=np.logspace(-3, 3, 13)))),
                  learned=False, targets=frozenset({"mem"})),
        Candidate("ridge", lambda seed: _log_scaled(RidgeCV(alphas=np.logspace(-3, 3, 13)))),
        Candidate("random_forest", lambda seed: RandomForestRegressor(n_estimators=100, max_features=0.5,
                                                                                    random_state=seed, n_jobs=1)),
        Candidate("lightgbm", _lightgbm, requires="lightgbm"),
        Candidate("xgboost", _xgboost, requires="xgboost"),
        Candidate("mlp", lambda seed: _log_scaled(MLPRegressor(hidden_layer_sizes=(64, 32), alpha=1e-3, max_iter=3000,
                                                               random_state=seed))),
    )
}

# Candidates that are reference points, never chosen as the predictor (documented in docs/predictors.md).
BASELINES: frozenset[str] = frozenset({"mean"})


def resolve_candidates(names: list[str] | None) -> list[Candidate]:
    """Candidates by name (all available ones when ``names`` is None); KeyError on an unknown name."""
    if names is None:
        return [c for c in CANDIDATES.values() if c.available()]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        raise KeyError(f"unknown candidate {unknown[0]!r}; known: {', '.join(CANDIDATES)}")
    return [CANDIDATES[n] for n in names if CANDIDATES[n].available()]


def predict_target(model: BaseEstimator, features: pd.DataFrame, target: TargetSpec) -> np.ndarray:
    """Predictions clipped to the target's valid range."""
    return np.clip(np.asarray(model.predict(features), dtype=float), target.lower, target.upper)
