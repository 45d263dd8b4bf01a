"""``horus colocation analyze DATA | --gavel PATH``: summed utilization vs co-location slowdown."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from horus.errors import HorusInputError


def register(subparsers: Any) -> None:
    colocation = subparsers.add_parser("colocation", help="analyse co-location measurements")
    nested = colocation.add_subparsers(dest="colocation_command", metavar="{analyze}", required=True)
    analyze = nested.add_parser("analyze", help="fit and report summed utilization vs slowdown")
    analyze.add_argument("data", nargs="?", type=Path, help="our co-location dataset (colocation.csv/.parquet)")
    analyze.add_argument("--solo", type=Path, help="solo dataset for members' utilization (default: the column)")
    analyze.add_argument("--gavel", type=Path, help="Gavel simulation_throughputs.json (analysed, or compared with)")
    analyze.add_argument("--gpu", default="v100", help="Gavel GPU type (default v100)")
    analyze.add_argument("--proxy", default="pressure", help="utilization proxy for Gavel: pressure or mfu")
    analyze.add_argument("--top", type=int, default=5, help="largest residuals to list")
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
    if not 0 <= args.top <= 1000:
        raise HorusInputError("--top", f"expected an integer in [0, 1,000], got {args.top}")
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
        report = analyze(sets, top=args.top, x_label=f"Gavel proxy '{args.proxy}': {proxy_text}")
        report["source"] = f"{args.gavel} ({args.gpu}, sha256 {gavel.sha256[:12]}; quirks {gavel.quirks})"
        report["notes"] = {"pairs": "both orders of a pair averaged; zero pairs dropped by the loader"}
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
