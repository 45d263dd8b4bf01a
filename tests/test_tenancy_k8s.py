"""Queues (tenants) in the Kubernetes extender, at the protocol level: extender/v1 JSON over real HTTP on 127.0.0.1,
the official client against the stub API server, ``horus k8s-extender --tenancy`` as a process and its one-line
errors. Charges are checked against the scheduler core's own rule (``horus.core.tenancy.Admission``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from k8s_helpers import StubAPIServer, gpu_node, gpu_pod, serve, wait_for_extender

from horus.cli import main
from horus.cluster import Cluster, Node
from horus.core.tenancy import Admission
from horus.jobs import JobSpec
from horus.k8s.api import KubeAPI
from horus.k8s.decide import Decider
from horus.k8s.extender import Extender
from horus.k8s.nodes import node_gpus
from horus.k8s.predictor import PodPredictor
from horus.k8s.queues import QueueGate
from horus.k8s.server import Resync, create_app
from horus.k8s.store import ClusterStore
from horus.predict.analytic import AnalyticPredictor
from horus.state import SchedulerState
from horus.tenancy import Tenancy, parse_tenancy

SRC = Path(__file__).resolve().parents[1] / "src"
QUOTA = "[queue-over-quota]"


def tenancy(*queues: dict[str, Any], **top: Any) -> Tenancy:
    return parse_tenancy({"queues": list(queues), **top}, "test")


@contextmanager
def running(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], tenants: Tenancy | None, *,
            delay_s: float = 0.0) -> Iterator[tuple[str, StubAPIServer, Extender]]:
    with StubAPIServer(nodes, pods, delay_s=delay_s) as stub:
        store = ClusterStore(PodPredictor(AnalyticPredictor()), queues=QueueGate(tenants) if tenants else None)
        extender = Extender(store, Decider(), KubeAPI.at(stub.url))
        Resync(extender, 60).sync_once()
        with serve(create_app(extender)) as url:
            yield url, stub, extender


def labelled(pod: dict[str, Any], *, queue: str | None = None, priority: str | None = None) -> dict[str, Any]:
    labels = {"horus.io/queue": queue, "horus.io/priority": priority}
    pod["metadata"]["labels"] = {k: v for k, v in labels.items() if v is not None}
    return pod


def on(name: str, node: str, gpu: str, ns: str, **kw: Any) -> dict[str, Any]:
    """A pod placed by an earlier decision on ``node``'s GPU(s) ``gpu`` (e.g. "0" or "0,1")."""
    return gpu_pod(name, ns=ns, node=node, phase="Running", annotations={"horus.io/gpu-ids": gpu}, **kw)


