"""``horus simulate``: run a trace on a cluster under one or more policies and compare them."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from horus.sim import options as opt
from horus.sim.tenants import tenancy_arg
from horus.sim.world import (
    MEMORY_TRUTHS,
    build_predictor,
    build_truth,
    check_trace_sizes,
    check_world_options,
    embedded,
    memory_truth_for,
)
from horus.tenancy import CHARGE_RULES
from horus.validation import NumberArg, check_input_path, check_output_path, path_arg

SUMMARY_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (summary key, column header, format)
    ("makespan_s", "makespan h", "{:.2f}"),
    ("mean_jct_s", "mean JCT h", "{:.2f}"),
    ("median_jct_s", "med JCT h", "{:.2f}"),
    ("p95_jct_s", "p95 JCT h", "{:.2f}"),
    ("mean_wait_s", "mean wait h", "{:.2f}"),
    ("p95_wait_s", "p95 wait h", "{:.2f}"),
    ("goodput", "goodput %", "{:.1f}"),
    ("gpu_util_mean", "GPU util %", "{:.1f}"),
    ("gpu_busy_mean", "GPU busy %", "{:.1f}"),
    ("gpu_busy_allocated_mean", "busy/alloc %", "{:.1f}"),
    ("gpu_mem_occupancy_mean", "GPU mem %", "{:.1f}"),
    ("colocated_share", "co-loc %", "{:.1f}"),
    ("mean_slowdown", "mean slow", "{:.3f}"),
    ("p95_slowdown", "p95 slow", "{:.3f}"),
    ("oom_failures", "OOMs", "{:.0f}"),
    ("oom_lost_job_h", "OOM lost job-h", "{:.2f}"),
    ("jobs_failed", "failed", "{:.0f}"),
    ("jobs_rejected", "rejected", "{:.0f}"),
)
TENANCY_COLUMNS: tuple[tuple[str, str, str], ...] = (  # horus sweep, cells run under a tenancy (horus.sim.queues)
    ("tenancy_source", "tenancy", "{}"),
    ("jain_index", "Jain", "{:.3f}"),
    ("min_guarantee_attainment", "min attain %", "{:.1f}"),
    ("quota_violation_s", "quota viol s", "{:.0f}"),
    ("reclaim_preemptions", "reclaims", "{:.0f}"),
)
INTERFERENCE_POLICIES: tuple[str, ...] = ("geng", "horus-iasp")  # policies taking model_dir=
_HOURS = {"makespan_s", "mean_jct_s", "median_jct_s", "p95_jct_s", "mean_wait_s", "p95_wait_s"}
_PERCENT = {"gpu_util_mean", "gpu_busy_mean", "gpu_busy_allocated_mean", "gpu_mem_occupancy_mean", "colocated_share",
            "goodput", "min_guarantee_attainment"}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="simulate a trace on a cluster under policies and compare them",
        description="Simulate a job trace on a GPU cluster under one or more scheduling policies. With no arguments, "
        "runs the embedded default workload on the embedded 64-GPU cluster under every registered policy.",
    )
    p.add_argument("--trace", type=path_arg, help="trace file (default: the embedded default workload)")
    p.add_argument("--format", dest="fmt", help="format of --trace: horus, philly or openb (default horus)")
    p.add_argument("--cluster", type=path_arg,
                   help="cluster spec YAML, or for --format openb the openb node CSV (default: embedded 8x8 V100)")
    p.add_argument("--policy", action="append", dest="policies", metavar="NAME",
                   help="policy to run (repeatable; default: every registered policy)")
    p.add_argument("--truth", default="parametric",
                   help="truth model: parametric (default), gavel (--gavel) or measured (--profiles, --colocation)")
    p.add_argument("--gavel", type=path_arg, help="Gavel simulation_throughputs.json (for --truth gavel)")
    p.add_argument("--profiles", type=path_arg, help="solo profile table (horus profile) for --truth measured")
    p.add_argument("--colocation", type=path_arg,
                   help="co-location table (horus profile colocate) for --truth measured")
    p.add_argument("--memory-truth", choices=MEMORY_TRUTHS,
                   help="true peak memory: deviated (default; the formula off by a deviation per job type fitted on "
                        "measured trainings, docs/truth.md) or formula (the truth's own); not with --truth measured")
    p.add_argument("--interference-scale", type=NumberArg(opt.INTERFERENCE_SCALE), default=1.0, metavar="S",
                   help="scale every co-location slowdown: x' = 1/(1 + S(1/x - 1)), S in [0, 100]; 0 = free, "
                        "1 = the truth (default)")
    p.add_argument("--losing-pairs", type=NumberArg(opt.LOSING_PAIRS), default=0.0, metavar="F",
                   help="make a seeded share F in [0, 1] of job-type pairs lose when sharing a GPU (combined throughput "
                        "0.6-0.95; docs/truth.md): a world where co-locating can cost (default 0: the truth)")
    p.add_argument("--predictor", default="physical",
                   help="predictor: physical (default; best on the held-out evaluation, docs/predictors.md), "
                        "analytic or learned")
    p.add_argument("--predictor-dir", type=path_arg, help="trained predictor directory (for --predictor learned)")
    p.add_argument("--interference-model", type=path_arg, metavar="DIR",
                   help="trained interference model (horus interference train) for the geng and horus-iasp policies")
    p.add_argument("--sizes", default="estimate", choices=("estimate", "exact", "none"),
                   help="what every policy is told of job lengths (docs/simulator.md, 'Job sizes'): estimate "
                        "(default: the user's stated length, with early termination and misjudgement), exact "
                        "(the true length: clairvoyant) or none (size-ordered policies are then left out)")
    p.add_argument("--sampler", default="by-size-duration", help="model-profile sampler for traces without models")
    p.add_argument("--max-jobs", type=NumberArg(opt.MAX_JOBS), help="use only the first N jobs of the trace (1 to 20,000,000)")
    p.add_argument("--telemetry", default="noisy", metavar="MODEL",
                   help="what running jobs report to the policies: noisy (default: a report every period, log-normal "
                        "rate noise, no rate before a warm-up after each (re)start) or exact (the true rate at once); "
                        "docs/simulator.md, 'Telemetry'")
    p.add_argument("--telemetry-period-s", type=NumberArg(opt.TELEMETRY_PERIOD_S), metavar="S",
                   help="noisy telemetry: seconds between reports, 1 to 86,400 (60)")
    p.add_argument("--telemetry-sigma", type=NumberArg(opt.TELEMETRY_SIGMA), metavar="SIGMA",
                   help="noisy telemetry: sigma of the log-normal rate noise, 0 to 1 (0.05)")
    p.add_argument("--telemetry-warmup", type=NumberArg(opt.TELEMETRY_WARMUP), metavar="ITERS",
                   help="noisy telemetry: iterations after the restore stall before a rate is reported, 0 to 1e6 (50)")
    p.add_argument("--online-correction", action="store_true",
                   help="telemetry of jobs running alone (rate, utilization, peak memory) corrects the predictions of "
                        "later jobs of that type and of other types on the same GPU type, as in the live service "
                        "(docs/predictors.md, 'Online correction'); the summary adds the prediction errors, raw and "
                        "corrected")
    p.add_argument("--tenancy", type=tenancy_arg, metavar="SOURCE",
                   help="tenant queues every policy runs under (docs/tenancy.md): off, spec (the cluster spec's "
                        "tenancy section; the default when it has one, else off), trace (a queue per value of the "
                        "trace's queue column, guaranteed its share of the trace's GPU-time demand; jobs without one "
                        "in queue 'default') or a YAML file with a 'tenancy:' section")
    p.add_argument("--tenancy-charge", choices=CHARGE_RULES,
                   help="how a shared GPU is charged to its residents' queues: equal (by request; the tenancy's "
                        "default) or util (by predicted utilization); overrides the tenancy's 'charge'")
    p.add_argument("--seed", type=NumberArg(opt.SEED), default=0,
                   help="seed for the profile sampler and noisy telemetry, 0 to 2**32-1 (default 0)")
    p.add_argument("--out", type=path_arg, help="results directory (default: results/<trace>-<UTC time>)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run_simulate)


def format_table(summary: dict[str, dict[str, Any]],
                 columns: Sequence[tuple[str, str, str]] = SUMMARY_COLUMNS) -> str:
    """A fixed-width comparison table, one row per policy (times in hours, shares in percent, words as they are),
    and the bounds every policy's run shares (``horus.sim.report.BOUND_ROWS``) as last rows."""
    from horus.sim.report import BOUND_ROWS

    def cell(key: str, value: Any, fmt: str) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):  # undefined (a mean of nothing)
            return "-"
        if isinstance(value, str):
            return value
        return fmt.format(value / 3600 if key in _HOURS else value * 100 if key in _PERCENT else value)

    headers = ["policy", *(h for _, h, _ in columns)]
    rows = [[policy, *(cell(key, metrics.get(key), fmt) for key, _, fmt in columns)]
            for policy, metrics in summary.items()]
    first = next(iter(summary.values()), {})
    for label, bounds in BOUND_ROWS:  # every policy ran the same jobs: one row per bound
        if any(bound in first for bound in bounds.values()):
            rows.append([label, *(cell(key, first.get(bounds.get(key, "")), fmt) for key, _, fmt in columns)])
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in [headers, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _check_options(args: argparse.Namespace) -> None:
    """Options that contradict each other or are out of range: rejected before any file is read."""
    from horus.errors import HorusInputError
    from horus.validation import check_option

    check_option("--seed", args.seed, "seed")  # argparse checked every number (NumberArg); callers may not
    repeated = sorted({name for name in args.policies or [] if args.policies.count(name) > 1})
    if repeated:
        raise HorusInputError("--policy", f"{repeated[0]!r} given more than once (each policy runs once)")
    if args.fmt is not None and args.trace is None:
        raise HorusInputError("--format", "applies to --trace FILE, which was not given (the embedded workload is "
                                          "in horus format)")
    check_world_options(args.truth, args.gavel, args.predictor, args.predictor_dir, profiles=args.profiles,
                        colocation=args.colocation, memory_truth=args.memory_truth)
    if args.interference_model is not None and args.policies \
            and not any(name in INTERFERENCE_POLICIES for name in args.policies):
        raise HorusInputError("--interference-model", f"is used only by {', '.join(INTERFERENCE_POLICIES)}; "
                                                      "none of them is among --policy")
    opt.INTERFERENCE_SCALE.check(args.interference_scale, "--interference-scale", "S")
    opt.LOSING_PAIRS.check(args.losing_pairs, "--losing-pairs", "F")
    for option, path, what in (("--trace", args.trace, "a trace file"), ("--cluster", args.cluster, "a cluster spec"),
                               ("--gavel", args.gavel, "Gavel's throughputs JSON"),
                               ("--profiles", args.profiles, "a solo profile table"),
                               ("--colocation", args.colocation, "a co-location table"),
                               ("--tenancy", args.tenancy if isinstance(args.tenancy, Path) else None,
                                "a YAML file with a tenancy section")):
        if path is not None:
            check_input_path(path, option, what)
    for option, path, what in (("--predictor-dir", args.predictor_dir, "a trained predictor directory"),
                               ("--interference-model", args.interference_model, "a trained interference model")):
        if path is not None:
            check_input_path(path, option, what, directory=True)
    telemetry_config(args)


TELEMETRY_KNOBS = (  # (flag, argparse dest, option of the noisy model)
    ("--telemetry-period-s", "telemetry_period_s", "period_s"),
    ("--telemetry-sigma", "telemetry_sigma", "sigma"),
    ("--telemetry-warmup", "telemetry_warmup", "warmup_iterations"),
)


def telemetry_config(args: argparse.Namespace) -> dict[str, Any]:
    """``SimConfig`` keyword arguments of the telemetry options (HorusInputError for a bad model or knob)."""
    from horus.errors import HorusInputError
    from horus.sim.telemetry import TELEMETRY_MODELS, create_telemetry

    if args.telemetry not in TELEMETRY_MODELS:
        raise HorusInputError("--telemetry", f"unknown telemetry model {args.telemetry!r}; known: "
                                             f"{', '.join(TELEMETRY_MODELS.names())}")
    options: dict[str, Any] = {key: getattr(args, dest) for _, dest, key in TELEMETRY_KNOBS
                               if getattr(args, dest) is not None}
    if args.telemetry == "noisy":
        options["seed"] = args.seed
    elif options:
        flag = next(flag for flag, dest, _ in TELEMETRY_KNOBS if getattr(args, dest) is not None)
        raise HorusInputError(flag, f"applies to --telemetry noisy, not {args.telemetry}")
    try:
        create_telemetry(args.telemetry, options)
    except ValueError as exc:
        flag = next((f for f, _, key in TELEMETRY_KNOBS if key in str(exc)), "--telemetry")
        raise HorusInputError(flag, str(exc)) from None
    return {"telemetry": args.telemetry, "telemetry_options": options}


def check_jobs_fit(jobs: list[Any], cluster: Any, source: str) -> tuple[int, str]:
    """(jobs that can never run on ``cluster``, description of the first); unknown GPU type names are errors.

    A job asking for more GPUs than the cluster has of the types it accepts is rejected by the engine and
    counted (``jobs_rejected``); the command says so on stderr. All jobs rejected is an error."""
    from horus.errors import HorusInputError
    from horus.gpu_types import PRESETS, accepted_gpu_types

    types = {t.name for t in cluster.gpu_types()} | set(PRESETS)
    per_type: dict[str, int] = {}
    for node in cluster.nodes:
        per_type[node.gpu_type.name] = per_type.get(node.gpu_type.name, 0) + node.num_gpus
    eligible_cache: dict[str | None, int] = {}
    rejected, first = 0, ""
    for job in jobs:
        request = job.gpu_type_request
        if request not in eligible_cache:
            accepted = accepted_gpu_types(request)
            unknown = sorted(accepted - types) if accepted is not None else []
            if unknown:
                raise HorusInputError(source, f"job {job.job_id!r}: unknown GPU type {unknown[0]!r} "
                                              f"(known: {', '.join(sorted(types))})")
            eligible_cache[request] = sum(n for t, n in per_type.items() if accepted is None or t in accepted)
        if job.num_gpus > eligible_cache[request]:
            rejected += 1
            if not first:
                first = (f"job {job.job_id!r} asks for {job.num_gpus} GPUs"
                         + (f" of {request}" if request else "") + f", the cluster has {eligible_cache[request]}")
    if jobs and rejected == len(jobs):
        raise HorusInputError(source, f"every job is larger than the cluster can hold (first: {first})")
    return rejected, first


GEN0_THRESHOLD = 50_000  # new container objects between young collections while simulating (``settle_heap``)


def settle_heap() -> None:
    """Freeze what is alive (modules, the trace, the jobs: kept to the end of the process) so the collector's full
    passes during the run no longer walk it, and collect again from here on (``run_simulate`` pauses the collector
    while the inputs are read: ~100k trace rows make no garbage cycles, only work for it). No collection first: it
    would cost more than the little cyclic garbage of the imports it could free (kept until the command ends).
    Together ~10% of a 10,000-job run's CPU seconds; only the collector's work changes, not what is computed.
    The youngest generation is collected after ``GEN0_THRESHOLD`` new containers, not Python's 700: the run makes
    millions of short-lived ones and little cyclic garbage (Philly 10,000 jobs: ~470 young collections, ~0.05 CPU-s,
    become a handful). ``run_simulate`` puts the thresholds back."""
    import gc

    gc.freeze()
    gc.set_threshold(max(GEN0_THRESHOLD, gc.get_threshold()[0]), *gc.get_threshold()[1:])
    gc.enable()


def run_simulate(args: argparse.Namespace) -> int:
    import gc

    enabled = gc.isenabled()
    thresholds = gc.get_threshold()
    gc.disable()  # until settle_heap, once the inputs are read
    try:
        return _run_simulate(args)
    finally:  # an in-process caller (the tests) gets its heap and its collector back as they were
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        if enabled:
            gc.enable()
        else:
            gc.disable()


def _run_simulate(args: argparse.Namespace) -> int:
    from horus.clusterspec import load_spec
    from horus.errors import HorusInputError
    from horus.plugins import load_all
    from horus.sim.tenants import check_queues, declared_tenancy
    from horus.traces import load_openb_cluster, load_trace, materialize
    from horus.traces.sampler import SAMPLERS
    from horus.validation import OutputDir

    _check_options(args)
    trace_path = args.trace or embedded("default_trace.csv")
    fmt = args.fmt or "horus"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    outdir = args.out or Path("results") / f"{Path(trace_path).stem}-{stamp}"
    check_output_path(outdir, "--out")  # before any input is read: a run must not end at its first write
    if args.cluster is None:
        if fmt == "openb":
            raise HorusInputError("--cluster", "--format openb needs --cluster with the openb node CSV or a cluster YAML")
        cluster, spec_tenancy = load_spec(embedded("default_cluster.yaml"))
    elif args.cluster.suffix.lower() == ".csv":
        cluster, spec_tenancy = load_openb_cluster(args.cluster), None
    else:
        cluster, spec_tenancy = load_spec(args.cluster)
    trace = load_trace(trace_path, fmt)  # inputs first: they are cheap to check, truth and policies are not
    check_trace_sizes(trace.jobs[: args.max_jobs], str(trace_path))
    tenancy, tenancy_source = declared_tenancy(args.tenancy, args.tenancy_charge, spec_tenancy, cluster,
                                               str(args.cluster or 'embedded default'))
    if tenancy is not None:  # the jobs that will run: materialize keeps the trace's order
        check_queues(trace.jobs[: args.max_jobs], tenancy, str(trace_path), tenancy_source)
    load_all("horus.traces")
    if args.sampler not in SAMPLERS:
        raise HorusInputError("--sampler", f"unknown sampler {args.sampler!r}; known: {', '.join(SAMPLERS.names())}")
    from horus.policies.base import POLICIES  # heavier imports only once the inputs passed

    load_all("horus.policies")
    names = args.policies or POLICIES.names()
    for name in names:
        if name not in POLICIES:
            raise HorusInputError("--policy", f"unknown policy {name!r}; known: {', '.join(POLICIES.names())}")
    if args.sizes == "none":
        from horus.sim.sizes import size_ordered_error

        by_size = [name for name in names if POLICIES.create(name).orders_by_size()]
        if by_size and args.policies:
            raise size_ordered_error(by_size[0])
        if by_size:
            print(f"horus: --sizes none: leaving out the size-ordered policies {', '.join(by_size)}", file=sys.stderr)
            names = [name for name in names if name not in by_size]
    if args.interference_model is not None and not (args.interference_model / "model.json").is_file():
        raise HorusInputError(str(args.interference_model), "not a trained interference model (no model.json); "
                              "create one with: horus interference train")

    from horus.sim.engine import SimConfig
    from horus.sim.runner import run_comparison  # matplotlib: seconds to import
    from horus.sim.tenants import DEFAULT_QUEUE, format_queue_tables, tenancy_from_trace

    memory_truth = memory_truth_for(args.truth, args.memory_truth)
    truth = build_truth(args.truth, args.gavel, cluster, args.profiles, args.colocation, memory_truth)
    if args.interference_scale != 1.0:
        from horus.truth.scaled import ScaledInterference

        truth = ScaledInterference(truth, args.interference_scale)
    if args.losing_pairs > 0:
        from horus.truth.losing_pairs import LosingPairs

        truth = LosingPairs(truth, args.losing_pairs, seed=args.seed)
    if args.interference_model is not None and any(name in INTERFERENCE_POLICIES for name in names):
        from horus.interference.persistence import load_model
        from horus.sim.leakage import check_model_disjoint

        check_model_disjoint(args.interference_model, truth.describe())  # as run_comparison, before the jobs
        load_model(args.interference_model)  # a damaged model fails here, not once the jobs are built
    predictor = build_predictor(args.predictor, args.predictor_dir)
    sampler = SAMPLERS.create(args.sampler, seed=args.seed)
    reference = max(cluster.gpu_types(), key=lambda t: sum(n.num_gpus for n in cluster.nodes if n.gpu_type == t))
    jobs = materialize(trace, truth, sampler, reference, seed=args.seed, limit=args.max_jobs)  # the first max_jobs
    settle_heap()
    rejected, first = check_jobs_fit(jobs, cluster, str(trace_path))
    if rejected:
        print(f"horus: warning: {trace_path}: {rejected} of {len(jobs)} jobs ask for more GPUs than the cluster has "
              f"of the types they accept and are rejected (counted as 'rejected'); first: {first}", file=sys.stderr)
    if tenancy_source == "trace":
        tenancy = tenancy_from_trace(jobs, cluster, truth, reference, args.tenancy_charge or "equal")
        check_queues(trace.jobs[: args.max_jobs], tenancy, str(trace_path), tenancy_source)  # priority classes
        if all(spec.queue is None for spec in jobs):
            print(f"horus: warning: --tenancy trace: {trace_path} names no queues; every job is in queue "
                  f"'{DEFAULT_QUEUE}'", file=sys.stderr)

    log = sys.stderr if args.json else sys.stdout
    print(f"horus: {len(jobs)} jobs from {trace_path} ({fmt}) on {cluster.num_gpus} GPUs; truth={truth.name}, "
          f"predictor={predictor.name}{' (corrected online)' if args.online_correction else ''}, "
          f"telemetry={args.telemetry}; job sizes: {args.sizes}; "
          + (f"tenancy: {len(tenancy.queues)} queues ({tenancy_source}, charge {tenancy.charge}); "
             if tenancy is not None else "") + f"policies: {', '.join(names)}", file=log)
    extra = {
        "command": ["horus", *sys.argv[1:]],
        "trace": {"path": str(trace_path), "format": fmt, "sha256": trace.sha256, "jobs": len(jobs),
                  "skipped": getattr(trace, "skipped", {}), "rejected_too_large": rejected},
        "cluster_spec": str(args.cluster or embedded("default_cluster.yaml")),
        "sampler": sampler.describe(),
        "seed": args.seed,
        "memory_truth": memory_truth,
    }
    if tenancy is not None:
        extra["tenancy"] = {"source": tenancy_source, **tenancy.describe()}
    options: dict[str, dict[str, object]] = {}
    if args.interference_model is not None:
        options = {name: {"model_dir": args.interference_model} for name in INTERFERENCE_POLICIES}
    title = (f"{Path(trace_path).name} ({fmt}) on {Path(args.cluster).name if args.cluster else 'default cluster'} "
             f"({cluster.num_gpus} GPUs), truth {truth.name}")
    with OutputDir(outdir, "--out"):
        config = SimConfig(sizes=args.sizes, sizes_seed=args.seed, online_correction=args.online_correction,
                           **telemetry_config(args))
        summary = run_comparison(jobs, cluster, names, truth, predictor, config, outdir, extra,
                                 progress=not args.no_progress and not args.json, policy_options=options,
                                 title=title, tenancy=tenancy)
    print(format_table(summary["policies"]), file=log)
    if tenancy is not None:
        print("\n" + format_queue_tables(summary["queues"]), file=log)
    print(f"horus: results, manifest and plots written to {outdir}", file=log)
    if args.json:
        json.dump(summary, sys.stdout, indent=2, default=float)
        print()
    return 0
