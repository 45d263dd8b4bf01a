"""``horus sweep`` without Ray (``--no-ray``): the grid, the table and the files it writes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from horus.cli import main
from horus.ray.commands import parse_seeds
from horus.ray.sweep import Cell, SweepSettings, aggregate, grid, run_cell


def test_grid_is_every_combination_in_a_stable_order():
    cells = grid(["p", "q"], ["t"], [0, 1], ["c1", "c2"])
    assert len(cells) == 8 and cells[0] == Cell("p", "t", 0, "c1") and cells[1] == Cell("q", "t", 0, "c1")
    assert parse_seeds("0-3") == [0, 1, 2, 3] and parse_seeds("5,7") == [5, 7]


def test_a_cell_is_the_simulation_horus_simulate_runs(tmp_path):
    row = run_cell(Cell("fifo-exclusive", "default", 0, "default"), SweepSettings(max_jobs=30))
    assert row["num_jobs"] == 30 and row["num_gpus"] == 64 and row["jobs_completed"] == 30
    assert main(["simulate", "--policy", "fifo-exclusive", "--max-jobs", "30", "--no-progress", "--json",
                 "--out", str(tmp_path / "sim")]) == 0
    simulated = json.loads((tmp_path / "sim" / "summary.json").read_text())["policies"]["fifo-exclusive"]
    assert row["mean_jct_s"] == pytest.approx(simulated["mean_jct_s"])
    assert row["makespan_s"] == pytest.approx(simulated["makespan_s"])


def test_sweep_writes_cells_means_and_table(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "--no-ray", "--policy", "fifo-exclusive", "--policy", "horus", "--seeds", "0,1",
                 "--max-jobs", "25", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "4 simulations" in printed and "fifo-exclusive" in printed and "horus" in printed
    parquet = out / "cells.parquet"
    cells = pd.read_parquet(parquet) if parquet.exists() else pd.read_csv(out / "cells.csv")
    assert len(cells) == 4 and set(cells["seed"]) == {0, 1}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["cells"] == 4 and manifest["executor"] == "this process"
    assert (out / "table.txt").read_text().startswith("policy")
    data = json.loads((out / "sweep.json").read_text())
    assert {m["policy"] for m in data["means"]} == {"fifo-exclusive", "horus"} and len(data["cells"]) == 4
    page = (out / "sweep.html").read_text()
    assert "default workload on default cluster" in page and "<svg" in page and "<div class='table-wrap'>" in page
    best = min(data["means"], key=lambda m: m["mean_jct_s"])
    assert f'<td class="best">{best["mean_jct_s"] / 3600:.2f}' in page


def test_aggregate_means_over_seeds():
    rows = [{"policy": "p", "trace": "t", "cluster": "c", "x": x} for x in (1.0, 3.0)]
    (entry,) = aggregate(rows, ["x"])
    assert entry["x"] == 2.0 and entry["x_std"] == pytest.approx(2 ** 0.5) and entry["seeds"] == 2


def test_bad_input_is_one_line(capsys):
    assert main(["sweep", "--no-ray", "--policy", "nope"]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err
    assert main(["sweep", "--no-ray", "--seeds", "x"]) == 2
    assert main(["sweep", "--no-ray", "--trace", "/no/such.csv", "--policy", "horus"]) == 2
    assert "/no/such.csv: no such file" in capsys.readouterr().err


def test_sweep_report_of_the_committed_evaluation_sweep(tmp_path, capsys):
    """``horus sweep-report`` on experiments/results/sweep.json: one table per world and workload, the best
    mean JCT of each marked."""
    from pathlib import Path

    source = Path(__file__).resolve().parents[1] / "experiments" / "results" / "sweep.json"
    if not source.is_file():
        pytest.skip("experiments/results/sweep.json is not in this checkout")
    page_path = tmp_path / "page" / "sweep.html"
    assert main(["sweep-report", str(source), "--out", str(page_path)]) == 0
    assert str(page_path) in capsys.readouterr().out
    page = page_path.read_text()
    rows = json.loads(source.read_text())["aggregate"]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["truth"], r["scale"], r["kind"], r["load"]), []).append(r)
    assert page.count("<div class='table-wrap'><table>") == len(groups)
    for members in groups.values():
        best = min(r["mean_jct_s"] for r in members)
        assert f'<td class="best">{best / 3600:.2f}' in page


def test_sweep_report_refuses_what_is_not_a_sweep(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"rows": []}')
    assert main(["sweep-report", str(bad)]) == 2
    assert "expected a sweep JSON" in capsys.readouterr().err
    assert main(["sweep-report", str(tmp_path / "missing.json")]) == 2
    assert main(["sweep-report", str(tmp_path)]) == 2  # a folder without sweep results
