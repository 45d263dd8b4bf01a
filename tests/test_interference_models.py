"""Interference predictors: matrix completion, cold start via features, IAPP on triples, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from horus.catalog import FEATURE_NAMES
from horus.errors import HorusInputError
from horus.interference.data import JobFeatures, Observation
from horus.interference.evaluation import random_splits
from horus.interference.factorization import IASP, LowRankMC
from horus.interference.iapp import IAPP
from horus.interference.persistence import load_model, save_model
from horus.interference.summed_util import SummedUtilization


def synthetic_graph(n: int, seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    return {f"m{i}/b1": {name: float(rng.uniform(1, 1e6)) for name in FEATURE_NAMES} for i in range(n)}


def pair_observations(matrix: np.ndarray, types: list[str], mask: np.ndarray) -> list[Observation]:
    return [Observation(types[i], (types[j],), "v100", float(matrix[i, j]))
            for i in range(len(types)) for j in range(len(types)) if mask[i, j]]


def test_lowrank_completion_recovers_planted_matrix() -> None:
    rng = np.random.default_rng(1)
    n, rank = 24, 2
    u, v = rng.normal(0, 0.4, (n, rank)), rng.normal(0, 0.4, (n, rank))
    matrix = 0.6 + rng.normal(0, 0.05, (n, 1)) + rng.normal(0, 0.05, (1, n)) + u @ v.T
    types = [f"t{i}/b1" for i in range(n)]
    observed = rng.random((n, n)) < 0.7
    model = LowRankMC(seed=0, rank=rank, reg_free=0.01).fit(pair_observations(matrix, types, observed))
    held = [(i, j) for i in range(n) for j in range(n) if not observed[i, j]]
    pred = np.array([model.pair(types[i], types[j], "v100") for i, j in held])
    truth = np.array([matrix[i, j] for i, j in held])
    mae = np.mean(np.abs(pred - truth))
    assert mae < 0.03
    assert mae < 0.25 * np.mean(np.abs(truth - truth.mean()))  # far better than the flat mean


def feature_driven_data(graph: dict[str, dict[str, float]]) -> tuple[list[str], np.ndarray]:
    """Pair throughput set by the two jobs' (log) train_flops: heavy jobs slow each other down."""
    types = sorted(graph)
    heavy = np.array([np.log1p(graph[t]["train_flops"]) for t in types])
    heavy = (heavy - heavy.min()) / (heavy.max() - heavy.min())
    return types, 1.0 - 0.3 * heavy[None, :] - 0.2 * heavy[:, None] * heavy[None, :]


def test_cold_start_prediction_depends_on_graph_features() -> None:
    graph = synthetic_graph(16, seed=2)
    types, matrix = feature_driven_data(graph)
    new = "newmodel/b1"
    graph[new] = dict(graph[types[0]])
    train = pair_observations(matrix, types, np.ones_like(matrix, dtype=bool))
    model = IASP(JobFeatures(graph=graph), seed=0).fit(train)
    assert new not in model.types
    base = model.predict_one(types[3], [new], "v100")
    assert 0.0 < base <= 1.0
    lightest, heaviest = (min(types, key=lambda t: graph[t]["train_flops"]),
                          max(types, key=lambda t: graph[t]["train_flops"]))
    for name in ("train_flops",):
        graph_light = {**graph, new: {**graph[new], name: graph[lightest][name]}}
        graph_heavy = {**graph, new: {**graph[new], name: graph[heaviest][name]}}
        model.features = JobFeatures(graph=graph_light)
        light = model.predict_one(types[3], [new], "v100")
        model.features = JobFeatures(graph=graph_heavy)
        heavy = model.predict_one(types[3], [new], "v100")
        assert light != pytest.approx(heavy, abs=1e-3)
        assert heavy < light  # the learned feature map says heavy co-runners hurt more


def test_lowrank_without_features_cannot_tell_unseen_types_apart() -> None:
    graph = synthetic_graph(10, seed=3)
    types, matrix = feature_driven_data(graph)
    model = LowRankMC(JobFeatures(graph=graph), seed=0).fit(
        pair_observations(matrix, types[:-2], np.ones((8, 8), dtype=bool)))
    a = model.predict_one(types[0], [types[-1]], "v100")
    b = model.predict_one(types[0], [types[-2]], "v100")
    assert a == pytest.approx(b)


def summed_util_truth(utils: dict[str, float], job_types: list[str]) -> float:
    return min(1.0, 1.0 / sum(utils[t] for t in job_types))


def test_iapp_predicts_triples_and_larger_sets_slow_down_more() -> None:
    graph = synthetic_graph(12, seed=4)
    types = sorted(graph)
    rng = np.random.default_rng(5)
    utils = {t: float(0.2 + 0.7 * np.log1p(graph[t]["train_flops"]) / np.log1p(1e6)) for t in types}
    obs = []
    for _ in range(400):
        k = int(rng.integers(2, 4))
        group = [types[int(i)] for i in rng.integers(0, len(types), k)]
        obs.append(Observation(group[0], tuple(group[1:]), "v100", summed_util_truth(utils, group)))
    model = IAPP(JobFeatures(graph=graph), seed=0, max_iter=400).fit(obs)
    heavy = sorted(types, key=utils.get)[-3:]
    triple = model.predict(heavy, "v100")
    assert len(triple) == 3 and all(0.0 < v <= 1.0 for v in triple)
    pair = model.predict(heavy[:2], "v100")
    assert triple[0] < pair[0]
    assert model.predict([heavy[0]], "v100") == [1.0]


def test_summed_util_fit_recovers_curve() -> None:
    graph = synthetic_graph(8, seed=6)
    types = sorted(graph)

    class Fixed(JobFeatures):
        def solo(self, job_type: str, gpu: object) -> tuple[float, float]:
            return 0.3 + 0.1 * types.index(job_type), 1000.0

    feats = Fixed(graph=graph)
    obs = [Observation(a, (b,), "v100", min(1.0, 1.2 / (feats.solo(a, "")[0] + feats.solo(b, "")[0])) ** 1.5)
           for a in types for b in types]
    model = SummedUtilization(feats).fit(obs)
    assert model.theta == pytest.approx(1.2, rel=0.05)
    assert model.gamma == pytest.approx(1.5, rel=0.05)


def test_random_splits_keep_both_orders_of_an_experiment_together() -> None:
    obs = [Observation(a, (b,), "v100", 0.5) for a in "abcdef" for b in "abcdef"]
    for split in random_splits(obs, folds=3, seed=0):
        test_keys = {tuple(sorted(o.job_types)) for o in split.test}
        assert not any(tuple(sorted(o.job_types)) in test_keys for o in split.train)


def test_persistence_round_trip_and_tamper_check(tmp_path) -> None:
    graph = synthetic_graph(8, seed=7)
    types, matrix = feature_driven_data(graph)
    model = IASP(JobFeatures(graph=graph), seed=0, max_iter=100).fit(
        pair_observations(matrix, types, np.ones_like(matrix, dtype=bool)))
    save_model(model, tmp_path, data_sha256="abc", metrics={"mae": 0.1})
    loaded = load_model(tmp_path)
    assert loaded.predict(types[:3], "v100") == model.predict(types[:3], "v100")
    (tmp_path / "model.pkl").write_bytes((tmp_path / "model.pkl").read_bytes() + b"x")
    with pytest.raises(HorusInputError, match="sha256"):
        load_model(tmp_path)
