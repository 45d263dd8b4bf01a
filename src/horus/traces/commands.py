"""``horus trace generate``: synthetic workloads with a target offered load (horus/traces/generate.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from horus.sim import options as opt
from horus.validation import NumberArg, check_output_path, path_arg


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("trace", help="make workloads: saturated streams and work-bound batches")
    sub = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    g = sub.add_parser("generate", help="write a synthetic trace with a target offered load",
                       description="Write a seeded synthetic trace (horus format): a Poisson stream at a target "
                       "offered load, or a batch submitted at once (docs/traces.md).")
    g.add_argument("--kind", default="stream", help="stream (default) or batch")
    g.add_argument("--jobs", type=NumberArg(opt.GENERATE_JOBS), default=1000,
                   help="number of jobs, 1 to 10,000,000 (default 1000)")
    g.add_argument("--load", type=NumberArg(opt.OFFERED_LOAD), default=1.0,
                   help="stream: offered load = mean GPU demand / cluster GPUs, 0.001 to 100 (default 1.0; >= 1 "
                        "saturates)")
    g.add_argument("--cluster", type=path_arg, help="cluster spec YAML whose GPU count sets the load (default: embedded)")
    g.add_argument("--mix", default="gavel", help="job types: gavel (26 Gavel types, default) or zoo")
    g.add_argument("--gpu-counts", default="1:0.70,2:0.12,4:0.10,8:0.08", help="GPUS:WEIGHT,... (default Philly-like)")
    g.add_argument("--duration-median-s", type=NumberArg(opt.JOB_DURATION_S), default=1500.0,
                   help="median run time alone, 1 s to 10 years (default 1500)")
    g.add_argument("--duration-sigma", type=NumberArg(opt.DURATION_SIGMA), default=1.2,
                   help="log-normal sigma of run times, 0 to 10 (default 1.2)")
    g.add_argument("--duration-min-s", type=NumberArg(opt.JOB_DURATION_S), default=180.0,
                   help="shortest run time, 1 s to 10 years, at most the median (default 180)")
    g.add_argument("--duration-max-s", type=NumberArg(opt.JOB_DURATION_S), default=16 * 3600.0,
                   help="longest run time, 1 s to 10 years, at least the median (default 57600)")
    g.add_argument("--tenants", type=NumberArg(opt.TENANTS), default=0, metavar="N",
                   help="add a queue column: each job's tenant drawn from N tenants with Zipf demand (tenant k "
                        "with probability ~ 1/k), 0 to 1000 (default 0: no queue column)")
    g.add_argument("--seed", type=NumberArg(opt.SEED), default=0, help="0 to 2**32-1 (default 0)")
    g.add_argument("--out", type=path_arg, required=True, help="CSV to write")
    g.set_defaults(func=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    from importlib import resources

    from horus.clusterspec import load_cluster
    from horus.errors import HorusInputError
    from horus.traces.generate import WorkloadSpec, generate_workload, parse_gpu_counts, write_trace

    check_output_path(args.out, "--out", directory=False)  # before anything is generated
    cluster_path = args.cluster or Path(str(resources.files("horus.data").joinpath("default_cluster.yaml")))
    cluster = load_cluster(cluster_path)
    spec = WorkloadSpec(kind=args.kind, num_jobs=args.jobs, load=args.load, cluster_gpus=cluster.num_gpus,
                        seed=args.seed, mix=args.mix, gpu_counts=parse_gpu_counts(args.gpu_counts),
                        duration_median_s=args.duration_median_s, duration_sigma=args.duration_sigma,
                        duration_min_s=args.duration_min_s, duration_max_s=args.duration_max_s,
                        tenants=args.tenants)
    rows, summary = generate_workload(spec)
    existed = args.out.exists()
    try:
        write_trace(args.out, rows, spec, summary)
    except OSError as exc:
        if not existed:  # nothing half-written left behind
            args.out.unlink(missing_ok=True)
        raise HorusInputError("--out", f"cannot write {args.out} ({exc.strerror or exc})") from None
    print(f"horus: wrote {len(rows)} jobs to {args.out} ({args.kind}, {cluster.num_gpus} GPUs)", file=sys.stderr)
    print(json.dumps(summary))
    return 0
