"""deploy/kubernetes/ agrees with the code: verbs and port, managed resources, RBAC for every API call the
extender makes, CLI arguments the parser accepts, an example pod Horus can read. Objects are decoded with
the official client's (strict) models. No cluster is involved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from horus.cli import build_parser
from horus.k8s import resources
from horus.k8s.resources import pod_job_spec

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes"
MODELS = {"Deployment": "V1Deployment", "Service": "V1Service", "ServiceAccount": "V1ServiceAccount",
          "ClusterRole": "V1ClusterRole", "ClusterRoleBinding": "V1ClusterRoleBinding", "Role": "V1Role",
          "RoleBinding": "V1RoleBinding", "ConfigMap": "V1ConfigMap", "Pod": "V1Pod", "Namespace": "V1Namespace"}


def _docs() -> list[dict[str, Any]]:
    out = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        out.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return out


def _one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in _docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


def test_every_manifest_decodes_with_the_official_models() -> None:
    api = client.ApiClient()
    docs = _docs()
    assert {d["kind"] for d in docs} <= set(MODELS)
    for doc in docs:
        obj = api._ApiClient__deserialize(doc, MODELS[doc["kind"]])  # strict: raises on wrong types
        assert obj.metadata.name == doc["metadata"]["name"]


def test_scheduler_configuration_points_at_the_extender() -> None:
    config = yaml.safe_load(_one("ConfigMap", "horus-scheduler-config")["data"]["config.yaml"])
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1" and config["kind"] == "KubeSchedulerConfiguration"
    (ext,) = config["extenders"]
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["bindVerb"]) == ("filter", "prioritize", "bind")
    assert ext["nodeCacheCapable"] is True and ext["weight"] > 0
    managed = {r["name"]: r["ignoredByScheduler"] for r in ext["managedResources"]}
    assert managed == {resources.GPU: True, resources.GPUMEM: True, resources.GPUCORES: True}
    service = _one("Service", "horus-extender")
    (port,) = service["spec"]["ports"]
    meta = service["metadata"]
    assert ext["urlPrefix"] == f"http://{meta['name']}.{meta['namespace']}.svc:{port['port']}"
    deployment = _one("Deployment", "horus-extender")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in container["ports"]}[port["targetPort"]] == port["port"]
    args = build_parser().parse_args(container["args"])
    assert args.port == port["port"] and args.policy == "horus-paper"
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    assert config["profiles"][0]["schedulerName"] == _one("Pod", "resnet50-train")["spec"]["schedulerName"]


@pytest.mark.parametrize("resource,verb", [("nodes", "list"), ("pods", "list"), ("pods", "get"), ("pods", "patch"),
                                           ("bindings", "create"), ("configmaps", "get")])
def test_extender_rbac_allows_each_call(resource: str, verb: str) -> None:
    rules = _one("ClusterRole", "horus-extender")["rules"]
    assert any(resource in r["resources"] and verb in r["verbs"] and r["apiGroups"] == [""] for r in rules)
    binding = _one("ClusterRoleBinding", "horus-extender")
    assert binding["subjects"][0]["name"] == _one("Deployment", "horus-extender")["spec"]["template"]["spec"][
        "serviceAccountName"]


def test_example_pod_is_readable_and_takes_its_gpus_from_the_annotation() -> None:
    pod = _one("Pod", "resnet50-train")
    pod["metadata"].setdefault("namespace", "default")
    spec = pod_job_spec(pod)
    assert (spec.num_gpus, spec.model, spec.batch_size, spec.gpumem_mib, spec.gpucores) == (1, "resnet50", 64, 8000, 50)
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        f"metadata.annotations['{resources.GPU_IDS}']"
