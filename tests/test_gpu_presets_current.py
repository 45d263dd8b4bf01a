"""Presets for current GPUs (RTX 3090/4090, RTX A6000, L4, L40S): cluster specs load them, predictors and truths use them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from horus.clusterspec import load_cluster
from horus.gpu_types import PRESETS, gpu_spec
from horus.jobs import JobSpec
from horus.learn.gpus import resolve_gpu
from horus.predict.base import PREDICTORS
from horus.truth.parametric import ParametricTruth

CURRENT = ("RTX3090", "RTX4090", "RTX-A6000", "L4", "L40S")
YAML = """\
inter_node_gbps: 12.5
nodes:
  - {name: g3090, gpu_type: RTX3090, gpus: 4, intra_link: pcie4}
  - {name: g4090, gpu_type: RTX4090, gpus: 4, intra_link: pcie4}
  - {name: a6000, gpu_type: RTX-A6000, gpus: 2, intra_link: pcie4}
  - {name: l4, count: 2, gpu_type: L4, gpus: 8, intra_link: pcie}
  - {name: l40s, gpu_type: L40S, gpus: 8, intra_link: pcie4}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    path: Path = tmp_path_factory.mktemp("spec") / "cluster.yaml"
    path.write_text(YAML)
    return load_cluster(path)


def test_a_cluster_yaml_naming_current_gpus_loads(cluster) -> None:
    assert cluster.num_gpus == 4 + 4 + 2 + 16 + 8
    names = {g.gpu_type.name for g in cluster.gpus}
    assert names == set(CURRENT)
    memory = {g.gpu_type.name: g.gpu_type.memory_mib for g in cluster.gpus}
    assert memory == {"RTX3090": 24576, "RTX4090": 24576, "RTX-A6000": 49152, "L4": 24576, "L40S": 49152}


@pytest.mark.parametrize("name, fp32, fp16, bw", [
    ("RTX3090", 35.6, 71, 936), ("RTX4090", 82.6, 165.2, 1008), ("RTX-A6000", 38.7, 154.8, 768),
    ("L4", 30.3, 121, 300), ("L40S", 91.6, 362, 864)])
def test_each_preset_has_its_own_sourced_spec(name: str, fp32: float, fp16: float, bw: float) -> None:
    spec = gpu_spec(name)
    assert spec.name == name and (spec.fp32_tflops, spec.fp16_tflops, spec.mem_bw_gbs) == (fp32, fp16, bw)
    assert spec.memory_gib * 1024 == PRESETS[name].memory_mib and spec.source


@pytest.mark.parametrize("nvml, expected", [("NVIDIA RTX A6000", "RTX-A6000"), ("NVIDIA GeForce RTX 4090", "RTX4090"),
                                            ("NVIDIA GeForce RTX 3090", "RTX3090"), ("NVIDIA L4", "L4"),
                                            ("NVIDIA L40S", "L40S")])
def test_nvml_names_resolve_to_the_new_presets(nvml: str, expected: str) -> None:
    assert gpu_spec(nvml).name == expected and resolve_gpu(nvml).name == expected


@pytest.mark.parametrize("predictor", ["physical", "analytic"])
def test_predictors_give_finite_predictions_on_current_gpus(cluster, predictor: str) -> None:
    model = PREDICTORS.create(predictor)
    for gpu_type in {g.gpu_type.name: g.gpu_type for g in cluster.gpus}.values():
        for name, batch in (("resnet50", 64), ("bert_base", 16), ("resnet18_cifar", 128)):
            p = model.predict(JobSpec("j", 0.0, 1, name, batch, 1.0), gpu_type)
            assert 0 < p.util <= 1 and 0 < p.mem_mib and math.isfinite(p.mem_mib)
            assert 0 < p.iter_time_s and math.isfinite(p.iter_time_s)
    if predictor == "physical":  # it reads the spec: a 4090 (165 TFLOPS, 1 TB/s) beats an L4 (121, 300 GB/s)
        job = JobSpec("j", 0.0, 1, "resnet50", 64, 1.0)
        assert model.predict(job, PRESETS["RTX4090"]).iter_time_s < model.predict(job, PRESETS["L4"]).iter_time_s


def test_the_parametric_truth_runs_on_current_gpus(cluster) -> None:
    truth = ParametricTruth()
    solo = {t: truth.solo("resnet50/b64", PRESETS[t]) for t in CURRENT}
    assert all(math.isfinite(s.iter_time_s) and s.iter_time_s > 0 for s in solo.values())
    assert solo["L40S"].iter_time_s < solo["RTX3090"].iter_time_s  # speed 1.65 vs 0.75
