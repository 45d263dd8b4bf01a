"""``horus sweep``: compare policies over traces x seeds x clusters, the simulations fanned out over Ray."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from horus.sim import options as opt
from horus.sim.tenants import tenancy_arg
from horus.tenancy import CHARGE_RULES
from horus.validation import NumberArg, check_output_path, path_arg


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sweep", help="simulate a grid of policy x trace x seed x cluster over a Ray cluster, one comparison table",
        description="Run one simulation per (policy, trace, seed, cluster) as a Ray task and gather one table "
        "(per cell, and mean +- std over seeds). A cell runs under its cluster spec's tenancy section, if any, as "
        "horus simulate (--tenancy). Needs the ray extra; --no-ray runs the cells here, one by one.")
    p.add_argument("--policy", action="append", dest="policies", metavar="NAME",
                   help="policy (repeatable; default: every registered policy)")
    p.add_argument("--trace", action="append", dest="traces", metavar="PATH", type=path_arg,
                   help="trace file (repeatable; default: the embedded default workload)")
    p.add_argument("--cluster", action="append", dest="clusters", metavar="PATH", type=path_arg,
                   help="cluster spec YAML or openb node CSV (repeatable; default: the embedded 8x8 V100)")
    p.add_argument("--seeds", default="0",
                   help=f"comma-separated sampler seeds, or A-B, each 0 to 2**32-1, at most {MAX_SEEDS} (default 0)")
    p.add_argument("--format", dest="fmt",
                   help="format of every --trace: horus (default), philly or openb")
    p.add_argument("--truth", default="parametric", help="truth model: parametric (default) or gavel")
    p.add_argument("--gavel", type=path_arg, help="Gavel simulation_throughputs.json (for --truth gavel)")
    p.add_argument("--memory-truth", choices=("formula", "deviated"),
                   help="true peak memory: deviated (default; the formula off by a deviation per job type fitted on "
                        "measured trainings, docs/truth.md) or formula (the truth's own)")
    p.add_argument("--predictor", default="physical", help="registered predictor (default physical, as horus serve and simulate)")
    p.add_argument("--predictor-dir", type=path_arg, help="trained predictor directory (for --predictor learned)")
    p.add_argument("--sampler", default="by-size-duration", help="model-profile sampler for traces without models")
    p.add_argument("--max-jobs", type=NumberArg(opt.MAX_JOBS),
                   help="use only the first N jobs of each trace (1 to 20,000,000)")
    p.add_argument("--sizes", default="estimate", choices=("estimate", "exact", "none"),
                   help="what every policy is told of job lengths, as horus simulate --sizes (default estimate)")
    p.add_argument("--telemetry", default="noisy", choices=("noisy", "exact"),
                   help="what running jobs report, as horus simulate --telemetry (default noisy, seeded by the cell)")
    p.add_argument("--tenancy", type=tenancy_arg, metavar="SOURCE",
                   help="tenant queues every cell runs under, as horus simulate --tenancy (docs/tenancy.md): off, "
                        "spec (the cell's cluster spec's tenancy section; the default for a cluster that has one, "
                        "else off), trace (a queue per value of the cell's trace's queue column, guaranteed its "
                        "share of the GPU-time demand) or a YAML file with a 'tenancy:' section (every cluster); "
                        "rows then add the tenancy figures (Jain's index, worst attainment, quota violations)")
    p.add_argument("--tenancy-charge", choices=CHARGE_RULES,
                   help="how a shared GPU is charged to its residents' queues: equal (by request; the tenancy's "
                        "default) or util (by predicted utilization); overrides the tenancy's 'charge'")
    p.add_argument("--ray-address", help="Ray cluster to use (default: find one, or start one on this machine)")
    p.add_argument("--no-ray", action="store_true", help="run the cells in this process, one after another")
    p.add_argument("--out", type=path_arg, help="results directory (default: results/sweep-<UTC time>)")
    p.add_argument("--json", action="store_true", help="print the per-cell rows as JSON on stdout")
    p.set_defaults(func=run_sweep_command)
    r = subparsers.add_parser(
        "sweep-report", help="write sweep.html, one comparison page, for a sweep's results",
        description="Write one self-contained comparison page (a table per world and workload with policies as "
        "rows and the best per column marked, heat maps and bar charts) for a 'horus sweep' output folder or its "
        "sweep.json, or for experiments/results/sweep.json. 'horus sweep' writes it by itself.")
    r.add_argument("source", type=path_arg, metavar="SWEEP", help="sweep.json, or a 'horus sweep --out' folder")
    r.add_argument("--out", type=path_arg, help="page to write (default: sweep.html next to SWEEP's JSON)")
    r.set_defaults(func=run_sweep_report_command)


TENANCY_FIGURES = ("queues", "jain_index", "min_guarantee_attainment", "quota_violation_s", "reclaim_preemptions",
                   "priority_preemptions", "contended_h")  # horus.sim.queues.tenancy_summary: sweep.json's means
MAX_SEEDS = 1000  # seeds per sweep: more is a typo, not a plan (each seed is a simulation per policy and trace)


def parse_seeds(text: str) -> list[int]:
    """``0,1,2`` or ``A-B``: at most ``MAX_SEEDS`` seeds, each in the sampler's seed range, checked before any
    list is built."""
    from horus.errors import HorusInputError
    from horus.validation import LIMITS

    try:
        if "-" in text and "," not in text:
            low, high = (int(x) for x in text.split("-", 1))
            bounds = [low, high]
            if high - low + 1 > MAX_SEEDS:
                raise HorusInputError("--seeds", f"{text!r} is {high - low + 1} seeds; at most {MAX_SEEDS}")
        else:
            bounds = [int(x) for x in text.split(",") if x.strip()]
            if len(bounds) > MAX_SEEDS:
                raise HorusInputError("--seeds", f"{len(bounds)} seeds; at most {MAX_SEEDS}")
    except ValueError:
        raise HorusInputError("--seeds", f"expected integers like 0,1,2 or 0-4, got {text[:80]!r}") from None
    domain = LIMITS["seed"]
    if any(not domain.contains(b) for b in bounds):
        raise HorusInputError("--seeds", f"each seed must be {domain.describe()}, got {text[:80]!r}")
    seeds = list(range(bounds[0], bounds[1] + 1)) if "-" in text and "," not in text else bounds
    if not seeds:
        raise HorusInputError("--seeds", f"no seed in {text[:80]!r}")
    return seeds


def probe_ray_address(address: str, timeout_s: float = 5.0) -> None:
    """HorusInputError unless something accepts a TCP connection at ``address`` (``host:port`` or
    ``ray://host:port``) within ``timeout_s``: ``ray.init`` would wait for ever. ``auto`` and ``local`` pass."""
    import socket

    from horus.errors import HorusInputError

    if address in ("auto", "local"):
        return
    if not address.strip():
        raise HorusInputError("--ray-address", "expected HOST:PORT, ray://HOST:PORT, auto or local, got an empty string")
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise HorusInputError("--ray-address", f"expected HOST:PORT, ray://HOST:PORT, auto or local, got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise HorusInputError("--ray-address", f"nothing answers at {address} within {timeout_s:g} s "
                                               f"({exc.strerror or exc})") from None


def run_sweep_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from horus.errors import HorusInputError
    from horus.plugins import load_all
    from horus.policies.base import POLICIES
    from horus.ray.sweep import DEFAULT, TENANCY_LABELS, SweepSettings, aggregate, check_cells, grid, run_sweep
    from horus.sim.commands import SUMMARY_COLUMNS, TENANCY_COLUMNS, format_table
    from horus.sim.outputs import environment, utc_timestamp, write_json, write_table
    from horus.sim.sweep_report import write_sweep_report
    from horus.sim.world import memory_truth_for
    from horus.validation import OutputDir

    for option, values in (("--policy", args.policies), ("--trace", args.traces), ("--cluster", args.clusters)):
        repeated = sorted({str(v) for v in values or [] if values.count(v) > 1})
        if repeated:
            raise HorusInputError(option, f"{repeated[0]!r} given more than once (each runs once per seed)")
    if args.no_ray and args.ray_address is not None:
        raise HorusInputError("--ray-address", "is not read with --no-ray (the cells run in this process)")
    if args.fmt is not None and not args.traces:
        raise HorusInputError("--format", "applies to --trace FILE, which was not given (the embedded workload is "
                                          "in horus format)")
    load_all("horus.policies")
    policies = args.policies or POLICIES.names()
    traces = [str(t) for t in args.traces or [DEFAULT]]
    clusters = [str(c) for c in args.clusters or [DEFAULT]]
    settings = SweepSettings(fmt=args.fmt or "horus", truth=args.truth, gavel=str(args.gavel) if args.gavel else None,
                             predictor=args.predictor,
                             predictor_dir=str(args.predictor_dir) if args.predictor_dir else None,
                             sampler=args.sampler, max_jobs=args.max_jobs, sizes=args.sizes, telemetry=args.telemetry,
                             memory_truth=memory_truth_for(args.truth, args.memory_truth),
                             tenancy=str(args.tenancy) if args.tenancy is not None else None,
                             tenancy_charge=args.tenancy_charge)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or Path("results") / f"sweep-{stamp}"
    output = OutputDir(out, "--out")  # before any simulation runs: a bad --out must not waste the sweep
    cells = grid(policies, traces, parse_seeds(args.seeds), clusters)
    check_cells(cells, settings)
    log = sys.stderr if args.json else sys.stdout
    where = "this process"
    if not args.no_ray:
        if args.ray_address is not None:
            probe_ray_address(args.ray_address)
        try:
            import ray
        except ImportError:
            raise HorusInputError("horus sweep", "Ray is not installed: pip install 'horus-scheduler[ray]', "
                                                 "or use --no-ray") from None
        if not ray.is_initialized():
            try:
                ray.init(address=args.ray_address, log_to_driver=False, include_dashboard=False)
            except Exception as exc:  # noqa: BLE001
                raise HorusInputError("--ray-address", f"cannot connect to Ray: {exc}") from None
        where = f"Ray ({int(ray.cluster_resources().get('CPU', 0))} CPUs)"
    print(f"horus: sweep of {len(cells)} simulations ({len(policies)} policies x {len(traces)} traces x "
          f"{len(cells) // max(1, len(policies) * len(traces) * len(clusters))} seeds x {len(clusters)} clusters) "
          f"on {where}", file=log)
    began = time.perf_counter()
    done = [0]

    def tick(row: dict) -> None:
        done[0] += 1
        print(f"  [{done[0]}/{len(cells)}] {row['policy']} seed {row['seed']} {Path(row['trace']).name} "
              f"{Path(row['cluster']).name}: {row['cell_wall_s']:.1f} s", file=log, flush=True)

    rows = run_sweep(cells, settings, use_ray=not args.no_ray, on_result=tick)
    wall_s = time.perf_counter() - began
    tenanted = any("tenancy_source" in row for row in rows)  # tenancy-free sweeps: rows and tables as before
    columns = [*SUMMARY_COLUMNS, *(TENANCY_COLUMNS if tenanted else ())]
    keys = [key for key, _, _ in columns if key not in TENANCY_LABELS]
    means = aggregate(rows, keys)
    import pandas as pd

    multi = len(traces) > 1 or len(clusters) > 1
    table = {(f"{m['policy']} | {Path(m['trace']).stem} | {Path(m['cluster']).stem}" if multi else m["policy"]): m
             for m in means}
    text = format_table(table, columns)
    with output:  # removed again if a write fails (unless it existed before)
        write_table(pd.DataFrame(rows), out / "cells")
        write_table(pd.DataFrame(means), out / "summary")
        write_json({"created": utc_timestamp(), "versions": environment(), "command": ["horus", *sys.argv[1:]],
                    "settings": asdict(settings),
                    "cells": len(cells), "executor": where, "wall_s": wall_s}, out / "manifest.json")
        page_keys = [*keys, "preemptions", "makespan_lower_bound_s", "mean_jct_lower_bound_s",  # bounds: per group
                     "makespan_exclusive_bound_s", "mean_jct_exclusive_bound_s",
                     *(TENANCY_FIGURES if tenanted else ())]
        write_json({"command": ["horus", *sys.argv[1:]], "settings": asdict(settings),
                    "means": aggregate(rows, page_keys), "cells": rows}, out / "sweep.json")
        write_sweep_report(out / "sweep.json")
        (out / "table.txt").write_text(text + "\n")
    print(text, file=log)
    print(f"horus: means over {len(cells) // max(1, len(means))} seed(s); {len(cells)} simulations in {wall_s:.1f} s; "
          f"cells, summary, table, manifest, sweep.json and sweep.html written to {out}", file=log)
    if args.json:
        json.dump(rows, sys.stdout, indent=2, default=float)
        print()
    return 0


def run_sweep_report_command(args: argparse.Namespace) -> int:
    from horus.errors import HorusInputError
    from horus.sim.sweep_report import write_sweep_report

    if not args.source.exists():
        raise HorusInputError(str(args.source), "no such file or folder")
    source_dir = args.source if args.source.is_dir() else args.source.parent
    target = args.out or source_dir / "sweep.html"
    check_output_path(target, "--out", directory=False)
    try:
        written = write_sweep_report(args.source, target)
    except OSError as exc:
        raise HorusInputError("--out", f"cannot write {target} ({exc.strerror or exc})") from None
    print(f"horus: wrote {written}")
    return 0
