"""Who may call the extender, over real HTTP(S) on 127.0.0.1.

* In process: a bearer token guards every endpoint but the probes (401 without, 403 wrong, 200 right).
* ``horus k8s-extender`` as a process with the deployment's options (``--tls-cert``, ``--tls-key``,
  ``--tls-client-ca``, ``--token-file``) and certificates made in the test: HTTPS verified against the test
  CA; kube-scheduler's way in (a client certificate the CA signed, no header) and a person's (the token)
  both pass; a certificate from another CA fails the handshake; plain HTTP gets nothing.
* Bad security options are one line and exit 2; ``--host`` defaults to 127.0.0.1.
"""

from __future__ import annotations

import os
import secrets
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from k8s_helpers import StubAPIServer, gpu_node, gpu_pod, serve, wait_for_extender
from tls_certs import make_certs

from horus.cli import build_parser, main
from horus.k8s.api import KubeAPI
from horus.k8s.decide import Decider
from horus.k8s.extender import Extender
from horus.k8s.predictor import PodPredictor
from horus.k8s.security import client_cert_protocol
from horus.k8s.server import Resync, create_app
from horus.k8s.store import ClusterStore
from horus.predict.analytic import AnalyticPredictor

SRC = Path(__file__).resolve().parents[1] / "src"
TOKEN = secrets.token_hex(32)
FILTER = {"Pod": gpu_pod("p"), "Nodes": None, "NodeNames": ["n1"]}
BIND = {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": "n1"}


def _extender(stub: StubAPIServer) -> Extender:
    extender = Extender(ClusterStore(PodPredictor(AnalyticPredictor())), Decider("horus-paper"), KubeAPI.at(stub.url))
    Resync(extender, 60).sync_once()
    return extender


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certs(tmp_path_factory.mktemp("tls"))


def _context(certs: dict[str, Path], client: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs["ca"].with_suffix(".crt")))
    if client:
        ctx.load_cert_chain(certs[client].with_suffix(".crt"), certs[client].with_suffix(".key"))
    return ctx


def test_bearer_token_guards_everything_but_the_probes() -> None:
    with StubAPIServer([gpu_node("n1", 2)], [gpu_pod("p")]) as stub, \
            serve(create_app(_extender(stub), "/horus", token=TOKEN)) as url:
        for path in ("/healthz", "/livez"):
            assert httpx.get(url + path).status_code == 200
        for verb in ("filter", "prioritize", "bind"):
            body = BIND if verb == "bind" else FILTER
            r = httpx.post(f"{url}/horus/{verb}", json=body)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            assert "Authorization: Bearer <token>" in r.json()["Error"]
            r = httpx.post(f"{url}/horus/{verb}", json=body, headers={"Authorization": "Bearer " + "x" * 64})
            assert r.status_code == 403 and TOKEN not in r.text
            r = httpx.post(f"{url}/horus/{verb}", json=body, headers={"Authorization": f"Basic {TOKEN}"})
            assert r.status_code == 401
        for path in ("/state", "/healthz/", "/nope", "/horus/filter/"):
            assert httpx.get(url + path).status_code == 401, path
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(url + "/state", headers=good).status_code == 200
        assert httpx.post(url + "/horus/filter", json=FILTER, headers=good).json()["NodeNames"] == ["n1"]
        assert httpx.post(url + "/horus/bind", json=BIND, headers=good).json() == {"Error": ""}
        assert stub.pods[("default", "p")]["spec"]["nodeName"] == "n1"


