"""How long a user waits for the first answer of ``horus``: ``--help``, a verb's ``--help``, an argument error.

Each case runs ``horus ...`` as a fresh process ``--repeat`` times (wall seconds, the median and the worst) and
lists the heavy libraries it imported (none is the goal). Target: every case <= 0.3 s median.

    python benchmarks/cli_start.py [--repeat 10] [--out benchmarks/results/cli_start.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "cli_start.json"
TARGET_S = 0.3
CASES = {"horus --help": ["--help"], "horus simulate --help": ["simulate", "--help"],
         "horus serve --help": ["serve", "--help"], "horus simulate --no-such-option": ["simulate", "--no-such-option"]}
HEAVY = ("pandas", "pyarrow", "sklearn", "torch", "matplotlib", "ray", "xgboost", "fastapi", "uvicorn", "scipy")
PROBE = ("import json, sys\nfrom horus.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
         "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    from horus.sim.outputs import environment

    results = {}
    for name, case in CASES.items():
        walls = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            subprocess.run([sys.executable, "-m", "horus.cli", *case], capture_output=True, check=False)
            walls.append(time.perf_counter() - began)
        probe = subprocess.run([sys.executable, "-c", PROBE, *case], capture_output=True, text=True, check=False)
        heavy = sorted(set(json.loads(probe.stdout.strip().splitlines()[-1])).intersection(HEAVY))
        results[name] = {"wall_s_median": statistics.median(walls), "wall_s_max": max(walls), "heavy_imports": heavy,
                         "met": statistics.median(walls) <= TARGET_S and not heavy}
        print(f"{name:36s} {statistics.median(walls):.3f} s median, {max(walls):.3f} s worst; heavy: {heavy or 'none'}")
    report = {"command": ["python", "benchmarks/cli_start.py", *(argv if argv is not None else sys.argv[1:])],
              "timing": "wall seconds of a fresh `python -m horus.cli ...` process", "repeat": args.repeat,
              "target_s": TARGET_S, "cases": results, "versions": environment(),
              "machine": {"cpus": os.cpu_count(), "processor": platform.processor(), "load_avg_at_end": os.getloadavg()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"-> {args.out}")
    return 0 if all(r["met"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
