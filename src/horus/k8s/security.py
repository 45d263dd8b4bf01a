"""Who may call the extender: a bearer token, TLS, and client certificates (``horus k8s-extender`` options).

* ``--token-file``: every endpoint but ``/healthz`` and ``/livez`` needs ``Authorization: Bearer <token>``
  (401 without, 403 with a wrong one; compared in constant time; never logged).
* ``--tls-cert`` / ``--tls-key``: HTTPS (uvicorn's own TLS).
* ``--tls-client-ca``: a client may present a certificate signed by this CA instead of the token. This is how
  kube-scheduler authenticates: its extender configuration has a ``tlsConfig`` (``certFile``/``keyFile``) but no
  way to send a header. A presented certificate that does not verify fails the TLS handshake; a connection
  without one still reaches ``/healthz`` (kubelet's probes send none) and needs the token elsewhere.

uvicorn does not hand the peer certificate to the app, so ``client_cert_protocol`` wraps its HTTP protocol: on a
connection whose certificate verified, every request's ``scope["state"]`` carries ``CLIENT_CERT``. Should a
future uvicorn stop copying ``app_state`` into the scope, certificate holders get 401: it fails closed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import ssl
from pathlib import Path
from typing import Any

from horus.errors import HorusInputError

OPEN_PATHS = frozenset({"/healthz", "/livez"})  # probes: no credentials, nothing secret in the answer
CLIENT_CERT = "horus.client_cert"  # scope["state"] key: the connection presented a verified client certificate
MIN_TOKEN_CHARS = 32  # e.g. `openssl rand -hex 32`; shorter is refused (a placeholder left in a Secret)


def read_token(path: str | Path) -> str:
    """The token in ``path`` (surrounding whitespace stripped). Raises HorusInputError naming ``--token-file``."""
    from horus.validation import read_secret

    return read_secret(path, "--token-file", min_chars=MIN_TOKEN_CHARS, hint=" (e.g. `openssl rand -hex 32`)")


def tls_options(cert: str | None, key: str | None, client_ca: str | None) -> dict[str, Any]:
    """uvicorn's TLS keyword arguments, after loading the files once (so a bad file is a one-line error at
    start, naming the option, not a traceback). Empty without ``cert``."""
    if bool(cert) != bool(key):
        raise HorusInputError("--tls-cert" if key else "--tls-key", "--tls-cert and --tls-key go together")
    if client_ca and not cert:
        raise HorusInputError("--tls-client-ca", "client certificates need TLS: give --tls-cert and --tls-key too")
    if not cert:
        return {}
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise HorusInputError("--tls-cert", f"cannot load {cert} with key {key}: {exc}") from None
    options: dict[str, Any] = {"ssl_certfile": cert, "ssl_keyfile": key}
    if client_ca:
        try:
            context.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise HorusInputError("--tls-client-ca", f"cannot load {client_ca}: {exc}") from None
        # optional, not required: kubelet's HTTPS probes of /healthz present no certificate
        options.update(ssl_ca_certs=client_ca, ssl_cert_reqs=ssl.CERT_OPTIONAL)
    return options


def client_cert_protocol(base: type | None = None) -> type:
    """uvicorn's HTTP protocol class (``base``; default its "auto" choice) marking requests that arrive on a
    connection with a verified client certificate (``scope["state"][CLIENT_CERT]``)."""
    if base is None:
        from uvicorn.config import HTTP_PROTOCOLS
        from uvicorn.importer import import_from_string

        base = import_from_string(HTTP_PROTOCOLS["auto"])
    assert base is not None

    class ClientCertProtocol(base):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if transport.get_extra_info("peercert"):  # {} or None without a (verified) certificate
                self.app_state = {**self.app_state, CLIENT_CERT: True}

    ClientCertProtocol.__name__ = f"ClientCert{base.__name__}"
    return ClientCertProtocol


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()


class BearerAuth:
    """ASGI middleware: requests other than ``OPEN_PATHS`` need the bearer token or a verified client
    certificate (when ``client_certs``). The answer names what is missing; the token is never echoed."""

    def __init__(self, app: Any, token: str | None, client_certs: bool = False) -> None:
        self.app = app
        self._digest = _digest(token) if token else None
        self.client_certs = client_certs

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        verdict = None if scope["type"] != "http" or scope.get("path") in OPEN_PATHS else self._verdict(scope)
        if verdict is None:
            await self.app(scope, receive, send)
            return
        status, message = verdict
        body = json.dumps({"Error": message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="horus-extender"'))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _verdict(self, scope: dict[str, Any]) -> tuple[int, str] | None:
        """None when the request may pass, else (status, message)."""
        if self.client_certs and (scope.get("state") or {}).get(CLIENT_CERT):
            return None
        header = next((v for k, v in scope.get("headers") or () if k == b"authorization"), None)
        need = "'Authorization: Bearer <token>'" if self._digest else "a client certificate"
        if self._digest and self.client_certs:
            need += " or a client certificate"
        if header is None:
            return 401, f"unauthenticated: this request needs {need}"
        scheme, _, value = header.decode("latin-1").partition(" ")
        if self._digest is None or scheme.lower() != "bearer":
            return 401, f"unauthenticated: this request needs {need}"
        if not hmac.compare_digest(_digest(value.strip()), self._digest):
            return 403, "forbidden: wrong bearer token"
        return None
