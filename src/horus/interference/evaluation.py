"""Evaluation protocols: random held-out pairs, held-out job types (cold start), cross-GPU transfer.

Each protocol trains every compared model on a split and pools the held-out predictions.
Splits never separate the two observations of one experiment (a with b, b with a): Gavel
stores both orders, so splitting them would leak the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr

from horus.interference.base import INTERFERENCE_MODELS, InterferenceModel
from horus.interference.data import JobFeatures, Observation, experiment_key, job_types_of

COMPARED_MODELS: tuple[str, ...] = ("contention", "contention-zeroshot", "physical", "iasp", "iapp", "summed-util",
                                    "summed-util-zeroshot", "lowrank-mc")


@dataclass(frozen=True)
class Split:
    name: str
    train: list[Observation]
    test: list[Observation]


def pairwise_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Share of observation pairs with different measured values that the prediction orders the same way
    (a predicted tie counts as half)."""
    if len(y_true) < 2:
        return float("nan")
    i, j = np.triu_indices(len(y_true), 1)
    truth, pred = np.sign(y_true[i] - y_true[j]), np.sign(y_pred[i] - y_pred[j])
    keep = truth != 0
    if not keep.any():
        return float("nan")
    return float(np.mean(np.where(pred[keep] == 0, 0.5, truth[keep] == pred[keep])))


def metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """MAE, Spearman rank correlation and pairwise ranking accuracy of normalized throughputs."""
    if len(y_true) == 0:
        return {"n": 0, "mae": float("nan"), "spearman": float("nan"), "pairwise_acc": float("nan")}
    rho = spearmanr(y_true, y_pred).statistic if len(y_true) > 2 else float("nan")
    return {"n": int(len(y_true)), "mae": float(np.mean(np.abs(y_true - y_pred))), "spearman": float(rho),
            "pairwise_acc": pairwise_accuracy(y_true, y_pred)}


def random_splits(obs: Sequence[Observation], *, folds: int = 5, seed: int = 0) -> list[Split]:
    """k-fold over experiments (unordered co-located sets), seeded."""
    keys = sorted({experiment_key(o) for o in obs})
    order = np.random.default_rng(seed).permutation(len(keys))
    fold_of = {keys[k]: pos % folds for pos, k in enumerate(order)}
    return [Split(f"fold{f}", [o for o in obs if fold_of[experiment_key(o)] != f],
                  [o for o in obs if fold_of[experiment_key(o)] == f]) for f in range(folds)]


def cold_start_splits(obs: Sequence[Observation]) -> list[Split]:
    """Leave one job type out: every observation involving it is held out."""
    return [Split(t, [o for o in obs if t not in o.job_types], [o for o in obs if t in o.job_types])
            for t in job_types_of(obs)]


ModelFactory = Callable[[str], InterferenceModel]


def default_factory(features: JobFeatures, seed: int = 0) -> ModelFactory:
    """Models with their default hyper-parameters and shared features."""
    def make(name: str) -> InterferenceModel:
        return INTERFERENCE_MODELS.create(name, features=features, seed=seed)
    return make


def evaluate_splits(splits: Sequence[Split], models: Sequence[str], factory: ModelFactory) -> dict[str, dict]:
    """Train each model on each split's train set; metrics of the pooled held-out predictions."""
    table: dict[str, dict] = {}
    for name in models:
        truth, pred = [], []
        for split in splits:
            if not split.test or not split.train:
                continue
            model = factory(name).fit(split.train)
            truth.append(np.array([o.value for o in split.test]))
            pred.append(model.predict_observations(split.test))
        table[name] = (metrics(np.concatenate(truth), np.concatenate(pred)) if truth
                       else metrics(np.zeros(0), np.zeros(0)))
    return table


ProtocolFn = Callable[..., dict[str, dict]]
PROTOCOLS: dict[str, ProtocolFn] = {}  # name -> protocol, filled by @protocol


def protocol(name: str) -> Callable[[ProtocolFn], ProtocolFn]:
    def decorator(fn: ProtocolFn) -> ProtocolFn:
        PROTOCOLS[name] = fn
        return fn
    return decorator


@protocol("random")
def random_protocol(data: dict[str, list[Observation]], models: Sequence[str], factory: ModelFactory,
                    *, train_gpu: str = "v100", folds: int = 5, seed: int = 0) -> dict[str, dict]:
    return {train_gpu: evaluate_splits(random_splits(data[train_gpu], folds=folds, seed=seed), models, factory)}


@protocol("cold-start")
def cold_start_protocol(data: dict[str, list[Observation]], models: Sequence[str], factory: ModelFactory,
                        *, train_gpu: str = "v100", **_: object) -> dict[str, dict]:
    return {train_gpu: evaluate_splits(cold_start_splits(data[train_gpu]), models, factory)}


@protocol("cross-gpu")
def cross_gpu_protocol(data: dict[str, list[Observation]], models: Sequence[str], factory: ModelFactory,
                       *, train_gpu: str = "v100", **_: object) -> dict[str, dict]:
    out = {}
    for gpu in sorted(g for g in data if g != train_gpu):
        out[f"{train_gpu}->{gpu}"] = evaluate_splits([Split(gpu, data[train_gpu], data[gpu])], models, factory)
    return out


@protocol("leave-one-gpu-out")
def leave_one_gpu_out_protocol(data: dict[str, list[Observation]], models: Sequence[str], factory: ModelFactory,
                               **_: object) -> dict[str, dict]:
    """Train on every GPU type but one, test on that one (the GPU type is never seen in training)."""
    out = {}
    for gpu in sorted(data):
        train = [o for other in sorted(data) if other != gpu for o in data[other]]
        out[f"others->{gpu}"] = evaluate_splits([Split(gpu, train, data[gpu])], models, factory)
    return out


@protocol("cold-start-cross-gpu")
def cold_start_cross_gpu_protocol(data: dict[str, list[Observation]], models: Sequence[str], factory: ModelFactory,
                                  *, train_gpu: str = "v100", **_: object) -> dict[str, dict]:
    """Job type held out *and* GPU type never seen: train on ``train_gpu`` without type t, test on the
    other GPUs' observations involving t."""
    out = {}
    for gpu in sorted(g for g in data if g != train_gpu):
        splits = [Split(t, [o for o in data[train_gpu] if t not in o.job_types],
                        [o for o in data[gpu] if t in o.job_types]) for t in job_types_of(data[gpu])]
        out[f"{train_gpu}->{gpu}"] = evaluate_splits(splits, models, factory)
    return out


def format_table(results: dict[str, dict[str, dict[str, dict]]]) -> str:
    """Markdown table: protocol, data, model, n, MAE, Spearman, pairwise ranking accuracy."""
    lines = ["| protocol | data | model | n | MAE | Spearman | pairwise acc |", "|---|---|---|---|---|---|---|"]
    for protocol, by_data in results.items():
        for data_name, by_model in by_data.items():
            for model, m in by_model.items():
                lines.append(f"| {protocol} | {data_name} | {model} | {m['n']} | {m['mae']:.3f} | {m['spearman']:.3f} "
                             f"| {m.get('pairwise_acc', float('nan')):.3f} |")
    return "\n".join(lines)
