from __future__ import annotations

import ast
import inspect

import pytest

import horus.predict.analytic as analytic
from horus.catalog import load_catalog
from horus.cluster import GPUType
from horus.jobs import JobSpec
from horus.predict.base import PREDICTORS

V100 = GPUType("V100", 16384, 1.0)


def _spec(model: str, batch: int) -> JobSpec:
    return JobSpec("j", 0.0, 1, model, batch, 100.0)


@pytest.mark.parametrize("model", sorted(load_catalog()))
def test_sane_prediction_for_every_catalog_model(model: str) -> None:
    predictor = PREDICTORS.create("analytic")
    info = load_catalog()[model]
    mib = 1024.0 * 1024.0
    for batch in (1, 16, 64):
        p = predictor.predict(_spec(model, batch), V100)
        assert 0.0 < p.util <= 1.0
        # at least the fp32 weights plus a CUDA context; at most 10x the model's own footprint
        # (weights, gradients, Adam moments and activations, fp32), so a unit slip (bytes/KiB/GiB) fails
        footprint_mib = (4 * 4 * info.params + info.activation_bytes_per_sample * batch) / mib
        assert 500 + 4 * info.params / mib < p.mem_mib < 10 * footprint_mib + 2000
        # no faster than a V100's fp32 peak (15.7 TFLOP/s), no slower than 1 % of it plus a second
        work_s = info.train_flops_per_sample * batch / 15.7e12
        assert work_s < p.iter_time_s < 100 * work_s + 1.0


def test_monotone_in_batch_and_gpu_speed() -> None:
    predictor = PREDICTORS.create("analytic")
    small, big = predictor.predict(_spec("resnet50", 16), V100), predictor.predict(_spec("resnet50", 128), V100)
    assert big.iter_time_s > small.iter_time_s and big.mem_mib > small.mem_mib and big.util >= small.util
    slow = predictor.predict(_spec("resnet50", 16), GPUType("K80", 12288, 0.3))
    assert slow.iter_time_s > small.iter_time_s


def test_no_reference_to_a_truth_model() -> None:
    tree = ast.parse(inspect.getsource(analytic))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not any(m and m.startswith("horus.truth") and m != "horus.truth.memory" for m in imported)
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {"TruthModel", "TRUTH_MODELS", "ParametricTruth", "GavelTruth", "SoloTruth"}
