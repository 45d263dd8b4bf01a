"""Live-service benchmarks: scheduling-decision latency at scale, and REST submission throughput.

1. Decision latency: a ``LiveScheduler`` (store on disk, ``synchronous=FULL``) with 1,000 fake
   agents x 8 GPUs, filled with running jobs (steps until one starts fewer than 16), and 1,000 jobs
   kept queued. Each round, 8 running jobs
   end (their agents report exit 0 through ``heartbeat``), then one scheduling step places what fits.
   Reported per placed job: the policy's decision time (``SchedulerCore.last_decision_s`` / starts)
   and the whole step including the durable start transitions. Goal: decision p99 <= 2 ms.
2. REST throughput: a real ``horus serve --no-agent`` on 127.0.0.1 (store on disk); N submissions
   over keep-alive HTTP from 1 and 4 client threads; jobs/s.

    python benchmarks/live_service.py [--policy horus] [--rounds 200] [--submissions 2000]

Writes benchmarks/results/live_service_<policy>.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
MIX = [("a3c", 32, 1), ("resnet50", 64, 1), ("resnet18_cifar", 32, 1), ("lstm_lm", 8, 1), ("ncf", 32, 1),
       ("mobilenet_v2", 8, 1), ("vgg16", 32, 2), ("bert_base", 8, 4), ("transformer", 64, 1), ("dcgan", 8, 1)]


def decision_latency(policy: str, nodes: int, gpus_per_node: int, queued: int, rounds: int, seed: int) -> dict:
    from horus.agent.gpus import fake_gpus
    from horus.predict.analytic import AnalyticPredictor
    from horus.service.agents import AgentInfo
    from horus.service.scheduler import LiveScheduler
    from horus.service.store import NewJob, Store

    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="horus-bench-", dir=ROOT.parent))
    store = Store(tmp / "horus.db")
    scheduler = LiveScheduler(store, AnalyticPredictor(), policy=policy, lease_s=1e9, job_secret=b"bench")
    began = time.perf_counter()
    for n in range(nodes):  # bulk registration: one store row each, one rebuild at the end
        name = f"node{n:04d}"
        row = store.register_agent(name, name, fake_gpus(gpus_per_node, "V100", name), 0.0)
        scheduler.agents[name] = AgentInfo(name, row.seq, name, row.gpus, last_seen=time.time())
    scheduler.rebuild()
    setup_s = time.perf_counter() - began

    def top_up() -> None:
        while len(scheduler.state.queue) < queued:
            model, batch, gpus = rng.choice(MIX)
            scheduler.submit(NewJob(model=model, batch_size=batch, num_gpus=gpus, command=["true"],
                                    iterations=float(rng.randint(100, 10_000))))

    began = time.perf_counter()
    fill_started = 0
    for _ in range(1000):  # fill the cluster: step until a step starts only a few jobs
        top_up()
        started = scheduler.step()
        fill_started += started
        if started < 16:
            break
    running_after_fill = len(scheduler.live)
    top_up()
    fill_s = time.perf_counter() - began
    decision_ms, step_ms, placed = [], [], []
    for _ in range(rounds):
        for key in rng.sample(sorted(scheduler.live), min(8, len(scheduler.live))):
            live = scheduler.live[key]
            for agent in live.agents():
                scheduler.heartbeat(agent, [{"job_id": key, "attempt": live.attempt, "status": "exited",
                                             "exit_code": 0}])
        t0 = time.perf_counter()
        started = scheduler.step()
        step = time.perf_counter() - t0
        if started:
            decision_ms.append(1e3 * scheduler.core.last_decision_s / started)
            step_ms.append(1e3 * step / started)
            placed.append(started)
        top_up()
    store.close()
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()

    def pct(values: list[float]) -> dict:
        return {"p50": float(np.percentile(values, 50)), "p99": float(np.percentile(values, 99)),
                "mean": float(np.mean(values))} if values else {}

    return {"nodes": nodes, "gpus": nodes * gpus_per_node, "queued": queued, "rounds": rounds,
            "rounds_placing": len(placed), "jobs_placed_per_round_mean": float(np.mean(placed)) if placed else 0.0,
            "initial_fill_started": fill_started, "running_after_fill": running_after_fill, "setup_s": setup_s, "fill_s": fill_s,
            "decision_ms_per_placed_job": pct(decision_ms), "step_ms_per_placed_job_incl_store": pct(step_ms),
            "goal_decision_p99_ms": 2.0}


def rest_throughput(submissions: int, threads: int, policy: str) -> dict:
    from service_helpers import Server

    tmp = Path(tempfile.mkdtemp(prefix="horus-bench-rest-", dir=ROOT.parent))
    server = Server(tmp / "state", "--no-agent", "--policy", policy, fake_gpus=0).start()
    per_thread = submissions // threads
    errors = []

    def client(t: int) -> None:
        with server.client() as api:
            for i in range(per_thread):
                r = api.post("/v1/jobs", json={"command": ["true"], "model": "a3c", "batch_size": 32,
                                               "idempotency_key": f"t{t}-{i}"})
                if r.status_code != 201:
                    errors.append(r.status_code)

    began = time.perf_counter()
    workers = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - began
    server.stop()
    subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return {"submissions": per_thread * threads, "client_threads": threads, "seconds": elapsed,
            "jobs_per_s": per_thread * threads / elapsed, "errors": len(errors)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="horus")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--queued", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--submissions", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = {
        "benchmark": "live_service", "policy": args.policy, "seed": args.seed,
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "command": " ".join(sys.argv),
        "decision": decision_latency(args.policy, args.nodes, args.gpus_per_node, args.queued, args.rounds, args.seed),
        "rest": [rest_throughput(args.submissions, t, args.policy) for t in (1, 4)],
    }
    out = args.out or ROOT / "benchmarks" / "results" / f"live_service_{args.policy}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
