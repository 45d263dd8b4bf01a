from __future__ import annotations

from pathlib import Path

import pytest

from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.plugins import load_all
from horus.sources.gavel import load_gavel
from horus.truth.base import TRUTH_MODELS

GAVEL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"
pytestmark = pytest.mark.skipif(not GAVEL.exists(), reason=f"shared data absent: {GAVEL}")
V100 = GPUType("V100", 16384, 1.0)


@pytest.fixture(scope="module")
def truth():
    load_all("horus.truth")  # registers every truth model
    return TRUTH_MODELS.create("gavel", path=GAVEL, gpus=("v100",))


@pytest.fixture(scope="module")
def table():
    return load_gavel(GAVEL, "v100")


def test_measured_pairs_are_returned_exactly(truth, table) -> None:
    for (a, b), _ in list(table.pairs.items())[::7]:
        expected = table.normalized_pair(a, b)
        assert truth.colocated_throughput([a, b], V100) == pytest.approx(list(expected), abs=0, rel=1e-12)


def test_solo_iteration_time_is_measured(truth, table) -> None:
    for jt, steps in table.solo.items():
        solo = truth.solo(jt, V100)
        assert solo.iter_time_s == pytest.approx(1.0 / steps)
        assert 0.0 < solo.util <= 1.0 and solo.mem_mib > 0


def test_unmeasured_pairs_and_triples_use_the_model(truth, table) -> None:
    types = table.job_types()
    unmeasured = [(a, b) for a in types for b in types
                  if (a, b) not in table.pairs and (b, a) not in table.pairs]
    assert unmeasured, "the v100 table has zero (unmeasured) pairs"
    a, b = unmeasured[0]
    assert all(0.0 < x < 1.0 for x in truth.colocated_throughput([a, b], V100))
    triple = truth.colocated_throughput([types[0], types[5], types[10]], V100)
    assert all(0.0 < x <= 1.0 for x in triple)
    assert truth.colocated_throughput([types[3]], V100) == [1.0]


def test_unknown_job_type_and_describe(truth) -> None:
    with pytest.raises(HorusInputError):
        truth.solo("vgg16/b32", V100)
    d = truth.describe()
    assert d["sha256"] and d["quirks"]["v100"]["zero_pairs"] > 0
    heldout = d["fit"]["v100"]["heldout"]
    assert 0.0 < heldout["mae"] < 0.5
    assert set(truth.job_types()) == set(load_gavel(GAVEL, "v100").solo)


def test_unknown_gpu_type_falls_back_to_v100_scaled(truth) -> None:
    fast = GPUType("A100", 40960, 2.0)
    assert truth.solo("resnet50/b64", fast).iter_time_s == pytest.approx(truth.solo("resnet50/b64", V100).iter_time_s / 2)
