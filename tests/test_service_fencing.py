"""At most once: an attempt stops itself before the server may run the job elsewhere.

The wrapper of every attempt reads a lease its agent renews with each accepted heartbeat; when the lease runs
out (agent frozen, killed or cut off) it sends SIGTERM, then SIGKILL, and records a fenced exit. The server
requeues a silent agent's attempts only after lease + fence_kill_s + 1 s. Checked here with the wrapper alone
and with real `horus serve` / `horus agent` processes whose agent is frozen with SIGSTOP across the lease;
the jobs write their own record of when they ran (independent of what Horus believes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from service_helpers import Server, kill_job_processes, wait_for

from horus.agent import wrapper

RECORDER = ("import os, sys, time\n"
            "path = os.path.join(sys.argv[1], f\"{os.environ['HORUS_JOB_ID']}.{os.environ['HORUS_ATTEMPT']}.{os.getpid()}\")\n"
            "end = time.time() + float(sys.argv[2])\n"
            "with open(path, 'a', buffering=1) as fh:\n"
            "    while time.time() < end:\n"
            "        fh.write(f'{time.time():.3f}\\n')\n"
            "        time.sleep(0.05)\n")


def _run_wrapper(folder: Path, *command: str) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-S", wrapper.__file__, str(folder), "--", *command],
                            start_new_session=True)


def _lease(folder: Path, in_s: float, kill_s: float) -> None:
    (folder / "lease.tmp").write_text(f"{time.monotonic() + in_s:.3f} {kill_s:.3f}\n")
    os.replace(folder / "lease.tmp", folder / "lease")


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_wrapper_fences_a_job_that_ignores_sigterm(tmp_path: Path) -> None:
    folder = tmp_path / "a"
    folder.mkdir()
    _lease(folder, 0.5, 0.5)
    started = time.monotonic()
    proc = _run_wrapper(folder, "sh", "-c", f"echo $$ > {tmp_path}/child; trap '' TERM; sleep 30")
    proc.wait(timeout=10)
    took = time.monotonic() - started
    assert proc.returncode == -signal.SIGKILL  # the wrapper took its whole group down, itself included
    assert 0.9 <= took < 3.0, took
    child = int((tmp_path / "child").read_text())
    assert wait_for(lambda: _gone(child), timeout_s=5, what="the job to be gone")
    status = json.loads((folder / "exit.json").read_text())
    assert status["fenced"] is True and status["exit_code"] == -signal.SIGKILL
    assert "fenced: the agent's lease expired" in (folder / "log").read_text()


def test_wrapper_fences_a_cooperative_job_with_sigterm_only(tmp_path: Path) -> None:
    folder = tmp_path / "a"
    folder.mkdir()
    _lease(folder, 0.3, 5.0)
    proc = _run_wrapper(folder, "sleep", "30")
    assert proc.wait(timeout=10) == -signal.SIGKILL
    status = json.loads((folder / "exit.json").read_text())
    assert status == {**status, "fenced": True, "exit_code": -signal.SIGTERM}


def test_renewed_lease_keeps_the_job_running_and_an_expired_one_never_starts_it(tmp_path: Path) -> None:
    folder = tmp_path / "renewed"
    folder.mkdir()
    _lease(folder, 0.5, 0.5)
    proc = _run_wrapper(folder, "sleep", "1.5")
    for _ in range(10):  # renewed every 0.2 s for 2 s: the job ends by itself
        time.sleep(0.2)
        _lease(folder, 0.5, 0.5)
    assert proc.wait(timeout=10) == 0
    assert json.loads((folder / "exit.json").read_text()) == {**json.loads((folder / "exit.json").read_text()),
                                                               "exit_code": 0}
    assert "fenced" not in json.loads((folder / "exit.json").read_text())
    late = tmp_path / "late"
    late.mkdir()
    _lease(late, -1.0, 0.5)
    proc = _run_wrapper(late, "touch", str(tmp_path / "ran"))
    assert proc.wait(timeout=10) == 0
    assert not (tmp_path / "ran").exists()
    assert json.loads((late / "exit.json").read_text())["fenced"] is True


def _agent(server: Server, name: str, workdir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "horus.cli", "agent", "--server", server.url, "--token-file",
                             str(server.state_dir / "token"), "--name", name, "--workdir", str(workdir),
                             "--fake-gpus", "1", "--heartbeat-s", "0.2", "--grace-s", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _intervals(records: Path, job_id: str) -> dict[int, tuple[float, float]]:
    """Attempt -> (first, last) time its process recorded itself alive."""
    out: dict[int, tuple[float, float]] = {}
    for path in records.glob(f"{job_id}.*"):
        times = [float(t) for t in path.read_text().split()]
        attempt = int(path.name.split(".")[1])
        assert attempt not in out, "two processes of one attempt"
        out[attempt] = (min(times), max(times))
    return out


@pytest.mark.parametrize(("freeze_s", "outcome"), [(0.8, "kept"), (3.0, "fenced"), (6.5, "lost")])
def test_frozen_agent_never_lets_two_attempts_run_at_once(tmp_path: Path, freeze_s: float, outcome: str) -> None:
    """Lease 2 s: fence after 1.6 s, requeue after 2 + 2 + 1 = 5 s of silence. A short freeze changes nothing; a
    freeze past the fence stops the job, which is requeued when the agent speaks again (not counted against it);
    a freeze past the requeue time loses the agent, and the job runs elsewhere only after it stopped."""
    server = Server(tmp_path / "state", "--no-agent", "--lease-s", "2", fake_gpus=0).start()
    records = tmp_path / "records"
    records.mkdir()
    agents = {name: _agent(server, name, tmp_path / name) for name in ("a1", "a2")}
    try:
        with server.client() as api:
            wait_for(lambda: len(api.get("/v1/cluster").json()["gpus"]) == 2, what="two agents")
            job = api.post("/v1/jobs", json={"command": [sys.executable, "-c", RECORDER, str(records), "9"]}).json()
            placed = wait_for(lambda: (j := api.get(f"/v1/jobs/{job['id']}").json())["placement"] and j,
                              what="the job to start")
            host = placed["placement"][0]["agent"]
            wait_for(lambda: list(records.glob(f"{job['id']}.1.*")), what="attempt 1 to record itself")
            agents[host].send_signal(signal.SIGSTOP)
            time.sleep(freeze_s)
            agents[host].send_signal(signal.SIGCONT)
            done = wait_for(lambda: (j := api.get(f"/v1/jobs/{job['id']}").json())["state"] == "finished" and j,
                            timeout_s=40, what="the job to finish")
        spans = _intervals(records, job["id"])
        kinds = [e["kind"] for e in done["events"]]
        if outcome == "kept":
            assert sorted(spans) == [1] and "requeued:fenced" not in kinds, kinds
        else:
            assert sorted(spans) == [1, 2], spans
            assert spans[1][1] < spans[2][0], f"attempts overlapped: {spans}"
            assert kinds.count("started") == 2
            assert f"requeued:{outcome}" in kinds, kinds
            assert done["lost_runs"] == (1 if outcome == "lost" else 0)
    finally:
        for proc in agents.values():
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait(10)
        server.stop()
        kill_job_processes(tmp_path)


def test_a_job_that_finished_while_its_agent_was_away_is_not_run_again(tmp_path: Path) -> None:
    """The only agent freezes while its job ends; the server loses the agent and requeues the job (nowhere to run
    it). When the agent comes back and reports the attempt's exit 0, the waiting job is finished, not rerun."""
    server = Server(tmp_path / "state", "--no-agent", "--lease-s", "2", fake_gpus=0).start()
    records = tmp_path / "records"
    records.mkdir()
    agent = _agent(server, "a1", tmp_path / "a1")
    try:
        with server.client() as api:
            wait_for(lambda: len(api.get("/v1/cluster").json()["gpus"]) == 1, what="the agent")
            job = api.post("/v1/jobs", json={"command": [sys.executable, "-c", RECORDER, str(records), "1"]}).json()
            wait_for(lambda: list(records.glob(f"{job['id']}.1.*")), what="attempt 1 to record itself")
            agent.send_signal(signal.SIGSTOP)
            wait_for(lambda: api.get(f"/v1/jobs/{job['id']}").json()["state"] == "queued", timeout_s=15,
                     what="the job to be requeued")
            agent.send_signal(signal.SIGCONT)
            done = wait_for(lambda: (j := api.get(f"/v1/jobs/{job['id']}").json())["state"] == "finished" and j,
                            timeout_s=20, what="the job to finish")
        assert sorted(_intervals(records, job["id"])) == [1]
        assert done["attempt"] == 1 and [e["kind"] for e in done["events"]] == ["submitted", "started",
                                                                                "requeued:lost", "finished"]
    finally:
        agent.send_signal(signal.SIGCONT)
        agent.kill()
        agent.wait(10)
        server.stop()
        kill_job_processes(tmp_path)
