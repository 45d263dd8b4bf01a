"""Request gate of the HTTP API: credentials and body size checked while the body is still unread.

A pure ASGI middleware (Starlette's ``@app.middleware("http")`` would sit in front of a streamed body
it cannot limit): a request whose ``Content-Length`` exceeds its path's limit is a 413 at once; the
``admit`` check (authentication from the headers alone) runs before the application reads a byte, so
a request without a valid credential is a 401/403 however large its body; and the body is counted
as it streams in (chunked bodies too), a 413 as soon as the limit is passed. Any response sent before
the body was read whole closes the connection, so the server never drains an unwanted body.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(HTTPException):
    """The request body passed its limit (raised from ``receive``: a 413 that closes the connection)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than {limit} bytes", headers={"Connection": "close"})


async def _refuse(send: Send, status: int, detail: Any, headers: dict[str, str] | None = None) -> None:
    """A JSON ``{"detail": ...}`` response that closes the connection (the body, if any, stays unread)."""
    body = json.dumps({"detail": detail}).encode()
    extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()
             if k.lower() != "connection"]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *extra]})
    await send({"type": "http.response.body", "body": body})


class RequestGate:
    """ASGI middleware: ``limit_for(path)`` bytes of body at most; ``admit(request)`` (headers only, run in a
    worker thread: it may read the store) raises an ``HTTPException`` to refuse a request before its body is read."""

    def __init__(self, app: ASGIApp, *, limit_for: Callable[[str], int],
                 admit: Callable[[Request], Awaitable[None]]) -> None:
        self.app = app
        self.limit_for = limit_for
        self.admit = admit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        request = Request(scope)
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _refuse(send, 413, f"request body larger than {limit} bytes")
            return
        try:
            await self.admit(request)
        except HTTPException as exc:
            await _refuse(send, exc.status_code, exc.detail, exc.headers)
            return
        received = 0
        started = False
        complete = length in (None, "0") and "transfer-encoding" not in request.headers  # no body to read

        async def counted() -> Message:
            nonlocal received, complete
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
                complete = complete or not message.get("more_body", False)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                if not complete and all(k.lower() != b"connection" for k, _ in headers):
                    # answered before its body was read (e.g. a 403): close rather than drain the rest
                    message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge as exc:  # raised where no handler turned it into a response
            if started:
                raise
            await _refuse(send, exc.status_code, exc.detail)
