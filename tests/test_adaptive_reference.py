"""The adaptive family (``horus``, ``horus-fifo``, ``horus-las``) and ``gandiva`` decide exactly as their frozen
pre-optimisation code (``tests/reference_policies/adaptive``, commit 0a6715b, before issue 27's speed work).

Golden decisions pin one small world (16 V100s, exact telemetry and sizes). This test drives the current and the
frozen code through the simulator on larger, more varied worlds -- two GPU types, gangs, congested streams and a
batch, the CLI's defaults (noisy periodic telemetry, estimated sizes) and the exact ones -- and requires the same
start and preemption sequence, call by call.

In the noisy worlds the current tracker caps a job's own solo rate (and its share of its type's and the speed bias)
at ``max_samples`` reports and stops reading jobs with nothing left to teach (issue 27), where the frozen one capped
only the co-located sets: both are run there with ``max_samples`` out of reach (no mean capped), so the rest of the
code is still compared decision by decision; ``tests/test_sim_telemetry.py`` tests the caps themselves.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from golden_workload import RecordingPolicy
from reference_policies.adaptive.horus import AdaptiveHorusPolicy as FrozenHorus
from reference_policies.adaptive.observed import ObservedThroughput as FrozenTracker

import horus.policies.gandiva as gandiva_module
import horus.policies.horus as horus_module
import reference_policies.adaptive.horus as frozen_horus_module
from horus.interference.observed import ObservedThroughput
from horus.cluster import Cluster, Node
from horus.gpu_types import preset
from horus.plugins import load_all
from horus.policies.base import POLICIES, Policy
from horus.predict.analytic import AnalyticPredictor
from horus.sim.engine import SimConfig, simulate
from horus.sim.telemetry import TELEMETRY_MODELS, Attempt, NoisyTelemetry
from horus.traces.base import RawJob, Trace
from horus.traces.generate import WorkloadSpec, generate_workload
from horus.traces.materialize import materialize
from horus.traces.sampler import SAMPLERS
from horus.truth.base import TRUTH_MODELS

load_all("horus.policies")
load_all("horus.truth")

FROZEN_OPTIONS: dict[str, dict[str, Any]] = {  # the registry's factories, applied to the frozen class
    "horus": {"order": "sjf"},
    "horus-fifo": {"order": "fifo"},
    "horus-las": {"order": "tiresias", "use_sizes": False, "preempt_s": 300.0},
}
WORLDS = {  # name: (kind, load, jobs, seed, config)
    "stream-noisy": ("stream", 2.0, 160, 11, SimConfig(sizes="estimate", sizes_seed=11, telemetry="noisy",
                                                       telemetry_options={"seed": 11})),
    "stream-exact": ("stream", 3.0, 160, 12, SimConfig()),
    "batch-noisy": ("batch", 1.0, 120, 13, SimConfig(sizes="estimate", sizes_seed=13, telemetry="noisy",
                                                     telemetry_options={"seed": 13})),
}


def build(kind: str, load: float, num_jobs: int, seed: int) -> tuple[list[Any], Cluster, Any]:
    """A generated trace on 3 x 8 V100 + 2 x 4 P100 under the seeded parametric truth."""
    cluster = Cluster([Node(f"v{i}", preset("V100"), 8, "nvlink") for i in range(3)]
                      + [Node(f"p{i}", preset("P100"), 4, "pcie") for i in range(2)])
    spec = WorkloadSpec(kind=kind, num_jobs=num_jobs, load=load, cluster_gpus=cluster.num_gpus, seed=seed,
                        gpu_counts={"1": 0.75, "2": 0.1, "4": 0.1, "8": 0.05})
    rows, _ = generate_workload(spec)
    raw = [RawJob(str(r["job_id"]), float(r["submit_time"]), int(r["num_gpus"]), float(r["duration_s"]),
                  model=str(r["model"]), batch_size=int(r["batch_size"])) for r in rows]
    truth = TRUTH_MODELS.create("parametric", seed=seed)
    jobs = materialize(Trace(raw, f"generated:{kind}", "", "horus"), truth,
                       SAMPLERS.create("by-size-duration", seed=seed), preset("V100"), seed=seed)
    return jobs, cluster, truth


UNCAPPED = 10**9  # ``max_samples`` no run reaches


class _UncappedTracker(ObservedThroughput):
    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **{**options, "max_samples": UNCAPPED})


class _UncappedFrozenTracker(FrozenTracker):
    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **{**options, "max_samples": UNCAPPED})


def uncap_in_noisy_worlds(world: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a noisy world, build the current and the frozen trackers with ``max_samples`` out of reach."""
    if world.endswith("-noisy"):
        monkeypatch.setattr(horus_module, "ObservedThroughput", _UncappedTracker)
        monkeypatch.setattr(gandiva_module, "ObservedThroughput", _UncappedTracker)
        monkeypatch.setattr(frozen_horus_module, "ObservedThroughput", _UncappedFrozenTracker)


