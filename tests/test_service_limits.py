"""Limits of the live service (issue 22), against a real `horus serve`: bodies are refused before they are read
(no credential: 401/403; too large, chunked or not: 413), an ONNX upload streams to a file and is parsed by another
process while heartbeats go on, job fields have total caps, ``GET /v1/jobs`` is bounded in bytes and pages, and
no float field takes a non-finite number."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_helpers import Server, kill_job_processes, metrics, rss_mib, wait_for, write_onnx_model

MIB = 2**20


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("limits")
    srv = Server(root / "state", "--lease-s", "3", "--predictor", "analytic").start()
    yield srv
    srv.stop()
    kill_job_processes(root)


@pytest.fixture
def api(server: Server) -> Iterator[httpx.Client]:
    with server.client(timeout_s=60) as client:
        yield client


class Body:
    """A chunked request body of ``mib`` MiB (a generator: httpx sends it without a Content-Length) that counts
    what the server let it send."""

    def __init__(self, mib: int) -> None:
        self.mib = mib
        self.sent = 0

    def __iter__(self) -> Iterator[bytes]:
        block = b" " * MIB
        for _ in range(self.mib):
            self.sent += len(block)
            yield block


def post_chunked(server: Server, path: str, body: Body, token: str | None) -> httpx.Response:
    with server.client(token=token, timeout_s=60) as client:
        return client.post(path, content=iter(body), headers={"Content-Type": "application/json"})


# ---- 1. bodies refused before they are read --------------------------------------------------------------
@pytest.mark.parametrize(("token", "status"), [(None, 401), ("not-a-token-of-this-server", 403)])
@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/models", "/v1/agents/x/heartbeat"])
def test_a_huge_chunked_body_without_a_valid_credential_is_refused_unread(server: Server, path: str,
                                                                          token: str | None, status: int) -> None:
    before = rss_mib(server.proc.pid)
    body = Body(400)
    began = time.monotonic()
    response = post_chunked(server, path, body, token)
    assert response.status_code == status, response.text
    assert response.headers["connection"] == "close"  # the rest of the body is never read
    assert time.monotonic() - began < 10.0
    assert body.sent < 64 * MIB, f"the client could send {body.sent / MIB:.0f} MiB"
    assert rss_mib(server.proc.pid) - before < 32, "the server's memory grew with the refused body"


def test_progress_without_a_token_is_refused_unread(server: Server) -> None:
    body = Body(100)
    response = post_chunked(server, "/v1/jobs/1/progress", body, None)
    assert response.status_code == 401 and body.sent < 64 * MIB


def test_a_chunked_body_over_the_limit_is_413_as_it_streams(server: Server) -> None:
    before = rss_mib(server.proc.pid)
    for path in ("/v1/jobs", "/v1/agents/x/heartbeat", "/v1/jobs/1/progress"):
        body = Body(300)
        response = post_chunked(server, path, body, server.token)
        assert response.status_code == 413, (path, response.text)
        assert "larger than 4194304 bytes" in response.json()["detail"]
        assert body.sent < 64 * MIB, f"{path}: the client could send {body.sent / MIB:.0f} MiB"
    assert rss_mib(server.proc.pid) - before < 32


def test_a_declared_length_over_the_limit_is_413_at_once(server: Server) -> None:
    """Only the headers are sent (a raw socket: a client library will not declare more than it sends)."""
    for path, limit in (("/v1/jobs", 4 * MIB), ("/v1/models", 512 * MIB)):
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n"
                         f"Content-Length: {limit + 1}\r\n\r\n".encode())
            answer = sock.makefile("rb").readline()
        assert answer.startswith(b"HTTP/1.1 413"), answer


# ---- 2. an upload does not starve the cluster ---------------------------------------------------------------
def _hwm_mib(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", text).group(1)) / 1024  # type: ignore[union-attr]


def test_an_upload_streams_to_a_file_and_heartbeats_go_on(tmp_path: Path) -> None:
    """48 MiB: the server process never holds the graph (its peak RSS grows by far less than the file; it was 7x
    the file when the body was read whole and parsed in the event loop), heartbeats are answered throughout and
    no agent misses its 3 s lease. The benchmark does 500 MB (benchmarks/upload_heartbeats.py)."""
    pytest.importorskip("onnx")
    model = write_onnx_model(tmp_path / "big.onnx", 48)
    srv = Server(tmp_path / "state", "--lease-s", "3", fake_gpus=1).start()
    try:
        with srv.client(timeout_s=60) as api:
            gpu = {"index": 0, "uuid": "probe-0", "name": "probe", "memory_mib": 16384, "type": "V100", "fake": True}
            assert api.post("/v1/agents", json={"name": "probe", "hostname": "h", "gpus": [gpu]}).status_code == 200
            peak_before = _hwm_mib(srv.proc.pid)
            result: dict[str, object] = {}

            def upload() -> None:
                with srv.client(timeout_s=300) as uploader:
                    result["response"] = uploader.post("/v1/models", content=model.read_bytes())

            thread = threading.Thread(target=upload)
            thread.start()
            latencies, seen = [], []
            while thread.is_alive():
                began = time.monotonic()
                assert api.post("/v1/agents/probe/heartbeat", json={"reports": []}).status_code == 200
                latencies.append(time.monotonic() - began)
                seen += [a["last_seen_s_ago"] for a in api.get("/v1/cluster").json()["agents"] if a["name"] != "probe"]
                time.sleep(0.02)
            thread.join()
            response = result["response"]
            assert isinstance(response, httpx.Response) and response.status_code == 201, response
            assert response.json()["model"].startswith("onnx-") and response.json()["params"] == 1024 * 12288
            assert len(latencies) >= 2 and max(latencies) < 3.0 and max(seen) < 3.0, (latencies, seen)
            assert metrics(api)[("horus_agents_lost_total", ())] == 0
            assert _hwm_mib(srv.proc.pid) - peak_before < 24, "the server held the upload in memory"
            again = api.post("/v1/models", content=model.read_bytes())  # the same file: the same model, not re-parsed
            assert again.status_code == 201 and again.json() == response.json()
        assert list((srv.state_dir / "uploads").iterdir()) == []  # temporary files are gone
    finally:
        srv.stop()


def test_a_bad_upload_is_422_and_leaves_no_file(server: Server, api: httpx.Client) -> None:
    for data in (b"not an onnx file", b"\x08" * 3000):
        response = api.post("/v1/models", content=data)
        assert response.status_code == 422 and "model file" in json.dumps(response.json()["detail"])
    assert api.post("/v1/models", content=b"").status_code == 422
    assert list((server.state_dir / "uploads").iterdir()) == []


def test_an_agent_token_cannot_upload(server: Server) -> None:
    made = subprocess.run([sys.executable, "-m", "horus.cli", "token", "create", "--state-dir", str(server.state_dir),
                           "--role", "agent", "--name", "node-up"], capture_output=True, text=True, check=True)
    token = made.stdout.strip().splitlines()[-1].split()[-1]
    body = Body(100)
    response = post_chunked(server, "/v1/models", body, token)
    assert response.status_code == 403 and body.sent < 64 * MIB


# ---- 3. total caps and a listing bounded in bytes ------------------------------------------------------------
ARG = "a" * 32_000  # the longest argument is 32 KiB; 8 of them and 8 env values of that size fit the total caps


@pytest.mark.parametrize(("body", "field"), [
    ({"command": ["true", *[ARG] * 9]}, "command"),
    ({"command": ["true"], "env": {f"V{i}": ARG for i in range(9)}}, "env"),
])
def test_command_and_env_have_total_caps(api: httpx.Client, body: dict, field: str) -> None:
    response = api.post("/v1/jobs", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(field in item["loc"] for item in detail) and "together" in json.dumps(detail)


def test_the_job_listing_is_bounded_in_bytes_and_pages(server: Server, api: httpx.Client) -> None:
    biggest = {"command": ["true", *[ARG] * 8], "env": {f"V{i}": ARG[:-4] for i in range(8)}}
    ids = []
    for i in range(20):  # ~0.5 MiB each: 10 MiB of jobs
        response = api.post("/v1/jobs", json={**biggest, "name": f"big-{i}"})
        assert response.status_code == 201, response.text
        ids.append(int(response.json()["id"]))
    listed = api.get("/v1/jobs", params={"limit": 1000})
    assert listed.status_code == 200 and len(listed.content) <= 8 * MIB + 4096, len(listed.content)
    page = listed.json()
    assert page["truncated"] is True and page["next"] == int(page["jobs"][-1]["id"])
    assert set(page) == {"jobs", "counts", "truncated", "next"}
    seen = [int(j["id"]) for j in page["jobs"]]
    while page["next"] is not None:
        page = api.get("/v1/jobs", params={"limit": 1000, "before": page["next"]}).json()
        seen += [int(j["id"]) for j in page["jobs"]]
    assert seen == sorted(seen, reverse=True) and len(set(seen)) == len(seen) and set(ids) <= set(seen)
    brief = api.get("/v1/jobs", params={"limit": 1000, "brief": True}).json()  # small rows: one page
    assert brief["truncated"] is False and brief["next"] is None and [int(j["id"]) for j in brief["jobs"]] == seen
    two = api.get("/v1/jobs", params={"limit": 2, "brief": True}).json()
    assert two["truncated"] is False and two["next"] == seen[1] and len(two["jobs"]) == 2
    assert api.get("/v1/jobs", params={"before": 0}).status_code == 422

    env = {**os.environ, "HORUS_SERVER": server.url, "HORUS_TOKEN": server.token, "COLUMNS": "200"}
    cli = subprocess.run([sys.executable, "-m", "horus.cli", "jobs", "--limit", "1000", "--json"], capture_output=True,
                         text=True, env=env, timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    assert [int(j["id"]) for j in json.loads(cli.stdout)["jobs"]] == seen  # the client follows cut pages
    table = subprocess.run([sys.executable, "-m", "horus.cli", "jobs", "--limit", "3"], capture_output=True,
                           text=True, env=env, timeout=120, check=False)
    assert table.returncode == 0 and f"more: horus jobs --limit 3 --before {seen[2]}" in table.stdout, table.stdout
    nxt = subprocess.run([sys.executable, "-m", "horus.cli", "jobs", "--limit", "3", "--before", str(seen[2]),
                          "--json"], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert [int(j["id"]) for j in json.loads(nxt.stdout)["jobs"]] == seen[3:6]


# ---- 5. no non-finite number in any float field --------------------------------------------------------------
@pytest.mark.parametrize(("path", "body"), [
    ("/v1/agents/fuzz-agent/heartbeat", '{"gpus": [{"index": 0, "mem_mib": NaN}]}'),
    ("/v1/agents/fuzz-agent/heartbeat", '{"gpus": [{"index": 0, "util": 0.5, "mem_mib": Infinity}]}'),
    ("/v1/agents/fuzz-agent/heartbeat",
     '{"reports": [{"job_id": "1", "attempt": 1, "status": "running", "rate": NaN}]}'),
    ("/v1/agents/fuzz-agent/heartbeat",
     '{"reports": [{"job_id": "1", "attempt": 1, "status": "running", "iterations": 1e400}]}'),
    ("/v1/agents/fuzz-agent/heartbeat",
     '{"reports": [{"job_id": "1", "attempt": 1, "status": "exited", "gpu_mem_mib": -Infinity}]}'),
    ("/v1/jobs/1/progress", '{"attempt": 1, "iteration": NaN}'),
    ("/v1/jobs/1/progress", '{"attempt": 1, "iteration": Infinity}'),
    ("/v1/jobs", '{"command": ["true"], "gpu_fraction": NaN}'),
])
def test_non_finite_numbers_are_422(api: httpx.Client, path: str, body: str) -> None:
    """With a credential (a job token for /progress: any, the body is checked first); without one the request is
    a 401 before its body is read, so nothing non-finite gets in either way."""
    headers = {"Content-Type": "application/json"}
    if path.endswith("/progress"):
        headers["Authorization"] = "Bearer some-job-token"
    response = api.post(path, content=body, headers=headers)
    assert response.status_code == 422, response.text
    assert "NaN" not in response.text and "Infinity" not in response.text
    with httpx.Client(base_url=str(api.base_url), timeout=30) as anonymous:
        assert anonymous.post(path, content=body, headers={"Content-Type": "application/json"}).status_code == 401


def test_the_server_still_answers(api: httpx.Client, server: Server) -> None:
    """After everything above: healthy, nothing lost, no traceback in its log."""
    assert api.get("/healthz").json()["status"] == "ok"
    wait_for(lambda: api.get("/v1/cluster").json()["agents"], 10, what="the agent")
    assert "Traceback" not in server.log.read_text()
