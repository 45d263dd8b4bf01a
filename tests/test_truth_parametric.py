from __future__ import annotations

import math

import pytest

from horus.catalog import load_catalog
from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.jobs import parse_job_type
from horus.truth.base import TRUTH_MODELS
from horus.truth.parametric import ParametricTruth

V100 = GPUType("V100", 16384, 1.0)
SLOW = GPUType("K80", 12288, 0.3)


@pytest.fixture(scope="module")
def truth() -> ParametricTruth:
    return TRUTH_MODELS.create("parametric")  # type: ignore[return-value]


def test_solo_is_sane_for_every_catalog_model_and_default_type(truth: ParametricTruth) -> None:
    types = truth.job_types() + [f"{m}/b3" for m in load_catalog()]
    for jt in types:
        s = truth.solo(jt, V100)
        assert 0.0 < s.util <= 1.0, jt
        assert 500 < s.mem_mib < 1e6, jt
        assert 0.0 < s.iter_time_s < 100, jt


def test_default_job_types_cover_gavel_like_mix(truth: ParametricTruth) -> None:
    models = {parse_job_type(jt)[0] for jt in truth.job_types()}
    assert {"resnet18_cifar", "resnet50", "transformer", "lstm_lm", "recoder", "cyclegan", "a3c"} <= models


def test_bigger_batch_means_more_work_and_memory(truth: ParametricTruth) -> None:
    small, big = truth.solo("resnet50/b16", V100), truth.solo("resnet50/b128", V100)
    assert big.iter_time_s > small.iter_time_s and big.mem_mib > small.mem_mib


def test_slower_gpu_is_slower(truth: ParametricTruth) -> None:
    assert truth.solo("vgg16/b32", SLOW).iter_time_s > truth.solo("vgg16/b32", V100).iter_time_s


def test_deterministic_in_seed_and_seed_matters() -> None:
    a, b, c = ParametricTruth(seed=1), ParametricTruth(seed=1), ParametricTruth(seed=2)
    assert a.solo("bert_base/b16", V100) == b.solo("bert_base/b16", V100)
    assert a.deviations("bert_base/b16") != c.deviations("bert_base/b16")


def test_alone_is_one_and_pairs_slow_down(truth: ParametricTruth) -> None:
    assert truth.colocated_throughput(["resnet50/b64"], V100) == [1.0]
    pair = truth.colocated_throughput(["resnet50/b64", "lstm_lm/b20"], V100)
    assert all(0.0 < x < 1.0 for x in pair)


def test_adding_co_runner_never_speeds_anyone_up(truth: ParametricTruth) -> None:
    types = ["recoder/b512", "transformer/b64", "resnet50/b32", "lstm_lm/b5"]
    previous = [1.0]
    for n in range(2, len(types) + 1):
        now = truth.colocated_throughput(types[:n], V100)
        for before, after in zip(previous, now):
            assert after <= before + 1e-12
        previous = now


def test_heavier_co_runner_slows_more(truth: ParametricTruth) -> None:
    light, heavy = "lstm_lm/b5", "gpt2/b8"
    assert truth.solo(heavy, V100).util > truth.solo(light, V100).util
    with_light = truth.colocated_throughput(["resnet50/b32", light], V100)[0]
    with_heavy = truth.colocated_throughput(["resnet50/b32", heavy], V100)[0]
    assert with_heavy < with_light


def test_order_and_repeats_are_consistent(truth: ParametricTruth) -> None:
    ab = truth.colocated_throughput(["resnet18/b64", "recoder/b1024"], V100)
    ba = truth.colocated_throughput(["recoder/b1024", "resnet18/b64"], V100)
    assert ab == ba[::-1]
    same = truth.colocated_throughput(["resnet18/b64"] * 3, V100)
    assert same[0] == same[1] == same[2] and math.isfinite(same[0])


def test_bad_job_type_is_rejected(truth: ParametricTruth) -> None:
    with pytest.raises(HorusInputError):
        truth.solo("resnet50-b64", V100)
    with pytest.raises(HorusInputError):
        truth.solo("nosuchmodel/b8", V100)


def test_describe_labels_synthetic_deviations(truth: ParametricTruth) -> None:
    d = truth.describe()
    assert d["name"] == "parametric" and "synthetic_deviations" in d


def test_batched_colocated_throughputs_are_the_single_calls_numbers(truth: ParametricTruth) -> None:
    from horus.truth.base import TruthModel
    from horus.truth.memory_deviation import MemoryDeviation

    jt = truth.job_types()
    sets = [[jt[0]], [], [jt[1], jt[0]], [jt[2], jt[2], jt[5]], [jt[7], jt[3], jt[7], jt[1]], jt[:9]]
    for model in (truth, MemoryDeviation(ParametricTruth(memory_overhead=False))):
        for gpu in (V100, SLOW):
            batched = model.colocated_throughputs(sets, gpu)
            assert batched == [model.colocated_throughput(s, gpu) for s in sets]  # exactly, not approximately
            assert batched == TruthModel.colocated_throughputs(model, sets, gpu)
