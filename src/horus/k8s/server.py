"""The extender's HTTP server (FastAPI on uvicorn).

``POST {prefix}/filter``, ``/prioritize``, ``/bind`` speak extender/v1 JSON; ``GET /healthz`` answers the
state of the re-listing (200 while the last listing succeeded and is fresh, 503 before the first, after a
failed one, or when the last success is older than ``stale_after_s``); ``GET /livez`` is 200 while the
process answers at all; ``GET /state`` shows the per-GPU load Horus believes and, with a tenancy, each queue's
charged GPUs, limit and pending requests (``tenancy``; null without one).

A body that is not a valid message (not JSON, a non-finite number, a wrong type) gets HTTP 400 and
``{"Error": "..."}`` naming the field; one over ``MAX_BODY_BYTES`` gets 413; an unexpected failure gets 500
with the same shape. The server never stops on a bad request. The verbs are a plain ASGI layer (``Verbs``)
ahead of FastAPI's router, inside ``BearerAuth``. Bind, large bodies and anything that may wait for the store's
lock or ask the policy per node run in worker threads, so the event loop (and with it ``/healthz``, which takes
no lock) stays free whatever a request costs; a small filter or prioritize on the placement path (about a
millisecond at 1,000 nodes) is answered on the event loop when the store's lock is free at once, saving two
thread hand-offs. JSON is read and written with orjson (the standard library's json takes over where orjson
refuses, so errors read the same). With a token or client certificates (``horus.k8s.security``), everything
else needs one.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from horus.errors import HorusInputError
from horus.k8s.api import KubeAPIError
from horus.k8s.extender import Extender
from horus.k8s.protocol import ExtenderArgs, ProtocolError, encode_json, parse_binding_args, parse_extender_args
from horus.k8s.resources import PodError
from horus.k8s.security import BearerAuth

log = logging.getLogger("horus.k8s")

MAX_BODY_BYTES = 64 * 1024 * 1024  # full Node objects of a large cluster (nodeCacheCapable: false)
INLINE_MAX_BYTES = 256 * 1024  # a filter of ~10,000 node names; larger bodies are decoded in a worker thread


class BodyTooLarge(ProtocolError):
    """A request body over ``MAX_BODY_BYTES`` (HTTP 413)."""


class _NonFinite(ValueError):
    pass


class _Mark:
    """Stands for a non-finite number while locating it in a body."""

    def __init__(self, text: str) -> None:
        self.text = text


def _reject(text: str) -> Any:
    raise _NonFinite(text)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # e.g. 1e999
        raise _NonFinite(text)
    return value


def _find_mark(obj: Any, path: str) -> tuple[str, str] | None:
    if isinstance(obj, _Mark):
        return path, obj.text
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        found = _find_mark(value, f"{path}[{key!r}]" if isinstance(obj, dict) else f"{path}[{key}]")
        if found:
            return found
    return None


def decode_json(raw: bytes) -> Any:
    """``raw`` as JSON; NaN, Infinity and numbers too large for a double are refused (RFC 8259 has none),
    naming where they are. Raises ProtocolError."""
    if not raw:
        raise ProtocolError("empty request body; expected JSON")
    try:  # orjson refuses NaN, Infinity, 1e999, bad UTF-8 and lone surrogates: json below says why (or reads them)
        return orjson.loads(raw)  # (integers beyond 64 bits become floats: no count is that large anyway)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw, parse_constant=_reject, parse_float=_finite)
    except _NonFinite:
        try:  # only on this error path: decode again with marks to name the field
            marked = json.loads(raw, parse_constant=_Mark, parse_float=lambda t: _Mark(t) if not
                                math.isfinite(float(t)) else float(t))
            where, text = _find_mark(marked, "body") or ("body", "?")
        except RecursionError:
            where, text = "body", "a non-finite number"
        raise ProtocolError(f"{where}: {text[:40]} is not a finite number") from None
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, absurd nesting
        raise ProtocolError(f"request body is not valid JSON: {str(exc)[:200]}") from None


class _Disconnected(Exception):
    """The client went away before its request body arrived."""


async def _read_body(scope: dict[str, Any], receive: Any) -> bytes:
    declared_raw = next((value for name, value in scope.get("headers") or () if name == b"content-length"), b"0")
    try:
        declared = int(declared_raw or 0)
    except ValueError:
        declared = 0
    if declared > MAX_BODY_BYTES:
        raise BodyTooLarge(f"request body of {declared} bytes exceeds {MAX_BODY_BYTES}")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BodyTooLarge(f"request body exceeds {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _error(verb: str, message: str) -> dict[str, str]:
    """``{"Error": "<verb>: <message>"}`` on one line (a pod's name may hold a line break)."""
    return {"Error": f"{verb}: " + " ".join(message.splitlines())}


def _encode(payload: Any) -> bytes:
    return encode_json(payload)  # (prioritize's answer comes encoded already)


def _reply(payload: Any, status: int = 200) -> Response:
    return Response(_encode(payload), status_code=status, media_type="application/json")


class Verbs:
    """``POST {prefix}/filter``, ``/prioritize`` and ``/bind`` as a plain ASGI layer in front of FastAPI's router
    (skipping its per-request machinery: ~10-25 % less server CPU per filter+prioritize at 1,000 nodes); other
    paths pass through. Sits inside ``BearerAuth``, so the verbs need the token or certificate exactly as before."""

    def __init__(self, app: Any, extender: Extender, prefix: str = "") -> None:
        self.app = app
        self.extender = extender
        self.paths = {f"{prefix}/{verb}": verb for verb in ("filter", "prioritize", "bind")}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        verb = self.paths.get(scope.get("path", "")) if scope["type"] == "http" else None
        if verb is None:
            await self.app(scope, receive, send)
            return
        headers = [(b"content-type", b"application/json")]
        if scope["method"] != "POST":
            status, payload = 405, _error(verb, f"method {scope['method']} not allowed; use POST")
            headers.append((b"allow", b"POST"))
        else:
            try:
                status, payload = await self.handle(verb, await _read_body(scope, receive))
            except BodyTooLarge as exc:
                status, payload = 413, _error(verb, str(exc))
            except _Disconnected:
                return
        body = _encode(payload)
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def handle(self, verb: str, raw: bytes) -> tuple[int, Any]:
        try:
            done, result = self.inline(verb, raw)
            return 200, (result if done else await run_in_threadpool(self.answer, verb, result))
        except (ProtocolError, PodError, HorusInputError) as exc:
            return 400, _error(verb, str(exc))
        except Exception as exc:  # a bug: answer, log, keep serving
            log.exception("%s failed", verb)
            return 500, _error(verb, f"internal error: {type(exc).__name__}: {str(exc)[:200]}")

    def answer(self, verb: str, raw: bytes | ExtenderArgs) -> Any:
        extender = self.extender
        if isinstance(raw, ExtenderArgs):
            args = raw
        else:
            body = decode_json(raw)
            if verb == "bind":
                return extender.bind(parse_binding_args(body))
            args = parse_extender_args(body)
        return extender.filter(args) if verb == "filter" else extender.prioritize(args)

    def inline(self, verb: str, raw: bytes) -> tuple[bool, Any]:
        """(True, answer) for a small filter / prioritize on the placement path while the store's lock is free
        (about a millisecond: cheaper than two thread hand-offs); else (False, what the worker thread gets)."""
        extender = self.extender
        if verb == "bind" or len(raw) > INLINE_MAX_BYTES or extender.decider.path != "placement":
            return False, raw
        args = parse_extender_args(decode_json(raw))
        lock = extender.store.lock
        if args.nodes is not None or not lock.acquire(blocking=False):  # Nodes may rebuild the model
            return False, args
        try:
            return True, self.answer(verb, args)
        finally:
            lock.release()


def create_app(extender: Extender, prefix: str = "", *, token: str | None = None, client_certs: bool = False,
               stale_after_s: float | None = None) -> FastAPI:
    """The extender's app. ``token`` / ``client_certs``: require a bearer token or a verified client certificate
    on everything but the probes (``horus.k8s.security``). ``stale_after_s``: ``/healthz`` turns 503 when the
    last successful listing is older (None: only the outcome of the last attempt counts)."""
    prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
    app = FastAPI(title="Horus scheduler extender", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.extender = extender
    app.add_middleware(Verbs, extender=extender, prefix=prefix)
    if token or client_certs:  # added last: outermost, so the verbs are behind it
        app.add_middleware(BearerAuth, token=token, client_certs=client_certs)

    from horus.k8s.openapi import openapi

    document = _encode(openapi(prefix, secured=bool(token or client_certs)))

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi_json() -> Response:
        """The OpenAPI document of the verbs and probes (``horus.k8s.openapi``)."""
        return Response(document, media_type="application/json")

    @app.get("/healthz")
    async def healthz() -> Response:
        health = extender.store.health(stale_after_s)
        return _reply(health, 200 if health["synced"] else 503)

    @app.get("/livez")
    async def livez() -> Response:
        return _reply({"alive": True})

    @app.get("/state")
    async def state() -> Response:
        def snapshot() -> dict[str, Any]:
            store = extender.store
            with store.lock:
                model, gate = store.model, store.queues
                tenancy = None if gate is None else gate.view(model, gate.pending(store.pods, store.stamp))
                return {"policy": extender.decider.policy_name, "path": extender.decider.path,
                        "nodes": len(model.nodes), "gpu_nodes": len(model.node_index),
                        "gpus": model.cluster.num_gpus, "max_node_gpus": model.max_node_gpus,
                        "placed_pods": len(model.pods), "unknown_pods": dict(model.unknown),
                        "counts": dict(extender.counts), "load": model.load_by_node(), "tenancy": tenancy}

        return _reply(await run_in_threadpool(snapshot))  # waits for the store's lock off the event loop

    return app


class Resync(threading.Thread):
    """Re-lists nodes and pods every ``period_s`` into the store (a daemon thread)."""

    def __init__(self, extender: Extender, period_s: float) -> None:
        super().__init__(name="horus-k8s-resync", daemon=True)
        self.extender = extender
        self.period_s = period_s
        self.stopped = threading.Event()

    def sync_once(self) -> None:
        """List nodes and pods into the store; a failure is recorded there (``/healthz``) and re-raised."""
        api, store = self.extender.api, self.extender.store
        assert api is not None
        try:
            store.sync(api.list_nodes(), api.list_pods())
        except Exception as exc:
            store.sync_failed(str(exc) if isinstance(exc, KubeAPIError) else f"{type(exc).__name__}: {exc}")
            raise

    def run(self) -> None:
        while not self.stopped.wait(self.period_s):
            try:
                self.sync_once()
            except Exception as exc:  # keep the last good state; try again next period
                log.warning("resync failed: %s", exc)
