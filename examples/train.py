"""A small training job for `horus serve` that needs only numpy (no torch, no GPU).

It fits a linear model by minibatch SGD on synthetic data, sleeping a little per iteration to stand in for
GPU work, and does what a real training script under Horus does:

* reports progress with ``horus.report(i)`` (iterations of this attempt beyond ``HORUS_START_ITERATION``);
* checkpoints into ``HORUS_CHECKPOINT_DIR`` every ``--checkpoint-every`` iterations and when stopped
  (SIGTERM: preemption or ``horus cancel``), and resumes from the checkpoint on the next attempt.

From the repository root, against ``horus serve --fake-gpus 4``::

    horus submit --model resnet18_cifar --batch-size 32 --iterations 1000 -- python examples/train.py --iterations 1000

Outside Horus it runs as a plain script (``python examples/train.py --iterations 200``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

try:
    from horus import report
except ImportError:  # a Python without Horus: write the progress lines the agent reads ourselves

    def report(iteration: float) -> None:
        path = os.environ.get("HORUS_PROGRESS_FILE")
        if path:
            with open(path, "a") as fh:
                fh.write(json.dumps({"iteration": float(iteration), "time": time.time()}) + "\n")

CHECKPOINT = "example_train.npz"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000, help="total iterations (default 1000)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--features", type=int, default=64, help="model size: number of weights")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--sleep-s", type=float, default=0.01, help="pause per iteration (default 0.01 s)")
    parser.add_argument("--checkpoint-every", type=int, default=100, help="iterations between checkpoints (0: never)")
    parser.add_argument("--checkpoint-dir", type=Path, help="default $HORUS_CHECKPOINT_DIR (none: no checkpoints)")
    parser.add_argument("--fail-at", type=int, help="exit with code 3 at this iteration (to see a failed job)")
    args = parser.parse_args()
    if args.iterations < 1 or args.batch_size < 1 or args.features < 1 or args.checkpoint_every < 0:
        parser.error("--iterations, --batch-size and --features must be positive, --checkpoint-every >= 0")

    folder = args.checkpoint_dir or (Path(os.environ["HORUS_CHECKPOINT_DIR"])
                                     if os.environ.get("HORUS_CHECKPOINT_DIR") else None)
    path = folder / CHECKPOINT if folder else None
    rng = np.random.default_rng(0)
    true_w = rng.normal(size=args.features)
    w = np.zeros(args.features)
    start = 0
    if path is not None and path.exists():
        saved = np.load(path)
        w, start = saved["w"], int(saved["iteration"])
        print(f"resumed from iteration {start} ({path})", flush=True)
    already = int(os.environ.get("HORUS_START_ITERATION", "0"))  # what Horus counted before this attempt

    def save(iteration: int) -> None:
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, w=w, iteration=iteration)
        os.replace(tmp, path)  # atomic: a kill mid-save leaves the previous checkpoint

    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    data = np.random.default_rng(start + 1)  # a different stream after a resume
    done = start
    for done in range(start + 1, args.iterations + 1):
        x = data.normal(size=(args.batch_size, args.features))
        y = x @ true_w + 0.1 * data.normal(size=args.batch_size)
        error = x @ w - y
        w = w - args.lr * (x.T @ error) / args.batch_size
        time.sleep(args.sleep_s)
        report(max(0, done - already))
        if done % 100 == 0 or done == args.iterations:
            print(f"iteration {done}: loss {float(np.mean(error ** 2)):.4f}", flush=True)
        if args.fail_at is not None and done == args.fail_at:
            print(f"failing on purpose at iteration {done} (--fail-at)", file=sys.stderr, flush=True)
            return 3
        if stopping:
            save(done)
            print(f"stopped at iteration {done}, checkpoint saved", flush=True)
            return 128 + stopping[0]
        if args.checkpoint_every and done % args.checkpoint_every == 0:
            save(done)
    save(done)
    print(f"done: {done} iterations, weight error {float(np.linalg.norm(w - true_w)):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
