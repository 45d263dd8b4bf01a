"""Identities of the live service against a real `horus serve` on 127.0.0.1: users see and act on their own jobs
only, agents only heartbeat as themselves, tokens are stored hashed, revoking one ends its access."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service_helpers import Server, kill_job_processes, wait_for

LIGHT = {"model": "a3c", "batch_size": 32}  # predicted ~7 % utilization: two share one GPU


def horus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "horus.cli", *args], capture_output=True, text=True, timeout=60)


def create(server: Server, name: str, role: str) -> str:
    done = horus("token", "create", "--name", name, "--role", role, "--state-dir", str(server.state_dir))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("roles") / "state", fake_gpus=1).start()
    yield s
    s.stop()
    kill_job_processes(s.state_dir)


@pytest.fixture(scope="module")
def tokens(server: Server) -> dict[str, str]:
    return {"alice": create(server, "alice", "user"), "bob": create(server, "bob", "user"),
            "node7": create(server, "node7", "agent")}


def as_(server: Server, token: str) -> httpx.Client:
    return server.client(token=token)


def test_users_see_and_cancel_only_their_own_jobs(server: Server, tokens: dict[str, str]) -> None:
    alice, bob, admin = as_(server, tokens["alice"]), as_(server, tokens["bob"]), server.client()
    a = alice.post("/v1/jobs", json={"command": ["sleep", "60"], "name": "alice-job", **LIGHT}).json()
    b = bob.post("/v1/jobs", json={"command": ["sleep", "60"], "name": "bob-job", "env": {"SECRET": "s3"},
                                   **LIGHT}).json()
    assert (a["owner"], b["owner"]) == ("alice", "bob")
    wait_for(lambda: all(admin.get(f"/v1/jobs/{j['id']}").json()["state"] == "running" for j in (a, b)),
             what="both jobs run")
    assert [j["id"] for j in alice.get("/v1/jobs").json()["jobs"]] == [a["id"]]
    assert alice.get("/v1/jobs").json()["counts"] == {"running": 1}
    assert {j["id"] for j in admin.get("/v1/jobs").json()["jobs"]} >= {a["id"], b["id"]}
    # another user's job does not exist for alice: not readable, not cancellable, its secret not seen
    assert alice.get(f"/v1/jobs/{b['id']}").status_code == 404
    assert alice.post(f"/v1/jobs/{b['id']}/cancel").status_code == 404
    assert admin.get(f"/v1/jobs/{b['id']}").json()["state"] == "running"
    # the cluster map shows that alice shares her GPU, but not with whom
    gpu = alice.get("/v1/cluster").json()["gpus"][0]
    assert sorted(gpu["residents"], key=str) == [a["id"], None]
    hidden = next(j for j in gpu["jobs"] if j["id"] is None)
    assert hidden["name"] is None and hidden["owner"] is None and hidden["model"] is None
    assert "bob" not in alice.get("/v1/cluster").text and "s3" not in alice.get("/v1/cluster").text
    admin_gpu = admin.get("/v1/cluster").json()["gpus"][0]
    assert sorted(admin_gpu["residents"]) == sorted([a["id"], b["id"]])
    # the ledger: the set both share, with bob's id hidden from alice
    sets = wait_for(lambda: alice.get("/v1/colocations").json()["sets"], what="a ledger entry")
    assert sorted(sets[0]["jobs"], key=str) == [int(a["id"]), None] and sets[0]["outcome"] == "running"
    # alice cancels her own; the set closes as cancelled, bob's job runs on
    assert alice.post(f"/v1/jobs/{a['id']}/cancel").json()["state"] == "cancelled"
    closed = wait_for(lambda: [s for s in admin.get("/v1/colocations").json()["sets"] if s["ended"]], what="closed")
    assert closed[0]["outcome"] == "cancelled" and sorted(closed[0]["jobs"]) == sorted([int(a["id"]), int(b["id"])])
    assert admin.get(f"/v1/jobs/{b['id']}").json()["state"] == "running"
    assert admin.post(f"/v1/jobs/{b['id']}/cancel").json()["state"] == "cancelled"


def test_idempotency_keys_are_per_user(server: Server, tokens: dict[str, str]) -> None:
    alice, bob = as_(server, tokens["alice"]), as_(server, tokens["bob"])
    first = alice.post("/v1/jobs", json={"command": ["true"], "idempotency_key": "k1"})
    again = alice.post("/v1/jobs", json={"command": ["true"], "idempotency_key": "k1"})
    other = bob.post("/v1/jobs", json={"command": ["true"], "idempotency_key": "k1"})
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert first.json()["id"] == again.json()["id"] != other.json()["id"]
    assert other.json()["idempotency_key"] == "k1" and other.json()["owner"] == "bob"


def test_an_agent_token_only_heartbeats_as_its_own_agent(server: Server, tokens: dict[str, str]) -> None:
    agent = as_(server, tokens["node7"])
    assert agent.post("/v1/jobs", json={"command": ["true"]}).status_code == 403
    assert agent.get("/v1/jobs").status_code == 403
    assert agent.get("/v1/cluster").status_code == 403
    assert agent.post("/v1/agents", json={"name": "other", "hostname": "h", "gpus": []}).status_code == 403
    assert agent.post("/v1/agents/other/heartbeat", json={"reports": []}).status_code == 403
    assert agent.post("/v1/agents", json={"name": "node7", "hostname": "h", "gpus": []}).status_code == 200
    assert agent.post("/v1/agents/node7/heartbeat", json={"reports": []}).status_code == 200
    # a user cannot pose as an agent and receive other jobs' commands
    user = as_(server, tokens["alice"])
    assert user.post("/v1/agents", json={"name": "alice", "hostname": "h", "gpus": []}).status_code == 403


def test_tokens_are_stored_hashed_listed_without_secrets_and_revocable(server: Server,
                                                                      tokens: dict[str, str]) -> None:
    db = server.state_dir / "horus.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        stored = " ".join(str(v) for row in conn.execute("SELECT * FROM tokens") for v in row)
    for token in tokens.values():
        assert token not in stored
    listing = horus("token", "list", "--state-dir", str(server.state_dir))
    assert listing.returncode == 0 and "alice" in listing.stdout
    assert all(t not in listing.stdout for t in tokens.values())
    temp = create(server, "carol", "user")
    assert as_(server, temp).get("/v1/whoami").json() == {"name": "carol", "role": "user"}
    assert horus("token", "revoke", "carol", "--state-dir", str(server.state_dir)).returncode == 0
    assert as_(server, temp).get("/v1/jobs").status_code == 403
    refused = horus("token", "create", "--name", "alice", "--role", "user", "--state-dir", str(server.state_dir))
    assert refused.returncode == 2 and "exists" in refused.stderr and refused.stderr.count("\n") == 1


def test_bad_token_commands_are_one_line_errors(tmp_path: Path) -> None:
    missing = horus("token", "list", "--state-dir", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no Horus state" in missing.stderr
    assert not (tmp_path / "nowhere").exists()


def test_no_path_lets_a_user_touch_or_read_another_users_job(server: Server, tokens: dict[str, str]) -> None:
    """Every route of the OpenAPI schema, called by alice with bob's job id wherever a path takes one (and with a
    plausible body): nothing changes bob's job, and no answer carries bob's name, command or secret."""
    alice, bob, admin = as_(server, tokens["alice"]), as_(server, tokens["bob"]), server.client()
    secret, marker = "b0b-s3cret-91d", "bob-private-cmd-7"
    job = bob.post("/v1/jobs", json={"command": ["sh", "-c", "sleep 60", marker], "name": "bob-job2", **LIGHT,
                                     "secret_env": {"BOB_KEY": secret}}).json()
    wait_for(lambda: admin.get(f"/v1/jobs/{job['id']}").json()["state"] == "running", what="bob's job runs")
    before = admin.get(f"/v1/jobs/{job['id']}").json()
    bodies: dict[str, object] = {"/v1/jobs/{job_id}/progress": {"attempt": 1, "iteration": 1e9},
                                 "/v1/agents": {"name": "vm", "hostname": "h", "gpus": []},
                                 "/v1/agents/join": {"name": "alice-node"},
                                 "/v1/agents/{name}/heartbeat": {"reports": [{"job_id": job["id"], "attempt": 1,
                                                                              "status": "exited", "exit_code": 1}]},
                                 "/v1/jobs": {"command": ["true"]}}
    paths = admin.get("/openapi.json").json()["paths"]
    tried = 0
    for template, methods in paths.items():
        url = template.replace("{job_id}", job["id"]).replace("{name}", before["placement"][0]["agent"])
        for method in methods:
            body = bodies.get(template)
            response = alice.request(method.upper(), url, json=body if method == "post" else None,
                                     content=b"\x00not onnx" if template == "/v1/models" else None)
            tried += 1
            assert response.status_code < 500, (method, template, response.text[:200])
            if "{" in template or template.startswith("/v1/agents"):
                assert response.status_code in (401, 403, 404, 422), (method, template, response.status_code)
            for leaked in (secret, marker, "bob-job2"):
                assert leaked not in response.text, (method, template, leaked)
    after = admin.get(f"/v1/jobs/{job['id']}").json()
    assert tried >= 10
    assert (after["state"], after["attempt"], after["iterations_done"]) == ("running", 1, before["iterations_done"])
    assert after["env"] == {"BOB_KEY": "(secret)"}
    assert secret not in bob.get(f"/v1/jobs/{job['id']}").text  # not even its owner reads it back
    admin.post(f"/v1/jobs/{job['id']}/cancel")
