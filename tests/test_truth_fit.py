from __future__ import annotations

import itertools

import numpy as np
import pytest

from horus.sources.gavel import GavelThroughputs
from horus.truth.fit import SlowdownParams, fit_slowdown_model, load_slowdown_params, normalized_throughputs

PLANTED = SlowdownParams(alpha=3.0, beta=1.2, gamma=0.7)


def _synthetic(utils: dict[str, float], params: SlowdownParams, noise: float, seed: int) -> GavelThroughputs:
    rng = np.random.default_rng(seed)
    solo = {t: float(rng.uniform(1, 50)) for t in utils}
    pairs = {}
    for a, b in itertools.combinations_with_replacement(sorted(utils), 2):
        xa, xb = normalized_throughputs([utils[a], utils[b]], params)
        xa, xb = (float(np.clip(x + rng.normal(0, noise), 0.01, 1.0)) for x in (xa, xb))
        pairs[(a, b)] = (xa * solo[a], xb * solo[b])
        pairs[(b, a)] = (xb * solo[b], xa * solo[a])
    return GavelThroughputs("synthetic", solo, pairs, {}, "0" * 64, {"zero_pairs": 0, "both_at_solo": 0})


def test_fit_recovers_planted_parameters() -> None:
    rng = np.random.default_rng(7)
    utils = {f"m{i}/b1": float(u) for i, u in enumerate(rng.uniform(0.1, 0.95, size=13))}
    utils["top/b1"] = 1.0  # the fit's scale convention: the heaviest type has u = 1
    result = fit_slowdown_model(_synthetic(utils, PLANTED, noise=0.01, seed=3), seed=0)
    assert result.params.alpha == pytest.approx(PLANTED.alpha, rel=0.15)
    assert result.params.beta == pytest.approx(PLANTED.beta, abs=0.15)
    assert result.params.gamma == pytest.approx(PLANTED.gamma, abs=0.15)
    errors = [abs(result.utils[t] - u) for t, u in utils.items()]
    assert max(errors) < 0.05
    assert result.heldout is not None and result.heldout.mae < 0.02 and result.heldout.spearman > 0.95


def test_fit_is_deterministic_in_seed() -> None:
    utils = {f"m{i}/b1": u for i, u in enumerate([0.2, 0.5, 0.8, 1.0, 0.35])}
    data = _synthetic(utils, PLANTED, noise=0.05, seed=1)
    assert fit_slowdown_model(data, seed=4).to_dict() == fit_slowdown_model(data, seed=4).to_dict()


def test_normalized_throughputs_properties() -> None:
    p = load_slowdown_params()
    assert normalized_throughputs([0.7], p) == [1.0]
    pair = normalized_throughputs([0.7, 0.3], p)
    triple = normalized_throughputs([0.7, 0.3, 0.5], p)
    assert all(0 < x < 1 for x in pair)
    assert triple[0] < pair[0] and triple[1] < pair[1]
    assert normalized_throughputs([0.5, 0.9], p)[0] < normalized_throughputs([0.5, 0.2], p)[0]


def test_shipped_params_are_a_few_scalars_with_provenance() -> None:
    import json
    from importlib import resources

    data = json.loads(resources.files("horus.data").joinpath("truth_params.json").read_text())
    assert set(data) == {"form", "alpha", "beta", "gamma", "provenance"}
    assert {"command", "data_sha256", "date", "heldout_mae"} <= set(data["provenance"])
