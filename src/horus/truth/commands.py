"""``horus truth``: fit and inspect the simulator's truth models."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("truth", help="fit the truth models' scalars to measurements")
    sub = p.add_subparsers(dest="truth_command", metavar="ACTION", required=True)
    fit = sub.add_parser("fit", help="fit the co-location slowdown model to Gavel's pairs",
                         description="Arguments are those of python -m horus.truth.fit (try --help).", add_help=False)
    fit.set_defaults(func=lambda args: _fit(args.rest), pass_through=True)
    mem = sub.add_parser("fit-memory", help="fit the memory deviation to GPUMemNet's measured MLP trainings",
                         description="Arguments are those of python -m horus.truth.memory_fit (try --help).",
                         add_help=False)
    mem.set_defaults(func=lambda args: _fit_memory(args.rest), pass_through=True)


def _fit(rest: list[str]) -> int:
    from horus.truth.fit import main

    return main(rest, prog="horus truth fit")


def _fit_memory(rest: list[str]) -> int:
    from horus.truth.memory_fit import main

    return main(rest, prog="horus truth fit-memory")
