"""One profiling job in its own process: ``python -m horus.profiling.worker --job JSON --settings JSON``.

Prints (or writes to ``--out``) ``{"row": {...}, "window_start": t, "window_end": t}``. The same
entry point runs solo jobs and members of a co-located set (``--barrier DIR --member I``). Imports
only the standard library, torch, nvidia-ml-py and horus itself (the GPU machine has no registry).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from horus.errors import HorusInputError
from horus.profiling.barrier import FileBarrier
from horus.profiling.campaign import JobConfig


def _json_safe(value: object) -> object:
    return None if isinstance(value, float) and math.isnan(value) else value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m horus.profiling.worker")
    parser.add_argument("--job", required=True, help="JobConfig as JSON")
    parser.add_argument("--settings", required=True, help="LoopSettings as JSON")
    parser.add_argument("--repeat", type=int, default=0)
    parser.add_argument("--barrier", help="barrier directory of a co-located set")
    parser.add_argument("--member", type=int, default=0)
    parser.add_argument("--out", help="write the result JSON here instead of stdout")
    args = parser.parse_args(argv)

    from horus.profiling.loop import LoopSettings, profile_job

    job = JobConfig.from_dict(json.loads(args.job))
    settings = LoopSettings.from_dict(json.loads(args.settings))
    barrier = FileBarrier(args.barrier) if args.barrier else None
    try:
        result = profile_job(job, settings, args.repeat, barrier, args.member)
    except HorusInputError as exc:
        if barrier is not None:
            barrier.signal_done(args.member)
        print(f"horus worker: error: {exc}", file=sys.stderr)
        return 2
    payload = json.dumps({k: (_json_safe(v) if not isinstance(v, dict) else {c: _json_safe(x) for c, x in v.items()})
                          for k, v in result.to_dict().items()})
    if args.out:
        tmp = Path(f"{args.out}.tmp")
        tmp.write_text(payload)
        os.replace(tmp, args.out)
    else:
        print(payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