def decisions(policy: Policy, world: str) -> tuple[list[str], dict[str, Any]]:
    kind, load, num_jobs, seed, config = WORLDS[world]
    jobs, cluster, truth = build(kind, load, num_jobs, seed)
    recorder = RecordingPolicy(policy)
    result = simulate(jobs, cluster, recorder, truth, AnalyticPredictor(), config)
    return recorder.log, dict(result.summary)


@pytest.mark.parametrize("world", sorted(WORLDS))
@pytest.mark.parametrize("name", sorted(FROZEN_OPTIONS))
def test_adaptive_policy_decides_as_frozen_code(name: str, world: str, monkeypatch: pytest.MonkeyPatch) -> None:
    uncap_in_noisy_worlds(world, monkeypatch)
    log, summary = decisions(POLICIES.create(name), world)
    frozen_log, frozen_summary = decisions(FrozenHorus(**FROZEN_OPTIONS[name]), world)
    assert len(log) > 20, "the world must make the policy act"
    assert summary["colocated_share"] > 0.2, "the world must make it co-locate"
    assert log == frozen_log
    assert summary["colocated_share"] == frozen_summary["colocated_share"]


@pytest.mark.parametrize("world", ["stream-noisy", "stream-exact"])
def test_gandiva_decides_as_with_frozen_tracker(world: str, monkeypatch: pytest.MonkeyPatch) -> None:
    uncap_in_noisy_worlds(world, monkeypatch)
    log, _ = decisions(POLICIES.create("gandiva"), world)
    monkeypatch.setattr(gandiva_module, "ObservedThroughput",
                        _UncappedFrozenTracker if world.endswith("-noisy") else FrozenTracker)
    frozen_log, _ = decisions(POLICIES.create("gandiva"), world)
    assert len(log) > 20
    assert log == frozen_log


class _NoisyReadEveryCall(NoisyTelemetry):
    """``noisy`` with the base class's read schedule: every running job read at every policy call."""

    def next_report_s(self, run: Attempt, now: float) -> float:
        return math.nextafter(now, math.inf)


def test_reading_jobs_only_when_a_report_is_due_changes_nothing() -> None:
    """The engine reads a job's telemetry only when ``next_report_s`` says a new report is due (or a rate changed
    at a report's own time); reading every job at every call must give the same run, action by action."""
    if "noisy-every-call" not in TELEMETRY_MODELS.names():
        TELEMETRY_MODELS.register("noisy-every-call")(_NoisyReadEveryCall)
    runs = []
    for model in ("noisy", "noisy-every-call"):
        jobs, cluster_, truth = build("stream", 2.0, 100, 7)
        recorder = RecordingPolicy(POLICIES.create("horus"))
        result = simulate(jobs, cluster_, recorder, truth, AnalyticPredictor(),
                          SimConfig(telemetry=model, telemetry_options={"seed": 7, "period_s": 45.0}))
        runs.append((recorder.log, result.summary["mean_jct_s"], result.summary["preemptions"]))
    assert len(runs[0][0]) > 50
    assert runs[0] == runs[1]

