"""The extender's HTTP server (FastAPI on uvicorn).

``POST {prefix}/filter``, ``/prioritize``, ``/bind`` speak extender/v1 JSON; ``GET /healthz`` is 200
once the first listing is in (503 before); ``GET /state`` shows the per-GPU load Horus believes.
A body that is not a valid message gets HTTP 400 and ``{"Error": "..."}`` naming the field; an
unexpected failure gets 500 with the same shape. The server never stops on a bad request.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from horus.errors import HorusInputError
from horus.k8s.extender import Extender
from horus.k8s.protocol import ProtocolError, parse_binding_args, parse_extender_args
from horus.k8s.resources import PodError

log = logging.getLogger("horus.k8s")

MAX_BODY_BYTES = 64 * 1024 * 1024  # full Node objects of a large cluster (nodeCacheCapable: false)


def _reply(payload: Any, status: int = 200) -> Response:
    return Response(json.dumps(payload, separators=(",", ":")), status_code=status, media_type="application/json")


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ProtocolError(f"request body of {len(raw)} bytes exceeds {MAX_BODY_BYTES}")
    if not raw:
        raise ProtocolError("empty request body; expected JSON")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, absurd nesting
        raise ProtocolError(f"request body is not valid JSON: {str(exc)[:200]}") from None


def create_app(extender: Extender, prefix: str = "") -> FastAPI:
    prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
    app = FastAPI(title="Horus scheduler extender", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.extender = extender

    async def handle(verb: str, request: Request) -> Response:
        try:
            body = await _json_body(request)
            if verb == "bind":
                return _reply(await run_in_threadpool(extender.bind, parse_binding_args(body)))
            args = parse_extender_args(body)
            if verb == "filter":
                return _reply(extender.filter(args))
            return _reply(extender.prioritize(args))
        except (ProtocolError, PodError, HorusInputError) as exc:
            return _reply({"Error": f"{verb}: {exc}"}, 400)
        except Exception as exc:  # a bug: answer, log, keep serving
            log.exception("%s failed", verb)
            return _reply({"Error": f"{verb}: internal error: {type(exc).__name__}: {str(exc)[:200]}"}, 500)

    @app.post(prefix + "/filter")
    async def filter_(request: Request) -> Response:
        return await handle("filter", request)

    @app.post(prefix + "/prioritize")
    async def prioritize(request: Request) -> Response:
        return await handle("prioritize", request)

    @app.post(prefix + "/bind")
    async def bind(request: Request) -> Response:
        return await handle("bind", request)

    @app.get("/healthz")
    async def healthz() -> Response:
        synced = getattr(extender.store, "synced", True)
        return _reply({"synced": synced}, 200 if synced else 503)

    @app.get("/state")
    async def state() -> Response:
        store = extender.store
        with store.lock:
            model = store.model
            payload = {"policy": extender.decider.policy_name, "path": extender.decider.path,
                       "nodes": len(model.nodes), "gpu_nodes": len(model.node_index),
                       "gpus": model.cluster.num_gpus, "placed_pods": len(model.pods),
                       "unknown_pods": dict(model.unknown), "counts": dict(extender.counts),
                       "load": model.load_by_node()}
        return _reply(payload)

    return app


class Resync(threading.Thread):
    """Re-lists nodes and pods every ``period_s`` into the store (a daemon thread)."""

    def __init__(self, extender: Extender, period_s: float) -> None:
        super().__init__(name="horus-k8s-resync", daemon=True)
        self.extender = extender
        self.period_s = period_s
        self.stopped = threading.Event()

    def sync_once(self) -> None:
        api = self.extender.api
        assert api is not None
        self.extender.store.sync(api.list_nodes(), api.list_pods())

    def run(self) -> None:
        while not self.stopped.wait(self.period_s):
            try:
                self.sync_once()
            except Exception as exc:  # keep the last good state; try again next period
                log.warning("resync failed: %s", exc)
