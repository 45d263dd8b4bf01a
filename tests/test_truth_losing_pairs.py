"""``LosingPairs``: a seeded share of type pairs sums below one when sharing a GPU; everything else is the truth."""

from __future__ import annotations

import itertools
import warnings

import pytest
from golden_workload import Workload

from horus.gpu_types import preset
from horus.plugins import load_all
from horus.policies.base import POLICIES
from horus.predict.analytic import AnalyticPredictor
from horus.sim.engine import SimConfig, simulate
from horus.truth.base import TRUTH_MODELS
from horus.truth.losing_pairs import LosingPairs

load_all("horus.truth")
V100 = preset("V100")
TYPES = ["resnet50/b64", "resnet18/b128", "vgg16/b32", "transformer/b64", "lstm_lm/b32", "mobilenet_v2/b64"]


@pytest.fixture(scope="module")
def inner():
    return TRUTH_MODELS.create("parametric", seed=0)


def test_share_zero_is_the_truth_and_solo_is_untouched(inner) -> None:
    same = LosingPairs(inner, 0.0)
    for a, b in itertools.combinations_with_replacement(TYPES, 2):
        assert same.colocated_throughput([a, b], V100) == pytest.approx(inner.colocated_throughput([a, b], V100))
    assert LosingPairs(inner, 1.0).solo(TYPES[0], V100) == inner.solo(TYPES[0], V100)


def test_every_set_with_a_losing_pair_sums_at_most_its_target(inner) -> None:
    world = LosingPairs(inner, 1.0, low=0.6, high=0.95)
    for a, b in itertools.combinations_with_replacement(TYPES, 2):
        xs = world.colocated_throughput([a, b], V100)
        before = inner.colocated_throughput([a, b], V100)
        assert sum(xs) <= 0.95 + 1e-12 and all(0 < x <= 1 for x in xs)
        if sum(before) > 0.95:  # scaled: ratios kept
            assert xs[0] / xs[1] == pytest.approx(before[0] / before[1])
    assert sum(world.colocated_throughput(TYPES[:3], V100)) <= 0.95 + 1e-12


def test_which_pairs_lose_is_seeded_symmetric_and_near_the_share(inner) -> None:
    world = LosingPairs(inner, 0.3, seed=4)
    names = [f"m{i}/b32" for i in range(60)]
    pairs = list(itertools.combinations_with_replacement(names, 2))
    share = sum(world.losing(a, b) for a, b in pairs) / len(pairs)
    assert abs(share - 0.3) < 0.04
    assert all(world.losing(a, b) == world.losing(b, a) for a, b in pairs[:200])
    other = LosingPairs(inner, 0.3, seed=5)
    assert [world.losing(a, b) for a, b in pairs] != [other.losing(a, b) for a, b in pairs]


def test_bad_parameters_are_refused(inner) -> None:
    with pytest.raises(ValueError, match="share"):
        LosingPairs(inner, 1.5)
    with pytest.raises(ValueError, match="low <= high"):
        LosingPairs(inner, 0.3, low=0.9, high=0.5)


def test_packing_blindly_costs_and_no_policy_beats_the_valid_bound() -> None:
    """Where every pair loses, a packer that never looks at interference does worse than FIFO-exclusive; every
    policy stays above the lower bounds (which read the same world)."""
    jobs, cluster, truth = Workload("stream-load2.5", "stream", 2.5, 60, 4, 4, 3).build()
    world = LosingPairs(truth, 1.0)
    out = {}
    for name in ("fifo-exclusive", "gandiva-greedy", "horus"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a run below a valid bound warns
            out[name] = simulate(jobs, cluster, POLICIES.create(name), world, AnalyticPredictor(), SimConfig()).summary
    assert out["gandiva-greedy"]["mean_jct_s"] > out["fifo-exclusive"]["mean_jct_s"]
    for summary in out.values():
        assert summary["makespan_s"] >= summary["makespan_lower_bound_s"] - 1e-6
        assert summary["mean_jct_s"] >= summary["mean_jct_lower_bound_s"] - 1e-6
