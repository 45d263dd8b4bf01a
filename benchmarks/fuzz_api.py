"""Fuzz the HTTP surfaces with schemathesis (``st run --checks all``): the live service's REST API (``horus serve
--fake-gpus 2``, once with the admin token, once with a ``user`` token) and the Kubernetes extender (``horus
k8s-extender`` against a stub API server), each from its own OpenAPI document. Every operation in those documents is
fuzzed: a new endpoint is covered without editing this file.

    python benchmarks/fuzz_api.py                      # the full campaign -> benchmarks/results/fuzz_api.json
    python benchmarks/fuzz_api.py --max-examples 20    # a quick one

``ST_CONFIG`` holds the two places where schemathesis's defaults ask what no schema can state: a body over the
server's byte limit is a 413 (schemathesis expects the 4xx of a bad field), and ``POST /v1/models`` takes an ONNX
graph, which JSON Schema cannot describe, so random bytes there are a 422 naming the model file.
tests/test_api_schemathesis.py runs this with a small budget.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "benchmarks" / "results" / "fuzz_api.json"
SEED = 28
ST_CONFIG = """\
[checks.negative_data_rejection]
expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429, "5XX"]

[[operations]]
include-name = "POST /v1/models"
checks.positive_data_acceptance.expected-statuses = ["2XX", "3XX", 401, 403, 404, 409, 422, 429, "5XX"]
"""
EXTENDER_TOKEN = "fuzz-" + "0123456789abcdef" * 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    src = str(ROOT / "src")
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": src + (os.pathsep + path if path else "")}


def _wait(url: str, proc: subprocess.Popen[bytes], log: Path, probe: str = "/healthz", timeout_s: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + probe, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout_s} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextmanager
def live_server(workdir: Path, *, role: str = "admin") -> Iterator[tuple[str, str]]:
    """``horus serve --fake-gpus 2`` on 127.0.0.1: (its URL, a token of ``role``: the admin token or a new user's)."""
    state, port = workdir / f"serve-{role}", free_port()
    log = workdir / f"serve-{role}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "horus.cli", "serve", "--fake-gpus", "2", "--state-dir",
                                 str(state), "--port", str(port), "--log-level", "warning", "--heartbeat-s", "0.5"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env())
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, proc, log)
        token = (state / "token").read_text().strip()
        if role != "admin":
            made = subprocess.run([sys.executable, "-m", "horus.cli", "token", "create", "--state-dir", str(state),
                                   "--name", "fuzzer", "--role", role], capture_output=True, text=True, env=_env(),
                                  check=True)
            token = made.stdout.strip().splitlines()[-1].split()[-1]
        yield url, token
    finally:
        _stop(proc)


@contextmanager
def extender(workdir: Path) -> Iterator[tuple[str, str]]:
    """``horus k8s-extender`` (bearer token, a tenancy of two queues) against a stub API server with two GPU nodes
    and a CPU node."""
    sys.path.insert(0, str(ROOT / "tests"))
    from k8s_helpers import StubAPIServer, cpu_node, gpu_node, gpu_pod

    nodes = [gpu_node("n1", 4), gpu_node("n2", 2, product="NVIDIA-A100-SXM4-40GB", memory=40960), cpu_node("c1")]
    pods = [gpu_pod("p1", node="n1", phase="Running"), gpu_pod("p2")]
    token_file = workdir / "extender-token"
    token_file.write_text(EXTENDER_TOKEN + "\n")
    tenancy = workdir / "tenancy.yaml"  # pods of namespace "default" are charged to queue "default"
    tenancy.write_text("tenancy:\n  queues:\n    - {name: default, guaranteed: 2, borrow_limit: 1}\n"
                       "    - {name: other, guaranteed: 4}\n")
    log = workdir / "extender.log"
    with StubAPIServer(nodes, pods) as api:
        port = free_port()
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "horus.cli", "k8s-extender", "--api-server", api.url,
                                     "--port", str(port), "--token-file", str(token_file), "--tenancy", str(tenancy),
                                     "--log-level", "warning"],
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env())
        url = f"http://127.0.0.1:{port}"
        try:
            _wait(url, proc, log, "/livez")
            yield url, EXTENDER_TOKEN
        finally:
            _stop(proc)


