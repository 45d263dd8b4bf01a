"""Agent internals with real processes: exactly-once launch, adoption after restart, stop escalation, env."""

from __future__ import annotations

import sys
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
    wrapper = item.proc
    assert first.launch("7", 1, command, {}) is item and item.proc is wrapper  # same attempt again: nothing new
    wait_for(lambda: item.pid() is not None, what="the wrapper")
    again = ProcessManager(tmp_path / "w")  # an agent restarted after kill -9
    again.scan()
    adopted = again.attempts[("7", 1)]
    again.launch("7", 1, command, {})  # the restarted agent is told to run it: it must not start a second copy
    assert adopted.proc is None  # no wrapper started by the restarted agent
    assert again.report(adopted)["status"] == "running" and adopted.pid() == item.pid()
    report = wait_for(lambda: (r := again.report(adopted)) and r["status"] == "exited" and r, timeout_s=10,
                      what="exit")
    assert report["exit_code"] == 0 and not report["oom"]
    # the command has ended (exit.json is written after it): its one copy wrote the marker once
    assert marker.read_text() == "x"
    assert (adopted.folder / "log").read_text().count("start:") == 1
    assert first.launch("7", 1, command, {}).exit_status() is not None and wrapper.wait(timeout=10) == 0
    assert marker.read_text() == "x"  # launching an ended attempt runs nothing
    again.forget(adopted)
    fresh = ProcessManager(tmp_path / "w")
    fresh.scan()
    assert fresh.attempts == {}  # forgotten attempts are not reported again


def test_stop_escalates_to_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    manager = ProcessManager(tmp_path / "w")
    term, beats = tmp_path / "term", tmp_path / "beats"
    stubborn = [sys.executable, "-c", "import signal, time\n"
                f"signal.signal(signal.SIGTERM, lambda *_: open({str(term)!r}, 'a').close())\n"
                f"while True:\n    open({str(beats)!r}, 'a').write('.')\n    time.sleep(0.05)"]

    def beating() -> bool:
        """The job writes a beat every 50 ms: wait for two more than now (it is alive and unblocked)."""
        seen = beats.stat().st_size if beats.exists() else 0
        return wait_for(lambda: beats.exists() and beats.stat().st_size >= seen + 2, timeout_s=10, interval_s=0.02,
                        what="two more beats of the job")

    item = manager.launch("9", 1, stubborn, {})
    wait_for(lambda: item.pid() is not None, what="start")
    beating()  # its SIGTERM handler is installed before the first beat
    t0 = 1000.0  # reap and stop take the time as an argument: no real grace period to sit out
    manager.stop(item, grace_s=0.5, now=t0)
    wait_for(term.exists, timeout_s=10, what="the job to receive SIGTERM")
    manager.reap(t0 + 0.49)  # before the deadline: nothing escalated
    beating()  # SIGTERM handled and the job goes on
    assert item.alive() and ("9", 1) in manager.attempts
    assert manager.report(item) is None  # being stopped: not reported
    manager.reap(t0 + 0.5)  # the deadline: SIGKILL to the group
    wait_for(lambda: not item.alive(), timeout_s=10, what="SIGKILL to end the job")
    assert item.exit_status() is None  # the wrapper was killed too (its group), so it recorded nothing
    manager.reap(t0 + 0.6)
    assert ("9", 1) not in manager.attempts and (item.folder / "forgotten").exists()


def test_job_environment_and_mps_limits(tmp_path: Path) -> None:
    gpus = fake_gpus(2, "V100", "n")
    agent = Agent("n", gpus, tmp_path / "w", DirectLink(None), mps="on")
    env = agent.environment({"job_id": "3", "attempt": 2, "command": ["x"], "gpu_uuids": ["fake-n-1"],
                             "start_iteration": 40.0, "predicted": {"util": 0.234, "mem_mib": 1000.0},
                             "cwd": "/tmp", "env": {"A": "b"}})
    assert env["CUDA_VISIBLE_DEVICES"] == "fake-n-1" and env["HORUS_START_ITERATION"] == "40"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "24" and env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=1100M"
    assert env["A"] == "b" and env["HORUS_CWD"] == "/tmp" and Path(env["HORUS_CHECKPOINT_DIR"]).is_dir()
    grown = agent.environment({"job_id": "3", "attempt": 3, "command": ["x"], "gpu_uuids": ["fake-n-1"],
                               "predicted": {"util": 0.234, "mem_mib": 1000.0}, "mem_limit_mib": 1650})
    assert grown["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=1650M" and grown["HORUS_MEM_LIMIT_MIB"] == "1650"
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


def test_an_exit_written_between_two_looks_is_not_reported_as_vanished(tmp_path: Path) -> None:
    """The wrapper may write exit.json and exit between ``report``'s first look at it and its liveness check;
    that attempt ended normally and must not be reported as vanished (the server would run it again)."""
    from horus.agent.processes import Attempt

    class FirstLookEarly(Attempt):
        """Its first read of exit.json happens before the wrapper wrote it (the race, made deterministic)."""

        looks = 0

        def exit_status(self):  # type: ignore[no-untyped-def]
            self.looks += 1
            return None if self.looks == 1 else super().exit_status()

    manager = ProcessManager(tmp_path / "w")
    item = manager.launch("5", 1, [sys.executable, "-c", "pass"], {})
    assert item.proc is not None and item.proc.wait(timeout=30) == 0
    wait_for(lambda: item.exit_status() is not None, what="exit.json")
    racing = FirstLookEarly(item.job_id, item.attempt, item.folder, proc=item.proc)
    report = manager.report(racing)
    assert racing.looks == 2 and report is not None
    assert (report["status"], report["exit_code"]) == ("exited", 0)
