"""Malformed and unknown payloads: every verb answers (200 or 400 with an ``Error``), never 500, never dies.

Bounded hypothesis fuzz over real HTTP: arbitrary JSON (non-finite numbers included), and valid kube-scheduler
messages with one field replaced by arbitrary JSON (the likelier mistakes: wrong types where objects, names or
quantities go).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horus.k8s.api import KubeAPI
from horus.k8s.decide import Decider
from horus.k8s.extender import Extender
from horus.k8s.predictor import PodPredictor
from horus.k8s.server import Resync, create_app
from horus.k8s.store import ClusterStore
from horus.predict.analytic import AnalyticPredictor
from k8s_helpers import StubAPIServer, gpu_node, gpu_pod, serve

KEYS = ["Pod", "Nodes", "NodeNames", "PodName", "PodNamespace", "PodUID", "Node", "metadata", "spec", "status",
        "name", "namespace", "uid", "annotations", "labels", "containers", "resources", "limits", "requests",
        "items", "nodeName", "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores", "horus.io/model",
        "horus.io/batch-size", "horus.io/gpu-type", "horus.io/gpu-ids", "horus.io/onnx-configmap"]
# floats include NaN and +-Infinity (json.dumps writes them as bare NaN / Infinity, which Python's json reads);
# digits beyond ASCII and beyond int()'s 4,300-digit limit; integers far beyond int64
SCALARS = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12) \
    | st.sampled_from(["1", "0", "-1", "1.5", "64", "resnet50", "V100", "n1", "Infinity", "", "\u00b2", "\u0661",
                       "9" * 5000, "1e999", str(2**31), "0,1", "GPU-x,0"])
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5), max_leaves=25)

VALID = {
    "filter": {"Pod": gpu_pod("p"), "Nodes": None, "NodeNames": ["n1", "n2"]},
    "prioritize": {"Pod": gpu_pod("p", gpus=2, gpumem=4000), "Nodes": {"metadata": {}, "items": [gpu_node("n1", 2)]},
                   "NodeNames": None},
    "bind": {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": "n1"},
}


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + (i,))
    return out


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    obj = copy.deepcopy(obj)
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with StubAPIServer([gpu_node("n1", 2), gpu_node("n2", 1)], [gpu_pod("p")]) as stub:
        extender = Extender(ClusterStore(PodPredictor(AnalyticPredictor())), Decider("horus-paper"), KubeAPI.at(stub.url))
        Resync(extender, 60).sync_once()
        with serve(create_app(extender)) as base:
            yield base


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as c:
        yield c


def _check(client: httpx.Client, url: str, verb: str, body: bytes) -> None:
    r = client.post(f"{url}/{verb}", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code in (200, 400), (r.status_code, r.text[:300])
    payload = r.json()
    if r.status_code == 400:
        assert isinstance(payload, dict) and payload["Error"].startswith(f"{verb}: ")
        assert "\n" not in payload["Error"]
    elif verb == "prioritize":
        assert isinstance(payload, list) and all(0 <= h["Score"] <= 10 for h in payload)
    else:
        assert isinstance(payload, dict) and isinstance(payload["Error"], str)


FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(verb=st.sampled_from(sorted(VALID)), body=JSON)
def test_arbitrary_json(url: str, client: httpx.Client, verb: str, body: Any) -> None:
    _check(client, url, verb, json.dumps(body).encode())


@FUZZ
@given(verb=st.sampled_from(sorted(VALID)), data=st.data(), value=JSON)
def test_valid_messages_with_one_field_replaced(url: str, client: httpx.Client, verb: str, data: st.DataObject,
                                                value: Any) -> None:
    message = VALID[verb]
    path = data.draw(st.sampled_from(_paths(message)))
    _check(client, url, verb, json.dumps(_replace(message, path, value)).encode())


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(verb=st.sampled_from(sorted(VALID)), body=st.binary(max_size=64))
def test_arbitrary_bytes(url: str, client: httpx.Client, verb: str, body: bytes) -> None:
    _check(client, url, verb, body)


def test_server_still_healthy_after_fuzz(url: str, client: httpx.Client) -> None:
    assert client.get(url + "/healthz").status_code == 200
    r = client.post(url + "/filter", json=VALID["filter"])
    assert r.status_code == 200 and r.json()["NodeNames"] == ["n1", "n2"]