def schemathesis(url: str, token: str, workdir: Path, *, max_examples: int, seed: int = SEED, workers: int = 1,
                 timeout_s: float = 600.0) -> dict[str, Any]:
    """``st run URL/openapi.json --checks all`` (all phases); the counts of its summary and the command."""
    config = workdir / "schemathesis.toml"
    config.write_text(ST_CONFIG)
    command = ["st", "--config-file", str(config), "run", f"{url}/openapi.json", "-H", f"Authorization: Bearer {token}",
               "--checks", "all", "--max-examples", str(max_examples), "--seed", str(seed), "--workers", str(workers),
               "--no-color"]
    st = Path(sys.executable).with_name("st")
    started = time.monotonic()
    done = subprocess.run([str(st) if st.exists() else "st", *command[1:]], capture_output=True, text=True,
                          timeout=timeout_s, env={**_env(), "NO_COLOR": "1"})
    wall = time.monotonic() - started
    out = done.stdout + done.stderr
    generated = re.search(r"(\d+) generated", out)
    failures: dict[str, int] = {}
    for code, name, count in re.findall(r"(ST\d+) ([^:\n]+): (\d+)", out.split("SUMMARY")[-1]):
        failures[f"{code} {name.strip(' ❌')}"] = int(count)
    errors = re.search(r"(\d+) errors?\b", out.split("SUMMARY")[-1])
    server_errors = len(re.findall(r"^\[5\d\d\]", out, flags=re.MULTILINE))
    shown = " ".join(command).replace(token, "$TOKEN")
    return {"command": shown, "exit_code": done.returncode, "requests_generated": int(generated.group(1)) if generated
            else 0, "failures_by_check": failures, "failures": sum(failures.values()),
            "errors": int(errors.group(1)) if errors else 0, "responses_5xx_reported": server_errors,
            "wall_s": round(wall, 1), "output_tail": out[-3000:] if done.returncode else "",
            "reproductions": re.findall(r"^\s*(curl -X .{0,300})", out, flags=re.MULTILINE)[:50]}


def server_5xx(log: Path) -> int:
    """Unhandled exceptions (500s) the server logged."""
    return log.read_text(errors="replace").count("Exception in ASGI application") if log.exists() else 0


def campaign(max_examples: int, seed: int = SEED, user_examples: int | None = None,
             extender_examples: int | None = None) -> dict[str, Any]:
    import importlib.metadata

    runs: dict[str, Any] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="horus-fuzz-api-") as tmp:
        work = Path(tmp)
        for role, examples in (("admin", max_examples), ("user", user_examples or max_examples)):
            with live_server(work, role=role) as (url, token):
                runs[f"service-{role}"] = schemathesis(url, token, work, max_examples=examples, seed=seed)
            runs[f"service-{role}"]["server_500s_logged"] = server_5xx(work / f"serve-{role}.log")
        with extender(work) as (url, token):
            runs["k8s-extender"] = schemathesis(url, token, work, max_examples=extender_examples or max_examples,
                                                seed=seed)
        runs["k8s-extender"]["server_500s_logged"] = server_5xx(work / "extender.log")
    total_failures: dict[str, int] = {}
    for run in runs.values():
        for check, count in run["failures_by_check"].items():
            total_failures[check] = total_failures.get(check, 0) + count
    return {
        "what": "schemathesis --checks all (examples, coverage, fuzzing, stateful) against horus serve --fake-gpus 2 "
                "(admin and user tokens) and horus k8s-extender (stub API server)",
        "schemathesis_version": importlib.metadata.version("schemathesis"), "seed": seed,
        "requests_generated": sum(r["requests_generated"] for r in runs.values()),
        "failures": sum(r["failures"] for r in runs.values()), "failures_by_check": total_failures,
        "errors": sum(r["errors"] for r in runs.values()),
        "responses_5xx": sum(r["responses_5xx_reported"] + r["server_500s_logged"] for r in runs.values()),
        "wall_s": round(time.monotonic() - started, 1), "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-examples", type=int, default=100, help="per operation and phase (service, admin token)")
    p.add_argument("--user-examples", type=int, default=50, help="the same with a user token")
    p.add_argument("--extender-examples", type=int, default=400, help="the same for the extender")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--out", type=Path, default=RESULT)
    args = p.parse_args(argv)
    result = campaign(args.max_examples, args.seed, args.user_examples, args.extender_examples)
    result["command"] = "python benchmarks/fuzz_api.py " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
    return 0 if result["failures"] == 0 and result["responses_5xx"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
