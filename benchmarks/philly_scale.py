"""Scale benchmark: the whole Philly trace on 256 nodes x 8 V100 (2,048 GPUs).

Target (docs/simulator.md): <= 20 s and <= 2 GB peak RSS on 2 cores with the Horus policy,
parametric truth and analytic predictor. Writes benchmarks/results/philly_scale.json.

    python benchmarks/philly_scale.py [--policy horus] [--truth parametric] [--predictor analytic]
    # a congested variant (first 5,000 jobs on 8 nodes = 64 GPUs), for comparing policies:
    python benchmarks/philly_scale.py --limit 5000 --nodes 8 --policy horus --out benchmarks/results/philly_5k_64gpu_horus.json

Needs ../shared/data (skips with a message when absent).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "data" / "traces" / "philly" / "philly_jobs.csv"
RESULT = ROOT / "benchmarks" / "results" / "philly_scale.json"


def peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="horus")
    parser.add_argument("--truth", default="parametric")
    parser.add_argument("--predictor", default="analytic")
    parser.add_argument("--nodes", type=int, default=256)
    parser.add_argument("--limit", type=int, default=0, help="simulate only the first N jobs (0 = all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    if not TRACE.exists():
        print(f"SKIP: Philly trace not found at {TRACE} (../shared/data is absent)")
        return 0

    from horus.cluster import Cluster, GPUType, Node
    from horus.plugins import load_all
    from horus.policies.base import POLICIES
    from horus.predict.base import PREDICTORS
    from horus.sim.engine import SimConfig, simulate
    from horus.sim.outputs import environment, sha256_file, to_jsonable
    from horus.traces import base as traces
    from horus.traces.materialize import materialize
    from horus.truth.base import TRUTH_MODELS

    for package in ("horus.policies", "horus.truth", "horus.predict"):
        load_all(package)
    v100 = GPUType("v100", 16_384, 1.0)
    cluster = Cluster([Node(f"node{i:03d}", v100, 8, "nvlink") for i in range(args.nodes)])

    started = time.perf_counter()
    trace = traces.load_trace(TRACE, "philly")
    truth = TRUTH_MODELS.create(args.truth)
    jobs = materialize(trace, truth, reference_gpu=v100, seed=args.seed)
    if args.limit:
        jobs = jobs[: args.limit]
    load_s = time.perf_counter() - started

    policy = POLICIES.create(args.policy)
    predictor = PREDICTORS.create(args.predictor)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = simulate(jobs, cluster, policy, truth, predictor, SimConfig())
    sim_wall_s, sim_cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0

    report = {
        "trace": {"path": str(TRACE), "sha256": sha256_file(TRACE), "jobs": len(jobs)},
        "cluster": cluster.describe(),
        "policy": policy.describe(),
        "truth": args.truth,
        "predictor": args.predictor,
        "seed": args.seed,
        "limit": args.limit,
        "load_and_materialize_s": round(load_s, 3),
        "simulate_wall_s": round(sim_wall_s, 3),
        "simulate_cpu_s": round(sim_cpu_s, 3),
        "events": result.events_processed,
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "summary": result.summary,
        "versions": environment(),
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor()},
        "target": {"simulate_wall_s": 20.0, "peak_rss_mib": 2048.0},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(to_jsonable(report), indent=2, default=str) + "\n")
    print(f"{len(jobs)} jobs on {cluster.num_gpus} GPUs: simulate {sim_wall_s:.1f} s wall ({sim_cpu_s:.1f} s CPU), "
          f"peak RSS {report['peak_rss_mib']:.0f} MiB, {result.events_processed} events -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
