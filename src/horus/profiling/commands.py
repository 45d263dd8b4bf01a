"""``horus profile`` (solo campaign), ``horus profile colocate`` and ``horus profile plan-pairs``.

torch is imported inside the command functions only (the CLI stays importable without it).
Exit codes: 0 complete, 2 bad input / no NVML / no CUDA, 3 stopped by ``--time-budget-s`` with
configurations left (rerun the same command: finished rows are kept and skipped).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from horus.errors import HorusInputError
from horus.profiling.campaign import (PRECISIONS, Campaign, ColocEntry, JobConfig, SoloEntry, load_campaign,
                                      parse_set)
from horus.profiling.nvml import MAX_PERIOD_S, MIN_PERIOD_S
from horus.validation import YEAR_S, Domain, NumberArg

INCOMPLETE_EXIT = 3
# Domains of the numeric options (docs/inputs.md)
GPU_INDEX = Domain(0, 1023, True, "(CUDA device index)")
NVML_PERIOD = Domain(MIN_PERIOD_S, MAX_PERIOD_S, False, "s")
WARMUP_ITERS = Domain(0, 1_000_000, True, "iterations")
WARMUP_S = Domain(0, 86_400, False, "s")
WINDOW_S = Domain(0.01, 86_400, False, "s")
LEARNING_RATE = Domain(1e-12, 100, False)
TIME_BUDGET_S = Domain(1, 10 * YEAR_S, False, "s")
REPEATS = Domain(1, 1000, True, "repeats")
SET_COUNT = Domain(0, 100_000, True, "sets")
CAPACITY_MIB = Domain(1, 2**22, False, "MiB")


def path_arg(text: str) -> Path:
    """argparse ``type=`` for a path: an empty string is an error (``Path('')`` would silently be ``.``)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r}")
    return Path(text)


def _add_settings(parser: argparse.ArgumentParser, out_required: bool = True) -> None:
    from horus.profiling.loop import OPTIMIZERS, LoopSettings

    d = LoopSettings()
    parser.add_argument("--out", required=out_required, type=path_arg, help="campaign directory (created; reruns resume)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--gpu", type=NumberArg(GPU_INDEX), default=0, help="CUDA / NVML device index")
    parser.add_argument("--no-nvml", action="store_true", help="no NVML sampling: NVML columns are NaN")
    parser.add_argument("--nvml-period", type=NumberArg(NVML_PERIOD), default=d.nvml_period_s,
                        help=f"seconds between samples ({MIN_PERIOD_S}-{MAX_PERIOD_S})")
    parser.add_argument("--warmup-iters", type=NumberArg(WARMUP_ITERS), default=d.warmup_iters)
    parser.add_argument("--warmup-s", type=NumberArg(WARMUP_S), default=d.warmup_s,
                        help="warm-up lasts at least this long too")
    parser.add_argument("--window-s", type=NumberArg(WINDOW_S), default=d.window_s, help="measuring window, seconds")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default=d.optimizer)
    parser.add_argument("--lr", type=NumberArg(LEARNING_RATE), default=d.lr)
    parser.add_argument("--seed", type=NumberArg("seed"), default=d.seed)
    parser.add_argument("--time-budget-s", type=NumberArg(TIME_BUDGET_S), default=math.inf,
                        help="start no configuration that would end after this many seconds (exit 3 if some are left)")


def register(subparsers: Any) -> None:
    profile = subparsers.add_parser("profile", help="profile training jobs on a GPU (solo and co-located)")
    _add_settings(profile, out_required=False)  # required unless a subcommand follows (checked in _profile)
    profile.add_argument("--campaign", type=path_arg, help="YAML/JSON campaign file (solo and/or colocate entries)")
    profile.add_argument("--model", help="one zoo model (instead of --campaign)")
    profile.add_argument("--batch", type=NumberArg("batch_size"), action="append", help="batch size (repeatable)")
    profile.add_argument("--precision", choices=PRECISIONS, default="fp32")
    profile.add_argument("--input-size", type=NumberArg("input_size"), help="input size (default: the zoo entry's)")
    profile.add_argument("--repeats", type=NumberArg(REPEATS), default=1)
    profile.set_defaults(func=_profile)
    nested = profile.add_subparsers(dest="profile_command", metavar="{colocate,plan-pairs}")

    coloc = nested.add_parser("colocate", help="run sets of jobs concurrently on one GPU")
    _add_settings(coloc)
    coloc.add_argument("--set", action="append", dest="sets", metavar="MODEL:BATCH[:PREC],...",
                       help="a co-located set, e.g. resnet50:64,bert_base:8 (repeatable)")
    coloc.add_argument("--campaign", type=path_arg, help="campaign file (its solo entries run first)")
    coloc.add_argument("--solo", type=path_arg, help="solo dataset (profiles.csv/.parquet/.jsonl) for solo throughputs")
    coloc.add_argument("--precision", choices=PRECISIONS, default="fp32")
    coloc.add_argument("--repeats", type=NumberArg(REPEATS), default=1)
    coloc.add_argument("--measure-solo", action="store_true",
                       help="also profile every member alone first (when no --solo data covers it)")
    coloc.set_defaults(func=_colocate)

    plan = nested.add_parser("plan-pairs", help="choose pairs/triples spanning summed util and memory from solo data")
    plan.add_argument("--solo", type=path_arg, required=True, help="solo dataset (profiles.csv/.parquet/.jsonl)")
    plan.add_argument("--pairs", type=NumberArg(SET_COUNT), default=100)
    plan.add_argument("--triples", type=NumberArg(SET_COUNT), default=20)
    plan.add_argument("--capacity-mib", type=NumberArg(CAPACITY_MIB),
                      help="GPU memory (default: the manifest beside --solo)")
    plan.add_argument("--repeats", type=NumberArg(REPEATS), default=1)
    plan.add_argument("--seed", type=NumberArg("seed"), default=0)
    plan.add_argument("--out", type=path_arg, required=True, help="campaign JSON to write")
    plan.set_defaults(func=_plan_pairs)


