"""Fixed small workloads for the golden-decision and README-claim tests (generated, seeded, no shared data).

``run_recorded`` simulates a policy on one of them and returns the summary and every action the policy took
(``"<time> S <job> <gpus>"`` or ``"<time> P <job>"``), recorded by ``RecordingPolicy``: a real ``Policy`` that
forwards to the policy under test and writes down what it returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from horus.cluster import Cluster, Node
from horus.gpu_types import preset
from horus.plugins import load_all
from horus.policies.base import POLICIES, Action, Policy, Preempt, Start
from horus.predict.analytic import AnalyticPredictor
from horus.sim.engine import SimConfig, simulate
from horus.state import SchedulerState
from horus.traces.base import RawJob, Trace
from horus.traces.generate import WorkloadSpec, generate_workload
from horus.traces.materialize import materialize
from horus.traces.sampler import SAMPLERS
from horus.truth.base import TRUTH_MODELS, TruthModel

load_all("horus.policies")
load_all("horus.truth")


@dataclass(frozen=True)
class Workload:
    """A generated trace on a small V100 cluster under the seeded parametric truth."""

    name: str
    kind: str  # stream | batch
    load: float
    num_jobs: int
    nodes: int
    gpus_per_node: int
    seed: int

    def cluster(self) -> Cluster:
        v100 = preset("V100")
        return Cluster([Node(f"n{i}", v100, self.gpus_per_node, "nvlink") for i in range(self.nodes)])

    def build(self) -> tuple[list[Any], Cluster, TruthModel]:
        cluster = self.cluster()
        spec = WorkloadSpec(kind=self.kind, num_jobs=self.num_jobs, load=self.load, cluster_gpus=cluster.num_gpus,
                            seed=self.seed, gpu_counts={"1": 0.7, "2": 0.15, "4": 0.15})
        rows, _ = generate_workload(spec)
        raw = [RawJob(str(r["job_id"]), float(r["submit_time"]), int(r["num_gpus"]), float(r["duration_s"]),
                      model=str(r["model"]), batch_size=int(r["batch_size"])) for r in rows]
        truth = TRUTH_MODELS.create("parametric", seed=self.seed)
        trace = Trace(raw, f"generated:{self.name}", "", "horus")
        jobs = materialize(trace, truth, SAMPLERS.create("by-size-duration", seed=self.seed), cluster.gpus[0].gpu_type,
                           seed=self.seed)
        return jobs, cluster, truth


class RecordingPolicy(Policy):
    """Forwards every call to ``inner`` and records the actions it returns, with the state's time."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.is_oracle = inner.is_oracle
        self.tick_s = inner.tick_s
        self.acts_on_running = inner.acts_on_running
        self.log: list[str] = []

    def schedule(self, state: SchedulerState) -> list[Action]:
        actions = self.inner.schedule(state)
        for a in actions:
            if isinstance(a, Start):
                self.log.append(f"{state.now:.3f} S {a.job_id} {','.join(map(str, a.gpus))}")
            elif isinstance(a, Preempt):
                self.log.append(f"{state.now:.3f} P {a.job_id}")
        return actions

    def bind_truth(self, truth: object) -> None:
        self.inner.bind_truth(truth)

    def bind_true_sizes(self, iterations: Mapping[str, float]) -> None:
        self.inner.bind_true_sizes(iterations)

    def orders_by_size(self) -> bool:
        return self.inner.orders_by_size()

    def describe(self) -> dict[str, object]:
        return self.inner.describe()


def run_recorded(workload: Workload, policy_name: str, **options: object) -> tuple[dict[str, Any], list[str]]:
    """Simulate ``policy_name`` on ``workload``; (summary, action log)."""
    jobs, cluster, truth = workload.build()
    policy = RecordingPolicy(POLICIES.create(policy_name, **options))
    result = simulate(jobs, cluster, policy, truth, AnalyticPredictor(), SimConfig())
    return dict(result.summary), policy.log
