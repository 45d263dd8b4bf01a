"""Tenancy evaluation (issue 24): real traces' tenants as queues, every policy with and without its tenancy.

Workloads (each needs ../shared/data; skipped with a message when absent):

* ``philly``: the whole Philly trace (82,247 jobs) on 64 x 8 V100 (512 GPUs, congested); each job's virtual
  cluster (the trace's ``cluster`` column) is its queue, guaranteed its share of the trace's GPU-time demand
  (``horus.tenancy.from_demand``: largest remainders, weight = guarantee, borrowing up to the whole cluster).
* ``openb``: Alibaba's 8,152 pods, ``qos`` (LS / BE / ...) as queues, on ``--openb-share`` of the trace's GPU
  nodes (on its own 1,213 nodes nothing queues, so no tenancy rule is ever exercised; a quarter does not queue
  either).

World: the exact one (``SimConfig()``: exact sizes and telemetry for every policy alike, the analytic predictor),
truth ``parametric``, materialization seeds ``--seeds`` (model and batch drawn per job). Modes: ``off`` (tenant-
unaware), ``equal`` (tenancy, shared GPUs split equally) and, for co-locating policies, ``util`` (split by predicted
utilization). Each run is its own process; CPU seconds are user + sys of the simulation.

    python experiments/tenancy.py [--workloads philly,openb] [--policies fifo-exclusive,tiresias,horus-paper,horus]
                                  [--seeds 0] [--limit N] [--workers 2]

Writes experiments/results/tenancy.json (every run: summary, per-queue table, CPU seconds, the command) and
tenancy.md (the goal table of issue 24 per workload and policy).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "traces"
PHILLY = SHARED / "philly" / "philly_jobs.csv"
OPENB_PODS = SHARED / "alibaba-openb" / "openb_pod_list_default.csv"
OPENB_NODES = SHARED / "alibaba-openb" / "openb_node_list_gpu_node.csv"
RESULTS = ROOT / "experiments" / "results"
COLOCATING = ("horus", "horus-paper", "horus-fifo", "horus-las", "gandiva", "gandiva-greedy", "sjf-horus",
              "horus-iasp", "geng")
SUMMARY_KEYS = ("mean_jct_s", "p95_jct_s", "makespan_s", "mean_wait_s", "jain_index", "quota_violation_s",
                "reclaim_preemptions", "priority_preemptions", "order_preemptions", "min_guarantee_attainment", "contended_h",
                "gpu_util_mean", "preemptions")


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


OPENB_NODE_SHARE = 0.25  # share of openb's GPU nodes simulated (``--openb-share``)


def build(workload: str, seed: int, limit: int) -> tuple[Any, list[Any], Any, dict[str, float]]:
    """(cluster, jobs with their queues, truth, GPU-seconds of demand per queue)."""
    from horus.cluster import Cluster, GPUType, Node
    from horus.plugins import load_all
    from horus.traces import base as traces
    from horus.traces.materialize import materialize
    from horus.truth.base import TRUTH_MODELS

    if workload == "philly":
        v100 = GPUType("v100", 16_384, 1.0)
        cluster = Cluster([Node(f"node{i:04d}", v100, 8, "nvlink") for i in range(64)])
        trace = traces.load_trace(PHILLY, "philly")
        reference = v100
    else:
        from horus.traces.openb import load_openb_cluster

        full = load_openb_cluster(OPENB_NODES)
        cluster = Cluster(full.nodes[: max(1, round(len(full.nodes) * OPENB_NODE_SHARE))], full.inter_node_gbps)
        trace = traces.load_trace(OPENB_PODS, "openb")
        reference = cluster.gpu_types()[0]
    for package in ("horus.truth", "horus.predict"):
        load_all(package)
    truth = TRUTH_MODELS.create("parametric")
    raws = trace.jobs[:limit] if limit else trace.jobs
    jobs = materialize(dataclasses.replace(trace, jobs=raws), truth, reference_gpu=reference, seed=seed)
    raw_by_id = {r.job_id: r for r in raws}
    column = {"philly": "cluster", "openb": "qos"}[workload]
    if raws and getattr(raws[0], "queue", None) is None:  # a loader that does not read the tenant column yet
        import pandas as pd

        values = pd.read_csv(PHILLY if workload == "philly" else OPENB_PODS, usecols=[column])[column].astype(str)
        tenants = {r.job_id: values.iloc[r.line - 2] for r in raws if r.line is not None}
    else:
        tenants = {r.job_id: getattr(r, "queue", None) for r in raws}
    demand: dict[str, float] = {}
    out = []
    for spec in jobs:
        raw = raw_by_id[spec.job_id]
        queue = tenants.get(spec.job_id) or "default"
        share = spec.gpu_fraction if spec.gpu_fraction is not None else 1.0
        length = raw.duration_s if raw.duration_s is not None else 0.0
        demand[queue] = demand.get(queue, 0.0) + length * spec.num_gpus * share
        out.append(dataclasses.replace(spec, queue=queue))
    return cluster, out, truth, demand


def run_one(workload: str, policy_name: str, mode: str, seed: int, limit: int,
            openb_share: float = OPENB_NODE_SHARE) -> dict[str, Any]:
    from horus.core import create_policy
    from horus.predict.base import PREDICTORS
    from horus.sim.engine import SimConfig, simulate
    from horus.tenancy import from_demand

    global OPENB_NODE_SHARE
    OPENB_NODE_SHARE = openb_share
    cluster, jobs, truth, demand = build(workload, seed, limit)
    tenancy = None if mode == "off" else from_demand(demand, cluster.num_gpus, charge=mode)
    policy = create_policy(policy_name, has_truth=True)
    predictor = PREDICTORS.create("analytic")
    c0, w0 = cpu_s(), time.perf_counter()
    result = simulate(jobs, cluster, policy, truth, predictor, SimConfig(), tenancy=tenancy)
    row: dict[str, Any] = {
        "workload": workload, "policy": policy_name, "mode": mode, "seed": seed, "jobs": len(jobs),
        "gpus": cluster.num_gpus, "simulate_cpu_s": round(cpu_s() - c0, 2),
        "simulate_wall_s": round(time.perf_counter() - w0, 2),
        "summary": {k: result.summary.get(k) for k in SUMMARY_KEYS if k in result.summary},
        "tenancy": None if tenancy is None else tenancy.describe(),
    }
    if tenancy is not None:
        row["queues"] = json.loads(result.queues.to_json(orient="records"))
    return row


def goal_rows(runs: list[dict[str, Any]]) -> list[str]:
    """Markdown lines: per workload x policy (mean over seeds) the issue's goals."""
    lines = [("| workload | policy | mode | violations (s) | min guarantee attainment | Jain | mean JCT h (off -> on) "
              "| change | max jobs/charged GPU vs fifo-exclusive | reclaims | CPU s (off / on) |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["workload"], r["policy"], r["mode"], r["seed"]): r for r in runs}
    keys = sorted({(r["workload"], r["policy"], r["mode"]) for r in runs if r["mode"] != "off"})
    for workload, policy, mode in keys:
        seeds = sorted(s for (w, p, m, s) in by if (w, p, m) == (workload, policy, mode))
        on = [by[(workload, policy, mode, s)] for s in seeds]
        off = [by.get((workload, policy, "off", s)) for s in seeds]
        fe = [by.get((workload, "fifo-exclusive", "equal", s)) for s in seeds]

        def mean(values: list[float]) -> float:
            values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
            return sum(values) / len(values) if values else math.nan

        jct_on = mean([r["summary"]["mean_jct_s"] / 3600 for r in on])
        jct_off = mean([r["summary"]["mean_jct_s"] / 3600 for r in off if r])
        ratio = []
        for r, f in zip(on, fe, strict=True):
            if not f:
                continue
            base = {q["queue"]: q["jobs_per_charged_gpu"] for q in f["queues"]}
            over = [q for q in r["queues"] if q["guaranteed_demand_gpu_h"] > 0 and q["used_gpu_h"]
                    > q["guaranteed_received_gpu_h"] * 1.01]  # queues that ran beyond their guarantee: over-demand
            gains = [q["jobs_per_charged_gpu"] / base[q["queue"]] for q in over
                     if base.get(q["queue"]) and q["jobs_per_charged_gpu"]]
            ratio.append(max(gains) if gains else math.nan)
        cpu_off = mean([r["simulate_cpu_s"] for r in off if r])
        cpu_on = mean([r["simulate_cpu_s"] for r in on])
        lines.append(
            f"| {workload} | {policy} | {mode} | {mean([r['summary']['quota_violation_s'] for r in on]):.0f} | "
            f"{mean([r['summary']['min_guarantee_attainment'] for r in on]):.3f} | "
            f"{mean([r['summary']['jain_index'] for r in on]):.3f} | {jct_off:.2f} -> {jct_on:.2f} | "
            f"{(jct_on / jct_off - 1) * 100:+.1f} % | {mean(ratio):.2f}x | "
            f"{mean([r['summary']['reclaim_preemptions'] for r in on]):.0f} | {cpu_off:.0f} / {cpu_on:.0f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", default="philly,openb")
    parser.add_argument("--policies", default="fifo-exclusive,tiresias,horus-paper,horus")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--limit", type=int, default=0, help="first N jobs only (0: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--openb-share", type=float, default=0.25,
                        help="share of openb's GPU nodes to simulate (default 0.25)")
    parser.add_argument("--util-for", default="horus-paper", help="policies also run with the 'util' charge rule")
    parser.add_argument("--out", type=Path, default=RESULTS / "tenancy.json")
    args = parser.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    missing = [w for w in workloads if not (PHILLY if w == "philly" else OPENB_PODS).exists()]
    if missing:
        print(f"skipping {', '.join(missing)}: trace not found under {SHARED}", file=sys.stderr)
        workloads = [w for w in workloads if w not in missing]
    policies = [p for p in args.policies.split(",") if p]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    cells = [(w, p, m, s) for w in workloads for p in policies for s in seeds
             for m in (("off", "equal", "util") if p in args.util_for.split(",") else ("off", "equal"))]
    runs: list[dict[str, Any]] = []
    started = time.time()
    with ProcessPoolExecutor(args.workers) as pool:
        futures = {pool.submit(run_one, *cell, args.limit, args.openb_share): cell for cell in cells}
        for future in as_completed(futures):
            row = future.result()
            runs.append(row)
            s = row["summary"]
            print(f"[{len(runs)}/{len(cells)}] {row['workload']} {row['policy']} {row['mode']} seed {row['seed']}: "
                  f"{row['simulate_cpu_s']:.0f} CPU-s, mean JCT {s['mean_jct_s'] / 3600:.2f} h, "
                  f"attainment {s.get('min_guarantee_attainment', float('nan')):.3f}, "
                  f"Jain {s.get('jain_index', float('nan')):.3f}", flush=True)
    runs.sort(key=lambda r: (r["workload"], r["policy"], r["mode"], r["seed"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"command": " ".join(["python", "experiments/tenancy.py", *(argv or sys.argv[1:])]),
            "python": platform.python_version(), "machine": platform.machine(), "cpus": __import__("os").cpu_count(),
            "wall_s": round(time.time() - started, 1)}
    args.out.write_text(json.dumps({"meta": meta, "runs": runs}, indent=1, default=str))
    table = "\n".join(goal_rows(runs))
    args.out.with_suffix(".md").write_text(f"# Tenancy evaluation\n\n`{meta['command']}`\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
