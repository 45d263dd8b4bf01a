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
    # two more FP32 copies of every parameter tensor, each rounded up by the caching allocator
    assert memory_mib(w, 8, g, p, "adam") - memory_mib(w, 8, g, p, "sgd") == pytest.approx(
        (1 + p.alloc_frac) * w.params * 8 / 2**20, rel=1e-3)


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


def test_precision_sets_the_matrix_peak() -> None:
    from horus.predict.physical import matrix_peak_flops

    a100, v100, t4 = gpu_spec("A100-40GB"), gpu_spec("V100"), gpu_spec("T4")
    assert matrix_peak_flops(a100, "fp32") == a100.fp32_tflops * 1e12  # TF32 off: CUDA cores
    assert matrix_peak_flops(a100, "tf32") == a100.tf32_tflops * 1e12
    assert matrix_peak_flops(a100, "bf16") == matrix_peak_flops(a100, "amp-fp16") == a100.fp16_tflops * 1e12
    for spec in (v100, t4):  # no BF16 tensor cores before Ampere: bf16 matmuls at the FP32 rate
        assert matrix_peak_flops(spec, "bf16") == spec.fp32_tflops * 1e12 < matrix_peak_flops(spec, "amp-fp16")
    assert matrix_peak_flops(v100, True) == matrix_peak_flops(v100, "amp-fp16")  # the old amp flag
    assert matrix_peak_flops(v100, False) == matrix_peak_flops(v100, "tf32")


def test_estimate_follows_the_precision() -> None:
    params = shipped_params()
    w, a100, v100 = catalog_workload("resnet50"), gpu_spec("A100-40GB"), gpu_spec("V100")
    t = {p: estimate(w, 64, a100, params, precision=p) for p in ("fp32", "tf32", "amp-fp16", "bf16")}
    assert t["fp32"].iter_time_s > t["tf32"].iter_time_s > t["amp-fp16"].iter_time_s
    assert t["bf16"].iter_time_s == pytest.approx(t["amp-fp16"].iter_time_s, rel=0.05)  # no loss scaling
    assert t["amp-fp16"].mem_mib < t["tf32"].mem_mib  # activations halve (weights gain a half copy)
    assert estimate(w, 64, v100, params, precision="bf16").iter_time_s > estimate(
        w, 64, v100, params, precision="amp-fp16").iter_time_s
    assert estimate(w, 64, v100, params, amp=True) == estimate(w, 64, v100, params, precision="amp-fp16")


def test_predictor_reads_the_job_precision() -> None:
    predictor = PhysicalPredictor()
    a100 = PRESETS["A100-40GB"]
    stated = {p: predictor.predict(JobSpec("j", 0.0, 1, "bert_base_squad", 16, 1.0, precision=p), a100)
              for p in ("fp32", "tf32", "amp-fp16")}
    default = predictor.predict(job("bert_base_squad", 16), a100)
    assert default == stated["tf32"]  # a job that states none gets tf32, today's default
    assert stated["fp32"].iter_time_s > stated["tf32"].iter_time_s > stated["amp-fp16"].iter_time_s
    assert PhysicalPredictor(amp=True).predict(job("bert_base_squad", 16), a100) == stated["amp-fp16"]


def test_kernel_floors_are_gpu_side_and_apart_from_dispatch() -> None:
    from dataclasses import replace

    params = shipped_params()
    g = params.globals
    assert 1e-6 <= g.min_kernel_s <= 4e-6 and 2e-6 <= g.min_matrix_s <= 10e-6
    w, spec = catalog_workload("ncf_ml1m"), gpu_spec("V100")
    base = estimate(w, 256, spec, params)
    slower_host = replace(params, per_gpu={**params.per_gpu, "V100": replace(params.for_gpu("V100"),
                                                                            dispatch_s=2 * params.for_gpu("V100").dispatch_s)})
    more = estimate(w, 256, spec, slower_host)
    assert more.busy_s == base.busy_s and more.host_s > base.host_s  # host launch cost is not GPU busy time
    assert more.util < base.util  # a launch-bound job idles the GPU while its host launches


def test_allocator_reserve_rounds_up() -> None:
    from horus.predict.physical import MIB, reserved_bytes

    assert reserved_bytes([(100.0, 1.0)]) == 512 / 2 + 100 + 2 * MIB / 2  # a small block in a 2 MiB segment
    big = reserved_bytes([(64 * MIB, 1.0)])
    assert big == 65 * MIB  # a large block rounds to 2 MiB: half a unit expected
    assert reserved_bytes([(4 * MIB, 3.0)]) > 12 * MIB  # 1-10 MiB blocks share 20 MiB segments
    # the cuBLAS workspace segment: 20 MiB before Hopper, larger from Hopper on
    from horus.predict.physical import cublas_workspace_bytes

    assert cublas_workspace_bytes(gpu_spec("A100-40GB")) < cublas_workspace_bytes(gpu_spec("H100"))


def test_uncalibrated_gpu_takes_its_architecture() -> None:
    params = shipped_params()
    a100_80 = params.for_gpu("A100-80GB")  # not calibrated; A100-40GB (ampere) and A40 are
    assert "A100-80GB" not in params.per_gpu
    assert a100_80.dispatch_s == params.default.dispatch_s
    assert a100_80.context_mib == pytest.approx(params.per_gpu["A100-40GB"].context_mib, rel=0.01)
