"""kube-scheduler's own extender/v1 JSON, posted over real HTTP to the extender on 127.0.0.1.

The golden messages below are the ``expectJSON`` strings of ``TestCompatibility`` in
kubernetes/kubernetes ``staging/src/k8s.io/kube-scheduler/extender/v1/types_test.go`` (the file that
pins the wire format of ``types.go`` in the same directory): what kube-scheduler's ``encoding/json``
produces for ExtenderArgs, ExtenderFilterResult, ExtenderBindingArgs, ExtenderBindingResult and
HostPriority. That test also decodes the lower-cased JSON, so field names match case-insensitively.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from horus.k8s.api import KubeAPI
from horus.k8s.decide import Decider
from horus.k8s.extender import Extender
from horus.k8s.predictor import PodPredictor
from horus.k8s.server import Resync, create_app
from horus.k8s.store import ClusterStore
from horus.predict.analytic import AnalyticPredictor
from k8s_helpers import StubAPIServer, gpu_node, gpu_pod, serve

GOLDEN_EXTENDER_ARGS = (
    '{"Pod":{"metadata":{"name":"podname","creationTimestamp":null},"spec":{"containers":null},"status":{}},'
    '"Nodes":{"metadata":{},"items":[{"metadata":{"name":"nodename","creationTimestamp":null},"spec":{},'
    '"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},"nodeInfo":{"machineID":"","systemUUID":"",'
    '"bootID":"","kernelVersion":"","osImage":"","containerRuntimeVersion":"","kubeletVersion":"",'
    '"kubeProxyVersion":"","operatingSystem":"","architecture":""}}}]},"NodeNames":["node1"]}')
GOLDEN_FILTER_RESULT = (
    '{"Nodes":{"metadata":{},"items":[{"metadata":{"name":"nodename","creationTimestamp":null},"spec":{},'
    '"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},"nodeInfo":{"machineID":"","systemUUID":"",'
    '"bootID":"","kernelVersion":"","osImage":"","containerRuntimeVersion":"","kubeletVersion":"",'
    '"kubeProxyVersion":"","operatingSystem":"","architecture":""}}}]},"NodeNames":["node1"],'
    '"FailedNodes":{"foo":"bar"},"Error":"myerror"}')
GOLDEN_BINDING_ARGS = '{"PodName":"mypodname","PodNamespace":"mypodnamespace","PodUID":"mypoduid","Node":"mynode"}'
GOLDEN_BINDING_RESULT = '{"Error":"myerror"}'
GOLDEN_HOST_PRIORITY = '{"Host":"myhost","Score":1}'

# Go field names of ExtenderFilterResult in types.go (FailedAndUnresolvableNodes is newer than the golden).
FILTER_RESULT_FIELDS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


def _bare_pod(ns: str, name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": uid, "resourceVersion": "1"},
            "spec": {"containers": None}, "status": {"phase": "Pending"}}


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[str, StubAPIServer]]:
    nodes = [gpu_node("gpu-a", 4), gpu_node("gpu-b", 2)]
    pods = [_bare_pod("mypodnamespace", "mypodname", "mypoduid"), gpu_pod("train-1")]
    with StubAPIServer(nodes, pods) as stub:
        store = ClusterStore(PodPredictor(AnalyticPredictor()))
        extender = Extender(store, Decider("horus-paper"), KubeAPI.at(stub.url))
        Resync(extender, 60).sync_once()
        with serve(create_app(extender)) as url:
            yield url, stub


def _post(url: str, body: str) -> httpx.Response:
    return httpx.post(url, content=body.encode(), headers={"Content-Type": "application/json"}, timeout=10)


def test_golden_extender_args_filter_answers_a_filter_result_subset(env: tuple[str, StubAPIServer]) -> None:
    url, _ = env
    r = _post(url + "/filter", GOLDEN_EXTENDER_ARGS)
    assert r.status_code == 200
    result = r.json()
    assert set(json.loads(GOLDEN_FILTER_RESULT)) <= set(result) <= FILTER_RESULT_FIELDS
    # a pod without GPU requests is not Horus's business: every node passes, in the form it was sent
    sent = json.loads(GOLDEN_EXTENDER_ARGS)["Nodes"]["items"]
    assert result["Nodes"]["items"] == sent
    assert result["NodeNames"] == ["nodename"]
    assert result["FailedNodes"] == {} and result["FailedAndUnresolvableNodes"] == {} and result["Error"] == ""


def test_golden_is_decoded_case_insensitively_like_go(env: tuple[str, StubAPIServer]) -> None:
    url, _ = env
    upper = _post(url + "/filter", GOLDEN_EXTENDER_ARGS).json()
    lower = _post(url + "/filter", GOLDEN_EXTENDER_ARGS.lower()).json()
    assert lower["NodeNames"] == upper["NodeNames"] == ["nodename"]
    r = _post(url + "/prioritize", GOLDEN_EXTENDER_ARGS.lower())
    assert r.status_code == 200 and r.json() == [{"Host": "nodename", "Score": 0}]


def test_golden_prioritize_answers_a_bare_host_priority_list(env: tuple[str, StubAPIServer]) -> None:
    url, _ = env
    r = _post(url + "/prioritize", GOLDEN_EXTENDER_ARGS)
    assert r.status_code == 200
    body = r.json()
    assert isinstance(body, list) and len(body) == 1
    assert set(body[0]) == set(json.loads(GOLDEN_HOST_PRIORITY))
    assert body[0]["Host"] == "nodename" and isinstance(body[0]["Score"], int)


def test_golden_binding_args_bind_posts_the_binding(env: tuple[str, StubAPIServer]) -> None:
    url, stub = env
    r = _post(url + "/bind", GOLDEN_BINDING_ARGS)
    assert r.status_code == 200
    assert set(r.json()) == set(json.loads(GOLDEN_BINDING_RESULT)) and r.json()["Error"] == ""
    posts = [c for c in stub.calls_of("POST") if c["path"] == "/api/v1/namespaces/mypodnamespace/bindings"]
    assert len(posts) == 1
    binding = posts[0]["body"]
    assert binding["kind"] == "Binding" and binding["target"] == {"apiVersion": "v1", "kind": "Node", "name": "mynode"}
    assert binding["metadata"]["name"] == "mypodname" and binding["metadata"]["uid"] == "mypoduid"
    assert stub.pods[("mypodnamespace", "mypodname")]["spec"]["nodeName"] == "mynode"
    # binding it again is refused with an error in the result body (HTTP 200, as kube-scheduler expects)
    again = _post(url + "/bind", GOLDEN_BINDING_ARGS).json()
    assert "already bound" in again["Error"]


def test_node_cache_capable_request_with_a_gpu_pod(env: tuple[str, StubAPIServer]) -> None:
    """nodeCacheCapable: true -> kube-scheduler sends ``"Nodes": null`` and names; the answer is names."""
    url, _ = env
    pod = gpu_pod("train-1")
    body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["gpu-a", "gpu-b", "not-listed"]})
    result = _post(url + "/filter", body).json()
    assert result["Nodes"] is None and result["Error"] == ""
    assert result["NodeNames"] == ["gpu-a", "gpu-b"]
    assert set(result["FailedNodes"]) == {"not-listed"}
    ranked = _post(url + "/prioritize", body).json()
    assert [h["Host"] for h in ranked] == ["gpu-a", "gpu-b", "not-listed"]
    assert all(0 <= h["Score"] <= 10 for h in ranked) and max(h["Score"] for h in ranked) == 10


@pytest.mark.parametrize("verb,body", [
    ("filter", "{"), ("filter", "[]"), ("filter", '{"Pod": null, "NodeNames": []}'),
    ("filter", '{"Pod": {"metadata": {"name": "p"}}, "Nodes": null, "NodeNames": null}'),
    ("prioritize", '{"Pod": {"metadata": {"name": "p"}}, "NodeNames": [1, 2]}'),
    ("prioritize", '{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": {}}]}}'),
    ("bind", '{"PodName": "x"}'), ("bind", '"text"'), ("bind", ""),
])
def test_malformed_messages_get_400_with_an_error(env: tuple[str, StubAPIServer], verb: str, body: str) -> None:
    url, _ = env
    r = _post(url + f"/{verb}", body)
    assert r.status_code == 400
    assert r.json()["Error"].startswith(f"{verb}: ")
