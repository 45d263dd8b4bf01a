"""Time the scheduling policies on the Philly trace (82k jobs) on a 2,048-GPU V100 cluster.

Target: ``horus`` simulates the whole trace in <= 20 s (wall clock of ``simulate``). The predictor
here is a stand-in (truth solo values x a seeded per-type error of up to +-20 %), so this measures
policy/engine speed, not prediction quality.

    python benchmarks/bench_policies_philly.py                       # horus
    python benchmarks/bench_policies_philly.py --policies horus gandiva fifo-exclusive --limit 20000
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

from horus.cluster import Cluster, GPUType, Node
from horus.jobs import JobSpec
from horus.plugins import load_all
from horus.policies.base import POLICIES
from horus.predict.base import Prediction, Predictor
from horus.sim.engine import simulate
from horus.traces.base import load_trace
from horus.traces.materialize import materialize
from horus.truth.base import TRUTH_MODELS, TruthModel

PHILLY = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "traces" / "philly" / "philly_jobs.csv"
V100 = GPUType("v100", 16_160, 1.0)


class NoisyTruthPredictor(Predictor):
    """Benchmark stand-in: truth solo values times a deterministic per-type factor in [0.8, 1.2]."""

    name = "noisy-truth (benchmark only)"

    def __init__(self, truth: TruthModel) -> None:
        self.truth = truth

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        solo = self.truth.solo(job.job_type, gpu_type)
        h = hashlib.sha256(job.job_type.encode()).digest()
        f = [0.8 + 0.4 * b / 255 for b in h[:3]]
        return Prediction(solo.util * f[0], solo.mem_mib * f[1], solo.iter_time_s * f[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", nargs="+", default=["horus"])
    parser.add_argument("--limit", type=int, default=0, help="first N jobs only (0 = all)")
    parser.add_argument("--nodes", type=int, default=256)
    args = parser.parse_args()
    load_all("horus.policies")
    load_all("horus.truth")
    truth = TRUTH_MODELS.create("parametric")
    specs = materialize(load_trace(PHILLY, "philly"), truth, reference_gpu=V100, seed=0)
    if args.limit:
        specs = specs[: args.limit]
    cluster = Cluster([Node(f"n{i}", V100, 8) for i in range(args.nodes)])
    for name in args.policies:
        policy = POLICIES.create(name)
        t0 = time.perf_counter()
        result = simulate(specs, cluster, policy, truth, NoisyTruthPredictor(truth))
        wall = time.perf_counter() - t0
        s = result.summary
        print(f"{name:16s} jobs={len(specs)} wall={wall:6.1f}s  mean_jct_h={s['mean_jct_s'] / 3600:.2f}  "
              f"mean_wait_h={s['mean_wait_s'] / 3600:.2f}  makespan_h={s['makespan_s'] / 3600:.1f}  "
              f"oom={s['oom_failures']}  failed={s['jobs_failed']}  unfinished={s['jobs_unfinished']}")


if __name__ == "__main__":
    main()