def test_client_certificate_or_token_in_process(certs: dict[str, Path]) -> None:
    """The same rules under uvicorn's h11 protocol in a thread (the process test runs the default one)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    tls = {"ssl_certfile": str(certs["server"].with_suffix(".crt")), "ssl_keyfile": str(certs["server"].with_suffix(".key")),
           "ssl_ca_certs": str(certs["ca"].with_suffix(".crt")), "ssl_cert_reqs": ssl.CERT_OPTIONAL,
           "http": client_cert_protocol(H11Protocol)}
    with StubAPIServer([gpu_node("n1", 2)], [gpu_pod("p")]) as stub, \
            serve(create_app(_extender(stub), token=TOKEN, client_certs=True), **tls) as url:
        assert url.startswith("https://")
        with httpx.Client(verify=_context(certs)) as anonymous:
            assert anonymous.get(url + "/healthz").status_code == 200
            assert anonymous.post(url + "/filter", json=FILTER).status_code == 401
            good = {"Authorization": f"Bearer {TOKEN}"}
            assert anonymous.post(url + "/filter", json=FILTER, headers=good).status_code == 200
        with httpx.Client(verify=_context(certs, "client")) as scheduler:
            assert scheduler.post(url + "/filter", json=FILTER).json()["NodeNames"] == ["n1"]


@pytest.fixture(scope="module")
def process(certs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, StubAPIServer]]:
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    with StubAPIServer([gpu_node("n1", 2)], [gpu_pod("p")]) as stub:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        argv = [sys.executable, "-m", "horus.cli", "k8s-extender", "--api-server", stub.url, "--port", str(port),
                "--tls-cert", str(certs["server"].with_suffix(".crt")),
                "--tls-key", str(certs["server"].with_suffix(".key")),
                "--tls-client-ca", str(certs["ca"].with_suffix(".crt")), "--token-file", str(token_file),
                "--log-level", "warning"]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        base = f"https://127.0.0.1:{port}"
        try:
            with httpx.Client(verify=_context(certs), timeout=2) as client:
                wait_for_extender(client, base, proc)
            yield base, stub
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def test_https_with_the_test_ca_and_probes_without_credentials(process: tuple[str, StubAPIServer],
                                                              certs: dict[str, Path]) -> None:
    base, _ = process
    with httpx.Client(verify=_context(certs)) as client:
        r = client.get(base + "/healthz")
        assert r.status_code == 200 and r.json()["synced"] is True and r.json()["stale_after_s"] == 30.0
        assert client.get(base + "/livez").status_code == 200
    with pytest.raises(httpx.ConnectError):  # not signed by a CA the client trusts
        httpx.get(base + "/healthz", verify=ssl.create_default_context())
    with pytest.raises(httpx.TransportError):  # plain HTTP to the TLS port
        httpx.get(base.replace("https", "http") + "/healthz")


def test_token_401_403_200_over_https(process: tuple[str, StubAPIServer], certs: dict[str, Path]) -> None:
    base, _ = process
    with httpx.Client(verify=_context(certs)) as client:
        assert client.post(base + "/filter", json=FILTER).status_code == 401
        assert client.get(base + "/state").status_code == 401
        assert client.post(base + "/filter", json=FILTER, headers={"Authorization": "Bearer wrong"}).status_code == 403
        r = client.post(base + "/filter", json=FILTER, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200 and r.json()["NodeNames"] == ["n1"]


def test_kube_schedulers_client_certificate_passes_without_a_header(process: tuple[str, StubAPIServer],
                                                                     certs: dict[str, Path]) -> None:
    """What kube-scheduler can do (tlsConfig certFile/keyFile/caFile, no header): filter and bind."""
    base, stub = process
    with httpx.Client(verify=_context(certs, "client")) as scheduler:
        assert scheduler.post(base + "/filter", json=FILTER).json()["NodeNames"] == ["n1"]
        assert scheduler.get(base + "/state").status_code == 200
        assert scheduler.post(base + "/bind", json=BIND).json() == {"Error": ""}
    assert stub.pods[("default", "p")]["spec"]["nodeName"] == "n1"


def test_a_certificate_from_another_ca_is_refused(process: tuple[str, StubAPIServer],
                                                 certs: dict[str, Path]) -> None:
    base, _ = process
    # the handshake fails (with TLS 1.3 the client learns it on its first read)
    with httpx.Client(verify=_context(certs, "rogue_client")) as rogue, pytest.raises(httpx.TransportError):
        rogue.post(base + "/filter", json=FILTER, headers={"Authorization": f"Bearer {TOKEN}"})


def test_host_defaults_to_loopback() -> None:
    assert build_parser().parse_args(["k8s-extender"]).host == "127.0.0.1"


@pytest.mark.parametrize("case,field", [
    ("short-token", "--token-file"), ("missing-token", "--token-file"), ("cert-without-key", "--tls-key"),
    ("key-without-cert", "--tls-cert"), ("ca-without-tls", "--tls-client-ca"), ("not-a-cert", "--tls-cert"),
    ("bad-ca", "--tls-client-ca"),
])
def test_bad_security_options_are_one_line_exit_2(case: str, field: str, certs: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    short = tmp_path / "short"
    short.write_text("REPLACE-ME\n")  # a placeholder left in a Secret
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    crt, key, ca = (str(certs["server"].with_suffix(".crt")), str(certs["server"].with_suffix(".key")),
                    str(certs["ca"].with_suffix(".crt")))
    argv = {"short-token": ["--token-file", str(short)], "missing-token": ["--token-file", str(tmp_path / "none")],
            "cert-without-key": ["--tls-cert", crt], "key-without-cert": ["--tls-key", key],
            "ca-without-tls": ["--tls-client-ca", ca], "not-a-cert": ["--tls-cert", str(junk), "--tls-key", key],
            "bad-ca": ["--tls-cert", crt, "--tls-key", key, "--tls-client-ca", str(junk)]}[case]
    rc = main(["k8s-extender", "--api-server", "http://127.0.0.1:9", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith(f"horus: error: {field}: "), err
    assert "REPLACE-ME" not in err
