"""Agent internals with real processes: exactly-once launch, adoption after restart, stop escalation, env."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from horus.agent.agent import Agent, DirectLink
from horus.agent.gpus import Telemetry, discover, fake_gpus
from horus.agent.processes import ProcessManager
from service_helpers import kill_job_processes, wait_for


def test_an_attempt_runs_once_and_a_restarted_agent_adopts_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x'); import time; time.sleep(1.5)"]
    first = ProcessManager(tmp_path / "w")
    item = first.launch("7", 1, command, {})
    first.launch("7", 1, command, {})  # same attempt again: nothing new
    wait_for(lambda: item.pid() is not None, what="the wrapper")
    again = ProcessManager(tmp_path / "w")  # an agent restarted after kill -9
    again.scan()
    adopted = again.attempts[("7", 1)]
    again.launch("7", 1, command, {})  # the restarted agent is told to run it: it must not start a second copy
    assert again.report(adopted)["status"] == "running"
    report = wait_for(lambda: (r := again.report(adopted)) and r["status"] == "exited" and r, timeout_s=10,
                      what="exit")
    assert report["exit_code"] == 0 and not report["oom"]
    time.sleep(0.3)
    assert marker.read_text() == "x"
    again.forget(adopted)
    fresh = ProcessManager(tmp_path / "w")
    fresh.scan()
    assert fresh.attempts == {}  # forgotten attempts are not reported again


def test_stop_escalates_to_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    manager = ProcessManager(tmp_path / "w")
    stubborn = [sys.executable, "-c", "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                      "while True: time.sleep(0.1)"]
    item = manager.launch("9", 1, stubborn, {})
    wait_for(lambda: item.pid() is not None, what="start")
    time.sleep(0.3)
    manager.stop(item, grace_s=0.5, now=time.time())
    manager.reap(time.time())
    assert item.alive()  # SIGTERM ignored
    time.sleep(0.6)
    manager.reap(time.time())  # past the grace period: SIGKILL to the group
    wait_for(lambda: not item.alive(), timeout_s=10, what="SIGKILL")
    manager.reap(time.time())
    assert ("9", 1) not in manager.attempts


def test_job_environment_and_mps_limits(tmp_path: Path) -> None:
    gpus = fake_gpus(2, "V100", "n")
    agent = Agent("n", gpus, tmp_path / "w", DirectLink(None), mps="on")
    env = agent.environment({"job_id": "3", "attempt": 2, "command": ["x"], "gpu_uuids": ["fake-n-1"],
                             "start_iteration": 40.0, "predicted": {"util": 0.234, "mem_mib": 1000.0},
                             "cwd": "/tmp", "env": {"A": "b"}})
    assert env["CUDA_VISIBLE_DEVICES"] == "fake-n-1" and env["HORUS_START_ITERATION"] == "40"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "24" and env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=1100M"
    assert env["A"] == "b" and env["HORUS_CWD"] == "/tmp" and Path(env["HORUS_CHECKPOINT_DIR"]).is_dir()
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in Agent("n", gpus, tmp_path / "w2", DirectLink(None)).environment(
        {"job_id": "3", "attempt": 2, "command": ["x"], "gpu_uuids": ["fake-n-1"], "predicted": {"util": 0.2}})
    kill_job_processes(tmp_path)


def test_no_gpu_is_said_in_one_line_and_fake_gpus_have_no_telemetry() -> None:
    gpus, reason = discover()
    if gpus:  # a machine with NVIDIA GPUs
        assert reason is None and all(g["memory_mib"] > 0 for g in gpus)
        return
    assert reason and "\n" not in reason
    assert Telemetry(fake_gpus(1, "T4", "n")).sample({}) == ([], {})
