"""kube-scheduler's extender protocol (``k8s.io/kube-scheduler/extender/v1``) as plain dicts.

Incoming bodies are parsed as JSON dicts, not with the official client's models (those reject
kube-scheduler's own payloads: e.g. ``creationTimestamp: null``). Keys are Go field names; Go's
``encoding/json`` matches them case-insensitively, so we do too. Anything malformed raises
``ProtocolError`` naming the field, which the server answers with HTTP 400.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

MIN_SCORE = 0  # extenderv1.MinExtenderPriority
MAX_SCORE = 10  # extenderv1.MaxExtenderPriority


class ProtocolError(ValueError):
    """A request body that is not a valid extender/v1 message; ``str`` names the field."""


def field(obj: dict[str, Any], name: str, default: Any = None) -> Any:
    """``obj[name]``, or the first key equal to it ignoring case (as Go's json decoding does)."""
    if name in obj:
        return obj[name]
    lower = name.lower()
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == lower:
            return value
    return default


def _expect_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _expect_string(value: Any, where: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise ProtocolError(f"{where}: expected a non-empty string, got {value!r}"[:200])
    return value


@dataclass(frozen=True)
class ExtenderArgs:
    """``ExtenderArgs {Pod, Nodes, NodeNames}``: exactly one of ``nodes`` / ``node_names`` is set."""

    pod: dict[str, Any]
    nodes: list[dict[str, Any]] | None  # full Node objects (nodeCacheCapable: false)
    node_names: list[str]  # candidate names, in the order given

    @property
    def node_cache_capable(self) -> bool:
        return self.nodes is None


def parse_extender_args(body: Any) -> ExtenderArgs:
    """Parse a filter/prioritize request body (already JSON-decoded)."""
    body = _expect_object(body, "ExtenderArgs")
    pod = _expect_object(field(body, "Pod"), "ExtenderArgs.Pod")
    meta = _expect_object(pod.get("metadata"), "ExtenderArgs.Pod.metadata")
    _expect_string(meta.get("name"), "ExtenderArgs.Pod.metadata.name")
    if "spec" in pod and not isinstance(pod["spec"], dict):
        raise ProtocolError("ExtenderArgs.Pod.spec: expected a JSON object")
    raw_nodes = field(body, "Nodes")
    raw_names = field(body, "NodeNames")
    nodes: list[dict[str, Any]] | None = None
    if raw_names is not None and not isinstance(raw_names, list):  # checked even when Nodes is what counts
        raise ProtocolError("ExtenderArgs.NodeNames: expected a JSON array of strings")
    if raw_nodes is not None:
        items = _expect_object(raw_nodes, "ExtenderArgs.Nodes").get("items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise ProtocolError("ExtenderArgs.Nodes.items: expected a JSON array")
        nodes = []
        for i, item in enumerate(items):
            node = _expect_object(item, f"ExtenderArgs.Nodes.items[{i}]")
            meta = _expect_object(node.get("metadata"), f"ExtenderArgs.Nodes.items[{i}].metadata")
            _expect_string(meta.get("name"), f"ExtenderArgs.Nodes.items[{i}].metadata.name")
            nodes.append(node)
        names = [n["metadata"]["name"] for n in nodes]
        if raw_names:
            for i, n in enumerate(raw_names):
                _expect_string(n, f"ExtenderArgs.NodeNames[{i}]")
    elif raw_names is not None:
        names = raw_names
        if not set(map(type, raw_names)) <= {str} or "" in raw_names:  # (C-speed check) name the culprit
            names = [_expect_string(n, f"ExtenderArgs.NodeNames[{i}]") for i, n in enumerate(raw_names)]
    else:
        raise ProtocolError("ExtenderArgs: one of Nodes or NodeNames must be set (both are null)")
    return ExtenderArgs(pod=pod, nodes=nodes, node_names=names)


@dataclass(frozen=True)
class BindingArgs:
    """``ExtenderBindingArgs {PodName, PodNamespace, PodUID, Node}``."""

    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


def parse_binding_args(body: Any) -> BindingArgs:
    body = _expect_object(body, "ExtenderBindingArgs")
    return BindingArgs(
        pod_name=_expect_string(field(body, "PodName"), "ExtenderBindingArgs.PodName"),
        pod_namespace=_expect_string(field(body, "PodNamespace"), "ExtenderBindingArgs.PodNamespace"),
        pod_uid=_expect_string(field(body, "PodUID"), "ExtenderBindingArgs.PodUID", required=False),
        node=_expect_string(field(body, "Node"), "ExtenderBindingArgs.Node"),
    )


def filter_result(args: ExtenderArgs, passed: list[str], failed: dict[str, str],
                  unresolvable: dict[str, str], error: str = "") -> dict[str, Any]:
    """``ExtenderFilterResult``: the passing subset in the form the request used (names or Node objects).

    kube-scheduler reads ``NodeNames`` when nodeCacheCapable (a null list there means *no* node passes),
    ``Nodes`` otherwise; both are filled when full nodes were sent.
    """
    result: dict[str, Any] = {"Nodes": None, "NodeNames": list(passed), "FailedNodes": dict(failed),
                              "FailedAndUnresolvableNodes": dict(unresolvable), "Error": error}
    if args.nodes is not None:
        keep = set(passed)
        result["Nodes"] = {"metadata": {}, "items": [n for n in args.nodes if n["metadata"]["name"] in keep]}
    return result


def host_priority_list(scores: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    """A bare ``HostPriorityList``: ``[{"Host": name, "Score": 0..10}]``, in the order given (scores: Python ints)."""
    return [{"Host": host, "Score": score} for host, score in scores]


def encode_json(payload: Any) -> bytes:
    """``payload`` as compact JSON (orjson; the standard library's json where orjson refuses, e.g. a lone surrogate
    echoed from a request). Bytes are taken as already encoded."""
    if isinstance(payload, bytes):
        return payload
    try:
        return orjson.dumps(payload)
    except orjson.JSONEncodeError:
        return json.dumps(payload, separators=(",", ":")).encode()


_SCORE_TAILS = np.array([f"{score}}}".encode() for score in range(MAX_SCORE + 1)], dtype=object)


def host_prefix(name: str) -> bytes:
    """``{"Host":<name as JSON>,"Score":``: the start of one ``HostPriority`` entry, to which
    ``host_priority_json`` adds the score."""
    try:
        encoded = orjson.dumps(name)
    except orjson.JSONEncodeError:  # a lone surrogate: json escapes it
        encoded = json.dumps(name).encode()
    return b'{"Host":' + encoded + b',"Score":'


def host_priority_json(prefixes: np.ndarray, scores: np.ndarray) -> bytes:
    """``host_priority_list`` already encoded as JSON, from each host's ``host_prefix`` (an object array) and its
    score (integers 0..10, same order): one join instead of a dict per host."""
    return b"[" + b",".join((prefixes + _SCORE_TAILS[scores]).tolist()) + b"]"


def binding_result(error: str = "") -> dict[str, str]:
    return {"Error": error}
