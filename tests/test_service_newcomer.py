"""A newcomer's path through the live service: the shipped example job, failed jobs' reasons and log tails,
(tests/test_cli_missing_extras.py: commands whose optional extra is not installed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from service_helpers import Server, kill_job_processes, wait_for

from horus.agent.gpus import fake_gpus
from horus.agent.processes import REPORT_TAIL_BYTES, ProcessManager
from horus.predict.analytic import AnalyticPredictor
from horus.service.scheduler import LiveScheduler, exit_reason
from horus.service.schemas import MAX_LOG_TAIL_CHARS, AttemptReport, job_view
from horus.service.store import NewJob, Store

REPO = Path(__file__).resolve().parents[1]


def _horus(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``horus ARGS`` as a subprocess that imports this checkout (``src`` first on PYTHONPATH)."""
    pythonpath = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "horus.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": pythonpath}, cwd=cwd, check=False)


# ---- the live service: the example job, and what `horus job` says about a failed one ---------------------------
@pytest.fixture()
def server(tmp_path: Path):
    srv = Server(tmp_path / "state", fake_gpus=2).start()
    yield srv
    srv.stop()
    kill_job_processes(srv.state_dir)


def test_the_readme_example_job_runs_from_the_repository_root(server: Server) -> None:
    common = ["--server", server.url, "--token-file", str(server.state_dir / "token")]
    submitted = _horus("submit", *common, "--model", "resnet18_cifar", "--batch-size", "32", "--iterations", "200",
                       "--", sys.executable, "examples/train.py", "--iterations", "200", "--sleep-s", "0.001",
                       cwd=REPO)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split()[1]
    with server.client() as http:
        job = wait_for(lambda: (j := http.get(f"/v1/jobs/{job_id}").json())["state"] in ("finished", "failed") and j,
                       timeout_s=60, what="the example job to end")
    assert job["state"] == "finished", job
    assert job["iterations_done"] == 200.0  # it reported its progress with horus.report
    assert "done: 200 iterations" in job["log_tail"]
    checkpoints = list(server.state_dir.glob(f"agent/*/jobs/{job_id}/checkpoint/example_train.npz"))
    assert checkpoints, "the example checkpoints into HORUS_CHECKPOINT_DIR"
    assert list(server.state_dir.glob(f"agent/*/jobs/{job_id}/1/log")), "logs live where docs/service.md says"


def test_horus_job_shows_the_reason_and_the_end_of_the_log_of_a_failed_job(server: Server) -> None:
    common = ["--server", server.url, "--token-file", str(server.state_dir / "token")]
    script = "import sys; print('loading data from /nowhere'); print('boom: no such dataset', file=sys.stderr); sys.exit(3)"
    submitted = _horus("submit", *common, "--", sys.executable, "-c", script)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split()[1]
    with server.client() as http:
        job = wait_for(lambda: (j := http.get(f"/v1/jobs/{job_id}").json())["state"] == "failed" and j,
                       timeout_s=60, what="the job to fail")
    assert (job["exit_code"], job["reason"], job["log_tail_attempt"]) == (3, "exit code 3", 1)
    assert "boom: no such dataset" in job["log_tail"]
    assert all("log_tail" not in e for e in job["events"])  # kept once, at the top of the view
    shown = _horus("job", *common, job_id)
    assert shown.returncode == 0, shown.stderr
    for text in ("exit code 3", "loading data from /nowhere", "boom: no such dataset", "end of the log of attempt 1"):
        assert text in shown.stdout, shown.stdout


# ---- pieces: the agent's tail, the report's bound, the stored event, the view ---------------------------------
def test_the_agent_sends_a_bounded_tail_of_whole_lines(tmp_path: Path) -> None:
    manager = ProcessManager(tmp_path / "w")
    noisy = "import sys\nfor i in range(2000): print(f'line {i}')\nsys.stdout.buffer.write(b'bad \\xff byte\\n')\n" \
            "sys.exit(5)"
    item = manager.launch("4", 1, [sys.executable, "-c", noisy], {})
    report = wait_for(lambda: (r := manager.report(item)) and r["status"] == "exited" and r, timeout_s=20,
                      what="exit")
    tail = report["log_tail"]
    assert report["exit_code"] == 5 and len(tail.encode()) <= REPORT_TAIL_BYTES + 8  # U+FFFD is 3 bytes, not 1
    assert tail.startswith("line ") and "line 1999\nbad \ufffd byte\n" in tail  # cut at a line start, bytes replaced
    AttemptReport.model_validate(report)  # what a remote agent sends passes the API's checks


def test_attempt_report_bounds_the_tail() -> None:
    base = {"job_id": "1", "attempt": 1, "status": "exited", "exit_code": 1}
    assert AttemptReport.model_validate({**base, "log_tail": "x" * MAX_LOG_TAIL_CHARS}).log_tail
    with pytest.raises(ValueError, match="log_tail"):
        AttemptReport.model_validate({**base, "log_tail": "x" * (MAX_LOG_TAIL_CHARS + 1)})


def test_the_exit_event_keeps_the_tail_and_the_view_shows_the_last_one(tmp_path: Path) -> None:
    store = Store(tmp_path / "h.db")
    scheduler = LiveScheduler(store, AnalyticPredictor(), policy="fifo-exclusive", job_secret=b"s",
                              clock=lambda: 100.0)
    scheduler.register_agent("n0", "host", fake_gpus(1, "V100", "n0"))
    job = scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, command=["true"]))[0]
    scheduler.step()
    huge = "y" * (3 * MAX_LOG_TAIL_CHARS) + "Traceback: it broke\n"  # an in-process agent skips the API's bound
    scheduler.heartbeat("n0", [{"job_id": job.job_id, "attempt": 1, "status": "exited", "exit_code": -9,
                                "log_tail": huge}])
    row = store.job(job.id)
    assert (row.state, row.reason) == ("failed", "killed by signal 9 (SIGKILL)")
    events = store.events(job.id)
    assert len(events[-1]["log_tail"]) == MAX_LOG_TAIL_CHARS and events[-1]["log_tail"].endswith("it broke\n")
    view = job_view(row, events=events)
    assert view["log_tail"].endswith("Traceback: it broke\n") and view["log_tail_attempt"] == 1
    assert "log_tail" not in view["events"][-1] and job_view(row)["reason"] == row.reason
    store.close()


def test_exit_reasons_name_the_signal() -> None:
    assert exit_reason(3) == "exit code 3"
    assert exit_reason(-15) == "killed by signal 15 (SIGTERM)"
    assert exit_reason(-200) == "killed by signal 200"
