"""Does a large ONNX upload starve the cluster? A real `horus serve --fake-gpus 2` (in-process agent) plus a
`horus agent --fake-gpus 1` over HTTP, jobs running on all three GPUs, then a valid ONNX graph of --mb MB is
uploaded (POST /v1/models) while a probe agent heartbeats over HTTP every 200 ms (POST /v1/agents/probe/heartbeat:
each answer renews its lease), /healthz is polled every 50 ms and /v1/cluster every 200 ms (each agent's
``last_seen_s_ago``).

    python benchmarks/upload_heartbeats.py [--mb 500] [--lease-s 10] [--out FILE]

Reports the upload's time and status, the longest heartbeat and /healthz answers and the longest gaps between
answers (``max_heartbeat_gap_s``: the longest an HTTP agent went without a lease renewal), each agent's largest
``last_seen_s_ago`` against the lease, agents lost and runs requeued as lost during the upload,
and how much the server's peak RSS grew. Writes benchmarks/results/upload_heartbeats.json. Run it against
another tree with PYTHONPATH=<tree>/src (the server is started with this interpreter and environment).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

JOB = "import horus, time\nfor i in range(10**6):\n    horus.report(i + 1); time.sleep(0.1)\n"


def _peak_rss_mib(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", text).group(1)) / 1024  # type: ignore[union-attr]


def _lost(api: Any) -> tuple[float, int]:
    """(agents lost so far, runs requeued because their machine was lost)."""
    from service_helpers import metrics

    jobs = api.get("/v1/jobs", params={"limit": 100}).json()["jobs"]
    return metrics(api)[("horus_agents_lost_total", ())], sum(j["lost_runs"] for j in jobs)


def _max_gap(times: list[float]) -> float:
    """The longest time between successive answers."""
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def _revision(tree: Path) -> str:
    """The commit of the tree the measured ``horus`` comes from (with "+dirty" when it has changes)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=tree,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not a git tree"
    return head + ("+dirty" if dirty else "")


def measure(mb: float, lease_s: float, folder: Path) -> dict[str, Any]:
    import httpx
    from service_helpers import Server, kill_job_processes, wait_for, write_onnx_model

    import horus

    began = time.perf_counter()
    model = write_onnx_model(folder / "model.onnx", mb * 1e6 / 2**20)
    made_s = time.perf_counter() - began
    server = Server(folder / "state", "--lease-s", str(lease_s), "--heartbeat-s", "1.0", "--predictor", "analytic",
                    fake_gpus=2).start(timeout_s=60)
    remote = subprocess.Popen([sys.executable, "-m", "horus.cli", "agent", "--server", server.url, "--token-file",
                               str(server.state_dir / "token"), "--name", "remote", "--fake-gpus", "1",
                               "--workdir", str(folder / "remote")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        with server.client(timeout_s=60) as api:
            wait_for(lambda: len(api.get("/v1/cluster").json()["agents"]) == 2, 60, what="both agents")
            for i in range(3):
                assert api.post("/v1/jobs", json={"command": [sys.executable, "-c", JOB], "name": f"job-{i}"}) \
                    .status_code == 201
            wait_for(lambda: api.get("/v1/cluster").json()["running"] == 3, 60, what="3 running jobs")
            lost_before = _lost(api)
            peak_before = _peak_rss_mib(server.proc.pid)
            upload: dict[str, Any] = {}

            def send() -> None:
                start = time.perf_counter()
                with server.client(timeout_s=1800) as uploader, open(model, "rb") as fh:
                    response = uploader.post("/v1/models", content=fh,
                                             headers={"Content-Type": "application/octet-stream"})
                upload.update(status=response.status_code, answer=response.text[:300],
                              seconds=round(time.perf_counter() - start, 2))

            beats: list[tuple[float, float]] = []  # the probe agent's heartbeats: (when sent, how long they took)
            done = threading.Event()

            refused: list[float] = []  # heartbeats answered 409: the probe had been declared lost
            probe_agent = {"name": "probe", "hostname": "probe", "gpus": []}

            def heartbeats() -> None:
                with server.client(timeout_s=600) as agent:
                    while not done.is_set():
                        sent = time.monotonic()
                        response = agent.post("/v1/agents/probe/heartbeat", json={"reports": []})
                        beats.append((sent, time.monotonic() - sent))
                        if response.status_code == 409:
                            refused.append(sent)
                            agent.post("/v1/agents", json=probe_agent)
                        done.wait(0.2)

            assert api.post("/v1/agents", json=probe_agent).status_code == 200
            beating = threading.Thread(target=heartbeats)
            beating.start()
            thread = threading.Thread(target=send)
            health: list[tuple[float, float]] = []  # (when sent, how long it took)
            seen: dict[str, float] = {}
            last_cluster = 0.0
            with httpx.Client(base_url=server.url, timeout=600) as probe:
                started = time.monotonic()
                thread.start()
                while thread.is_alive():
                    sent = time.monotonic()
                    probe.get("/healthz")
                    health.append((sent, time.monotonic() - sent))
                    if time.monotonic() - last_cluster >= 0.2:
                        last_cluster = time.monotonic()
                        for agent in api.get("/v1/cluster").json()["agents"]:
                            seen[agent["name"]] = max(seen.get(agent["name"], 0.0), agent["last_seen_s_ago"])
                    time.sleep(0.05)
            thread.join()
            ended = time.monotonic()
            peak_after = _peak_rss_mib(server.proc.pid)
            time.sleep(lease_s + 2)  # a lease missed during the upload is declared within one more lease
            lost_after = _lost(api)
            done.set()
            beating.join()
            during = [(s, d) for s, d in beats if s + d >= started and s <= ended]
            beat_gap = _max_gap([s + d for s, d in beats if s + d >= started - 1.0 and s <= ended + 1.0])
            return {
                "horus": str(Path(horus.__file__).parent), "mb": mb, "model_bytes": model.stat().st_size,
                "model_written_s": round(made_s, 2), "lease_s": lease_s, "heartbeat_s": 1.0, "upload": upload,
                "healthz_polls": len(health), "healthz_max_latency_s": round(max(d for _, d in health), 3),
                "healthz_max_gap_s": round(_max_gap([s + d for s, d in health]), 3),
                "heartbeats_during_upload": len(during),
                "heartbeat_max_latency_s": round(max((d for _, d in during), default=0.0), 3),
                "max_heartbeat_gap_s": round(beat_gap, 3), "heartbeats_refused_as_lost": len(refused),
                "agents_max_last_seen_s_ago": seen,
                "lease_missed": beat_gap >= lease_s or bool(refused) or lost_after != lost_before,
                "agents_lost": lost_after[0] - lost_before[0], "runs_requeued_lost": lost_after[1] - lost_before[1],
                "server_peak_rss_mib": {"before": round(peak_before, 1), "after": round(peak_after, 1)},
            }
    finally:
        remote.terminate()
        remote.wait(10)
        server.stop()
        kill_job_processes(folder)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=500.0, help="size of the uploaded graph in MB (default 500)")
    parser.add_argument("--lease-s", type=float, default=10.0, help="agent lease (default 10, as `horus serve`)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "upload_heartbeats.json")
    parser.add_argument("--note", default="", help="a note kept in the JSON (e.g. which tree was measured)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(args.mb, args.lease_s, Path(tmp))
    result = {"benchmark": "upload_heartbeats", "command": " ".join(["python", *sys.argv]),
              "revision": _revision(Path(result["horus"])), "note": args.note, **result,
              "python": platform.python_version(), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
