"""Start the real service for tests: `horus serve` / `horus agent` subprocesses on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A `horus serve` subprocess with its own state directory; restartable after kill -9."""

    def __init__(self, state_dir: Path, *args: str, fake_gpus: int = 2, port: int | None = None) -> None:
        self.state_dir = state_dir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = ["--state-dir", str(state_dir), "--port", str(self.port), "--log-level", "warning",
                     "--heartbeat-s", "0.2", *args]
        if fake_gpus:
            self.args += ["--fake-gpus", str(fake_gpus)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = state_dir.parent / f"serve-{self.port}.log"

    def start(self, timeout_s: float = 30.0) -> Server:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "horus.cli", "serve", *self.args], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"horus serve exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"horus serve did not answer within {timeout_s} s: {self.log.read_text()[-2000:]}")

    @property
    def token(self) -> str:
        return (self.state_dir / "token").read_text().strip()

    def client(self, token: str | None = "default", timeout_s: float = 10.0) -> httpx.Client:
        token = self.token if token == "default" else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()


def wait_for(predicate: Any, timeout_s: float = 30.0, interval_s: float = 0.1, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns a truthy value (returned); TimeoutError naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def metrics(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``/metrics`` as {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def decision_cycles(client: httpx.Client) -> int:
    """How many policy decision steps the server has made (``horus_scheduling_decision_seconds_count``)."""
    return int(metrics(client)[("horus_scheduling_decision_seconds_count", ())])


def wait_decisions(client: httpx.Client, after: int, n: int = 1, timeout_s: float = 30.0) -> int:
    """Wait until the server has made ``n`` decision steps more than ``after``; the new count."""
    return int(wait_for(lambda: (c := decision_cycles(client)) >= after + n and c, timeout_s, 0.05,
                        f"{n} decision step(s) after step {after}"))


def kill_job_processes(state_dir: Path) -> None:
    """SIGKILL every job process group a test left behind (their wrappers wrote pid files)."""
    for pid_file in state_dir.glob("**/jobs/*/*/pid"):
        try:
            pid = int(pid_file.read_text().split()[0])
            os.killpg(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass


def job_states(client: httpx.Client) -> dict[str, str]:
    jobs = client.get("/v1/jobs", params={"limit": 100000}).json()["jobs"]
    return {j["id"]: j["state"] for j in jobs}


def write_onnx_model(path: Path, mib: float) -> Path:
    """A valid ONNX graph of about ``mib`` MiB (one MatMul against a float initializer), for upload tests."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    cols = max(1, int(mib * 2**20 / (4 * 1024)))
    weight = numpy_helper.from_array(np.zeros((1024, cols), dtype=np.float32), name="W")
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], "big",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [8, 1024])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [8, cols])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    del weight
    path.write_bytes(model.SerializeToString())
    return path


def rss_mib(pid: int) -> float:
    """Resident set size of process ``pid`` in MiB (``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")
