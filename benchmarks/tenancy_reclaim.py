"""Reclaim latency on a real ``horus serve --fake-gpus 2``: queue a borrows both GPUs, b submits within its guarantee.

    python benchmarks/tenancy_reclaim.py [--repeat 5]

Per repetition: server-side seconds from b's submission to its start (the event times the store recorded) and the
client-observed time including polling. Writes benchmarks/results/tenancy_reclaim.json.
"""
import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from service_helpers import Server, kill_job_processes, wait_for

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--repeat", type=int, default=5)
args = parser.parse_args()
root = Path(tempfile.mkdtemp())
(root / "t.yaml").write_text("tenancy:\n  queues:\n    - {name: a, guaranteed: 1}\n    - {name: b, guaranteed: 1}\n")
s = Server(root / "state", "--policy", "fifo-exclusive", "--predictor", "analytic", "--grace-s", "1",
           "--tenancy", str(root / "t.yaml"), fake_gpus=2).start()
HEAVY = {"command": ["sleep", "600"], "model": "resnet50", "batch_size": 64}
delays = []
try:
    with s.client() as c:
        for _ in range(args.repeat):
            a = [c.post("/v1/jobs", json={**HEAVY, "queue": "a"}).json() for _ in range(2)]
            wait_for(lambda a=a: all(c.get(f"/v1/jobs/{j['id']}").json()["state"] == "running" for j in a), 20)
            t0 = time.time()
            b = c.post("/v1/jobs", json={**HEAVY, "queue": "b"}).json()
            run = wait_for(lambda b=b: (j := c.get(f"/v1/jobs/{b['id']}").json())["state"] == "running" and j, 20)
            t1 = time.time()
            started = run["events"][-1]["time"]
            delays.append((started - run["submitted"], t1 - t0))
            for j in (*a, b):
                c.post(f"/v1/jobs/{j['id']}/cancel")
            wait_for(lambda: c.get("/v1/queues").json()["queues"][0]["charged_gpus"] == 0, 20)
            wait_for(lambda: c.get("/v1/queues").json()["queues"][1]["charged_gpus"] == 0, 20)
finally:
    s.stop(); kill_job_processes(root)
out = {"command": " ".join(["python", "benchmarks/tenancy_reclaim.py", *sys.argv[1:]]),
       "server_submit_to_start_s": [round(d[0], 4) for d in delays],
       "server_median_s": round(statistics.median(d[0] for d in delays), 4),
       "client_observed_s": [round(d[1], 3) for d in delays], "python": platform.python_version()}
(ROOT / "benchmarks" / "results" / "tenancy_reclaim.json").write_text(json.dumps(out, indent=1))
print(json.dumps(out, indent=1))
