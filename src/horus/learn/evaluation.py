"""Cross-validation protocols and the metrics table (target x candidate x protocol).

Protocols (registered in ``PROTOCOLS``):
- ``kfold``: seeded shuffled K-fold over configurations. Optimistic: the same model appears in
  train and test at other batch sizes / GPUs.
- ``leave_family_out``: each model family (cnn, transformer, ...) is held out in turn, so the
  predictor must generalise to an unseen kind of network, as for a new job.
Metrics are computed on the pooled out-of-fold predictions (each row predicted exactly once).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold, LeaveOneGroupOut

from horus.errors import HorusInputError
from horus.learn.candidates import TARGET_SPECS, Candidate, predict_target
from horus.learn.dataset import ProfileDataset
from horus.learn.metrics import METRICS, score_all

Splits = Iterator[tuple[np.ndarray, np.ndarray]]


def kfold_splits(data: ProfileDataset, folds: int, seed: int) -> Splits:
    n_splits = min(folds, len(data))
    if n_splits < 2:
        raise HorusInputError(data.source, f"k-fold needs at least 2 configurations, got {len(data)}")
    yield from KFold(n_splits=n_splits, shuffle=True, random_state=seed).split(data.features)


def leave_family_out_splits(data: ProfileDataset, folds: int, seed: int) -> Splits:
    if len(set(data.families)) < 2:
        raise HorusInputError(data.source, "leave-one-family-out needs at least 2 model families in column 'family'")
    yield from LeaveOneGroupOut().split(data.features, groups=data.families)


PROTOCOLS: dict[str, Callable[[ProfileDataset, int, int], Splits]] = {
    "kfold": kfold_splits,
    "leave_family_out": leave_family_out_splits,
}
SELECTION_PROTOCOL = "leave_family_out"


@dataclass(frozen=True)
class MetricRow:
    target: str
    candidate: str
    protocol: str
    n: int
    metrics: dict[str, float]

    def as_dict(self) -> dict[str, object]:
        return {"target": self.target, "candidate": self.candidate, "protocol": self.protocol, "n": self.n,
                **self.metrics}


def out_of_fold(data: ProfileDataset, candidate: Candidate, target: str, protocol: str, folds: int,
                seed: int) -> np.ndarray:
    """Out-of-fold predictions of ``candidate`` for ``target`` under ``protocol``."""
    spec = TARGET_SPECS[target]
    y = data.targets[target].to_numpy()
    pred = np.full(len(data), np.nan)
    for train, test in PROTOCOLS[protocol](data, folds, seed):
        model = candidate.make(spec, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(data.features.iloc[train], y[train])
        pred[test] = predict_target(model, data.features.iloc[test], spec)
    return pred


def cross_validate(data: ProfileDataset, candidates: Sequence[Candidate], protocols: Sequence[str] = tuple(PROTOCOLS),
                   folds: int = 5, seed: int = 0) -> list[MetricRow]:
    """Metrics of every applicable (target, candidate, protocol)."""
    rows: list[MetricRow] = []
    for target in TARGET_SPECS:
        y = data.targets[target].to_numpy()
        for candidate in candidates:
            if not candidate.applies_to(target):
                continue
            for protocol in protocols:
                pred = out_of_fold(data, candidate, target, protocol, folds, seed)
                rows.append(MetricRow(target, candidate.name, protocol, len(y), score_all(y, pred)))
    return rows


def best_candidate(rows: Sequence[MetricRow], target: str, exclude: frozenset[str] = frozenset()) -> MetricRow:
    """The row with the lowest selection metric of ``target`` (TargetSpec.selection_metric) under
    SELECTION_PROTOCOL, or under k-fold when that protocol was not run."""
    metric = TARGET_SPECS[target].selection_metric
    for protocol in (SELECTION_PROTOCOL, "kfold"):
        scored = [r for r in rows if r.target == target and r.protocol == protocol and r.candidate not in exclude
                  and np.isfinite(r.metrics[metric])]
        if scored:
            return min(scored, key=lambda r: r.metrics[metric])
    raise ValueError(f"no scored candidate for target {target!r}")


def format_table(rows: Sequence[MetricRow]) -> str:
    """Fixed-width text table, one line per (target, candidate, protocol)."""
    header = f"{'target':<10}{'candidate':<17}{'protocol':<18}{'n':>5}" + "".join(f" {m:>10}" for m in METRICS)
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r.target:<10}{r.candidate:<17}{r.protocol:<18}{r.n:>5}"
                     + "".join(f" {r.metrics[m]:>10.4g}" for m in METRICS))
    return "\n".join(lines)
