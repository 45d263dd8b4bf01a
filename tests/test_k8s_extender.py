"""The extender against a stub API server over real HTTP: filter subsets, bind's PATCH + Binding through
the official client, per-node serialisation of concurrent binds, restart rebuilding the same load."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
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
from k8s_helpers import StubAPIServer, cpu_node, gpu_node, gpu_pod, serve

UUIDS = ["GPU-0000-a", "GPU-0000-b"]


def make_extender(stub: StubAPIServer, policy: str = "horus-paper", **kw: Any) -> Extender:
    extender = Extender(ClusterStore(PodPredictor(AnalyticPredictor())), Decider(policy), KubeAPI.at(stub.url), **kw)
    Resync(extender, 60).sync_once()
    return extender


@contextmanager
def running(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], *, delay_s: float = 0.0,
            policy: str = "horus-paper", **kw: Any) -> Iterator[tuple[str, StubAPIServer, Extender]]:
    with StubAPIServer(nodes, pods, delay_s=delay_s) as stub:
        extender = make_extender(stub, policy, **kw)
        with serve(create_app(extender)) as url:
            yield url, stub, extender


def args_for(pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return {"Pod": pod, "Nodes": None, "NodeNames": names}


def bind_args(pod: dict[str, Any], node: str) -> dict[str, Any]:
    meta = pod["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}


def test_filter_passes_only_nodes_where_the_pod_fits_with_reasons() -> None:
    busy = gpu_pod("busy", model=None, node="full", annotations={"horus.io/gpu-ids": "0"}, phase="Running")
    nodes = [gpu_node("full", 1), gpu_node("free", 2), cpu_node("cpu"), gpu_node("small", 1)]
    pending = gpu_pod("p", gpus=2)
    with running(nodes, [busy, pending]) as (url, _, _):
        r = httpx.post(url + "/filter", json=args_for(pending, ["full", "free", "cpu", "small", "ghost"]))
        result = r.json()
        assert r.status_code == 200 and result["Error"] == ""
        assert result["NodeNames"] == ["free"]
        assert set(result["FailedAndUnresolvableNodes"]) == {"cpu", "small", "full"}  # no GPUs / too few GPUs
        assert "pod needs 2" in result["FailedAndUnresolvableNodes"]["small"]
        assert set(result["FailedNodes"]) == {"ghost"}
        single = gpu_pod("q", gpus=1)
        result = httpx.post(url + "/filter", json=args_for(single, ["full", "free", "small"])).json()
        # the opaque pod on "full" is assumed to fill its GPU: nothing shares with it
        assert result["NodeNames"] == ["free", "small"] and "fit" in result["FailedNodes"]["full"]


def test_bind_patches_the_decision_then_posts_the_binding() -> None:
    nodes = [gpu_node("n1", 2, uuids=UUIDS), gpu_node("n2", 2)]
    pod = gpu_pod("train", gpumem=6000, gpucores=50)
    with running(nodes, [pod]) as (url, stub, extender):
        decided = extender.decider.evaluate(extender.store.model, _spec(pod), ["n1"])["n1"].gpus
        r = httpx.post(url + "/bind", json=bind_args(pod, "n1"))
        assert r.status_code == 200 and r.json() == {"Error": ""}
        writes = [c for c in stub.calls if c["method"] in ("PATCH", "POST")]
        assert [c["method"] for c in writes] == ["PATCH", "POST"]  # the decision is on the pod before binding
        patch, binding = writes
        assert patch["content_type"] == "application/merge-patch+json"
        ann = patch["body"]["metadata"]["annotations"]
        chosen = [int(i) for i in ann["horus.io/gpu-indices"].split(",")]
        assert tuple(chosen) == decided  # bind did what filter/prioritize announced
        assert ann["horus.io/gpu-ids"] == ",".join(UUIDS[i] for i in chosen)
        assert ann["hami.io/vgpu-devices-to-allocate"] == f"{UUIDS[chosen[0]]},NVIDIA,6000,50:;"
        assert ann["hami.io/vgpu-node"] == "n1"
        assert binding["path"] == "/api/v1/namespaces/default/bindings"
        assert binding["body"]["target"]["name"] == "n1" and binding["body"]["metadata"]["uid"] == "uid-train"
        # the bound pod is counted at once (before any re-listing)
        load = httpx.get(url + "/state").json()["load"]["n1"]
        assert load["residents"][chosen[0]] == 1 and load["pred_mem_mib"][chosen[0]] == 6000


@pytest.mark.parametrize("margin", [0.25, 0.5, None])
def test_bind_holds_an_undeclared_pod_to_its_predicted_memory(margin: float | None) -> None:
    """A pod naming a model but no nvidia.com/gpumem gets predicted peak x (1 + margin) as HAMi's limit; an opaque
    pod, or any pod with the limit switched off, gets the whole card; a declared gpumem always wins."""
    nodes = [gpu_node("n1", 4, uuids=UUIDS + ["GPU-0000-c", "GPU-0000-d"])]
    pods = [gpu_pod("m", model="resnet50", batch=32), gpu_pod("o", model=None), gpu_pod("d", gpumem=5000)]
    with running(nodes, pods, memory_margin=margin) as (url, stub, extender):
        card = extender.store.model.nodes["n1"].gpu_type.memory_mib
        predicted = extender.store.model.state.predict(_spec(pods[0]), extender.store.model.nodes["n1"].gpu_type)
        limits = {}
        for pod in pods:
            assert httpx.post(url + "/bind", json=bind_args(pod, "n1")).json() == {"Error": ""}
            ann = [c for c in stub.calls if c["method"] == "PATCH"][-1]["body"]["metadata"]["annotations"]
            mib = int(ann["hami.io/vgpu-devices-to-allocate"].split(",")[2])
            assert ann["horus.io/gpumem-limit"] == str(mib)
            limits[pod["metadata"]["name"]] = (mib, ann["horus.io/gpumem-source"])
        if margin is None:
            assert limits["m"] == (card, "card")
        else:
            assert predicted.mem_mib < limits["m"][0] < card
            assert limits["m"] == (math.ceil(predicted.mem_mib * (1 + margin)), "predicted")
        assert limits["o"] == (card, "card") and limits["d"] == (5000, "declared")


def _spec(pod: dict[str, Any]) -> Any:
    from horus.k8s.resources import pod_job_spec

    return pod_job_spec(pod)


def test_concurrent_binds_on_one_node_are_serialised() -> None:
    """Three pods that each fill a GPU race for a 2-GPU node: two get distinct GPUs, one is refused, and
    the API server never sees one bind's PATCH/POST interleaved with another's."""
    pods = [gpu_pod(f"job{i}", model=None) for i in range(3)]
    with running([gpu_node("n1", 2)], pods, delay_s=0.03) as (url, stub, _):
        answers: dict[str, str] = {}

        def bind(pod: dict[str, Any]) -> None:
            reply = httpx.post(url + "/bind", json=bind_args(pod, "n1"), timeout=30)
            answers[pod["metadata"]["name"]] = reply.json()["Error"]

        threads = [threading.Thread(target=bind, args=(p,)) for p in pods]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ok = [name for name, err in answers.items() if not err]
        refused = [err for err in answers.values() if err]
        assert len(ok) == 2 and len(refused) == 1 and "does not fit" in refused[0]
        gpus = {stub.pods[("default", n)]["metadata"]["annotations"]["horus.io/gpu-ids"] for n in ok}
        assert gpus == {"0", "1"}
        writes = sorted((c for c in stub.calls if c["method"] in ("PATCH", "POST")), key=lambda c: c["t0"])
        assert len(writes) == 4
        for first, second in zip(writes[1::2], writes[2::2]):  # each bind's pair ends before the next starts
            assert first["t1"] <= second["t0"]


def test_restart_rebuilds_the_same_load_from_annotations() -> None:
    nodes = [gpu_node("n1", 4, uuids=[f"GPU-{i}" for i in range(4)]), gpu_node("n2", 4, product="NVIDIA-A100-SXM4-80GB",
                                                                            memory=81920)]
    pods = [gpu_pod("a", model="resnet50", batch=32), gpu_pod("b", model="vgg16", batch=16, gpus=2),
            gpu_pod("c", model=None, gpumem=8000, gpucores=30), gpu_pod("d", model="resnet18", batch=64),
            gpu_pod("e", model="resnet50", batch=64, gpumem=9000)]
    with StubAPIServer(nodes, pods) as stub:
        first = make_extender(stub)
        with serve(create_app(first)) as url:
            for pod, node in zip(pods, ["n1", "n2", "n1", "n2", "n1"]):
                assert httpx.post(url + "/bind", json=bind_args(pod, node)).json() == {"Error": ""}
            before = httpx.get(url + "/state").json()
        second = make_extender(stub)  # a fresh process: only the API server's pods and their annotations
        with serve(create_app(second)) as url2:
            after = httpx.get(url2 + "/state").json()
        assert before["placed_pods"] == after["placed_pods"] == 5
        assert after["unknown_pods"] == {}
        assert before["load"] == after["load"]
        assert sum(sum(n["residents"]) for n in after["load"].values()) == 6  # b has two workers


def test_filter_after_bind_sees_the_new_load() -> None:
    """Declared HAMi limits: two pods at 40 % cores share a GPU, a third would exceed the 100 % cap."""
    pods = [gpu_pod(f"s{i}", model=None, gpumem=4000, gpucores=40) for i in range(3)]
    with running([gpu_node("n1", 1)], pods) as (url, _, _):
        for pod in pods[:2]:
            assert httpx.post(url + "/filter", json=args_for(pod, ["n1"])).json()["NodeNames"] == ["n1"]
            assert httpx.post(url + "/bind", json=bind_args(pod, "n1")).json() == {"Error": ""}
        result = httpx.post(url + "/filter", json=args_for(pods[2], ["n1"])).json()
        assert result["NodeNames"] == [] and "n1" in result["FailedNodes"]
        refused = httpx.post(url + "/bind", json=bind_args(pods[2], "n1")).json()["Error"]
        assert "does not fit" in refused


def test_bind_errors_are_reported_not_raised() -> None:
    pod, other = gpu_pod("p"), gpu_pod("o")
    with running([gpu_node("n1", 2), cpu_node("cpu")], [pod, other]) as (url, stub, _):
        wrong_uid = dict(bind_args(pod, "n1"), PodUID="another")
        assert "recreated" in httpx.post(url + "/bind", json=wrong_uid).json()["Error"]
        assert "cannot place GPUs" in httpx.post(url + "/bind", json=bind_args(pod, "cpu")).json()["Error"]
        assert "not found" in httpx.post(url + "/bind", json=dict(bind_args(pod, "n1"), PodName="nope")).json()["Error"]
        stub.fail_bind.add("o")
        error = httpx.post(url + "/bind", json=bind_args(other, "n1")).json()["Error"]
        assert "HTTP 500" in error
        # a failed Binding is not counted as load
        assert sum(httpx.get(url + "/state").json()["load"]["n1"]["residents"]) == 0


def test_unreadable_pod_filter_error_and_prioritize_400() -> None:
    bad = gpu_pod("bad", model="no-such-model")
    with running([gpu_node("n1", 1)], [bad]) as (url, _, _):
        result = httpx.post(url + "/filter", json=args_for(bad, ["n1"])).json()
        assert result["NodeNames"] == [] and "horus.io/model" in result["Error"] and "no-such-model" in result["Error"]
        r = httpx.post(url + "/prioritize", json=args_for(bad, ["n1"]))
        assert r.status_code == 400 and "horus.io/model" in r.json()["Error"]


def test_full_node_objects_are_taken_from_the_request() -> None:
    """nodeCacheCapable: false -> Nodes carries full objects; a node not listed yet is used from there."""
    pod = gpu_pod("p")
    with running([gpu_node("n1", 1)], [pod]) as (url, _, _):
        sent = [gpu_node("n1", 1), gpu_node("fresh", 2, product="NVIDIA-H100-80GB-HBM3", memory=None)]
        r = httpx.post(url + "/filter", json={"Pod": pod, "Nodes": {"metadata": {}, "items": sent}, "NodeNames": None})
        result = r.json()
        assert result["NodeNames"] == ["n1", "fresh"]
        assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["n1", "fresh"]
        state = httpx.get(url + "/state").json()
        assert state["gpus"] == 3 and len(state["load"]["fresh"]["residents"]) == 2


@pytest.mark.parametrize("policy", ["fifo-exclusive", "horus-iasp"])
def test_other_registered_policies_drive_the_same_verbs(policy: str) -> None:
    """fifo-exclusive goes through its placement; horus-iasp (own cost) through the policy itself."""
    pods = [gpu_pod("a"), gpu_pod("b")]
    with running([gpu_node("n1", 1), gpu_node("n2", 1)], pods, policy=policy) as (url, _, extender):
        assert extender.decider.path == ("placement" if policy == "fifo-exclusive" else "policy")
        assert httpx.post(url + "/bind", json=bind_args(pods[0], "n1")).json() == {"Error": ""}
        result = httpx.post(url + "/filter", json=args_for(pods[1], ["n1", "n2"])).json()
        reply = httpx.post(url + "/prioritize", json=args_for(pods[1], ["n1", "n2"]))
        ranked = {h["Host"]: h["Score"] for h in reply.json()}
        if policy == "fifo-exclusive":
            assert result["NodeNames"] == ["n2"]  # exclusive: the busy GPU is off limits
        else:
            assert "n2" in result["NodeNames"]
        assert ranked["n2"] == 10 and ranked["n2"] > ranked["n1"]


def test_oracle_policy_is_refused() -> None:
    from horus.errors import HorusInputError

    with pytest.raises(HorusInputError, match="oracle"):
        Decider("oracle")


def test_state_endpoint_is_json() -> None:
    with running([gpu_node("n1", 1)], []) as (url, _, _):
        body = httpx.get(url + "/state").json()
        assert body["policy"] == "horus-paper" and body["gpus"] == 1
        assert httpx.get(url + "/healthz").status_code == 200
        json.dumps(body)


def test_horus_iasp_decides_on_pods_without_a_model() -> None:
    """The policy path with an opaque pod small enough to share: the interference estimator falls back to
    the extender's predictor, and the verbs answer normally."""
    opaque = gpu_pod("o", model=None, gpucores=20, gpumem=1000)
    busy = gpu_pod("r", node="n1", phase="Running", annotations={"horus.io/gpu-ids": "0"})
    with running([gpu_node("n1", 2)], [opaque, busy], policy="horus-iasp") as (url, _, _):
        body = httpx.post(url + "/filter", json=args_for(opaque, ["n1"])).json()
        assert body["NodeNames"] == ["n1"] and body["Error"] == ""
        assert httpx.post(url + "/bind", json=bind_args(opaque, "n1")).json() == {"Error": ""}


def test_policy_input_errors_become_verb_errors_not_500() -> None:
    from horus.errors import HorusInputError
    from horus.policies.base import POLICIES, Policy

    class Refuses(Policy):
        name = "test-refuses"

        def schedule(self, state: Any) -> list[Any]:
            raise HorusInputError("model", "this policy knows no such job type")

    POLICIES.register("test-refuses")(Refuses)
    try:
        pod = gpu_pod("p")
        with running([gpu_node("n1", 1)], [pod], policy="test-refuses") as (url, _, _):
            body = httpx.post(url + "/filter", json=args_for(pod, ["n1"])).json()
            assert body["NodeNames"] == [] and body["Error"].startswith("Horus policy 'test-refuses': model: ")
            r = httpx.post(url + "/prioritize", json=args_for(pod, ["n1"]))
            assert r.status_code == 400 and "no such job type" in r.json()["Error"]
            assert "no such job type" in httpx.post(url + "/bind", json=bind_args(pod, "n1")).json()["Error"]
    finally:
        POLICIES.unregister("test-refuses")