def _settings(args: argparse.Namespace) -> Any:
    from horus.profiling.loop import LoopSettings

    from horus.validation import check_option

    check_option("--seed", args.seed, "seed")
    if args.device == "cpu" and not args.no_nvml:
        raise HorusInputError("--device", "cpu runs need --no-nvml too (NVML measures a GPU)")
    for name in ("window_s", "warmup_s"):
        if getattr(args, name) < 0 or (name == "window_s" and args.window_s == 0):
            raise HorusInputError(f"--{name.replace('_', '-')}", f"expected a positive number, got {getattr(args, name)}")
    return LoopSettings(device=args.device, use_nvml=not args.no_nvml, nvml_period_s=args.nvml_period,
                        warmup_iters=args.warmup_iters, warmup_s=args.warmup_s, window_s=args.window_s,
                        optimizer=args.optimizer, lr=args.lr, seed=args.seed, gpu_index=args.gpu)


def _preflight(settings: Any) -> Any:
    """Open NVML (when asked) and check CUDA; one-line HorusInputError otherwise. Returns the device or None."""
    from horus.extras import require
    from horus.profiling.nvml import MAX_PERIOD_S, MIN_PERIOD_S, open_nvml

    require("torch", "horus profile")  # before anything is written
    if not MIN_PERIOD_S <= settings.nvml_period_s <= MAX_PERIOD_S:
        raise HorusInputError("--nvml-period", f"expected {MIN_PERIOD_S}-{MAX_PERIOD_S} s, got {settings.nvml_period_s}")
    device = open_nvml(settings.gpu_index) if settings.use_nvml else None
    if settings.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise HorusInputError("--device", f"CUDA is not available to torch {torch.__version__}; "
                                  "use --device cpu --no-nvml for a CPU test run")
    return device


def _run(campaign: Campaign, args: argparse.Namespace, solo_rows: list[dict[str, Any]] | None = None) -> int:
    from horus.graph.input_sizes import check_input_size
    from horus.profiling.manifest import build_manifest, write_manifest
    from horus.profiling.runner import CampaignRunner
    from horus.validation import check_output_path

    settings = _settings(args)
    jobs = [e.job for e in campaign.solo] + [m for e in campaign.colocate for m in e.members]
    from horus.extras import require
    from horus.profiling.models import resolve_model

    require("torch", "horus profile")  # the zoo needs it; say so before naming a model unknown
    for model in sorted({job.model for job in jobs}):  # unknown names fail here, before a row is written
        resolve_model(model)
    for job in jobs:  # a conv net below its total stride measures no network anyone trains
        check_input_size(job.model, job.input_size, str(args.campaign) if args.campaign else "--input-size")
    check_output_path(args.out, "--out")  # reruns resume in an existing directory; nothing else may stand there
    device = _preflight(settings)
    runner = CampaignRunner(args.out, settings, device.read if device else None, solo_rows or [], args.time_budget_s)
    left = runner.run(campaign)
    written = runner.write_tables()
    write_manifest(args.out / "manifest.json", build_manifest(settings, device, {
        "solo_configs": sum(e.repeats for e in campaign.solo),
        "colocated_sets": sum(e.repeats for e in campaign.colocate), "left": left}))
    print(f"wrote {', '.join(str(p) for p in written) or 'no rows'} and {args.out / 'manifest.json'}")
    _fail_if_nothing_succeeded(args.out)
    if left:
        print(f"stopped by --time-budget-s with {left} configuration(s) left; rerun the same command to continue")
        return INCOMPLETE_EXIT
    return 0


