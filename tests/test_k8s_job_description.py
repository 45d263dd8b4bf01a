"""Pod annotations horus.io/input-size, horus.io/precision and horus.io/optimizer reach the PodJobSpec and the
extender's belief; bad values are the extender's one-line errors (filter Error, prioritize 400)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from k8s_helpers import StubAPIServer, gpu_node, gpu_pod, serve

from horus.k8s.api import KubeAPI
from horus.k8s.decide import Decider
from horus.k8s.extender import Extender
from horus.k8s.predictor import PodPredictor
from horus.k8s.resources import PodError, pod_job_spec
from horus.k8s.server import Resync, create_app
from horus.k8s.store import ClusterStore
from horus.predict.physical import PhysicalPredictor


@contextmanager
def extender_on(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Iterator[str]:
    with StubAPIServer(nodes, pods) as stub:
        extender = Extender(ClusterStore(PodPredictor(PhysicalPredictor())), Decider("horus-paper"),
                            KubeAPI.at(stub.url))
        Resync(extender, 60).sync_once()
        with serve(create_app(extender)) as url:
            yield url


def resident(annotations: dict[str, str]) -> dict[str, Any]:
    return gpu_pod("res", model="resnet50", batch=128, node="n1", phase="Running",
                   annotations={"horus.io/gpu-ids": "0", **annotations})


def test_annotations_round_trip_into_the_pod_job_spec() -> None:
    pod = gpu_pod("p", model="resnet18", batch=128, annotations={
        "horus.io/input-size": "32", "horus.io/precision": "amp", "horus.io/optimizer": "sgd"})
    spec = pod_job_spec(pod)
    assert (spec.input_size, spec.precision, spec.optimizer) == (32, "amp-fp16", "sgd")
    assert spec.job_type == "resnet18/b128/s32/amp-fp16/sgd"
    plain = pod_job_spec(gpu_pod("q", model="resnet18", batch=128))
    assert (plain.input_size, plain.precision, plain.optimizer) == (None, None, None)


def test_the_extenders_belief_reads_them() -> None:
    """A placed pod's predicted memory in /state: at 32 px with SGD far below the catalog's 224 px with Adam."""
    loads = {}
    for label, stated in (("catalog", {}), ("cifar", {"horus.io/input-size": "32", "horus.io/optimizer": "sgd"}),
                          ("amp", {"horus.io/precision": "bf16"})):
        with extender_on([gpu_node("n1", 1)], [resident(stated)]) as url:
            load = httpx.get(url + "/state").json()["load"]["n1"]
            assert load["residents"] == [1]
            loads[label] = (load["pred_mem_mib"][0], load["pred_util"][0])
    assert loads["cifar"][0] < loads["catalog"][0] / 3
    assert loads["amp"] != loads["catalog"]


@pytest.mark.parametrize("annotations, names", [
    ({"horus.io/input-size": "16"}, ("horus.io/input-size", "at least 32")),
    ({"horus.io/input-size": "0"}, ("horus.io/input-size", "65,536")),
    ({"horus.io/input-size": "big"}, ("horus.io/input-size", "integer")),
    ({"horus.io/input-size": "70000"}, ("horus.io/input-size",)),
    ({"horus.io/precision": "int8"}, ("horus.io/precision", "amp-fp16")),
    ({"horus.io/optimizer": "lamb"}, ("horus.io/optimizer", "adam")),
])
def test_bad_annotations_are_the_extenders_clear_errors(annotations: dict[str, str], names: tuple[str, ...]) -> None:
    bad = gpu_pod("bad", model="resnet18", batch=32, annotations=annotations)
    with pytest.raises(PodError) as info:
        pod_job_spec(bad)
    assert all(n in str(info.value) for n in names) and "\n" not in str(info.value)
    with extender_on([gpu_node("n1", 1)], [bad]) as url:
        result = httpx.post(url + "/filter", json={"Pod": bad, "Nodes": None, "NodeNames": ["n1"]}).json()
        assert result["NodeNames"] == [] and all(n in result["Error"] for n in names), result
        r = httpx.post(url + "/prioritize", json={"Pod": bad, "Nodes": None, "NodeNames": ["n1"]})
        assert r.status_code == 400 and names[0] in r.json()["Error"]


def test_a_description_without_a_model_is_refused() -> None:
    pod = gpu_pod("opaque", model=None, annotations={"horus.io/precision": "amp"})
    with pytest.raises(PodError, match="horus.io/precision.*horus.io/model"):
        pod_job_spec(pod)
