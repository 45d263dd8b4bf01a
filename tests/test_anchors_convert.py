"""The anchor-simulator trace converters (benchmarks/anchors/convert.py) write each anchor's format.

Needs no anchor source: the Gavel writer gets a small throughputs file built here. Skips when the
Philly trace is absent.
"""

from __future__ import annotations

import csv
import importlib.util
import itertools
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "data" / "traces" / "philly" / "philly_jobs.csv"
N = 50

pytestmark = pytest.mark.skipif(not TRACE.exists(), reason=f"Philly trace not found at {TRACE}")


@pytest.fixture(scope="module")
def convert():
    spec = importlib.util.spec_from_file_location("anchors_convert", ROOT / "benchmarks" / "anchors" / "convert.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def jobs(convert):
    return convert.load_slice(TRACE, N)


def test_slice_is_the_first_jobs_in_submit_order(convert, jobs):
    from horus.traces.base import load_trace

    raw = load_trace(TRACE, "philly").jobs[:N]
    assert [j.job_id for j in jobs] == [r.job_id for r in raw]
    assert [j.gpus for j in jobs] == [r.num_gpus for r in raw]
    assert [j.submit_s for j in jobs] == sorted(j.submit_s for j in jobs) and jobs[0].submit_s == 0
    assert all(j.duration_s >= 1 and isinstance(j.duration_s, int) for j in jobs)


def test_tiresias_trace_and_cluster_spec(convert, jobs, tmp_path):
    files = convert.write_tiresias(jobs, tmp_path, nodes=64)
    with files["trace"].open() as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == convert.TIRESIAS_COLUMNS
    assert len(rows) == N
    # Tiresias turns digit-only fields into ints (jobs.py add_job): every number must be a plain integer
    assert all(rows[i][k].isdigit() for i in range(N) for k in ("job_id", "num_gpu", "submit_time", "duration"))
    assert [int(r["num_gpu"]) for r in rows] == [j.gpus for j in jobs]
    assert [int(r["duration"]) for r in rows] == [j.duration_s for j in jobs]
    for row, nxt in itertools.pairwise(rows):
        assert int(row["submit_time"]) + int(row["interval"]) == int(nxt["submit_time"])
    assert {r["model_name"] for r in rows} <= set(convert.TIRESIAS_MODELS)
    spec = list(csv.DictReader(files["cluster_spec"].open()))
    assert spec == [{"num_switch": "1", "num_node_p_switch": "64", "num_gpu_p_node": "8", "num_cpu_p_node": "128",
                     "mem_p_node": "256"}]


def test_gavel_trace_steps_match_the_duration(convert, jobs, tmp_path):
    rates = {"v100": {str((name, sf)): {"null": 2.0 * sf} for name in ("A", "B") for sf in (1, 2, 4, 8)}}
    rates["v100"][str(("C", 1))] = {"null": 1.0}  # single-GPU only: never chosen
    throughputs = tmp_path / "throughputs.json"
    throughputs.write_text(json.dumps(rates))
    out = convert.write_gavel(jobs, tmp_path / "philly.trace", throughputs)
    lines = out.read_text().splitlines()
    assert len(lines) == N
    for job, line in zip(jobs, lines):
        fields = line.split("\t")
        assert len(fields) == 10  # Gavel's utils.parse_trace unpacks exactly ten
        job_type, scale, steps, arrival = fields[0], int(fields[6]), int(fields[5]), float(fields[9])
        assert job_type in ("A", "B")
        assert scale == min(max(job.gpus, 1), 8) and scale in (1, 2, 4, 8)
        assert steps == round(job.duration_s * 2.0 * scale)
        assert arrival == job.submit_s


def test_gavel_scale_factor_rounds_up_and_caps_at_8(convert):
    assert [convert.gavel_scale_factor(g) for g in (1, 2, 3, 4, 5, 8, 16, 32)] == [1, 2, 4, 4, 8, 8, 8, 8]


def test_lucid_trace_and_vc_config(convert, jobs, tmp_path):
    files = convert.write_lucid(jobs, tmp_path, nodes=64)
    assert files["trace"].name == "cluster_full_log_0.csv"
    rows = list(csv.DictReader(files["trace"].open()))
    assert tuple(rows[0]) == convert.LUCID_COLUMNS and len(rows) == N
    assert [(int(r["submit_time"]), int(r["gpu_num"]), int(r["duration"])) for r in rows] == [
        (j.submit_s, j.gpus, j.duration_s) for j in jobs]
    assert {r["vc"] for r in rows} == {convert.LUCID_VC}
    assert list(csv.reader(files["vc_config"].open())) == [["", "num"], [convert.LUCID_VC, "64"]]
