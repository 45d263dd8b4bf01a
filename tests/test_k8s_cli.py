"""``horus k8s-extender`` as a user runs it: a real process serving HTTP, and one-line errors (exit 2)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from horus.cli import main
from k8s_helpers import StubAPIServer, gpu_node, gpu_pod, wait_for_extender

SRC = Path(__file__).resolve().parents[1] / "src"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_extender_process_serves_the_verbs() -> None:
    pods = [gpu_pod("p"), gpu_pod("r", node="n1", phase="Running", annotations={"horus.io/gpu-ids": "0"})]
    with StubAPIServer([gpu_node("n1", 2)], pods) as stub:
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc = subprocess.Popen([sys.executable, "-m", "horus.cli", "k8s-extender", "--api-server", stub.url,
                                 "--host", "127.0.0.1", "--port", str(port), "--resync-s", "0.2",
                                 "--log-level", "warning"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(timeout=1) as client:
                wait_for_extender(client, base, proc)
            result = httpx.post(base + "/filter", json={"Pod": pods[0], "Nodes": None, "NodeNames": ["n1"]}).json()
            assert result["NodeNames"] == ["n1"]
            bind = {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": "n1"}
            assert httpx.post(base + "/bind", json=bind).json() == {"Error": ""}
            assert stub.pods[("default", "p")]["metadata"]["annotations"]["horus.io/gpu-ids"] == "1"
            # the running pod finishes: the periodic re-listing drops its load
            with stub.lock:
                stub.pods[("default", "r")]["status"]["phase"] = "Succeeded"
            deadline = time.monotonic() + 20
            while httpx.get(base + "/state").json()["load"]["n1"]["residents"] != [0, 1]:
                assert time.monotonic() < deadline, "re-listing did not drop the finished pod"
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def test_unreachable_api_server_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["k8s-extender", "--api-server", f"http://127.0.0.1:{_free_port()}", "--port", "0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.startswith("horus: error: API server: first listing failed: list nodes")


@pytest.mark.parametrize("argv,field", [
    (["--policy", "oracle"], "--policy"), (["--policy", "nope"], "--policy"), (["--predictor", "nope"], "--predictor"),
    (["--policy-args", "[1]"], "--policy-args"), (["--resync-s", "10", "--stale-after-s", "5"], "--stale-after-s"),
])
def test_bad_options_are_one_line_exit_2(argv: list[str], field: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["k8s-extender", "--api-server", "http://127.0.0.1:9", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith(f"horus: error: {field}: ")


@pytest.mark.parametrize("option", ["--resync-s", "--stale-after-s"])
@pytest.mark.parametrize("value", ["0", "nan", "inf", "-1", str(2**70), "1e30"])
def test_periods_outside_their_domain_are_usage_errors(option: str, value: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["k8s-extender", "--api-server", "http://127.0.0.1:9", option, value])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and f"argument {option}: expected a number in [" in err
