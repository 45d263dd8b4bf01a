"""Pods whose model is an ONNX graph in a ConfigMap (``horus.io/onnx-configmap``): read through the official
client from the stub API server, turned into a catalog model, predicted, rebuilt identically after a restart."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from horus.catalog import model_info  # noqa: E402
from horus.k8s.api import KubeAPI  # noqa: E402
from horus.k8s.decide import Decider  # noqa: E402
from horus.k8s.extender import Extender  # noqa: E402
from horus.graph.onnx_features import onnx_model_info  # noqa: E402
from horus.k8s.onnx_models import OnnxModels  # noqa: E402
from horus.k8s.predictor import PodPredictor  # noqa: E402
from horus.k8s.resources import PodError, pod_job_spec  # noqa: E402
from horus.k8s.server import Resync, create_app  # noqa: E402
from horus.k8s.store import ClusterStore  # noqa: E402
from horus.predict.analytic import AnalyticPredictor  # noqa: E402
from k8s_helpers import StubAPIServer, gpu_node, gpu_pod, serve  # noqa: E402


def mlp_onnx(width: int = 64, hidden: int = 32, out: int = 10) -> bytes:
    """A two-layer MLP (Gemm, Relu, Gemm) with a static batch of 1."""
    def weight(name: str, rows: int, cols: int) -> Any:
        return helper.make_tensor(name, TensorProto.FLOAT, [rows, cols], [0.01] * (rows * cols))

    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "w2"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, out])],
        initializer=[weight("w1", width, hidden), weight("w2", hidden, out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def configmap(name: str, key: str, data: bytes, ns: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": "1"},
            "binaryData": {key: base64.b64encode(data).decode()}}


def onnx_pod(name: str, ref: str = "nets/mlp.onnx", **kwargs: Any) -> dict[str, Any]:
    return gpu_pod(name, model=None, annotations={"horus.io/onnx-configmap": ref, "horus.io/batch-size": "32"},
                   **kwargs)


def test_graph_features_per_sample() -> None:
    info, batch = onnx_model_info(mlp_onnx(), "onnx-test", "unit")
    assert batch >= 1
    assert info.params == 64 * 32 + 32 * 10
    assert info.forward_flops_per_sample == 2 * (64 * 32 + 32 * 10)
    assert info.op_counts["linear"] == 2 and info.op_counts["activation"] == 1 and info.family == "onnx"


def test_onnx_pod_is_predicted_bound_and_rebuilt_after_restart() -> None:
    pods = [onnx_pod("a"), onnx_pod("b")]
    with StubAPIServer([gpu_node("n1", 2)], pods, configmaps=[configmap("nets", "mlp.onnx", mlp_onnx())]) as stub:
        def extender() -> Extender:
            api = KubeAPI.at(stub.url)
            ext = Extender(ClusterStore(PodPredictor(AnalyticPredictor()), onnx=OnnxModels(api.get_configmap)),
                           Decider("horus-paper"), api)
            Resync(ext, 60).sync_once()
            return ext

        first = extender()
        with serve(create_app(first)) as url:
            for pod in pods:
                assert httpx.post(url + "/filter", json={"Pod": pod, "NodeNames": ["n1"]}).json()["NodeNames"] == ["n1"]
                bind = {"PodName": pod["metadata"]["name"], "PodNamespace": "default",
                        "PodUID": pod["metadata"]["uid"], "Node": "n1"}
                assert httpx.post(url + "/bind", json=bind).json() == {"Error": ""}
            before = httpx.get(url + "/state").json()
        spec = pod_job_spec(pods[0], onnx=first.store.onnx)
        assert spec.model.startswith("onnx-") and spec.batch_size == 32
        assert model_info(spec.model).params == 64 * 32 + 32 * 10
        # the load is the analytic belief about the graph (an idle GPU each: Horus prefers idle to shared)
        from horus.gpu_types import PRESETS

        pred = AnalyticPredictor().predict(spec, PRESETS["V100"])
        assert before["load"]["n1"]["residents"] == [1, 1]
        assert before["load"]["n1"]["pred_mem_mib"] == [round(pred.mem_mib, 6)] * 2
        assert before["load"]["n1"]["pred_util"] == [round(pred.util, 9)] * 2
        configmap_gets = [c for c in stub.calls_of("GET") if "/configmaps/" in c["path"]]
        assert len(configmap_gets) == 1  # cached per ConfigMap reference
        second = extender()
        with serve(create_app(second)) as url:
            assert httpx.get(url + "/state").json()["load"] == before["load"]


@pytest.mark.parametrize("ref,cms,message", [
    ("nets/mlp.onnx", [], "not found"),
    ("nets/other.onnx", [configmap("nets", "mlp.onnx", b"x")], "no key 'other.onnx'"),
    ("nets/mlp.onnx", [configmap("nets", "mlp.onnx", b"not an onnx graph")], "not a valid ONNX model"),
    ("nets", [], "expected '<configmap>/<key>'"),
])
def test_bad_references_are_filter_errors(ref: str, cms: list[dict[str, Any]], message: str) -> None:
    pod = onnx_pod("p", ref=ref)
    with StubAPIServer([gpu_node("n1", 1)], [pod], configmaps=cms) as stub:
        api = KubeAPI.at(stub.url)
        ext = Extender(ClusterStore(PodPredictor(AnalyticPredictor()), onnx=OnnxModels(api.get_configmap)),
                       Decider("horus-paper"), api)
        Resync(ext, 60).sync_once()
        with serve(create_app(ext)) as url:
            result = httpx.post(url + "/filter", json={"Pod": pod, "NodeNames": ["n1"]}).json()
            assert result["NodeNames"] == [] and "horus.io/onnx-configmap" in result["Error"]
            assert message in result["Error"]


def test_without_api_access_the_annotation_is_refused() -> None:
    with pytest.raises(PodError, match="cannot read ConfigMaps"):
        pod_job_spec(onnx_pod("p"))
