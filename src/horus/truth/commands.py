"""``horus truth``: fit and inspect the simulator's truth models."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("truth", help="fit the parametric slowdown model to measured pairs")
    sub = p.add_subparsers(dest="truth_command", metavar="ACTION", required=True)
    fit = sub.add_parser("fit", help="fit the co-location slowdown model to Gavel's pairs",
                         description="Arguments are those of python -m horus.truth.fit (try --help).", add_help=False)
    fit.set_defaults(func=lambda args: _fit(args.rest), pass_through=True)


def _fit(rest: list[str]) -> int:
    from horus.truth.fit import main

    return main(rest, prog="horus truth fit")
