"""The ``horus`` command. Each area registers its subcommands from ``horus.<area>.commands``.

Convention: a commands module defines ``register(subparsers) -> None`` adding parsers whose
``func(args) -> int`` does the work, importing heavy dependencies (torch...) inside ``func`` only.
``HorusInputError`` becomes one line on stderr and exit code 2 (as do argparse's usage errors, and a
missing optional package such as torch: ``horus.extras``); a closed stdout (``horus simulate | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys
from collections.abc import Sequence

from horus import __version__
from horus.errors import HorusInputError

DESCRIPTION = ("Horus: simulate and schedule deep-learning training jobs on GPU clusters, co-locating jobs where "
               "their predicted interference is low. Start with 'horus simulate' (no arguments: the embedded "
               "default workload and cluster); run real jobs with 'horus serve' and 'horus submit -- CMD' "
               "(no GPU here: 'horus serve --fake-gpus 4'); 'horus COMMAND --help' explains each command.")
EPILOG = "Bad input ends with one line 'horus: error: FILE: WHERE: what was expected' and exit code 2."

# Modules that contribute subcommands, in help order. Missing modules are skipped.
COMMAND_MODULES: tuple[str, ...] = (
    "horus.sim.commands",
    "horus.truth.commands",
    "horus.traces.commands",
    "horus.graph.commands",
    "horus.learn.commands",
    "horus.profiling.commands",
    "horus.profiling.train",
    "horus.colocation.commands",
    "horus.interference.commands",
    "horus.service.commands",
    "horus.service.token_commands",
    "horus.service.queue_commands",
    "horus.ray.commands",
    "horus.k8s.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="horus", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"horus {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(subparsers)
    return parser


def _exit_without_collecting() -> None:
    """The command is done and the process (the ``horus`` script: ``main()`` without ``argv``) is about to exit:
    move everything alive to the collector's permanent generation, so the full collection of interpreter
    shutdown does not walk it (a 10,000-job ``horus simulate`` keeps ~1 million objects: ~0.15 CPU-s). Nothing
    a command writes depends on it; an in-process caller passes ``argv`` and keeps its collector as it was."""
    import gc

    gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "pass_through", False):  # commands that hand their arguments to another parser
        args.rest = [*getattr(args, "rest", []), *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        print("horus: error: expected a COMMAND (listed above)", file=sys.stderr)
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at interpreter exit
        if argv is None:
            _exit_without_collecting()
        return code
    except HorusInputError as exc:
        print(f"horus: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an optional extra (torch, onnx, ray...) that is not installed
        from horus.extras import missing_extra

        missing = missing_extra(exc, f"horus {args.command}")
        if missing is None:
            raise
        print(f"horus: error: {missing}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:  # any command, any path option: the OS refuses the name itself
            raise
        name = str(exc.filename or "")
        print(f"horus: error: {name[:80]}{'...' if len(name) > 80 else ''}: path too long "
              f"({len(name):,} characters; Linux allows 255 per name, 4,095 in all)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("horus: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (horus ... | head): not an error of ours
        _silence_stdout()
        return 0


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not raise again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (tests, in-process callers)
        pass


if __name__ == "__main__":
    sys.exit(main())
