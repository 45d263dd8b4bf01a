"""The Kubernetes API through the official ``kubernetes`` client (responses kept as plain dicts).

Only what the extender needs: list nodes and pods, read a pod, merge-patch its annotations, post a
``v1.Binding``. Responses are read with ``_preload_content=False`` and decoded as JSON: the client's
models are strict, slow to build, and its Binding call fails to decode the ``Status`` the server returns.
"""

from __future__ import annotations

import json
from typing import Any


MERGE_PATCH = "application/merge-patch+json"  # the client would default to JSON Patch, which a dict is not


class KubeAPIError(RuntimeError):
    """An API call failed; the message names the call and the server's answer."""


class KubeAPI:
    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self._client_mod = client
        self.core = client.CoreV1Api(api_client)

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> KubeAPI:
        """In-cluster service account when running in a pod (and no kubeconfig is given), else kubeconfig."""
        from kubernetes import client, config

        if kubeconfig is None:
            try:
                config.load_incluster_config()
                return cls(client.ApiClient())
            except config.ConfigException:
                pass
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        return cls(client.ApiClient(cfg))

    @classmethod
    def at(cls, host: str) -> KubeAPI:
        """A client for an API server at ``host`` with no credentials (tests, ``kubectl proxy``)."""
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = host
        return cls(client.ApiClient(cfg))

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = fn(*args, _preload_content=False, **kwargs)
        except ApiException as exc:
            detail = exc.body.decode() if isinstance(exc.body, bytes) else exc.body
            raise KubeAPIError(f"{what}: HTTP {exc.status} {exc.reason}: {str(detail)[:300]}") from None
        except Exception as exc:  # connection refused, timeouts...
            raise KubeAPIError(f"{what}: {type(exc).__name__}: {exc}") from None
        data = resp.data
        return json.loads(data) if data else {}

    def list_nodes(self) -> list[dict[str, Any]]:
        return self._call("list nodes", self.core.list_node).get("items") or []

    def list_pods(self) -> list[dict[str, Any]]:
        """Pods of every namespace that may hold resources (finished pods are left out by the server)."""
        return self._call("list pods", self.core.list_pod_for_all_namespaces,
                          field_selector="status.phase!=Succeeded,status.phase!=Failed").get("items") or []

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call(f"get pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace)

    def get_configmap(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call(f"get configmap {namespace}/{name}", self.core.read_namespaced_config_map, name, namespace)

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> dict[str, Any]:
        """Merge ``annotations`` into the pod's (a JSON merge patch); returns the patched pod."""
        body = {"metadata": {"annotations": annotations}}
        return self._call(f"patch pod {namespace}/{name}", self.core.patch_namespaced_pod, name, namespace, body,
                          _content_type=MERGE_PATCH)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST the pod's ``v1.Binding`` to ``node`` (with the pod UID as precondition when given)."""
        c = self._client_mod
        meta = c.V1ObjectMeta(name=name, namespace=namespace, uid=uid or None)
        body = c.V1Binding(api_version="v1", kind="Binding", metadata=meta,
                           target=c.V1ObjectReference(api_version="v1", kind="Node", name=node))
        # this client sends no Content-Type for Bindings unless told; the API server wants one
        self._call(f"bind pod {namespace}/{name} to {node}", self.core.create_namespaced_binding, namespace, body,
                   _headers={"Content-Type": "application/json"})
