"""Ray backend benchmark: placement-to-running latency and jobs/s through a real multi-node Ray cluster.

A ``ray.cluster_utils.Cluster`` on this machine (a CPU-only head plus ``--nodes`` nodes with
``--gpus`` fake GPUs each, declared as per-GPU resources) runs the live scheduler with the Ray
backend in-process (as ``horus serve --backend ray`` wires it, without HTTP). Jobs are real
processes (tests/ray_helpers.py ``JOB_SCRIPT``) that record when they started.

* latency: ``--latency-jobs`` whole-GPU jobs submitted one at a time on an idle cluster; placement =
  the store's ``started`` event (the scheduler's decision made durable), running = the job's own
  first line. Also submit-to-running.
* throughput: ``--jobs`` quarter-GPU jobs that exit at once, submitted together; jobs/s = jobs /
  (last finish - first submit), with placement-to-running latency under that load.
Both phases run twice: with a new actor per worker (``idle_s=0``) and with idle actors reused
(the default). The throughput jobs outnumber the cluster's 4 x GPUs slots when ``--jobs`` > 4 x GPUs.
* raw Ray, for scale: as many empty actors, pinned and sized the same way, created at once and
  waited for (no Horus involved): actors/s, the bound a one-actor-per-worker backend has here.

    python benchmarks/ray_backend.py [--nodes 2] [--gpus 4] [--jobs 64] [--out benchmarks/results/ray_backend.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from provenance import git_commit  # beside this script

RESULT = ROOT / "benchmarks" / "results" / "ray_backend.json"


def quantiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    if not values:
        return {}
    pick = lambda q: values[min(len(values) - 1, int(round(q * (len(values) - 1))))]  # noqa: E731
    return {"n": len(values), "mean_s": statistics.fmean(values), "median_s": pick(0.5), "p95_s": pick(0.95),
            "min_s": values[0], "max_s": values[-1]}


def placement_to_running(svc, job_id: str) -> tuple[float, float]:
    """(placement -> running, submit -> running) of the job's latest attempt, in seconds."""
    events = svc.store.events(int(job_id))
    submitted = next(e["time"] for e in events if e["kind"] == "submitted")
    placed = [e["time"] for e in events if e["kind"] == "started"][-1]
    started = svc.records(job_id)[0]["started"]
    return started - placed, started - submitted


def raw_actor_rate(nodes: list, count: int) -> dict[str, float]:
    """Create ``count`` empty actors pinned like JobWorkers (num_gpus=0, a quarter-GPU resource share) at once."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote
    class Empty:
        def ready(self) -> bool:
            return True

    began = time.perf_counter()
    actors = []
    for k in range(count):
        node = nodes[k % len(nodes)]
        gpu = node.gpus[(k // len(nodes)) % len(node.gpus)]
        actors.append(Empty.options(num_cpus=0, num_gpus=0, resources={gpu["resource"]: 0.0625},
                                    scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False))
                      .remote())
    ray.get([a.ready.remote() for a in actors], timeout=600)
    wall = time.perf_counter() - began
    for actor in actors:
        ray.kill(actor)
    return {"actors": count, "wall_s": wall, "actors_per_s": count / wall}


def measure(svc, args, wait_for) -> dict[str, object]:
    """Latency on an idle cluster (jobs one at a time), then jobs/s with ``args.jobs`` submitted together."""
    launched, reused = svc.backend.launched, svc.backend.reused
    lat, sub = [], []
    for _ in range(args.latency_jobs):
        job = svc.submit(hold_s=60)
        wait_for(lambda: svc.records(job), 60, "job running")
        a, b = placement_to_running(svc, job)
        lat.append(a)
        sub.append(b)
        svc.release(job)
        wait_for(lambda: svc.row(job).state == "finished", 60, "job finished")
    wait_for(lambda: not svc.backend.workers, 30, "idle")
    t0 = time.time()
    jobs = [svc.submit(gpu_fraction=0.25, hold_s=0) for _ in range(args.jobs)]
    wait_for(lambda: all(svc.row(j).state in ("finished", "failed") for j in jobs), 600, "all jobs ended")
    last_end = max(svc.row(j).ended for j in jobs)
    states = [svc.row(j).state for j in jobs]
    loaded = [placement_to_running(svc, j)[0] for j in jobs]
    wait_for(lambda: not svc.backend.workers, 30, "idle")
    return {
        "idle_cluster": {"placement_to_running": quantiles(lat), "submit_to_running": quantiles(sub)},
        "throughput": {"jobs": args.jobs, "finished": states.count("finished"), "wall_s": last_end - t0,
                       "jobs_per_s": args.jobs / (last_end - t0), "placement_to_running_under_load": quantiles(loaded)},
        "actors_started": svc.backend.launched - launched, "actors_reused": svc.backend.reused - reused,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=4, help="fake GPUs per node")
    parser.add_argument("--latency-jobs", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=64, help="short quarter-GPU jobs for the throughput phase")
    parser.add_argument("--heartbeat-s", type=float, default=0.2)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray.cluster_utils import Cluster

    from ray_helpers import RayService, wait_for

    load_before = os.getloadavg()
    began = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for n in range(args.nodes):
        cluster.add_node(num_cpus=1, num_gpus=args.gpus,
                         resources={f"horus_gpu_n{n}_{i}": 1.0 for i in range(args.gpus)})
    ray.init(address=cluster.address, namespace="horus", log_to_driver=False)
    cluster.wait_for_nodes(timeout=120)
    cluster_start_s = time.perf_counter() - began
    result: dict[str, object] = {}
    try:
        with RayService(Path(tempfile.mkdtemp(prefix="horus-ray-bench-")), heartbeat_s=args.heartbeat_s) as svc:
            wait_for(lambda: len(svc.backend.nodes) == args.nodes, 60, "nodes registered")
            for mode, idle_s in (("new_actor_per_worker", 0.0), ("idle_actors_reused", 10.0)):
                svc.backend.stop_all()
                svc.backend.idle_s = idle_s
                result[mode] = measure(svc, args, wait_for)
            svc.backend.stop_all()
            result["raw_ray_empty_actors"] = raw_actor_rate(list(svc.backend.nodes.values()), args.jobs)
    finally:
        ray.shutdown()
        cluster.shutdown()
    out = {
        "benchmark": "ray_backend",
        "command": [sys.executable, *sys.argv],
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "ray": ray.__version__, "loadavg_1m_before": load_before[0],
                    "loadavg_1m_after": os.getloadavg()[0]},
        "config": {"nodes": args.nodes, "gpus_per_node": args.gpus, "heartbeat_s": args.heartbeat_s,
                   "policy": "fifo-exclusive", "cluster": "ray.cluster_utils.Cluster on one machine, fake GPUs"},
        "cluster_start_s": cluster_start_s,
        **result,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
