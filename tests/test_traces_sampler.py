"""Profile sampler, materialization and the embedded default workload."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.traces import SAMPLERS, load_default_trace, load_trace, materialize
from horus.traces.base import RawJob, make_trace
from horus.traces.sampler import GAVEL_JOB_TYPES, job_type_size, split_job_type
from traces_helpers import ToyTruth

V100 = GPUType("V100", 16384, 1.0)
FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def _jobs(n: int, seed: int = 0) -> list[RawJob]:
    rng = np.random.default_rng(seed)
    gpus = rng.choice([1, 2, 4, 8], size=n)
    durations = rng.lognormal(np.log(3000), 1.5, size=n)
    return [RawJob(f"j{i}", float(i), int(g), float(d)) for i, (g, d) in enumerate(zip(gpus, durations))]


def test_sampler_is_deterministic_given_seed() -> None:
    jobs = _jobs(300)
    sampler = SAMPLERS.create("by-size-duration")
    a = sampler.assign(jobs, GAVEL_JOB_TYPES, np.random.default_rng(7))
    b = sampler.assign(jobs, GAVEL_JOB_TYPES, np.random.default_rng(7))
    c = sampler.assign(jobs, GAVEL_JOB_TYPES, np.random.default_rng(8))
    assert a == b and a != c


def test_sampler_draws_only_known_types_and_bigger_jobs_get_bigger_types() -> None:
    jobs = [RawJob("s", 0.0, 1, 60.0)] * 400 + [RawJob("l", 0.0, 8, 20 * 3600.0)] * 400
    types = ["ncf/b512", "resnet18/b32", "resnet50/b128"]
    picks = SAMPLERS.create("by-size-duration").assign(jobs, types, np.random.default_rng(0))
    assert set(picks) <= set(types)
    small = np.mean([job_type_size(p) for p in picks[:400]])
    large = np.mean([job_type_size(p) for p in picks[400:]])
    assert large > 2 * small


def test_sampler_describe_has_seed_and_rule() -> None:
    info = SAMPLERS.create("by-size-duration", seed=11).describe()
    assert info["seed"] == 11 and info["name"] == "by-size-duration" and "rule" in info


def test_job_type_sizes_grow_with_batch() -> None:
    assert job_type_size("resnet50/b128") == pytest.approx(2 * job_type_size("resnet50/b64"))
    assert job_type_size("unknown_model/b8") > 0
    with pytest.raises(ValueError):
        split_job_type("resnet50-64")


def test_materialize_respects_truth_and_converts_durations() -> None:
    trace = load_trace(FIXTURES / "good_horus.csv", "horus")
    truth = ToyTruth(["resnet50/b64", "transformer/b128", "ncf/b512"])
    specs = materialize(trace, truth, "by-size-duration", V100, seed=3)
    by_id = {s.job_id: s for s in specs}
    assert by_id["a"].iterations == 1000.0  # given as iterations: kept
    assert by_id["b"].iterations == pytest.approx(3600.0 / 0.128)  # duration / solo iteration time on V100
    assert by_id["c"].job_type in truth.job_types()
    assert by_id["c"].iterations == pytest.approx(600.0 / truth.solo(by_id["c"].job_type, V100).iter_time_s)
    assert by_id["c"].gpu_fraction == 0.5 and by_id["b"].gpu_type_request == "V100|V100-32GB"
    assert [s.job_id for s in specs] == [j.job_id for j in trace.jobs]


def test_materialize_same_seed_same_specs() -> None:
    trace = make_trace(_jobs(200), "mem", "0" * 64, "test")
    truth = ToyTruth()
    assert materialize(trace, truth, "by-size-duration", V100, seed=5) == \
        materialize(trace, truth, "by-size-duration", V100, seed=5)
    assert {s.job_type for s in materialize(trace, truth, "by-size-duration", V100, seed=5)} <= set(GAVEL_JOB_TYPES)


def test_materialize_rejects_job_type_unknown_to_truth() -> None:
    trace = load_trace(FIXTURES / "good_horus.csv", "horus")
    with pytest.raises(HorusInputError, match=r"good_horus.csv: line 3, job 'a': job type 'resnet50/b64' is unknown"):
        materialize(trace, ToyTruth(["transformer/b128", "ncf/b512"]), "by-size-duration", V100)


def test_default_trace_loads_and_uses_gavel_types() -> None:
    trace = load_default_trace()
    assert len(trace.jobs) == 400
    assert {f"{j.model}/b{j.batch_size}" for j in trace.jobs} <= set(GAVEL_JOB_TYPES)
    assert {j.num_gpus for j in trace.jobs} == {1, 2, 4, 8}
    specs = materialize(trace, ToyTruth(GAVEL_JOB_TYPES), "by-size-duration", V100, seed=0)
    assert all(s.iterations > 0 for s in specs)
