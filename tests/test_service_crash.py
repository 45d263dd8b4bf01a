"""Crash safety: `kill -9` of the server while a client streams submissions, and of an agent running jobs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import httpx
import pytest

from service_helpers import Server, free_port, kill_job_processes, wait_for

N_SUBMISSIONS = 1000
KILLS = 5
RETRY_FOR_S = 60.0  # a submission not acknowledged for this long fails the test


def test_kill9_during_a_stream_of_submissions_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """Every acknowledged job exists exactly once, reaches a final state, and ran exactly once."""
    runs = tmp_path / "runs"
    runs.mkdir()
    server = Server(tmp_path / "state", "--lease-s", "5", fake_gpus=4).start()
    acked: dict[str, str] = {}
    retries = [0]  # requests the client saw fail (the server was down) and sent again
    stop = threading.Event()

    def client() -> None:
        """Submit N_SUBMISSIONS jobs, each retried until acknowledged; raises (in the main thread, via the
        future) on a bad answer or a submission that cannot get through for RETRY_FOR_S."""
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token}"},
                          timeout=5.0) as http:
            for i in range(N_SUBMISSIONS):
                key = f"key-{i:04d}"
                body = {"command": ["sh", "-c", f"echo x >> {runs / key}"], "model": "a3c", "batch_size": 32,
                        "idempotency_key": key}
                deadline = time.monotonic() + RETRY_FOR_S
                while True:
                    if stop.is_set():
                        raise RuntimeError("the test stopped the client")
                    try:
                        response = http.post("/v1/jobs", json=body)
                    except httpx.HTTPError as exc:
                        retries[0] += 1
                        if time.monotonic() > deadline:
                            raise AssertionError(f"{key} not acknowledged within {RETRY_FOR_S} s: {exc!r}") from exc
                        stop.wait(0.05)  # back off while the server restarts
                        continue
                    assert response.status_code in (200, 201), response.text
                    acked[key] = response.json()["id"]
                    break

    rng = random.Random(7)
    kills = 0
    pool = ThreadPoolExecutor(1)
    future = pool.submit(client)
    try:
        # Kill at random points of the stream (after a random number of acknowledged submissions), not after
        # random delays: the 1000 submissions can take only a few seconds, and timed kills then often came
        # after the stream had ended (the kills >= 3 check below failed on a fast machine).
        for at in sorted(rng.sample(range(50, N_SUBMISSIONS - 50), KILLS)):
            wait_for(lambda: future.done() or len(acked) >= at, timeout_s=120, interval_s=0.01,
                     what=f"{at} acknowledged submissions ({len(acked)} so far)")
            if future.done():
                break
            server.kill9()
            kills += 1
            # down until the client has seen a random number (1-5) of failed requests, not for a fixed time
            seen = retries[0] + rng.randint(1, 5)
            wait_for(lambda: future.done() or retries[0] >= seen, timeout_s=30, interval_s=0.01,
                     what="the client to find the server down")
            server.start()
        try:
            future.result(timeout=240)  # the client's own failure surfaces here, as soon as it happens
        except FutureTimeout:
            pytest.fail(f"client did not finish ({len(acked)} acknowledged)")
        with server.client() as api:
            def all_final() -> dict | None:
                data = api.get("/v1/jobs", params={"limit": 100000}).json()
                return data if not {"queued", "running"} & set(data["counts"]) else None

            data = wait_for(all_final, timeout_s=240, interval_s=0.5, what="every job to end")
            events = {j["id"]: [e["kind"] for e in api.get(f"/v1/jobs/{j['id']}").json()["events"]]
                      for j in data["jobs"] if j["attempt"] != 1}  # the jobs that were started more than once
    finally:
        stop.set()
        pool.shutdown(wait=True)
        server.stop()
        kill_job_processes(tmp_path)
    jobs = data["jobs"]
    keys = [j["idempotency_key"] for j in jobs]
    assert kills >= 3, "the stream ended before the server could be killed several times"
    assert len(acked) == N_SUBMISSIONS
    assert sorted(keys) == sorted(acked), "lost or duplicated submissions"
    assert {j["idempotency_key"]: j["id"] for j in jobs} == acked  # the acknowledged id is the stored one
    assert data["counts"] == {"finished": N_SUBMISSIONS}, data["counts"]
    assert {p.name for p in runs.iterdir()} <= set(acked)
    ran = {key: (runs / key).read_text().count("x") if (runs / key).exists() else 0 for key in acked}
    wrong = {key: (n, next(j for j in jobs if j["idempotency_key"] == key)["id"]) for key, n in ran.items() if n != 1}
    assert not wrong, f"jobs that did not run exactly once (key: (runs, job id)): {wrong}; events: {events}"
    print(f"\n{N_SUBMISSIONS} submissions, {kills} kill -9s, {retries[0]} client retries: 0 lost, 0 duplicated")


def _agent(server: Server, name: str, workdir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "horus.cli", "agent", "--server", server.url, "--token-file",
                             str(server.state_dir / "token"), "--name", name, "--workdir", str(workdir),
                             "--fake-gpus", "2", "--heartbeat-s", "0.2", "--grace-s", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_killed_agent_jobs_fence_themselves_before_they_are_requeued(tmp_path: Path) -> None:
    """kill -9 of an agent: its attempt's wrapper stops the job when the lease runs out, before the server requeues
    it (at lease + fence_kill_s + 1 s), so attempts 1 and 2 never run at the same time."""
    server = Server(tmp_path / "state", "--no-agent", "--lease-s", "2", fake_gpus=0).start()
    agents: list[subprocess.Popen[bytes]] = []
    try:
        with server.client() as api:
            agents.append(_agent(server, "a1", tmp_path / "a1"))
            wait_for(lambda: len(api.get("/v1/cluster").json()["gpus"]) == 2, what="agent a1")
            # attempt 1 sleeps (it will be orphaned); attempt 2 finishes at once
            job = api.post("/v1/jobs", json={"command": ["sh", "-c", 'test "$HORUS_ATTEMPT" = 2 || sleep 120'],
                                             "model": "a3c", "batch_size": 32}).json()
            wait_for(lambda: api.get(f"/v1/jobs/{job['id']}").json()["state"] == "running", what="running")
            pid_file = tmp_path / "a1" / "jobs" / job["id"] / "1" / "pid"
            orphan = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().split()[0], what="pid"))
            agents[0].send_signal(signal.SIGKILL)
            agents[0].wait(10)
            fenced_at = wait_for(lambda: (not os.path.exists(f"/proc/{orphan}") or _zombie(orphan)) and time.time(),
                                 timeout_s=15, interval_s=0.02, what="the orphaned attempt to fence itself")
            requeued = wait_for(lambda: (j := api.get(f"/v1/jobs/{job['id']}").json())["state"] == "queued" and j,
                                timeout_s=15, interval_s=0.02, what="requeue after the lease")
            assert requeued["queued_since"] >= fenced_at - 0.05, "requeued while the old attempt still ran"
            assert requeued["lost_runs"] == 1 and requeued["reason"] == "lost"
            assert api.get("/v1/cluster").json()["gpus"] == []  # the lost machine left the cluster
            exit_file = tmp_path / "a1" / "jobs" / job["id"] / "1" / "exit.json"
            assert json.loads(exit_file.read_text())["fenced"] is True
            assert "fenced: the agent's lease expired" in (exit_file.parent / "log").read_text()
            agents.append(_agent(server, "a2", tmp_path / "a2"))
            finished = wait_for(lambda: (j := api.get(f"/v1/jobs/{job['id']}").json())["state"] == "finished" and j,
                                timeout_s=20, what="attempt 2 on a2")
            assert finished["attempt"] == 2
            assert [e["kind"] for e in finished["events"]] == ["submitted", "started", "requeued:lost", "started",
                                                                "finished"]
            agents.append(_agent(server, "a1", tmp_path / "a1"))  # a1 comes back, finds its fenced attempt, forgets it
            wait_for(lambda: (exit_file.parent / "forgotten").exists(), timeout_s=20, what="a1 to forget attempt 1")
            assert api.get(f"/v1/jobs/{job['id']}").json()["state"] == "finished"  # its old report changed nothing
    finally:
        for agent in agents:
            agent.kill()
            agent.wait(10)
        server.stop()
        kill_job_processes(tmp_path)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("port", [free_port()])
def test_server_refuses_a_corrupt_state_file(tmp_path: Path, port: int) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "horus.db").write_bytes(b"this is not sqlite" * 100)
    result = subprocess.run([sys.executable, "-m", "horus.cli", "serve", "--state-dir", str(state), "--port",
                             str(port), "--fake-gpus", "1"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("horus: error: --state-dir:") and "not a usable Horus state file" in result.stderr
    assert (state / "horus.db").read_bytes() == b"this is not sqlite" * 100  # untouched
