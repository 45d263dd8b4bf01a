"""The extender's OpenAPI document (served at ``/openapi.json``): what ``horus.k8s.server`` answers, stated for
schemathesis and for readers.

The verbs are a plain ASGI layer (``server.Verbs``), not FastAPI routes, so this document is written by hand from
``horus.k8s.protocol``'s parsers: the bodies they refuse with a 400 (not an object, a missing or empty
``Pod.metadata.name``, neither ``Nodes`` nor ``NodeNames``, a node without a name, a non-string node name, a
non-finite number) are outside these schemas. Keys are matched case-insensitively by the server (as Go's
``encoding/json`` does); the schema names them as kube-scheduler sends them. What the server reads further inside a
pod (its GPU requests and ``horus.io/*`` annotations, see ``horus.k8s.resources``) is left open here: a filter
answers a pod it cannot read with ``Error`` set, a prioritize with a 400.
"""

from __future__ import annotations

from typing import Any

from horus import __version__
from horus.k8s.protocol import MAX_SCORE, MIN_SCORE

_NAME = {"type": "string", "minLength": 1}
_META = {"type": "object", "required": ["name"], "properties": {"name": _NAME}}
_OBJECT = {"type": "object", "required": ["metadata"], "properties": {"metadata": _META}}
_ERROR = {"type": "object", "required": ["Error"], "properties": {"Error": {"type": "string"}}}

SCHEMAS: dict[str, Any] = {
    "Pod": {"type": "object", "required": ["metadata"], "description": "a v1 Pod (only its name is required)",
            "properties": {"metadata": _META, "spec": {"type": "object"}}},
    "NodeList": {"type": "object", "description": "a v1 NodeList (nodeCacheCapable: false)",
                 "properties": {"items": {"type": ["array", "null"], "items": _OBJECT}}},
    "ExtenderArgs": {
        "type": "object", "required": ["Pod"],
        "description": "the pod and its candidate nodes: full Node objects (Nodes) or their names (NodeNames)",
        "properties": {"Pod": {"$ref": "#/components/schemas/Pod"},
                       "Nodes": {"anyOf": [{"$ref": "#/components/schemas/NodeList"}, {"type": "null"}]},
                       "NodeNames": {"type": ["array", "null"], "items": _NAME}},
        "anyOf": [{"required": ["Nodes"], "properties": {"Nodes": {"type": "object"}}},
                  {"required": ["NodeNames"], "properties": {"NodeNames": {"type": "array"}}}]},
    "ExtenderBindingArgs": {
        "type": "object", "required": ["PodName", "PodNamespace", "Node"],
        "properties": {"PodName": _NAME, "PodNamespace": _NAME, "PodUID": {"type": ["string", "null"]},
                       "Node": _NAME}},
    "ExtenderFilterResult": {
        "type": "object", "required": ["NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"],
        "properties": {"Nodes": {"anyOf": [{"type": "object"}, {"type": "null"}]},
                       "NodeNames": {"type": "array", "items": {"type": "string"}},
                       "FailedNodes": {"type": "object", "additionalProperties": {"type": "string"}},
                       "FailedAndUnresolvableNodes": {"type": "object", "additionalProperties": {"type": "string"}},
                       "Error": {"type": "string"}}},
    "HostPriorityList": {"type": "array", "items": {
        "type": "object", "required": ["Host", "Score"],
        "properties": {"Host": {"type": "string"}, "Score": {"type": "integer", "minimum": MIN_SCORE,
                                                              "maximum": MAX_SCORE}}}},
    "ExtenderBindingResult": _ERROR,
    "Error": _ERROR,
}


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}


def _errors(*codes: int) -> dict[str, Any]:
    why = {400: "not a valid extender/v1 message (the Error names the field)", 401: "no credential",
           403: "a wrong bearer token", 413: "the body is larger than 64 MiB"}
    return {str(code): {"description": why[code], "content": _json("Error")} for code in codes}


def _verb(summary: str, body: str, answer: str) -> dict[str, Any]:
    return {"post": {"summary": summary, "requestBody": {"required": True, "content": _json(body)},
                     "responses": {"200": {"description": "the answer", "content": _json(answer)},
                                   **_errors(400, 401, 403, 413)}}}


def openapi(prefix: str = "", *, secured: bool = False) -> dict[str, Any]:
    """The document for verbs under ``prefix``; ``secured``: everything but the probes needs the bearer token."""
    def read(description: str, schema: dict[str, Any], *extra: int, probe: bool = False) -> dict[str, Any]:
        responses = {"200": {"description": description, "content": {"application/json": {"schema": schema}}}}
        for code in extra:
            responses[str(code)] = {"description": "the last listing failed or is stale",
                                    "content": {"application/json": {"schema": schema}}}
        operation: dict[str, Any] = {"responses": responses}
        if secured and not probe:
            operation["responses"].update(_errors(401, 403))
        if probe:
            operation["security"] = []
        return {"get": operation}

    paths = {
        f"{prefix}/filter": _verb("nodes that can run the pod", "ExtenderArgs", "ExtenderFilterResult"),
        f"{prefix}/prioritize": _verb("a score (0-10) per node", "ExtenderArgs", "HostPriorityList"),
        f"{prefix}/bind": _verb("bind the pod to the node (Error says why not)", "ExtenderBindingArgs",
                                "ExtenderBindingResult"),
        "/healthz": read("synced", {"type": "object", "required": ["synced"]}, 503, probe=True),
        "/livez": read("alive", {"type": "object", "required": ["alive"]}, probe=True),
        "/state": read("the per-GPU load Horus believes; with a tenancy, per-queue charged GPUs and limits",
                       {"type": "object", "required": ["load", "tenancy"],
                        "properties": {"tenancy": {"type": ["object", "null"]}}}),
    }
    if not secured:
        for item in paths.values():
            for operation in item.values():
                operation["responses"].pop("401", None)
                operation["responses"].pop("403", None)
    document: dict[str, Any] = {
        "openapi": "3.1.0", "info": {"title": "Horus scheduler extender", "version": __version__},
        "paths": paths, "components": {"schemas": SCHEMAS}}
    if secured:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document
