"""A training step's operator table derived from an ONNX inference graph: exact matrix FLOPs, backward ops as
autograd would run them, and physical predictions close to a zoo model's recorded step (the bound measured on
resnet18_cifar / resnet50 / mobilenet_v2 exports: iteration time within 40 %, memory within 30 %, utilization
within 15 points)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper

from horus.catalog import register_model, registered_ops
from horus.errors import HorusInputError
from horus.gpu_types import gpu_spec, preset
from horus.graph.onnx_features import onnx_file_info
from horus.graph.onnx_ops import onnx_file_ops, onnx_model_analysis
from horus.jobs import JobSpec
from horus.predict.analytic import AnalyticPredictor
from horus.predict.physical import PhysicalPredictor, estimate, shipped_params
from horus.predict.workload import catalog_workload


def mlp(batch: int = 4, width: int = 64, hidden: int = 32, out: int = 10) -> bytes:
    """Gemm(+bias) -> Relu -> Gemm at a static batch."""
    def tensor(name: str, dims: list[int]) -> Any:
        n = 1
        for d in dims:
            n *= d
        return helper.make_tensor(name, TensorProto.FLOAT, dims, [0.01] * n)

    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Reshape", ["r", "shape"], ["r2"]), helper.make_node("Gemm", ["r2", "w2"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, out])],
        initializer=[tensor("w1", [width, hidden]), tensor("b1", [hidden]), tensor("w2", [hidden, out]),
                     helper.make_tensor("shape", TensorProto.INT64, [2], [batch, hidden])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_mlp_step_has_the_backward_autograd_runs() -> None:
    info, ops = onnx_model_analysis(mlp(), "onnx-mlp-test", "unit")
    matrix = [r for r in ops if r["kind"] == "matrix"]
    flops = sum(r["count"] * r["flops_per_sample"] for r in matrix)
    # first Gemm: forward + weight gradient (its input is the data: no input gradient); second: all three
    assert flops == pytest.approx(2 * 64 * 32 * 2 + 2 * 32 * 10 * 3)
    assert sum(r["count"] for r in matrix) == 5
    assert [r["count"] for r in ops if r["kind"] == "param_tensors"] == [3]  # w1, b1, w2 (not the int64 shape)
    assert sum(r["count"] for r in ops if r["kind"] == "host") == 1  # the Reshape
    assert all(r["flops_fixed"] == 0.0 and r["bytes_per_sample"] >= 0 for r in ops)
    # weights are the fixed part: the same graph at batch 8 has the same fixed bytes and per-sample costs
    _, ops8 = onnx_model_analysis(mlp(batch=8), "onnx-mlp-test8", "unit")
    assert sorted(map(str, ops)) == sorted(map(str, ops8))
    register_model(info, ops)
    assert registered_ops(info.name) == ops
    w = catalog_workload(info.name)
    assert w.params == 64 * 32 + 32 + 32 * 10 and w.param_tensors == 3


def test_registered_onnx_model_is_predicted_physically() -> None:
    info, ops = onnx_model_analysis(mlp(), "onnx-mlp-phys", "unit")
    register_model(info, ops)
    job = JobSpec("j", 0.0, 1, info.name, 256, 1.0)
    phys = PhysicalPredictor().predict(job, preset("V100"))
    assert phys != AnalyticPredictor().predict(job, preset("V100"))
    assert 0.0 < phys.util <= 1.0 and phys.iter_time_s > 0 and phys.mem_mib > 0
    register_model(info)  # re-registered without rows: none kept
    assert registered_ops(info.name) is None


def test_malformed_file_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(HorusInputError) as err:
        onnx_model_analysis(b"not a model", "onnx-bad", "configmap ns/x")
    assert str(err.value).startswith("configmap ns/x") and "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["resnet18_cifar"])
def test_exported_zoo_model_is_close_to_its_recorded_step(name: str, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from horus.zoo import get_entry

    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    try:
        entry = get_entry(name)
        model = entry.build(entry.default_input_size)
        path = tmp_path / "m.onnx"
        torch.onnx.export(model.train(), entry.example_input(8, entry.default_input_size, "cpu"), str(path),
                          dynamo=True, verbose=False)
    finally:
        logging.disable(logging.NOTSET)
    info, _ = onnx_file_info(path, f"onnx-test-{name}", "unit")
    register_model(info, onnx_file_ops(path))
    recorded, derived = catalog_workload(name), catalog_workload(info.name)
    matrix_flops = [(w.flops[:, 1] * w.count)[w.mask("matrix")].sum() for w in (recorded, derived)]
    assert matrix_flops[1] == pytest.approx(matrix_flops[0], rel=0.01)
    for gpu, batch in (("V100", 32), ("A100-40GB", 128)):
        ref, got = (estimate(w, batch, gpu_spec(gpu), shipped_params()) for w in (recorded, derived))
        assert abs(got.iter_time_s / ref.iter_time_s - 1) < 0.40
        assert abs(got.mem_mib / ref.mem_mib - 1) < 0.30
        assert abs(got.util - ref.util) < 0.15


def test_service_upload_row_keeps_the_step_for_the_physical_predictor(tmp_path: Path) -> None:
    """What the service stores for an upload (JSON) registers the derived step again after a restart, so the
    service's physical predictor predicts it itself instead of falling back to ``analytic``."""
    import json

    from horus.service.models_onnx import catalog_row_from_file, register_catalog_row
    from horus.service.predictor import ServicePredictor

    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp())
    row = json.loads(json.dumps(catalog_row_from_file(path, "onnx-upload-test")))
    register_catalog_row("onnx-upload-test", row)
    job = JobSpec("j", 0.0, 1, "onnx-upload-test", 4, 1.0)
    served = ServicePredictor(PhysicalPredictor()).predict(job, preset("V100"))
    assert served == PhysicalPredictor().predict(job, preset("V100"))
    assert served != AnalyticPredictor().predict(job, preset("V100"))
    old = {k: v for k, v in row.items() if k != "ops"}  # stored before rows were derived: the fallback
    register_catalog_row("onnx-upload-old", old)
    job = JobSpec("j", 0.0, 1, "onnx-upload-old", 4, 1.0)
    assert ServicePredictor(PhysicalPredictor()).predict(job, preset("V100")) == \
        AnalyticPredictor().predict(job, preset("V100"))
