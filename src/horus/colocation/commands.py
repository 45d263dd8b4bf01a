"""``horus colocation analyze DATA | --gavel PATH``: summed utilization vs co-location slowdown."""

from __future__ import annotations

import argparse
import json
from typing import Any

from horus.errors import HorusInputError
from horus.validation import Domain, NumberArg, path_arg

TOP = Domain(0, 1000, True, "sets")
DEFAULT_GPU, DEFAULT_PROXY = "v100", "pressure"
MIN_DISTINCT_X = 3  # the hinge curve has three free parameters (intercept, two slopes) besides its knee


def register(subparsers: Any) -> None:
    colocation = subparsers.add_parser("colocation", help="analyse co-location measurements")
    nested = colocation.add_subparsers(dest="colocation_command", metavar="{analyze}", required=True)
    analyze = nested.add_parser("analyze", help="fit and report summed utilization vs slowdown")
    analyze.add_argument("data", nargs="?", type=path_arg, metavar="DATA", help="our co-location dataset (colocation.csv/.parquet)")
    analyze.add_argument("--solo", type=path_arg, help="solo dataset for members' utilization (default: the column)")
    analyze.add_argument("--gavel", type=path_arg, help="Gavel simulation_throughputs.json (analysed, or compared with)")
    analyze.add_argument("--gpu", default=None, help=f"Gavel GPU type (default {DEFAULT_GPU})")
    analyze.add_argument("--proxy", default=None, help=f"utilization proxy for Gavel: pressure or mfu "
                                                       f"(default {DEFAULT_PROXY})")
    analyze.add_argument("--top", type=NumberArg(TOP), default=5, help="largest residuals to list (default 5)")
    analyze.add_argument("--json", action="store_true", help="print the report as JSON")
    analyze.set_defaults(func=_analyze)


def _analyze(args: argparse.Namespace) -> int:
    from horus.colocation.analysis import analyze, compare_shapes, format_report
    from horus.colocation.datasets import (gavel_member_values, load_coloc, member_values, sets_from_coloc,
                                           sets_from_gavel)
    from horus.profiling.store import read_table

    from horus.colocation.datasets import GAVEL_PROXIES

    if args.data is None and args.gavel is None:
        raise HorusInputError("horus colocation analyze", "give a co-location dataset DATA and/or --gavel PATH")
    if not TOP.contains(args.top):
        raise HorusInputError("--top", f"expected {TOP.describe()}, got {args.top!r}")
    ignored = {"--solo": args.solo is not None and args.data is None,  # would be ignored: errors, not no-ops
               "--gpu": args.gpu is not None and args.gavel is None,
               "--proxy": args.proxy is not None and (args.gavel is None or args.data is not None)}
    for option, bad in ignored.items():
        if bad:
            raise HorusInputError(option, {"--solo": "is read only with a co-location dataset DATA",
                                           "--gpu": "is read only with --gavel PATH",
                                           "--proxy": "is read only when --gavel PATH is analysed without DATA"}[option])
    args.gpu = args.gpu or DEFAULT_GPU
    args.proxy = args.proxy or DEFAULT_PROXY
    if args.proxy not in GAVEL_PROXIES:
        raise HorusInputError("--proxy", f"unknown utilization proxy {args.proxy!r}; known: {', '.join(GAVEL_PROXIES)}")
    gavel = None
    if args.gavel is not None:
        from horus.sources.gavel import load_gavel

        gavel = load_gavel(args.gavel, args.gpu)
    if args.data is not None:
        coloc = load_coloc(args.data)
        solo = read_table(args.solo, ["model", "batch_size", "status", "gpu_util_mean"]) if args.solo else None
        sets = sets_from_coloc(coloc, solo)
        if sets["summed_util"].notna().sum() < 4:
            raise HorusInputError(str(args.data), "fewer than 4 ok sets with members' solo utilization "
                                  "(solo_util_mean column or --solo FILE)")
        _check_spread(sets, str(args.data), "summed solo utilization")
        report = analyze(sets, top=args.top)
        report["source"] = str(args.data)
        if gavel is not None:
            report["shape"] = compare_shapes(member_values(coloc), gavel_member_values(gavel))
    else:
        sets, proxy_text = sets_from_gavel(gavel, args.proxy)
        usable = int(sets["summed_util"].notna().sum()) if {"summed_util", "mean_normalized"} <= set(sets) else 0
        if usable < 4:
            raise HorusInputError(str(args.gavel), f"{usable} usable co-located pairs on {args.gpu} (both jobs "
                                                   f"measured alone, positive throughputs); the analysis needs 4")
        _check_spread(sets, str(args.gavel), f"proxy '{args.proxy}'")
        report = analyze(sets, top=args.top, x_label=f"Gavel proxy '{args.proxy}': {proxy_text}")
        report["source"] = f"{args.gavel} ({args.gpu}, sha256 {gavel.sha256[:12]}; quirks {gavel.quirks})"
        report["notes"] = {"pairs": "both orders of a pair averaged; zero pairs dropped by the loader"}
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


def _check_spread(sets: Any, source: str, x_name: str) -> None:
    """The hinge fit has three parameters: it needs at least three distinct x values among the usable sets."""
    usable = sets.dropna(subset=["summed_util", "slowdown"])
    distinct = usable["summed_util"].round(12).nunique()
    if distinct < MIN_DISTINCT_X:
        raise HorusInputError(source, f"the {len(usable)} usable sets have {distinct} distinct value(s) of {x_name}; "
                                      f"fitting the hinge curve needs at least {MIN_DISTINCT_X}")
