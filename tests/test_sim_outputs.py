"""run_comparison writes tables, summary, manifest (versions, hashes) and plots."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from sim_fakes import ConstPredictor, PackingPolicy, ToyTruth, cluster, job

from horus.policies.base import POLICIES
from horus.sim.engine import SimConfig
from horus.sim.outputs import sha256_file
from horus.sim.runner import run_comparison
from horus.truth.base import SoloTruth

TEST_POLICIES = (("test-exclusive", 1.0), ("test-pairs", 2.0))


@pytest.fixture(autouse=True)
def _test_policies():
    """Register two toy policies for these tests only (other tests iterate over POLICIES)."""
    for name, share in TEST_POLICIES:
        POLICIES.register(name)(lambda share=share: PackingPolicy(max_share=share))
    yield
    for name, _ in TEST_POLICIES:
        POLICIES.unregister(name)


def test_run_comparison_writes_everything(tmp_path: Path) -> None:
    jobs = [job(f"j{i}", 5.0 * i, 20 + 3 * i) for i in range(12)]
    truth = ToyTruth({"toya/b1": SoloTruth(0.4, 3000.0, 1.0)})
    extra = {"trace": {"path": "toy.csv", "sha256": "ab" * 32}, "seed": 1}
    summary = run_comparison(jobs, cluster(1, 2), ["test-exclusive", "test-pairs"], truth, ConstPredictor(),
                             SimConfig(), tmp_path, manifest_extra=extra, progress=False)
    assert set(summary["policies"]) == {"test-exclusive", "test-pairs"}
    for name in ("test-exclusive", "test-pairs"):
        tables = {p.stem: p for p in (tmp_path / name).iterdir()}
        assert set(tables) == {"jobs", "gpus", "timeline", "placements"}
        frame = pd.read_parquet(tables["jobs"]) if tables["jobs"].suffix == ".parquet" else pd.read_csv(tables["jobs"])
        assert len(frame) == len(jobs) and (frame["status"] == "completed").all()
    # co-locating pairs of 0.4-util jobs cannot slow them (sum util <= 1) and cannot wait longer
    pols = summary["policies"]
    assert pols["test-pairs"]["mean_wait_s"] <= pols["test-exclusive"]["mean_wait_s"]
    assert pols["test-exclusive"]["colocated_share"] == 0.0
    assert json.loads((tmp_path / "summary.json").read_text())["policies"].keys() == pols.keys()
    for png in ("util_over_time.png", "jct_cdf.png", "queue_length.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert {"horus", "python", "numpy", "pandas", "platform"} <= set(manifest["versions"])
    assert manifest["trace"]["sha256"] == "ab" * 32 and manifest["seed"] == 1
    assert manifest["policies"]["test-pairs"]["name"] == "packing"
    assert manifest["cluster"]["num_gpus"] == 2 and "name" in manifest["truth"]
    assert manifest["outputs"]["summary.json"] == sha256_file(tmp_path / "summary.json")
    assert manifest["outputs"]["test-pairs/jobs.parquet"] == sha256_file(tmp_path / "test-pairs/jobs.parquet")
    report = (tmp_path / "report.html").read_text()
    assert "toy.csv on 2 GPUs" in report and report.count("data:image/png;base64,") == 3
    assert "test-pairs" in report and "lower bound" in report and "ab" * 32 in report


def test_unknown_policy_name_is_reported(tmp_path: Path) -> None:
    from horus.errors import HorusInputError

    with pytest.raises(HorusInputError, match="--policy: unknown policy 'nope'"):
        run_comparison([job("a", 0.0, 1)], cluster(), ["nope"], ToyTruth({"toya/b1": SoloTruth(0.4, 1.0, 1.0)}),
                       ConstPredictor(), SimConfig(), tmp_path, {}, False)


def test_one_policy_runs_under_two_labels_with_different_options(tmp_path: Path) -> None:
    from horus.predict.analytic import AnalyticPredictor
    from horus.truth.parametric import ParametricTruth
    from horus.jobs import JobSpec
    from horus.cluster import Cluster, Node
    from horus.gpu_types import PRESETS

    jobs = [JobSpec(f"j{i}", 10.0 * i, 1, "a3c", 32, 2000.0) for i in range(8)]
    summary = run_comparison(jobs, Cluster([Node("n", PRESETS["V100"], 2)]), ["horus", "horus-solo=horus"],
                             ParametricTruth(), AnalyticPredictor(), SimConfig(), tmp_path,
                             policy_options={"horus-solo": {"max_residents": 1}})
    pols = summary["policies"]
    assert set(pols) == {"horus", "horus-solo"}
    assert pols["horus-solo"]["colocated_share"] == 0.0 < pols["horus"]["colocated_share"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["policies"]["horus-solo"]["registered_as"] == "horus"
    assert (tmp_path / "horus-solo" / "jobs.parquet").exists() or (tmp_path / "horus-solo" / "jobs.csv").exists()
