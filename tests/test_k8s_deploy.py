"""deploy/kubernetes/ agrees with the code: verbs and port, managed resources, RBAC for every API call the
extender makes, CLI arguments the parser accepts, an example pod Horus can read; and the security set-up:
HTTPS with client certificates from kube-scheduler's tlsConfig, files that exist in mounted Secrets, probes on
the endpoints that need no credentials, a NetworkPolicy admitting only the scheduler's pods. Objects are
decoded with the official client's (strict) models. No cluster is involved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from horus.cli import build_parser
from horus.k8s import resources
from horus.k8s.resources import pod_job_spec
from horus.k8s.security import OPEN_PATHS

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes"
MODELS = {"Deployment": "V1Deployment", "Service": "V1Service", "ServiceAccount": "V1ServiceAccount",
          "ClusterRole": "V1ClusterRole", "ClusterRoleBinding": "V1ClusterRoleBinding", "Role": "V1Role",
          "RoleBinding": "V1RoleBinding", "ConfigMap": "V1ConfigMap", "Pod": "V1Pod", "Namespace": "V1Namespace",
          "Secret": "V1Secret", "NetworkPolicy": "V1NetworkPolicy"}


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
    assert ext["urlPrefix"] == f"https://{meta['name']}.{meta['namespace']}.svc:{port['port']}"
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


def _container(name: str) -> dict[str, Any]:
    (container,) = _one("Deployment", name)["spec"]["template"]["spec"]["containers"]
    return container


def _secret_file(deployment: str, path: str) -> tuple[str, str]:
    """(Secret name, key) that ``path`` is in the Deployment's pod, through its volume mounts."""
    spec = _one("Deployment", deployment)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    (container,) = spec["containers"]
    for mount in container["volumeMounts"]:
        prefix = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(prefix) and "secret" in volumes[mount["name"]]:
            return volumes[mount["name"]]["secret"]["secretName"], path[len(prefix):]
    raise AssertionError(f"{path} is in no Secret mounted by {deployment}")


def _secret_keys(name: str) -> set[str]:
    secret = _one("Secret", name)
    return set(secret.get("stringData") or {}) | set(secret.get("data") or {})


def test_extender_serves_https_with_token_and_client_certificates_from_secrets() -> None:
    container = _container("horus-extender")
    args = build_parser().parse_args(container["args"])
    # in the pod it must listen beyond loopback for kube-scheduler to reach it; token, client certificates
    # and the NetworkPolicy protect the port
    assert args.host == "0.0.0.0"
    files = {"tls_cert": args.tls_cert, "tls_key": args.tls_key, "tls_client_ca": args.tls_client_ca,
             "token_file": args.token_file}
    assert all(files.values()), files
    for path in files.values():
        secret, key = _secret_file("horus-extender", path)
        assert key in _secret_keys(secret), (secret, key)
    assert _secret_file("horus-extender", args.tls_cert)[0] == _secret_file("horus-extender", args.tls_key)[0]
    assert all(m.get("readOnly") for m in container["volumeMounts"] if m["name"] != "tmp")
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["scheme"] == "HTTPS" and get["path"] in OPEN_PATHS  # kubelet sends no credentials
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_scheduler_calls_the_extender_over_https_with_its_client_certificate() -> None:
    config = yaml.safe_load(_one("ConfigMap", "horus-scheduler-config")["data"]["config.yaml"])
    (ext,) = config["extenders"]
    assert ext["urlPrefix"].startswith("https://") and ext["enableHTTPS"] is True
    tls = ext["tlsConfig"]
    # the fields of KubeSchedulerConfiguration v1's ExtenderTLSConfig; there is none for a header or token
    assert set(tls) <= {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"}
    assert not tls.get("insecure")
    secrets_used = set()
    for field in ("caFile", "certFile", "keyFile"):
        secret, key = _secret_file("horus-scheduler", tls[field])
        assert key in _secret_keys(secret), (field, secret, key)
        secrets_used.add(secret)
    assert secrets_used == {"horus-scheduler-client-tls"}


def test_network_policy_admits_only_the_scheduler_to_the_extender() -> None:
    policy = _one("NetworkPolicy", "horus-extender")
    extender = _one("Deployment", "horus-extender")
    scheduler = _one("Deployment", "horus-scheduler")
    namespace = policy["metadata"]["namespace"]
    assert extender["metadata"]["namespace"] == scheduler["metadata"]["namespace"] == namespace
    selected = policy["spec"]["podSelector"]["matchLabels"]
    extender_labels = extender["spec"]["template"]["metadata"]["labels"]
    scheduler_labels = scheduler["spec"]["template"]["metadata"]["labels"]
    assert selected and selected.items() <= extender_labels.items()  # it selects the extender's pods...
    assert not selected.items() <= scheduler_labels.items()  # ...and not the scheduler's
    assert "Ingress" in policy["spec"]["policyTypes"]
    (container,) = extender["spec"]["template"]["spec"]["containers"]
    ports = {p["containerPort"] for p in container["ports"]}
    rules = policy["spec"]["ingress"]
    assert rules
    for rule in rules:
        peers = rule["from"]
        assert peers, "an ingress rule without 'from' admits every source"
        for peer in peers:
            # same namespace (no namespaceSelector), no address ranges, only pods carrying the scheduler's labels
            assert set(peer) == {"podSelector"}, peer
            wanted = peer["podSelector"].get("matchLabels") or {}
            assert wanted and wanted.items() <= scheduler_labels.items() and not peer["podSelector"].get(
                "matchExpressions")
            assert not wanted.items() <= extender_labels.items()
        assert {p["port"] for p in rule["ports"]} <= ports and all(p["protocol"] == "TCP" for p in rule["ports"])


def test_placeholder_secrets_are_refused_by_the_extender(tmp_path: Path) -> None:
    """The Secrets in deploy/kubernetes/ are placeholders: an extender started with them must not run."""
    from horus.errors import HorusInputError
    from horus.k8s.security import read_token

    token = tmp_path / "token"
    token.write_text(_one("Secret", "horus-extender-token")["stringData"]["token"])
    with pytest.raises(HorusInputError):
        read_token(token)
    for name in ("horus-extender-tls", "horus-scheduler-client-tls"):
        assert all(not v for v in _one("Secret", name)["stringData"].values())
