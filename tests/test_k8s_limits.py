"""Requests that used to stall or break the extender, over real HTTP on 127.0.0.1 against a stub API server.

* A pod asking for more GPUs than any node has (1e5, 1e9, 2**31 - 1) is answered in well under a second with
  every node unresolvable and the reason, while ``/healthz`` keeps answering; so is one arriving while the
  store's lock is held (a long re-listing): the check needs no lock, and ``/healthz`` takes none.
* Non-finite numbers, huge integers, non-ASCII digits and wrong types anywhere in a request give 400 (or the
  filter's ``Error``) with one line naming the field, never 500; the same junk in the cluster's own objects
  leaves the re-listing working.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from k8s_helpers import StubAPIServer, gpu_node, gpu_pod, serve

from horus.k8s.api import KubeAPI
from horus.k8s.decide import Decider
from horus.k8s.extender import Extender
from horus.k8s.nodes import MAX_NODE_GPUS, node_gpus
from horus.k8s.predictor import PodPredictor
from horus.k8s.resources import MAX_COUNT
from horus.k8s.server import MAX_BODY_BYTES, Resync, create_app
from horus.k8s.store import ClusterStore
from horus.predict.analytic import AnalyticPredictor

NODES = [gpu_node(f"n{i:04d}", 8 if i % 2 else 4) for i in range(200)]
NAMES = [f"n{i:04d}" for i in range(200)] + [f"cpu{i:04d}" for i in range(1800)]  # 2,000 candidates


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[str, Extender]]:
    with StubAPIServer(NODES, []) as stub:
        extender = Extender(ClusterStore(PodPredictor(AnalyticPredictor())), Decider("horus-paper"),
                            KubeAPI.at(stub.url))
        Resync(extender, 60).sync_once()
        with serve(create_app(extender)) as url:
            yield url, extender


def _filter(url: str, pod: dict[str, Any], names: list[str] = NAMES) -> tuple[float, httpx.Response]:
    began = time.perf_counter()
    r = httpx.post(url + "/filter", json={"Pod": pod, "Nodes": None, "NodeNames": names}, timeout=30)
    return time.perf_counter() - began, r


@pytest.mark.parametrize("gpus", [9, 10**5, 10**9, MAX_COUNT])
def test_impossible_gpu_request_is_answered_at_once_with_the_reason(env: tuple[str, Extender], gpus: int) -> None:
    url, extender = env
    assert extender.store.model.max_node_gpus == 8
    took, r = _filter(url, gpu_pod("huge", gpus=gpus))
    assert r.status_code == 200 and took < 1.0, took
    result = r.json()
    assert result["NodeNames"] == [] and result["FailedNodes"] == {} and result["Error"] == ""
    assert set(result["FailedAndUnresolvableNodes"]) == set(NAMES)  # kube-scheduler: preemption will not help
    reason = result["FailedAndUnresolvableNodes"]["n0001"]
    assert reason.startswith("[gang-too-large]") and f"pod needs {gpus} GPUs" in reason and "largest node has 8" in reason
    took, r = _timed_prioritize(url, gpu_pod("huge", gpus=gpus), NAMES[:50])
    assert took < 1.0 and {h["Score"] for h in r.json()} == {0}


def _timed_prioritize(url: str, pod: dict[str, Any], names: list[str]) -> tuple[float, httpx.Response]:
    began = time.perf_counter()
    r = httpx.post(url + "/prioritize", json={"Pod": pod, "Nodes": None, "NodeNames": names}, timeout=30)
    return time.perf_counter() - began, r


def test_a_pod_that_fits_the_largest_node_is_still_decided(env: tuple[str, Extender]) -> None:
    _, r = _filter(env[0], gpu_pod("eight", gpus=8))
    result = r.json()
    assert result["NodeNames"] == [f"n{i:04d}" for i in range(1, 200, 2)]  # the 8-GPU nodes
    assert "node has 4 GPUs, pod needs 8" in result["FailedAndUnresolvableNodes"]["n0000"]


def test_healthz_answers_while_impossible_requests_stream_in(env: tuple[str, Extender]) -> None:
    url, _ = env
    stop = threading.Event()
    worst = [0.0]

    def probe() -> None:
        with httpx.Client(timeout=10) as client:
            while not stop.is_set():
                began = time.perf_counter()
                assert client.get(url + "/healthz").status_code == 200
                worst[0] = max(worst[0], time.perf_counter() - began)
                time.sleep(0.01)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        with ThreadPoolExecutor(4) as pool:
            times = list(pool.map(lambda g: _filter(url, gpu_pod(f"p{g}", gpus=g))[0], [10**9, 10**5] * 10))
    finally:
        stop.set()
        prober.join()
    assert max(times) < 1.0 and worst[0] < 1.0, (max(times), worst[0])


def test_probes_and_impossible_pods_do_not_wait_for_the_stores_lock(env: tuple[str, Extender]) -> None:
    """A re-listing holds the store's lock while it rebuilds (1.4 s at 1,000 nodes): a filter that needs the
    model waits for it, off the event loop; /healthz, /livez and a pod no node can take do not."""
    url, extender = env
    with ThreadPoolExecutor(1) as pool:
        with extender.store.lock:
            waiting = pool.submit(_filter, url, gpu_pod("fits", gpus=1))
            time.sleep(0.2)
            for path in ("/healthz", "/livez"):
                began = time.perf_counter()
                assert httpx.get(url + path, timeout=5).status_code == 200
                assert time.perf_counter() - began < 0.5
            took, r = _filter(url, gpu_pod("huge", gpus=10**9))
            assert took < 0.5 and r.json()["NodeNames"] == []
            assert not waiting.done()
        took, r = waiting.result(timeout=10)
        assert r.status_code == 200 and len(r.json()["NodeNames"]) == 200


def _with_limit(value: Any) -> dict[str, Any]:
    pod = gpu_pod("p")
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = value
    return pod


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]


@pytest.mark.parametrize("verb", ["filter", "prioritize", "bind"])
@pytest.mark.parametrize("literal", NON_FINITE)
def test_non_finite_numbers_are_400_naming_the_field(env: tuple[str, Extender], verb: str, literal: str) -> None:
    url, _ = env
    if verb == "bind":
        body = f'{{"PodName": "p", "PodNamespace": "default", "PodUID": {literal}, "Node": "n0001"}}'
        field = "body['PodUID']"
    else:
        marker = '"__X__"'
        body = json.dumps({"Pod": _with_limit("__X__"), "Nodes": None, "NodeNames": ["n0001"]})
        body = body.replace(marker, literal)
        field = "body['Pod']['spec']['containers'][0]['resources']['limits']['nvidia.com/gpu']"
    r = httpx.post(f"{url}/{verb}", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    error = r.json()["Error"]
    assert error == f"{verb}: {field}: {literal} is not a finite number" and "\n" not in error


@pytest.mark.parametrize("value,expect", [
    ("²", "expected a non-negative integer"), ("9" * 5000, "expected a non-negative integer"),
    (10**30, "at most 2147483647"), (-1, "at most 2147483647"), (1.5, "expected a non-negative integer"),
    ([1], "expected a non-negative integer"), ({"a": 1}, "expected a non-negative integer"),
    (True, "expected a non-negative integer"), ("1e5", "expected a non-negative integer"),
])
def test_bad_gpu_quantities_name_the_field(env: tuple[str, Extender], value: Any, expect: str) -> None:
    url, _ = env
    pod = _with_limit(value)
    _, r = _filter(url, pod, ["n0001"])
    assert r.status_code == 200  # filter: kube-scheduler shows the Error as the pod's scheduling failure
    error = r.json()["Error"]
    assert "resources.limits['nvidia.com/gpu']" in error and expect in error and "\n" not in error
    r = httpx.post(url + "/prioritize", json={"Pod": pod, "Nodes": None, "NodeNames": ["n0001"]})
    assert r.status_code == 400 and "resources.limits['nvidia.com/gpu']" in r.json()["Error"]


def test_bad_numbers_in_sent_nodes_make_the_node_unusable_not_a_500(env: tuple[str, Extender]) -> None:
    """nodeCacheCapable: false sends full Node objects: their labels are input too."""
    url, extender = env
    odd = [gpu_node("odd-digit", 2), gpu_node("huge", 2), gpu_node("long", 2)]
    odd[0]["metadata"]["labels"]["nvidia.com/gpu.count"] = "²"
    odd[0]["status"]["capacity"]["nvidia.com/gpu"] = "²"
    odd[1]["metadata"]["labels"]["nvidia.com/gpu.count"] = str(10**9)
    odd[2]["metadata"]["labels"]["nvidia.com/gpu.count"] = "9" * 5000
    odd[2]["status"]["capacity"]["nvidia.com/gpu"] = "9" * 5000
    r = httpx.post(url + "/filter", json={"Pod": gpu_pod("p"), "Nodes": {"items": odd}, "NodeNames": None})
    assert r.status_code == 200
    failed = r.json()["FailedAndUnresolvableNodes"]
    assert set(failed) == {"odd-digit", "huge", "long"}
    assert f"more than {MAX_NODE_GPUS}" in failed["huge"]
    assert extender.store.model.max_node_gpus == 8  # none of them counts as a bigger node
    assert node_gpus(odd[0]).problem and node_gpus(odd[2]).problem


def test_junk_in_listed_pods_leaves_the_relisting_working() -> None:
    odd = {"horus.io/gpu-indices": "²", "horus.io/gpu-ids": "9" * 5000}
    pods = [gpu_pod("odd", node="n1", phase="Running", annotations=odd),
            gpu_pod("big", node="n1", phase="Running", annotations={"horus.io/gpu-indices": "0"}),
            gpu_pod("ok", node="n1", phase="Running", annotations={"horus.io/gpu-indices": "1"})]
    pods[1]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "9" * 5000
    with StubAPIServer([gpu_node("n1", 2)], pods) as stub:
        extender = Extender(ClusterStore(PodPredictor(AnalyticPredictor())), Decider("horus-paper"),
                            KubeAPI.at(stub.url))
        Resync(extender, 60).sync_once()
        model = extender.store.model
        assert list(model.pods) == ["uid-ok"] and set(model.unknown) == {"uid-odd", "uid-big"}
        assert extender.store.health()["synced"] is True


def test_a_body_over_the_limit_is_413_not_read_whole(env: tuple[str, Extender]) -> None:
    url, _ = env
    r = httpx.post(url + "/filter", content=b" " * (MAX_BODY_BYTES + 1), headers={"Content-Type": "application/json"},
                   timeout=30)
    assert r.status_code == 413 and r.json()["Error"].startswith("filter: request body of ")
    assert httpx.get(url + "/healthz").status_code == 200


@pytest.mark.parametrize("raw", [
    '{"Pod": {"metadata": {"name": "p\\ud800"}}, "NodeNames": ["n1"]}'.encode(),  # lone surrogate: orjson refuses
    '{"NodeNames": ["n\u00e9"], "x": [1.5, -0.0, 18446744073709551615]}'.encode("utf-16"),  # not UTF-8
    '\ufeff{"NodeNames": ["n1"]}'.encode("utf-8"),  # a byte-order mark
    b'{"NodeNames": ["n1", "n2"], "Nodes": null, "x": {"y": [true, false, 0.1, 12]}}',
])
def test_bodies_read_as_the_standard_json_module_reads_them(raw: bytes) -> None:
    """orjson reads the verbs' bodies; where it refuses what Python's json accepts, json reads them: same value."""
    from horus.k8s.server import decode_json

    assert decode_json(raw) == json.loads(raw)


def test_answers_echoing_a_lone_surrogate_are_still_json() -> None:
    from horus.k8s.server import _reply

    body = _reply({"Error": "filter: pod p\ud800"}).body
    assert json.loads(body) == {"Error": "filter: pod p\ud800"}
