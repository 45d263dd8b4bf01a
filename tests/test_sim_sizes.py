"""Job-size knowledge is a property of the world (horus.sim.sizes): every policy reads the same announcement, the
engine runs the true length, oracles alone get the truth, and a world without sizes refuses size-ordered policies."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from golden_workload import RecordingPolicy, Workload

from horus.errors import HorusInputError
from horus.jobs import JobSpec
from horus.policies.base import POLICIES, Action, Policy
from horus.predict.analytic import AnalyticPredictor
from horus.sim.engine import SimConfig, simulate
from horus.sim.sizes import EstimatedSizes, seeded_pcg64_states, size_knowledge, with_iterations
from horus.state import SchedulerState

CONGESTED = Workload("stream-load2.5", "stream", 2.5, 60, 4, 4, 3)


def specs(n: int) -> list[JobSpec]:
    return [JobSpec(f"j{i}", float(i), 1, "resnet50", 64, 1000.0 + i) for i in range(n)]


def test_exact_and_none_announce_the_truth_and_nothing() -> None:
    job = specs(1)[0]
    assert size_knowledge("exact").visible(job) is job
    hidden = size_knowledge("none").visible(job)
    assert math.isinf(hidden.iterations) and hidden.job_id == job.job_id and not size_knowledge("none").known


def test_estimates_follow_the_documented_error_model() -> None:
    jobs = specs(4000)
    knowledge = EstimatedSizes(seed=7)
    ratio = np.array([knowledge.announced(j) / j.iterations for j in jobs])
    again = np.array([EstimatedSizes(seed=7).announced(j) / j.iterations for j in jobs])
    assert np.array_equal(ratio, again)  # deterministic by (seed, job id)
    assert not np.array_equal(ratio, [EstimatedSizes(seed=8).announced(j) / j.iterations for j in jobs])
    # early enders (0.3) announce true / u, u ~ U(0.05, 1): ratio in (1, 20]; the others true x exp(0.5 Z)
    assert (ratio <= 20.0 + 1e-9).all()
    over_by_2 = (ratio >= 2.0).mean()
    expected = 0.3 * (1 / 0.95) * (0.5 - 0.05) + 0.7 * 0.5 * math.erfc(math.log(2) / 0.5 / math.sqrt(2))
    assert abs(over_by_2 - expected) < 0.03
    under = (ratio < 1.0).mean()  # only the log-normal misjudgement under-states a length
    assert abs(under - 0.7 * 0.5) < 0.03


def test_bulk_draws_are_numpys_per_job_generators() -> None:
    """``prepare`` (one generator, each job's state set from ``seeded_pcg64_states``) draws what
    ``np.random.default_rng(entropy)`` per job draws: every entropy width (0, one word, two words, the extremes)."""
    rng = np.random.default_rng(27)
    entropies = [0, 1, 2**32 - 1, 2**32, 2**63, 2**64 - 1, *range(2, 300),
                 *rng.integers(0, 2**64 - 1, 3000, dtype=np.uint64, endpoint=True).tolist()]
    for entropy, (state, inc) in zip(entropies, seeded_pcg64_states(entropies)):
        assert np.random.default_rng(entropy).bit_generator.state["state"] == {"state": state, "inc": inc}
    assert seeded_pcg64_states([]) == []
    jobs = specs(2000)
    bulk, single = EstimatedSizes(seed=3), EstimatedSizes(seed=3)
    bulk.prepare(jobs)
    assert len(bulk._drawn) == len(jobs)
    assert [bulk.announced(j) for j in jobs] == [single.announced(j) for j in jobs]
    for job in jobs[:50]:  # the per-job generator itself, drawn in announced's order
        generator = single._rng(job.job_id)
        assert bulk._drawn[job.job_id] == (generator.random(), generator.random(), generator.standard_normal())


def test_with_iterations_is_replace() -> None:
    from dataclasses import fields, replace

    job = JobSpec("j", 1.0, 2, "resnet50", 64, 100.0, gpu_type_request="V100", queue="q", input_size=224)
    _ = job.job_type  # a cached job type is kept (it does not depend on iterations)
    new = with_iterations(job, 250.0)
    assert new == replace(job, iterations=250.0) and new.iterations == 250.0 and job.iterations == 100.0
    assert new.job_type == job.job_type and type(new) is JobSpec
    assert set(new.__dict__) <= {f.name for f in fields(JobSpec)} | {"job_type"}


def test_estimate_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="early_share"):
        EstimatedSizes(early_share=1.5)
    with pytest.raises(ValueError, match="unknown size knowledge"):
        size_knowledge("oracle")
    with pytest.raises(ValueError, match="takes no options"):
        size_knowledge("exact", sigma=1.0)


class Seen(Policy):
    """Records the iterations each job was announced with, then runs the wrapped policy."""

    def __init__(self, inner: Policy) -> None:
        self.inner, self.name, self.tick_s = inner, inner.name, inner.tick_s
        self.acts_on_running = inner.acts_on_running
        self.announced: dict[str, float] = {}

    def schedule(self, state: SchedulerState) -> list[Action]:
        for job in state.queue.values():
            self.announced[job.spec.job_id] = job.spec.iterations
        return self.inner.schedule(state)


def run(policy: Policy, sizes: str) -> tuple[dict, object]:
    jobs, cluster, truth = CONGESTED.build()
    result = simulate(jobs, cluster, policy, truth, AnalyticPredictor(), SimConfig(sizes=sizes, sizes_seed=3))
    return jobs, result


def test_policies_see_the_announcement_and_jobs_run_their_true_length() -> None:
    seen = Seen(POLICIES.create("fifo-exclusive"))
    jobs, result = run(seen, "estimate")
    knowledge = EstimatedSizes(seed=3)
    true = {j.job_id: j.iterations for j in jobs}
    assert seen.announced and all(v == knowledge.announced(next(j for j in jobs if j.job_id == k))
                                  for k, v in seen.announced.items())
    assert any(abs(v / true[k] - 1) > 0.1 for k, v in seen.announced.items())
    done = result.jobs.set_index("job_id")
    completed = done[done["status"] == "completed"]
    assert len(completed) == len(jobs)
    for job_id, row in completed.iterrows():
        assert row["iterations_done"] == pytest.approx(true[job_id], rel=1e-9)


def test_a_size_free_policy_decides_the_same_whatever_the_announcement() -> None:
    """FIFO never reads a size: exact, estimated and hidden sizes give the same schedule."""
    logs = []
    for sizes in ("exact", "estimate", "none"):
        policy = RecordingPolicy(POLICIES.create("fifo-exclusive"))
        run(policy, sizes)
        logs.append(policy.log)
    assert logs[0] == logs[1] == logs[2]


def test_size_ordered_policies_depend_on_the_announcement_and_are_refused_without_one() -> None:
    logs = {}
    for sizes in ("exact", "estimate"):
        policy = RecordingPolicy(POLICIES.create("sjf-exclusive"))
        run(policy, sizes)
        logs[sizes] = policy.log
    assert logs["exact"] != logs["estimate"]
    for name in ("sjf-exclusive", "horus", "sjf-horus"):
        with pytest.raises(HorusInputError, match="--sizes none"):
            run(POLICIES.create(name), "none")


def test_the_oracle_reads_true_lengths_whatever_is_announced() -> None:
    logs = []
    for sizes in ("exact", "estimate"):
        policy = RecordingPolicy(POLICIES.create("oracle-truth"))
        run(policy, sizes)
        logs.append(policy.log)
    assert logs[0] == logs[1]


def test_cli_sizes_none_leaves_out_size_ordered_policies(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "horus.cli", "simulate", "--sizes", "none", "--max-jobs", "30",
                          "--no-progress", "--policy", "fifo-exclusive", "--policy", "sjf-exclusive",
                          "--out", str(tmp_path / "r")], capture_output=True, text=True, check=False)
    assert out.returncode != 0 and "--sizes none" in out.stderr and "sjf-exclusive" in out.stderr
    assert "Traceback" not in out.stderr
