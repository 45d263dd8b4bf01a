"""report.html: the GPU timeline (placements recorded by the engine), the policy selector, scrolling tables."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from sim_fakes import ConstPredictor, PackingPolicy, ToyTruth, cluster, job

from horus.sim.engine import SimConfig, SimResult, simulate
from horus.sim.gpu_timeline import colocated_intervals, timeline_payload
from horus.sim.report import STYLE, write_report
from horus.truth.base import SoloTruth


def _run(mem_mib: float = 3000.0) -> dict[str, SimResult]:
    """Two tiny runs on 2 GPUs: exclusive and two jobs per GPU."""
    jobs = [job(f"j{i}", 5.0 * i, 20 + 3 * i) for i in range(10)]
    truth = ToyTruth({"toya/b1": SoloTruth(0.4, mem_mib, 1.0)})
    return {name: simulate(jobs, cluster(1, 2), PackingPolicy(max_share=share), truth, ConstPredictor(), SimConfig())
            for name, share in (("exclusive", 1.0), ("pairs", 2.0))}


def _page(tmp_path: Path, results: dict[str, SimResult], **kwargs: object) -> tuple[str, dict]:
    summary = {"policies": {n: r.summary for n, r in results.items()}, "num_jobs": 10, "num_gpus": 2}
    path = write_report(tmp_path / "report.html", "tiny", summary, {"truth": {"name": "toy"}}, [],
                        results=results, gpu_names=["n0/0", "n0/1"], **kwargs)
    page = path.read_text()
    match = re.search(r'<script type="application/json" id="horus-data">(.*?)</script>', page, re.DOTALL)
    assert match, "the page embeds its data"
    return page, json.loads(match.group(1))


def _shared_pairs(placements: pd.DataFrame) -> list[tuple[int, float, float]]:
    """(gpu, start, end) of every overlap of two residencies, by brute force over pairs."""
    stays = placements[placements["outcome"] != "oom"].to_dict("records")
    out = []
    for i, a in enumerate(stays):
        for b in stays[i + 1:]:
            start, end = max(a["start"], b["start"]), min(a["end"], b["end"])
            if a["gpu"] == b["gpu"] and end > start:
                out.append((a["gpu"], start, end))
    return out


def test_placements_are_the_residencies_of_every_job() -> None:
    result = _run()["pairs"]
    placed = result.placements
    assert list(placed.columns) == ["job_id", "gpu", "start", "end", "outcome"]
    jobs = result.jobs.set_index("job_id")
    for job_id, rows in placed.groupby("job_id"):
        assert (rows["outcome"] == "completed").all() and len(rows) == jobs.loc[job_id, "num_gpus"]
        assert rows["start"].iloc[0] == jobs.loc[job_id, "first_start"] and rows["end"].iloc[0] == jobs.loc[job_id, "end"]
    assert placed["start"].is_monotonic_increasing


def test_report_timeline_marks_where_two_jobs_shared_a_gpu(tmp_path: Path) -> None:
    results = _run()
    shared = _shared_pairs(results["pairs"].placements)
    assert shared, "the pairs policy put two jobs on one GPU in this run"
    assert not _shared_pairs(results["exclusive"].placements)
    page, data = _page(tmp_path, results)
    origin = min(float(r.jobs["submit"].min()) for r in results.values())
    coloc = data["gantt"]["pairs"]["coloc"]
    for gpu, start, end in shared:  # every overlap lies inside a co-located interval drawn on its GPU's row
        s, e = (start - origin) / 3600, (end - origin) / 3600
        assert any(g == gpu and c0 <= s + 1e-3 and c1 >= e - 1e-3 and n >= 2 for g, c0, c1, n in coloc)
    assert data["gantt"]["exclusive"]["coloc"] == []
    bars = data["gantt"]["pairs"]["bars"]
    assert len(bars) == len(results["pairs"].placements) and {b[5] for b in bars} == {0, 1}  # two lanes used
    assert data["gantt"]["pairs"]["lanes"] == {"0": 2, "1": 2}
    assert 'id="gantt"' in page and "co-located" in page and 'id="policy"' in page
    assert set(data["series"]["pairs"]) == {"util", "queue", "cdf"} and data["gpus"] == ["n0/0", "n0/1"]
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # self-contained: nothing fetched


def test_out_of_memory_starts_are_marks(tmp_path: Path) -> None:
    results = _run(mem_mib=9000.0)  # two residents need 18,000 MiB of a 16,000 MiB GPU: the second start fails
    assert results["pairs"].summary["oom_failures"] > 0
    _, data = _page(tmp_path, results)
    assert any(kind == "oom" for _, _, kind in data["gantt"]["pairs"]["marks"])
    assert data["gantt"]["pairs"]["coloc"] == []


def test_table_scrolls_sideways_and_the_chosen_policy_is_highlighted(tmp_path: Path) -> None:
    assert re.search(r"\.table-wrap\s*\{[^}]*overflow-x:\s*auto", STYLE)
    page, data = _page(tmp_path, _run())
    assert "<div class='table-wrap'><table>" in page
    chosen = data["chosen"]
    assert f'<tr data-policy="{chosen}" class="chosen">' in page
    assert len(set(data["colors"].values())) == 2


def test_timeline_is_capped_and_says_so(tmp_path: Path) -> None:
    results = _run()
    page, data = _page(tmp_path, results, max_bars=3)
    gantt = data["gantt"]["pairs"]
    assert gantt["cut"] and gantt["shown"] == 3 and gantt["total"] == len(results["pairs"].placements)
    assert "At most 3 residencies are drawn per policy" in page


@pytest.mark.parametrize(("rows", "expected"), [
    ([("a", 0, 0.0, 10.0), ("b", 0, 5.0, 15.0), ("c", 0, 15.0, 20.0)], [(0, 5.0, 10.0, 2)]),  # touching: not shared
    ([("a", 1, 0.0, 10.0), ("b", 1, 0.0, 10.0), ("c", 1, 2.0, 4.0)], [(1, 0.0, 2.0, 2), (1, 2.0, 4.0, 3),
                                                                         (1, 4.0, 10.0, 2)]),
    ([("a", 0, 0.0, 10.0), ("b", 1, 0.0, 10.0)], []),
])
def test_colocated_intervals(rows: list[tuple[str, int, float, float]], expected: list) -> None:
    frame = pd.DataFrame([(*r, "completed") for r in rows], columns=["job_id", "gpu", "start", "end", "outcome"])
    assert colocated_intervals(frame) == expected
    payload = timeline_payload(frame, 0.0, {})
    assert payload["total"] == len(rows) and not payload["cut"]
