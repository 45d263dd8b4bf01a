"""``horus train MODEL``: a reference training job for the live service (zoo model, synthetic data).

It reports progress with ``horus.report``, checkpoints model and optimizer every ``--checkpoint-every``
iterations into ``$HORUS_CHECKPOINT_DIR`` (or ``--checkpoint-dir``), resumes from the checkpoint on the
next attempt, and on SIGTERM (preemption, cancel) saves a checkpoint before it exits. Submit it with
``horus submit --model resnet50 --batch-size 64 --iterations 500 -- horus train resnet50 --batch-size 64
--iterations 500``. Needs torch (``pip install -e '.[graph]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from horus.errors import HorusInputError
from horus.extras import require
from horus.validation import Domain, NumberArg

CHECKPOINT = "horus_train.pt"
ITERATIONS = Domain(1, 1e12, True, "iterations")
CHECKPOINT_EVERY = Domain(0, 1e12, True, "iterations")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train", help="train a zoo model on synthetic data (a job to submit to horus serve)",
                              description=__doc__.splitlines()[0])
    p.add_argument("model", help="zoo model name (see horus features --help)")
    p.add_argument("--batch-size", type=NumberArg("batch_size"), default=32)
    p.add_argument("--iterations", type=NumberArg(ITERATIONS), default=100)
    p.add_argument("--input-size", type=NumberArg("input_size"), help="input size (default: the model's)")
    p.add_argument("--precision", choices=("fp32", "amp"), default="fp32")
    p.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--checkpoint-every", type=NumberArg(CHECKPOINT_EVERY), default=100,
                   help="iterations between checkpoints (0: never)")
    p.add_argument("--checkpoint-dir", help="default $HORUS_CHECKPOINT_DIR")
    p.add_argument("--seed", type=NumberArg("seed"), default=0)
    p.set_defaults(func=run_train)


@contextlib.contextmanager
def _memory_is_input(args: argparse.Namespace, device: object, torch: Any) -> Iterator[None]:
    """A batch that does not fit the device's memory is the user's input: one clear line, not a traceback."""
    try:
        yield
    except (torch.OutOfMemoryError, MemoryError, RuntimeError) as exc:
        if isinstance(exc, RuntimeError) and not isinstance(exc, torch.OutOfMemoryError) \
                and "allocate" not in str(exc):  # the CPU allocator's failure is a plain RuntimeError
            raise
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise HorusInputError("--batch-size", f"{args.model} at batch {args.batch_size} does not fit in {device} "
                                              f"memory ({first}); use a smaller --batch-size or --input-size") from None


def run_train(args: argparse.Namespace) -> int:
    from horus.graph.input_sizes import check_input_size
    from horus.validation import LIMITS, check_output_path

    for option, value, domain in (("--batch-size", args.batch_size, LIMITS["batch_size"]),
                                  ("--iterations", args.iterations, ITERATIONS),
                                  ("--checkpoint-every", args.checkpoint_every, CHECKPOINT_EVERY),
                                  ("--seed", args.seed, LIMITS["seed"]), ("--input-size", args.input_size,
                                                                         LIMITS["input_size"])):
        if value is not None and not domain.contains(value):  # argparse checked them; other callers too
            raise HorusInputError(option, f"expected {domain.describe()}, got {value!r}")
    check_input_size(args.model, args.input_size, "--input-size")
    folder_text = args.checkpoint_dir if args.checkpoint_dir is not None else os.environ.get("HORUS_CHECKPOINT_DIR")
    source = "--checkpoint-dir" if args.checkpoint_dir is not None else "$HORUS_CHECKPOINT_DIR"
    if args.checkpoint_dir is not None and not args.checkpoint_dir.strip():
        raise HorusInputError(source, "expected a directory path, got ''")
    folder = Path(folder_text) if folder_text else None
    if folder is not None:
        check_output_path(folder, source)  # before the model is built and trained
    require("torch", "horus train")
    import torch

    import horus
    from horus.profiling.campaign import JobConfig
    from horus.profiling.loop import LoopSettings, Trainer
    from horus.profiling.models import resolve_model

    if args.device == "cuda" and not torch.cuda.is_available():
        raise HorusInputError("--device", f"CUDA is not available to torch {torch.__version__}")
    device = torch.device("cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu")
    spec = resolve_model(args.model)
    settings = LoopSettings(device=device.type, optimizer=args.optimizer, seed=args.seed)
    with _memory_is_input(args, device, torch):
        trainer = Trainer(spec, JobConfig(args.model, args.batch_size, args.precision, args.input_size), settings,
                          device)
    path = folder / CHECKPOINT if folder else None
    start = 0
    if path is not None and path.exists():
        state = torch.load(path, map_location=device, weights_only=True)
        trainer.module.load_state_dict(state["model"])
        trainer.optimizer.load_state_dict(state["optimizer"])
        start = int(state["iteration"])
        print(f"horus train: resumed {args.model} from iteration {start} ({path})", flush=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))

    def save(iteration: int) -> None:
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save({"model": trainer.module.state_dict(), "optimizer": trainer.optimizer.state_dict(),
                    "iteration": iteration}, tmp)
        os.replace(tmp, path)

    began = time.perf_counter()
    done = start
    for done in range(start + 1, args.iterations + 1):
        if done == start + 1:  # the first step allocates what every later one needs
            with _memory_is_input(args, device, torch):
                trainer.step()
        else:
            trainer.step()
        horus.report(done - start)
        if stopping:
            save(done)
            print(f"horus train: stopped at iteration {done} (checkpoint saved)", flush=True)
            return 128 + signal.SIGTERM
        if args.checkpoint_every and done % args.checkpoint_every == 0:
            save(done)
    save(done)
    elapsed = time.perf_counter() - began
    print(f"horus train: {args.model} b{args.batch_size} {done - start} iterations on {device} in {elapsed:.1f} s "
          f"({(done - start) / elapsed:.2f} it/s)", flush=True)
    return 0