def _fail_if_nothing_succeeded(out: Path) -> None:
    """A campaign whose every row failed (timeouts, errors, OOM) is an error, not a success: exit 2."""
    from horus.profiling.runner import COLOC_FILE, SOLO_FILE
    from horus.profiling.store import read_jsonl

    rows = [*read_jsonl(out / SOLO_FILE), *read_jsonl(out / COLOC_FILE)]
    if rows and not any(row.get("status") == "ok" for row in rows):
        first = rows[0]
        raise HorusInputError(str(out), f"no configuration succeeded ({len(rows)} row(s), first: "
                                        f"{first.get('status')}: {str(first.get('error') or '')[:160]}); "
                                        "the rows are kept for inspection")


def _profile(args: argparse.Namespace) -> int:
    if args.out is None:
        raise HorusInputError("horus profile", "--out DIR is required")
    if (args.campaign is None) == (args.model is None):
        raise HorusInputError("horus profile", "give either --campaign FILE or --model NAME --batch N")
    if args.campaign is not None:
        campaign = load_campaign(args.campaign)
        if not campaign.solo and not campaign.colocate:
            raise HorusInputError(str(args.campaign), "no solo or colocate entries; expected at least one")
    else:
        if not args.batch or any(b <= 0 for b in args.batch):
            raise HorusInputError("--batch", "expected one or more positive batch sizes with --model")
        campaign = Campaign(solo=[SoloEntry(JobConfig(args.model, b, args.precision, args.input_size), args.repeats)
                                  for b in args.batch])
    return _run(campaign, args)


def _colocate(args: argparse.Namespace) -> int:
    from horus.profiling.store import read_table

    if not args.sets and args.campaign is None:
        raise HorusInputError("horus profile colocate", "give --set MODEL:BATCH,MODEL:BATCH or --campaign FILE")
    campaign = load_campaign(args.campaign) if args.campaign is not None else Campaign()
    for text in args.sets or []:
        campaign.colocate.append(ColocEntry(parse_set(text, "--set", args.precision), args.repeats))
    solo_rows: list[dict[str, Any]] = []
    if args.solo is not None:
        solo_rows = read_table(args.solo, ["model", "batch_size", "precision", "status", "throughput_samples_s"]) \
            .to_dict("records")
    if args.measure_solo:
        covered = {(r["model"], int(r["batch_size"]), r["precision"]) for r in solo_rows if r["status"] == "ok"}
        listed = {e.job for e in campaign.solo}
        for entry in campaign.colocate:
            for job in entry.members:
                if (job.model, job.batch, job.precision) not in covered and job not in listed:
                    campaign.solo.append(SoloEntry(job))
                    listed.add(job)
    return _run(campaign, args, solo_rows)


def _plan_pairs(args: argparse.Namespace) -> int:
    import json

    from horus.colocation.plan import plan_sets
    from horus.profiling.store import read_table

    from horus.validation import check_option, check_output_path

    check_option("--seed", args.seed, "seed")
    for option, value, domain in (("--pairs", args.pairs, SET_COUNT), ("--triples", args.triples, SET_COUNT),
                                  ("--repeats", args.repeats, REPEATS), ("--capacity-mib", args.capacity_mib,
                                                                         CAPACITY_MIB)):
        if value is not None and not domain.contains(value):  # argparse checked them; a caller of this function
            raise HorusInputError(option, f"expected {domain.describe()}, got {value!r}")
    if args.pairs + args.triples == 0:
        raise HorusInputError("--pairs", "--pairs 0 and --triples 0 plan nothing; expected at least one set")
    check_output_path(args.out, "--out", directory=False)
    solo = read_table(args.solo, ["model", "batch_size", "precision", "status", "gpu_util_mean",
                                  "torch_max_reserved_mib"])
    capacity = args.capacity_mib
    if capacity is None:
        manifest = args.solo.parent / "manifest.json"
        if not manifest.is_file():
            raise HorusInputError("--capacity-mib", f"not given and no manifest at {manifest}")
        from horus.validation import load_json

        data, _ = load_json(manifest, "a campaign manifest (manifest.json)")
        capacity = data.get("gpu_memory_mib") if isinstance(data, dict) else None
        if capacity is None:
            raise HorusInputError(str(manifest), "gpu_memory_mib: missing; pass --capacity-mib")
        CAPACITY_MIB.check(capacity, str(manifest), "gpu_memory_mib")
    doc = plan_sets(solo, float(capacity), args.pairs, args.triples, args.seed, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)  # check_output_path found it creatable
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(doc['colocate'])} sets to {args.out}")
    return 0