def filter_(url: str, pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    r = httpx.post(url + "/filter", json={"Pod": pod, "Nodes": None, "NodeNames": names})
    assert r.status_code == 200, r.text
    return r.json()


def bind(url: str, pod: dict[str, Any], node: str) -> str:
    meta = pod["metadata"]
    body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
    r = httpx.post(url + "/bind", json=body)
    assert r.status_code == 200, r.text
    return r.json()["Error"]


def queues_view(url: str) -> dict[str, Any]:
    return httpx.get(url + "/state").json()["tenancy"]["queues"]


TWO = tenancy({"name": "a", "guaranteed": 1, "borrow_limit": 0}, {"name": "b", "guaranteed": 2, "borrow_limit": 1})


def test_a_queue_at_its_limit_is_filtered_off_every_node_and_others_pass() -> None:
    nodes = [gpu_node("n1", 4), gpu_node("n2", 4)]
    pods = [on("a-run", "n1", "0", "a", model=None), gpu_pod("a-next", ns="a"), gpu_pod("b-next", ns="b")]
    with running(nodes, pods, TWO) as (url, _, _):
        refused = filter_(url, pods[1], ["n1", "n2"])
        assert refused["NodeNames"] == [] and refused["FailedNodes"] == {} and refused["Error"] == ""
        reasons = refused["FailedAndUnresolvableNodes"]
        assert set(reasons) == {"n1", "n2"}
        assert reasons["n1"] == reasons["n2"]
        assert reasons["n1"].startswith(QUOTA) and "queue 'a' is charged 1 GPUs of its limit 1" in reasons["n1"]
        assert filter_(url, pods[2], ["n1", "n2"])["NodeNames"] == ["n1", "n2"]  # b is within its limit
        assert QUOTA in bind(url, pods[1], "n2")  # bind checks again
        view = queues_view(url)
        assert view["a"]["charged_gpus"] == 1 and view["a"]["limit"] == {"*": 1}
        assert view["b"]["charged_gpus"] == 0 and view["b"]["pending_gpus"] == 1


def test_binds_fill_a_queue_up_to_its_limit_then_filter_and_bind_refuse() -> None:
    pods = [gpu_pod(f"b{i}", ns="b", model=None) for i in range(5)]
    with running([gpu_node("n1", 4), gpu_node("n2", 4)], pods, TWO) as (url, _, _):
        limit = 3  # b: guaranteed 2 + borrow_limit 1
        for i, pod in enumerate(pods[:limit]):
            assert filter_(url, pod, ["n1", "n2"])["NodeNames"] == ["n1", "n2"]
            assert bind(url, pod, "n1" if i % 2 == 0 else "n2") == ""
            view = queues_view(url)["b"]
            assert view["charged_gpus"] == i + 1 and view["pending_gpus"] == len(pods) - i - 1  # bound: not pending
        over = filter_(url, pods[limit], ["n1", "n2"])["FailedAndUnresolvableNodes"]
        assert f"queue 'b' is charged {limit} GPUs of its limit {limit}" in over["n1"]
        assert QUOTA in bind(url, pods[limit + 1], "n1")


def test_concurrent_binds_of_one_queue_on_two_nodes_cannot_both_take_its_last_gpu() -> None:
    """Queue a has room for one more GPU; two of its pods are bound at once to different nodes (different node
    locks) through a slow API server: exactly one gets it, the other is refused with the quota reason."""
    pods = [on("a-run", "n1", "0", "a", model=None), gpu_pod("x", ns="a", model=None), gpu_pod("y", ns="a", model=None)]
    tenants = tenancy({"name": "a", "guaranteed": 2, "borrow_limit": 0}, {"name": "b", "guaranteed": 1})
    with running([gpu_node("n1", 2), gpu_node("n2", 2)], pods, tenants, delay_s=0.05) as (url, _, _):
        for pod in pods[1:]:
            assert filter_(url, pod, ["n1", "n2"])["NodeNames"] == ["n1", "n2"]  # each alone would fit
        errors: dict[str, str] = {}
        threads = [threading.Thread(target=lambda p=p, n=n: errors.__setitem__(p["metadata"]["name"], bind(url, p, n)))
                   for p, n in zip(pods[1:], ["n1", "n2"])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(bool(e) for e in errors.values()) == [False, True], errors
        assert "queue 'a' is charged 2 GPUs of its limit 2" in "".join(errors.values())
        assert queues_view(url)["a"]["charged_gpus"] == 2


def test_namespace_fallback_and_default_queue() -> None:
    """No label: the namespace's queue; a namespace that is no queue goes to default_queue."""
    tenants = tenancy({"name": "team", "guaranteed": 1, "borrow_limit": 0},
                      {"name": "shared", "guaranteed": 0, "borrow_limit": 1}, default_queue="shared")
    pods = [on("t", "n1", "0", "team", model=None), on("x", "n1", "1", "elsewhere", model=None),
            gpu_pod("t2", ns="team"), gpu_pod("x2", ns="elsewhere")]
    with running([gpu_node("n1", 4)], pods, tenants) as (url, _, _):
        view = queues_view(url)
        assert view["team"]["charged_gpus"] == 1 and view["shared"]["charged_gpus"] == 1
        why = filter_(url, pods[2], ["n1"])["FailedAndUnresolvableNodes"]["n1"]
        assert "queue 'team'" in why and why.endswith("(queue from its namespace)")
        why = filter_(url, pods[3], ["n1"])["FailedAndUnresolvableNodes"]["n1"]
        assert "queue 'shared'" in why and "the default queue: namespace 'elsewhere' is no queue" in why


def test_the_label_overrides_the_namespace() -> None:
    pods = [on("a-run", "n1", "0", "a", model=None), labelled(gpu_pod("in-a-for-b", ns="a"), queue="b"),
            labelled(on("b-run", "n1", "1", "a", model=None), queue="b")]
    with running([gpu_node("n1", 4)], pods, TWO) as (url, _, _):
        view = queues_view(url)
        assert view["a"]["charged_gpus"] == 1 and view["b"]["charged_gpus"] == 1  # b-run runs in namespace a
        assert filter_(url, pods[1], ["n1"])["NodeNames"] == ["n1"]  # a is full; the label puts the pod in b
        assert bind(url, pods[1], "n1") == ""
        assert queues_view(url)["b"]["charged_gpus"] == 2 and queues_view(url)["a"]["charged_gpus"] == 1


def _core_charge(jobs: list[tuple[JobSpec, int]], tenants: Tenancy, gpus: int) -> dict[str, float]:
    """What the scheduler core charges each queue for one-GPU ``jobs`` placed on GPU ``g`` of a one-node cluster of
    ``gpus`` V100s (the extender's predictor: an opaque pod fills its GPU unless it declares limits)."""
    info = node_gpus(gpu_node("n1", gpus))
    state = SchedulerState(Cluster([Node("n1", info.gpu_type, gpus)]), PodPredictor(AnalyticPredictor()))
    for spec, g in jobs:
        state.submit(spec, 0.0)
        state.start(spec.job_id, (g,), 0.0)
    admission = Admission(tenants)
    admission.observe(state)
    return {name: acc.used() for name, acc in admission.accounts.items()}


def _job(job_id: str, queue: str, model: str, batch: int, fraction: float | None = None) -> JobSpec:
    return JobSpec(job_id=f"uid-{job_id}", submit_time=0, num_gpus=1, model=model, batch_size=batch, iterations=1,
                   gpu_fraction=fraction, queue=queue)


@pytest.mark.parametrize("charge", ["equal", "util"])
def test_co_located_pods_are_charged_their_share_as_the_core_charges_them(charge: str) -> None:
    """Two whole-GPU pods of queue c on one GPU share it (their requests sum to 2): the core charges the GPU once,
    split between them, so a third pod still fits a limit of 2; on two GPUs they are charged 2 and it does not.
    Two 40 %-cores pods of d on one GPU are charged their requests (0.4 each)."""
    tenants = tenancy({"name": "c", "guaranteed": 2, "borrow_limit": 0}, {"name": "d", "guaranteed": 1}, charge=charge)
    shared = [on("s1", "n1", "0", "c", model="resnet50", batch=16), on("s2", "n1", "0", "c", model="resnet50", batch=16)]
    fractional = [on(f"f{i}", "n1", "1", "d", model=None, gpucores=40) for i in range(2)]
    expected = _core_charge([(_job("s1", "c", "resnet50", 16), 0), (_job("s2", "c", "resnet50", 16), 0),
                             (_job("f0", "d", "<opaque>", 0, 0.4), 1), (_job("f1", "d", "<opaque>", 0, 0.4), 1)],
                            tenants, 4)
    assert expected["c"] == pytest.approx(1.0) and expected["d"] == pytest.approx(0.8)  # the core's rule
    third = gpu_pod("s3", ns="c", model="resnet50", batch=16)
    with running([gpu_node("n1", 4)], [*shared, *fractional, third], tenants) as (url, _, _):
        view = queues_view(url)
        assert view["c"]["charged_gpus"] == pytest.approx(expected["c"])
        assert view["d"]["charged_gpus"] == pytest.approx(expected["d"])
        assert filter_(url, third, ["n1"])["NodeNames"] == ["n1"]
    apart = [on("s1", "n1", "0", "c", model="resnet50", batch=16), on("s2", "n1", "1", "c", model="resnet50", batch=16)]
    with running([gpu_node("n1", 4)], [*apart, third], tenants) as (url, _, _):
        assert queues_view(url)["c"]["charged_gpus"] == 2
        assert "charged 2 GPUs of its limit 2" in filter_(url, third, ["n1"])["FailedAndUnresolvableNodes"]["n1"]


@pytest.mark.parametrize("charge", ["equal", "util"])
def test_a_gpu_shared_by_two_queues_is_split_by_the_tenancys_rule(charge: str) -> None:
    """resnet18 (queue c) and vgg16 (queue d) on one GPU: ``equal`` splits it in halves, ``util`` by predicted
    utilization; the extender charges what the core charges either way."""
    tenants = tenancy({"name": "c", "guaranteed": 1}, {"name": "d", "guaranteed": 1}, charge=charge)
    pods = [on("r", "n1", "0", "c", model="resnet18", batch=16), on("v", "n1", "0", "d", model="vgg16", batch=16)]
    expected = _core_charge([(_job("r", "c", "resnet18", 16), 0), (_job("v", "d", "vgg16", 16), 0)], tenants, 2)
    assert expected["c"] + expected["d"] == pytest.approx(1.0)
    assert (expected["c"] == pytest.approx(0.5)) == (charge == "equal")
    with running([gpu_node("n1", 2)], pods, tenants) as (url, _, _):
        view = queues_view(url)
        assert view["c"]["charged_gpus"] == pytest.approx(expected["c"], abs=1e-6)
        assert view["d"]["charged_gpus"] == pytest.approx(expected["d"], abs=1e-6)


def test_unknown_queue_or_priority_label_is_a_clear_error_not_a_500() -> None:
    pod = labelled(gpu_pod("typo", ns="a"), queue="nope")
    cls = labelled(gpu_pod("cls", ns="a"), priority="urgent")
    placed = labelled(on("gone", "n1", "0", "a", model=None), queue="retired")
    with running([gpu_node("n1", 2)], [pod, cls, placed], TWO) as (url, _, _):
        result = filter_(url, pod, ["n1"])
        assert result["NodeNames"] == []
        assert "label horus.io/queue: unknown queue 'nope' (known: a, b)" in result["Error"]
        r = httpx.post(url + "/prioritize", json={"Pod": pod, "Nodes": None, "NodeNames": ["n1"]})
        assert r.status_code == 400 and "unknown queue 'nope'" in r.json()["Error"]
        assert "unknown queue 'nope'" in bind(url, pod, "n1")
        assert "horus.io/priority: unknown priority class 'urgent'" in filter_(url, cls, ["n1"])["Error"]
        # a placed pod whose queue is gone still uses its GPU, charged to no queue of the tenancy
        view = queues_view(url)
        assert view["<unlisted>"]["charged_gpus"] == 1 and view["a"]["charged_gpus"] == 0


def test_borrowing_leaves_the_gpus_owed_to_queues_with_pending_pods() -> None:
    """a may borrow up to 4; b (guaranteed 2) has a pending pod: a can borrow until only b's pending GPU is free."""
    tenants = tenancy({"name": "a", "guaranteed": 1, "borrow_limit": 3}, {"name": "b", "guaranteed": 2})
    running_a = [on(f"a{g}", "n1", str(g), "a", model=None) for g in range(2)]
    nxt = gpu_pod("a-next", ns="a", model=None)
    with running([gpu_node("n1", 4)], [*running_a, nxt, gpu_pod("b-wait", ns="b", model=None)], tenants) as (url, _, _):
        assert filter_(url, nxt, ["n1"])["NodeNames"] == ["n1"]  # 2 free, 1 owed to b
        assert bind(url, nxt, "n1") == ""
        last = gpu_pod("a-last", ns="a", model=None)
        why = filter_(url, last, ["n1"])["FailedAndUnresolvableNodes"]["n1"]
        assert why.startswith(QUOTA) and "owed to queue(s) b" in why and "1 of the 1 free GPUs" in why
        assert queues_view(url)["b"]["pending_gpus"] == 1
    # without b's pending pod nothing is owed: a borrows the last GPU too
    with running([gpu_node("n1", 4)], [*running_a, gpu_pod("a-x", ns="a", model=None)], tenants) as (url, _, _):
        assert filter_(url, gpu_pod("a-x", ns="a", model=None), ["n1"])["NodeNames"] == ["n1"]


def test_per_type_quotas_are_checked_on_each_node_type() -> None:
    """A queue with a V100 quota of 1 (borrowing 1) that runs one V100 pod can borrow an A100, not a second V100
    beyond its limit of 2: nodes of each type get their own verdict."""
    v100 = node_gpus(gpu_node("v")).gpu_type.name
    a100 = node_gpus(gpu_node("x", product="NVIDIA-A100-SXM4-80GB", memory=81920)).gpu_type.name
    tenants = tenancy({"name": "t", "guaranteed": {v100: 1}, "borrow_limit": 1})
    nodes = [gpu_node("v", 4), gpu_node("x", 4, product="NVIDIA-A100-SXM4-80GB", memory=81920)]
    pods = [on("r1", "v", "0", "t", model=None), on("r2", "v", "1", "t", model=None), gpu_pod("p", ns="t")]
    with running(nodes, pods, tenants) as (url, _, _):
        result = filter_(url, pods[2], ["v", "x"])
        assert result["NodeNames"] == ["x"]
        assert f"charged 2 {v100} GPUs of its limit 2" in result["FailedAndUnresolvableNodes"]["v"]
        assert queues_view(url)["t"]["charged_by_type"] == {v100: 2}
        assert queues_view(url)["t"]["limit"] == {v100: 2} and a100 != v100


def test_without_a_tenancy_labels_are_ignored() -> None:
    pod = labelled(gpu_pod("p", ns="a"), queue="nope")
    with running([gpu_node("n1", 1)], [pod], None) as (url, _, _):
        assert filter_(url, pod, ["n1"])["NodeNames"] == ["n1"]
        assert httpx.get(url + "/state").json()["tenancy"] is None


def _write(path: Path, data: Any) -> str:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("content,expected", [
    (None, "--tenancy: "),
    ("queues: []\n", "expected a YAML mapping with a 'tenancy:' section"),
    ({"tenancy": {"queues": [{"name": "a", "guaranteed": -1}]}}, "tenancy.queues[0].guaranteed: expected"),
    ({"tenancy": {"queues": [{"name": "a"}], "default_queue": "z"}}, "tenancy.default_queue: unknown queue 'z'"),
    ("tenancy: [\n", "not valid YAML"),
])
def test_a_bad_tenancy_file_is_one_line_exit_2(tmp_path: Path, content: Any, expected: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "missing.yaml") if content is None else _write(tmp_path / "t.yaml", content)
    rc = main(["k8s-extender", "--api-server", "http://127.0.0.1:9", "--tenancy", path])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and expected in err, err


def test_the_extender_process_serves_a_tenancy_file(tmp_path: Path) -> None:
    """``horus k8s-extender --tenancy`` as a user runs it: a cluster spec with a tenancy section is accepted."""
    spec = _write(tmp_path / "cluster.yaml", {"nodes": [{"name": "x", "gpu_type": "V100", "gpus": 1}],
                                                "tenancy": {"queues": [{"name": "ml", "guaranteed": 1,
                                                                        "borrow_limit": 0}]}})
    pods = [on("r", "n1", "0", "ml", model=None), gpu_pod("p", ns="ml")]
    with StubAPIServer([gpu_node("n1", 2)], pods) as stub:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc = subprocess.Popen([sys.executable, "-m", "horus.cli", "k8s-extender", "--api-server", stub.url,
                                 "--port", str(port), "--tenancy", spec, "--log-level", "warning"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(timeout=2) as client:
                wait_for_extender(client, base, proc)
            why = filter_(base, pods[1], ["n1"])["FailedAndUnresolvableNodes"]["n1"]
            assert why.startswith(QUOTA) and "queue 'ml'" in why
            assert queues_view(base)["ml"]["charged_gpus"] == 1
        finally:
            proc.terminate()
            proc.wait(timeout=20)
