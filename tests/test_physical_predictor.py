"""Physical (roofline + dispatch) predictor: GPU specs, per-operator workloads, estimates, memory."""

from __future__ import annotations

import warnings

import pytest

from horus.cluster import GPUType
from horus.gpu_types import PRESETS, SPECS, gpu_spec
from horus.jobs import JobSpec
from horus.predict.base import PREDICTORS
from horus.predict.physical import PhysicalParams, PhysicalPredictor, estimate, memory_mib, shipped_params
from horus.predict.workload import catalog_workload, mlp_workload


def job(model: str, batch: int) -> JobSpec:
    return JobSpec("j", 0.0, 1, model, batch, 1.0)


def test_every_preset_has_a_sourced_spec() -> None:
    for name in PRESETS:
        spec = gpu_spec(name)
        assert spec.name == name
        assert spec.source and spec.fp32_tflops > 0 and spec.mem_bw_gbs > 0 and spec.sms > 0
        assert spec.fp16_tflops >= spec.fp32_tflops and spec.tf32_tflops >= spec.fp32_tflops


@pytest.mark.parametrize("nvml, expected", [("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("Tesla V100-SXM2-16GB", "V100"),
                                            ("Quadro RTX 6000", "RTX6000"), ("NVIDIA H100 PCIe", "H100-PCIe"),
                                            ("Tesla T4", "T4"), ("NVIDIA A10", "A10")])
def test_nvml_names_resolve(nvml: str, expected: str) -> None:
    assert gpu_spec(nvml).name == expected


def test_unknown_gpu_maps_by_family_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="RTX 3080"):
        assert gpu_spec("NVIDIA GeForce RTX 3080").name == "RTX3090"
    with pytest.warns(UserWarning):
        assert gpu_spec("Mystery accelerator 9000").name in SPECS


def test_every_catalog_model_has_operators_and_a_prediction() -> None:
    import csv
    from importlib import resources

    from horus.catalog import parse_catalog

    predictor = PREDICTORS.create("physical")
    with resources.files("horus.data").joinpath("model_catalog.csv").open("r", newline="") as fh:
        shipped = parse_catalog(list(csv.DictReader(fh)), "model_catalog.csv")  # not models registered at run time
    for name in shipped:
        w = catalog_workload(name)
        assert w.count.sum() > 0 and w.param_tensors > 0
        p = predictor.predict(job(name, 8), PRESETS["V100"])
        assert 0 < p.util <= 1 and p.iter_time_s > 0 and p.mem_mib > 0


def test_unknown_gpu_type_predicts_without_crashing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = PhysicalPredictor().predict(job("resnet50", 32), GPUType("Z9000", 24 * 1024, 1.0))
    assert p.iter_time_s > 0


def test_physics_orders() -> None:
    params = shipped_params()
    w = catalog_workload("resnet50")
    small = estimate(w, 16, gpu_spec("V100"), params)
    large = estimate(w, 128, gpu_spec("V100"), params)
    assert large.iter_time_s > 4 * small.iter_time_s and large.mem_mib > small.mem_mib
    assert estimate(w, 64, gpu_spec("H100"), params).iter_time_s < estimate(w, 64, gpu_spec("K80"), params).iter_time_s
    v100 = gpu_spec("V100")
    assert estimate(w, 64, v100, params, amp=True).iter_time_s < estimate(w, 64, v100, params).iter_time_s
    # a launch-bound net (tiny per-op work) is host-bound: low GPU busy share
    tiny = estimate(catalog_workload("ncf_ml1m"), 32, gpu_spec("A100-40GB"), params)
    assert tiny.host_s > tiny.busy_s


def test_memory_terms_follow_the_optimizer() -> None:
    params = PhysicalParams()
    w = catalog_workload("bert_base")
    g, p = params.default, params.globals
    assert memory_mib(w, 8, g, p, "adam") - memory_mib(w, 8, g, p, "sgd") == pytest.approx(
        (1 + p.alloc_frac) * w.params * 8 / 2**20)


def test_mlp_workload_counts_training_flops() -> None:
    w = mlp_workload("m", 100, [("linear", 50, 100 * 50 + 50), ("ReLU", 50, 0), ("linear", 10, 50 * 10 + 10)])
    assert w.params == 100 * 50 + 50 + 50 * 10 + 10
    assert w.train_flops_per_sample == 6 * (100 * 50 + 50 * 10)
    flops, _ = w.at_batch(4)
    assert (flops * w.count).sum() == 4 * w.train_flops_per_sample


def test_bad_optimizer_is_input_error() -> None:
    from horus.errors import HorusInputError

    with pytest.raises(HorusInputError, match="optimizer"):
        PhysicalPredictor(optimizer="lion")
