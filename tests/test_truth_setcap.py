"""Unmeasured sets of 3+ jobs get at most the summed throughput of their best measured pair (horus.truth.setcap)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from horus.cluster import GPUType
from horus.colocation.truth_measured import MeasuredTruth
from horus.truth.fit import normalized_throughputs
from horus.truth.setcap import PairSumCap

FIXTURE = Path(__file__).parent / "fixtures" / "coloc_synthetic"
H100 = GPUType("h100", 81559, speed=2.0)
V100 = GPUType("V100", 16384, 1.0)


def test_the_bound_comes_from_own_pairs_then_members_then_all() -> None:
    cap = PairSumCap({("b", "a"): 1.5, ("a", "c"): 1.2, ("c", "c"): 1.9, ("d", "e"): 1.1})
    assert cap.pair_sums[("a", "b")] == 1.5  # keys are ordered
    assert cap.bound(["a", "b", "c"]) == 1.5  # own pairs (a,b) 1.5, (a,c) 1.2, (b,c) unmeasured
    assert cap.bound(["c", "c", "a"]) == 1.9  # (c, c) is an own pair when c appears twice
    assert cap.bound(["b", "x", "y"]) == 1.5  # no own pair measured: b's best pair
    assert cap.bound(["x", "y", "z"]) == 1.9  # nothing about its types: the best pair overall
    assert PairSumCap({}).bound(["a", "b", "c"]) is None


def test_apply_scales_members_proportionally_and_leaves_pairs_alone() -> None:
    cap = PairSumCap({("a", "b"): 1.5})
    assert cap.apply(["a", "b"], [0.9, 0.9]) == [0.9, 0.9]  # a pair is never capped
    assert cap.apply(["a", "b", "b"], [0.4, 0.5, 0.5]) == [0.4, 0.5, 0.5]  # under the cap
    scaled = cap.apply(["a", "b", "b"], [0.8, 0.6, 0.6])
    assert math.fsum(scaled) == pytest.approx(1.5)
    assert scaled[0] / scaled[1] == pytest.approx(0.8 / 0.6) and scaled[1] == scaled[2]


@pytest.fixture(scope="module")
def measured() -> MeasuredTruth:
    return MeasuredTruth(FIXTURE / "solo.csv", FIXTURE / "colocation.csv", measured_speed=2.0)


def test_measured_truth_caps_unmeasured_sets_of_three_and_four(measured: MeasuredTruth) -> None:
    types = measured.job_types()
    binding = 0
    for n in (3, 4):
        for combo in itertools.combinations_with_replacement(types, n):
            xs = measured.colocated_throughput(list(combo), H100)
            if tuple(sorted(combo)) in measured._sets:
                continue  # measured sets are returned as measured
            bound = measured._cap.bound(combo)
            assert math.fsum(xs) <= bound + 1e-12
            assert len(set(xs)) == 1  # the fitted curve gives every member the same value, scaling keeps it
            uncapped = float(measured._curve(measured._fit, [measured._summed_util(combo)])[0]) * n
            binding += uncapped > bound + 1e-9
    assert binding > 0  # the fixture has sets the pair curve would put above their best pair


def test_measured_truth_pairs_and_measured_triples_are_unchanged(measured: MeasuredTruth) -> None:
    assert measured.colocated_throughput(["syn_d/b32", "syn_b/b8"], H100) == [0.66, 0.70]
    triple = measured.colocated_throughput(["syn_a/b8", "syn_b/b8", "syn_e/b4"], H100)
    assert triple == [0.82, 0.80, 0.81]  # measured: 2.43, above its best pair's 1.95, and kept
    assert "rule" in measured.describe()["aggregate_cap"]


def test_gavel_truth_caps_sets_of_three_and_four(gavel_path: Path) -> None:
    from horus.truth.gavel_pairs import GavelTruth

    truth = GavelTruth(gavel_path, gpus=("v100",))
    fit, cap, table = truth.fits["v100"], truth.caps["v100"], truth.tables["v100"]
    types = truth.job_types()
    binding = 0
    for combo in [*itertools.combinations_with_replacement(types[::2], 3),
                  *itertools.combinations_with_replacement(types[::3], 4)]:
        xs = truth.colocated_throughput(list(combo), V100)
        assert math.fsum(xs) <= cap.bound(combo) + 1e-12 and all(0 < x <= 1 for x in xs)
        law = normalized_throughputs([min(1.0, max(0.01, fit.utils[t])) for t in sorted(combo)], fit.params)
        binding += math.fsum(law) > cap.bound(combo) + 1e-9
    assert binding > 0
    for a, b in list(table.pairs)[::11]:  # measured pairs are returned exactly, whatever the cap
        assert truth.colocated_throughput([a, b], V100) == list(table.normalized_pair(a, b))
