"""Builders for Kubernetes objects, a stub API server and an extender server on 127.0.0.1 (k8s tests)."""

from __future__ import annotations

import copy
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import uvicorn


def gpu_node(name: str, gpus: int = 4, product: str = "Tesla-V100-SXM2-16GB", memory: int | None = 16384,
             uuids: list[str] | None = None, rv: str = "1") -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus), "kubernetes.io/hostname": name}
    if memory is not None:
        labels["nvidia.com/gpu.memory"] = str(memory)
    meta: dict[str, Any] = {"name": name, "labels": labels, "resourceVersion": rv, "creationTimestamp": None}
    if uuids:
        meta["annotations"] = {"horus.io/gpu-uuids": ",".join(uuids)}
    return {"metadata": meta, "spec": {},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)}, "allocatable": {"nvidia.com/gpu": str(gpus)}}}


def cpu_node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {}, "resourceVersion": "1"}, "spec": {},
            "status": {"capacity": {"cpu": "8"}}}


def gpu_pod(name: str, *, gpus: int = 1, model: str | None = "resnet50", batch: int = 64, ns: str = "default",
            uid: str | None = None, gpumem: int | None = None, gpucores: int | None = None,
            node: str | None = None, annotations: dict[str, str] | None = None, phase: str = "Pending",
            rv: str = "1") -> dict[str, Any]:
    limits: dict[str, Any] = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    if gpumem is not None:
        limits["nvidia.com/gpumem"] = str(gpumem)
    if gpucores is not None:
        limits["nvidia.com/gpucores"] = str(gpucores)
    ann = dict(annotations or {})
    if model is not None:
        ann.update({"horus.io/model": model, "horus.io/batch-size": str(batch)})
    spec: dict[str, Any] = {"containers": [{"name": "train", "image": "trainer:1", "resources": {"limits": limits}}],
                            "schedulerName": "default-scheduler"}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}", "annotations": ann,
                         "resourceVersion": rv, "creationTimestamp": None},
            "spec": spec, "status": {"phase": phase}}


class StubAPIServer:
    """A tiny kube-apiserver stand-in: lists, gets, merge-patches pods and accepts Bindings, recording calls.

    ``calls`` holds (method, path, content type, body, t_start, t_end) per request, in arrival order.
    """

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], *, delay_s: float = 0.0,
                 configmaps: list[dict[str, Any]] | None = None) -> None:
        self.configmaps = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in configmaps or []}
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}
        self.pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): copy.deepcopy(p) for p in pods}
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.delay_s = delay_s
        self.fail_bind: set[str] = set()
        self.fail_status = 0  # when set, every request is answered with this HTTP status (an API server in trouble)
        self._rv = 100
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                began = time.perf_counter()
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                url = urlparse(self.path)
                if stub.delay_s:
                    time.sleep(stub.delay_s)
                status, payload = stub.route(method, url.path, parse_qs(url.query), body,
                                             self.headers.get("Content-Type", ""))
                with stub.lock:
                    stub.calls.append({"method": method, "path": url.path, "query": url.query,
                                       "content_type": self.headers.get("Content-Type", ""), "body": body,
                                       "status": status, "t0": began, "t1": time.perf_counter()})
                self._send(status, payload)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

            def do_POST(self) -> None:
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _status(self, code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
        return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                      "message": message, "code": code}

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any,
              content_type: str) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        with self.lock:
            if self.fail_status:
                return self._status(self.fail_status, "InternalError", "injected failure")
            if method == "GET" and path == "/api/v1/nodes":
                return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {},
                             "items": list(self.nodes.values())}
            if method == "GET" and path == "/api/v1/pods":
                selector = query.get("fieldSelector", [""])[0]
                skip = {s.split("!=")[1] for s in selector.split(",") if s.startswith("status.phase!=")}
                items = [p for p in self.pods.values() if p.get("status", {}).get("phase") not in skip]
                return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
            if method == "GET" and len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] \
                    and parts[4] == "configmaps":
                cm = self.configmaps.get((parts[3], parts[5]))
                return (200, cm) if cm is not None else self._status(404, "NotFound",
                                                                     f'configmaps "{parts[5]}" not found')
            if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
                pod = self.pods.get((parts[3], parts[5]))
                if pod is None:
                    return self._status(404, "NotFound", f'pods "{parts[5]}" not found')
                if method == "GET":
                    return 200, pod
                if method == "PATCH":
                    if content_type != "application/merge-patch+json":
                        return self._status(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")
                    ann = (body.get("metadata") or {}).get("annotations") or {}
                    pod["metadata"].setdefault("annotations", {}).update(ann)
                    self._rv += 1
                    pod["metadata"]["resourceVersion"] = str(self._rv)
                    return 200, pod
            if method == "POST" and len(parts) == 5 and parts[4] == "bindings":
                if content_type != "application/json":
                    return self._status(415, "UnsupportedMediaType", f"unsupported media type {content_type!r}")
                name = body["metadata"]["name"]
                pod = self.pods.get((parts[3], name))
                if pod is None:
                    return self._status(404, "NotFound", f'pods "{name}" not found')
                if name in self.fail_bind:
                    return self._status(500, "InternalError", "injected failure")
                uid = body["metadata"].get("uid")
                if uid and uid != pod["metadata"]["uid"]:
                    return self._status(409, "Conflict", "Precondition failed: UID in precondition")
                if pod["spec"].get("nodeName"):
                    return self._status(409, "Conflict", f"pod {name} is already assigned to a node")
                pod["spec"]["nodeName"] = body["target"]["name"]
                self._rv += 1
                pod["metadata"]["resourceVersion"] = str(self._rv)
                return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        return self._status(404, "NotFound", f"no route {method} {path}")

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        with self.lock:
            return [c for c in self.calls if c["method"] == method]

    def __enter__(self) -> StubAPIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def serve(app: Any, **config: Any) -> Iterator[str]:
    """Run ``app`` on uvicorn in a thread on a free 127.0.0.1 port; yields its base URL. ``config``: more
    ``uvicorn.Config`` arguments (TLS files, the HTTP protocol class); the URL is then https."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # loop="asyncio": the same event loop in tests whether or not uvloop is installed
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", loop="asyncio",
                                           **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"{'https' if config.get('ssl_certfile') else 'http'}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def wait_for_extender(client: httpx.Client, base: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Poll ``base``/healthz through ``client`` until it answers 200; fail with the process's output if it exited,
    or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if client.get(base + "/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        assert time.monotonic() < deadline, "extender did not come up"
        time.sleep(0.1)
