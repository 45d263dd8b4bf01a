"""How fast ``horus`` rejects oversized inputs, as a user runs it (a fresh ``horus`` process per run).

Each case is an input whose numbers would allocate a huge cluster or trace if they were believed (an openb
node with 10^9 GPUs, a YAML node with 10^7 GPUs, a node group of 100,000 copies, a 10^5-deep YAML list).
The command must end in exit 2 with its one-line error, and quickly: validation happens before anything
is built. Target (moved here from tests/test_inputs_regressions.py, issue 29): under 5 s wall per run,
start-up included. Reported per case over ``--repeat`` runs: wall and whole-process CPU seconds (user +
sys of the child, ``resource.getrusage``), best and all, and the child's peak RSS.

    python benchmarks/input_rejection.py [--repeat 3] [--out benchmarks/results/input_rejection.json]

Wall time carries the machine's load (2 shared cores): the JSON records the load average at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "input_rejection.json"
TARGET_WALL_S = 5.0

SIM = ["simulate", "--no-progress", "--policy", "fifo-exclusive", "--out", "{d}/out"]
NODES = "sn,cpu_milli,memory_mib,gpu,model\n"
PODS = "name,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\np,1,1000,0,10,0\n"

# name -> (files, argv, expected text of the error line)
CASES: dict[str, tuple[dict[str, str], list[str], str]] = {
    "openb-node-1e9-gpus": ({"nodes.csv": NODES + "n0,1,1,1e9,V100M16\n", "pods.csv": PODS},
                            [*SIM, "--format", "openb", "--trace", "{d}/pods.csv", "--cluster", "{d}/nodes.csv"],
                            "line 2, column 'gpu'"),
    "yaml-node-1e7-gpus": ({"c.yaml": "nodes:\n- {name: a, gpu_type: V100, gpus: 10000000}\n"},
                           [*SIM, "--cluster", "{d}/c.yaml"], "nodes[0].gpus: expected an integer in [1, 256]"),
    "yaml-count-100000": ({"c.yaml": "nodes:\n- {name: a, count: 100000, gpu_type: V100, gpus: 8}\n"},
                          [*SIM, "--cluster", "{d}/c.yaml"], "200,000 GPUs"),
    "yaml-nested-10000": ({"c.yaml": "nodes: " + "[" * 10_000 + "]" * 10_000 + "\n"},
                          [*SIM, "--cluster", "{d}/c.yaml"], "nested more than 32 levels"),
}


def run_once(argv: list[str], folder: Path) -> dict[str, object]:
    """One ``python -m horus.cli`` run in ``folder``: exit code, last stderr line, wall and CPU seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "horus.cli", *argv], capture_output=True, text=True, env=env,
                          cwd=folder, timeout=300, check=False)
    wall = time.perf_counter() - wall0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = done.stderr.strip().splitlines()
    return {"rc": done.returncode, "error": lines[-1] if lines else "", "wall_s": round(wall, 3),
            "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 3),
            "wrote_output": (folder / "out").exists()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)

    from horus.sim.outputs import environment, to_jsonable

    cases: list[dict[str, object]] = []
    ok = True
    for name, (files, case_argv, expected) in CASES.items():
        runs = []
        for _ in range(max(args.repeat, 1)):
            with tempfile.TemporaryDirectory(prefix="horus-reject-") as tmp:
                folder = Path(tmp)
                for file_name, text in files.items():
                    (folder / file_name).write_text(text)
                runs.append(run_once([a.replace("{d}", tmp) for a in case_argv], folder))
        clear = all(r["rc"] == 2 and str(r["error"]).startswith("horus: error:") and expected in str(r["error"])
                    and not r["wrote_output"] for r in runs)
        best_wall = min(float(r["wall_s"]) for r in runs)  # type: ignore[arg-type]
        met = clear and best_wall < TARGET_WALL_S
        ok &= met
        cases.append({"case": name, "expected_error": expected, "clear_error": clear, "best_wall_s": best_wall,
                      "best_cpu_s": min(float(r["cpu_s"]) for r in runs),  # type: ignore[arg-type]
                      "met": met, "runs": runs})
        print(f"{name:22s} best {best_wall:6.2f} s wall, {cases[-1]['best_cpu_s']:6.2f} s CPU; clear error: {clear};"
              f" target < {TARGET_WALL_S} s wall: {'met' if met else 'NOT met'}", flush=True)

    report = {
        "command": ["python", "benchmarks/input_rejection.py", *(argv if argv is not None else sys.argv[1:])],
        "target": {"wall_s_per_run": TARGET_WALL_S, "note": "best of --repeat runs, process start-up included"},
        "cpu_time": "user + sys seconds of the child process (resource.getrusage RUSAGE_CHILDREN)",
        "peak_rss_mib_of_largest_child": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        "cases": cases,
        "all_met": ok,
        "versions": environment(),
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor(), "load_avg_at_end": os.getloadavg()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(to_jsonable(report), indent=2, default=str) + "\n")
    print(f"-> {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
