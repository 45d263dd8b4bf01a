"""A small HTTP client of the service API, used by the CLI verbs (``horus submit``, ``jobs``, ...)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from horus.errors import HorusInputError
from horus.service.server import DEFAULT_PORT, default_state_dir, read_token

MAX_URL_CHARS = 2048  # a server URL: scheme, host, port and an optional path prefix
MAX_HOST_CHARS = 253  # a DNS name (RFC 1035); each dot-separated label at most 63


def check_host(host: str, source: str) -> str:
    """``host`` (an IP address, or a DNS name of letters, digits, ``-`` and ``_`` in labels of at most 63
    characters), else HorusInputError naming ``source``. Says nothing about whether the name resolves."""
    import ipaddress
    import re

    if not host:
        raise HorusInputError(source, "no host; expected an IP address or a host name")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    if (len(host) > MAX_HOST_CHARS or not host.isascii()
            or not all(re.fullmatch(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?", label) for label in labels)):
        shown = host if len(host) <= 60 else host[:60] + "..."
        raise HorusInputError(source, f"{shown!r} is not an IP address or a host name (letters, digits and '-' in "
                                      f"dot-separated labels of at most 63 characters, {MAX_HOST_CHARS} in all)")
    return host


def check_server_url(url: str, source: str) -> str:
    """``url`` as an HTTP(S) server URL (``http[s]://host[:port][/prefix]``, printable ASCII, at most
    ``MAX_URL_CHARS``; no credentials, query or fragment), without a trailing slash; else HorusInputError."""
    from urllib.parse import urlsplit

    expected = "expected http://HOST[:PORT] or https://HOST[:PORT]"
    shown = url if len(url) <= 60 else url[:60] + "..."
    if len(url) > MAX_URL_CHARS:
        raise HorusInputError(source, f"a URL of {len(url):,} characters; {expected}, at most {MAX_URL_CHARS:,}")
    if not url.isascii() or not url.isprintable() or " " in url:
        raise HorusInputError(source, f"{shown!r} holds a space, a control or a non-ASCII character; {expected}")
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as exc:  # a port out of range or not a number, an unbalanced [IPv6 literal]
        raise HorusInputError(source, f"{shown!r}: {exc}; {expected}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise HorusInputError(source, f"{shown!r}: {expected}")
    if parts.username is not None or parts.password is not None:
        raise HorusInputError(source, f"{shown!r} holds credentials; {expected} (the token goes in --token-file)")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise HorusInputError(source, f"{shown!r} holds a query or a fragment; {expected}")
    if port == 0:
        raise HorusInputError(source, f"{shown!r}: port 0; expected a port in [1, 65535]")
    check_host(host or "", source)
    return url.rstrip("/")


def url_arg(option: str) -> Callable[[str], str]:
    """argparse ``type=`` of a server URL option (``--server``, the extender's ``--api-server``):
    :func:`check_server_url` as a usage error."""
    import argparse

    def server_arg(text: str) -> str:
        try:
            return check_server_url(text, option)
        except HorusInputError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    return server_arg


server_arg = url_arg("--server")


def default_server() -> str:
    """``$HORUS_SERVER`` (checked like ``--server``), else this machine's default port."""
    env = os.environ.get("HORUS_SERVER")
    return check_server_url(env, "$HORUS_SERVER") if env else f"http://127.0.0.1:{DEFAULT_PORT}"


def find_token(token_file: Path | None) -> str | None:
    """``--token-file``, else ``$HORUS_TOKEN``, else the default state directory's token file (if any)."""
    if token_file is not None:
        return read_token(token_file)
    if os.environ.get("HORUS_TOKEN"):
        token = os.environ["HORUS_TOKEN"].strip()
        if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
            raise HorusInputError("$HORUS_TOKEN", "a token is printable ASCII without spaces")
        return token
    path = default_state_dir() / "token"
    return read_token(path) if path.exists() else None


def add_client_args(p: Any) -> None:
    """The options every client verb takes: ``--server``, ``--token-file``, ``--json``."""
    from horus.validation import path_arg

    p.add_argument("--server", type=server_arg,
                   help="service URL (default $HORUS_SERVER or http://127.0.0.1:8470)")
    p.add_argument("--token-file", type=path_arg,
                   help="token file (default $HORUS_TOKEN, else the default state dir's)")
    p.add_argument("--json", action="store_true", help="print JSON")


def client_from(args: Any) -> Client:
    """A client of ``--server`` (or the default) with ``--token-file``'s token (or the default)."""
    return Client(args.server or default_server(), find_token(args.token_file))


class Client:
    def __init__(self, server: str, token: str | None, timeout_s: float = 30.0) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.server = server.rstrip("/")
        try:
            self.http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout_s)
        except (httpx.InvalidURL, UnicodeError, ValueError) as exc:  # checked before; a last line of defence
            raise HorusInputError("--server", f"not a usable URL ({exc})") from None

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self.http.request(method, path, **kwargs)
        except (httpx.InvalidURL, UnicodeError) as exc:
            raise HorusInputError("--server", f"not a usable URL ({exc})") from None
        except httpx.HTTPError as exc:
            raise HorusInputError("--server", f"cannot reach the Horus server at {self.server} "
                                              f"({type(exc).__name__}); is `horus serve` running?") from None
        if response.status_code >= 400:
            raise HorusInputError(f"{method} {path}", f"HTTP {response.status_code}: {_detail(response)}")
        return response.json() if response.content else None

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", "/v1/jobs", json=body)

    def jobs(self, states: list[str] | None = None, limit: int = 1000, before: int | None = None) -> dict[str, Any]:
        """Up to ``limit`` jobs, newest first (older than job ``before``), following the pages the server cut at
        its byte budget; ``next`` (the last page's) is the ``before`` of more jobs, if any."""
        params: dict[str, Any] = {"limit": limit}
        if states:
            params["state"] = states
        if before is not None:
            params["before"] = before
        page = self.request("GET", "/v1/jobs", params=params)
        jobs = list(page["jobs"])
        while page.get("truncated") and page.get("next") and len(jobs) < limit:
            more = {**params, "limit": limit - len(jobs), "before": page["next"]}
            page = self.request("GET", "/v1/jobs", params=more)
            jobs += page["jobs"]
        return {**page, "jobs": jobs}

    def job(self, job_id: int) -> dict[str, Any]:
        return self.request("GET", f"/v1/jobs/{int(job_id)}")

    def cancel(self, job_id: int) -> dict[str, Any]:
        return self.request("POST", f"/v1/jobs/{int(job_id)}/cancel")

    def cluster(self) -> dict[str, Any]:
        return self.request("GET", "/v1/cluster")

    def upload_model(self, path: Path) -> dict[str, Any]:
        from horus.service.models_onnx import MAX_ONNX_BYTES
        from horus.validation import read_input_bytes

        data = read_input_bytes(path, "an ONNX graph", MAX_ONNX_BYTES)
        return self.request("POST", "/v1/models", content=data,
                            headers={"Content-Type": "application/octet-stream"})


def _detail(response: Any) -> str:
    """One line from FastAPI's error body (``detail`` string or list of field errors)."""
    try:
        detail = response.json().get("detail")
    except ValueError:
        return response.text[:300]
    if isinstance(detail, list):
        parts = []
        for item in detail[:3]:
            loc = ".".join(str(p) for p in item.get("loc", []) if p != "body")
            parts.append(f"{loc}: {item.get('msg')}" if loc else str(item.get("msg")))
        return "; ".join(parts)
    return str(detail)
