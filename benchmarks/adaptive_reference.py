"""The adaptive policy against its frozen pre-optimisation copy on a Philly slice: same actions, CPU seconds of each.

Drives ``horus`` (or ``horus-fifo``/``horus-las``) and the frozen copy in ``tests/reference_policies/adaptive``
(commit 0a6715b, before issue 27) through the simulator on Philly's first ``--jobs`` jobs on 64 x 8 V100, in the
exact world (``SimConfig()``) or the CLI's (noisy telemetry, estimated sizes), and compares the start and
preemption sequences. Exit 1 when they differ. Needs the Philly trace at ../shared/data/traces/philly.

    python benchmarks/adaptive_reference.py --jobs 2000 --world exact --policy horus
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "data" / "traces" / "philly" / "philly_jobs.csv"
sys.path.insert(0, str(ROOT / "tests"))  # the frozen copy and the recording wrapper live with the tests
FROZEN_OPTIONS = {"horus": {"order": "sjf"}, "horus-fifo": {"order": "fifo"},
                  "horus-las": {"order": "tiresias", "use_sizes": False, "preempt_s": 300.0}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--world", choices=("exact", "cli"), default="exact")
    parser.add_argument("--policy", choices=sorted(FROZEN_OPTIONS), default="horus")
    parser.add_argument("--out", type=Path, help="JSON output (default: stdout only)")
    args = parser.parse_args(argv)
    if not TRACE.exists():
        print(f"SKIP: Philly trace not found at {TRACE}")
        return 0
    from golden_workload import RecordingPolicy
    from reference_policies.adaptive.horus import AdaptiveHorusPolicy as Frozen

    from horus.cluster import Cluster, GPUType, Node
    from horus.plugins import load_all
    from horus.policies.base import POLICIES
    from horus.predict.base import PREDICTORS
    from horus.sim.engine import SimConfig, simulate
    from horus.traces import base as traces
    from horus.traces.materialize import materialize
    from horus.truth.base import TRUTH_MODELS

    for package in ("horus.policies", "horus.truth", "horus.predict"):
        load_all(package)
    v100 = GPUType("v100", 16_384, 1.0)
    cluster = Cluster([Node(f"node{i:04d}", v100, 8, "nvlink") for i in range(64)])
    truth = TRUTH_MODELS.create("parametric")
    jobs = materialize(traces.load_trace(TRACE, "philly"), truth, reference_gpu=v100, seed=0)[:args.jobs]
    config = SimConfig() if args.world == "exact" else SimConfig(sizes="estimate", telemetry="noisy",
                                                                 telemetry_options={"seed": 0})
    runs = {}
    for label, policy in (("current", POLICIES.create(args.policy)), ("frozen", Frozen(**FROZEN_OPTIONS[args.policy]))):
        recorder = RecordingPolicy(policy)
        cpu0 = time.process_time()
        result = simulate(jobs, cluster, recorder, truth, PREDICTORS.create("physical"), config)
        runs[label] = {"cpu_s": round(time.process_time() - cpu0, 2), "actions": len(recorder.log),
                       "mean_jct_s": result.summary["mean_jct_s"], "log": recorder.log}
        print(f"{label:8s} {runs[label]['cpu_s']:8.1f} CPU-s, {len(recorder.log)} actions", flush=True)
    identical = runs["current"].pop("log") == runs["frozen"].pop("log")
    print("identical actions" if identical else "ACTIONS DIFFER")
    report = {"command": ["python", "benchmarks/adaptive_reference.py", *(argv if argv is not None else sys.argv[1:])],
              "jobs": len(jobs), "world": args.world, "policy": args.policy, "identical": identical, "runs": runs,
              "load_avg_at_end": os.getloadavg()}
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
