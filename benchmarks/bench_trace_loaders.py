"""Time the trace loaders on the shared data (target: Philly's 82k rows well under 2 s).

    python benchmarks/bench_trace_loaders.py [--shared ../shared/data]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from horus.traces import load_openb_cluster, load_trace

TARGET_S = 2.0


def best_of(n: int, fn) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    traces = args.shared / "traces"
    cases = {
        "philly": lambda: load_trace(traces / "philly" / "philly_jobs.csv", "philly"),
        "openb": lambda: load_trace(traces / "alibaba-openb" / "openb_pod_list_default.csv", "openb"),
        "openb nodes": lambda: load_openb_cluster(traces / "alibaba-openb" / "openb_node_list_gpu_node.csv"),
    }
    ok = True
    for name, fn in cases.items():
        seconds = best_of(3, fn)
        ok &= seconds < TARGET_S
        print(f"{name:12s} {seconds:6.3f} s (best of 3; target < {TARGET_S} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
