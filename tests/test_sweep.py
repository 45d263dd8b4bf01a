"""``horus sweep`` without Ray (``--no-ray``): the grid, the table and the files it writes."""

from __future__ import annotations

import json
import pickle

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


# ---- tenancy (docs/tenancy.md): every cell under the tenancy horus simulate would choose ---------------------------
SPEC = "nodes:\n  - {name: n, count: 2, gpu_type: V100, gpus: 4}\n"
QUOTAS = "tenancy:\n  queues:\n    - {name: a, guaranteed: 4}\n    - {name: b, guaranteed: 4}\n"
TENANCY_FIGURES = ("queues", "jain_index", "min_guarantee_attainment", "quota_violation_s", "reclaim_preemptions")


def tenant_trace(path, queues=("a", "b", "a", "b", "a", "b")):
    """A horus CSV whose jobs name ``queues`` (None: no queue), a few minutes apart."""
    lines = ["job_id,submit_time,num_gpus,model,batch_size,duration_s,queue"]
    lines += [f"j{i},{60 * i},{1 + i % 2},resnet18_cifar,16,{900 + 300 * i},{q or ''}" for i, q in enumerate(queues)]
    path.write_text("\n".join(lines) + "\n")
    return path


def sweep_json(argv):
    """(rows printed by ``horus sweep --no-ray --json ARGV``, stdout + stderr) run here."""
    from cli_helpers import run

    rc, out, err = run(["sweep", "--no-ray", "--json", *argv])
    assert rc == 0, err
    return json.loads(out), err


def test_sweep_runs_each_cell_under_the_spec_tenancy_as_simulate_does(tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text(SPEC + QUOTAS)
    trace = tenant_trace(tmp_path / "t.csv")
    out = tmp_path / "sweep"
    rows, log = sweep_json(["--policy", "fifo-exclusive", "--policy", "horus", "--trace", str(trace),
                            "--cluster", str(spec), "--out", str(out)])
    assert len(rows) == 2
    for row in rows:  # the spec's section by default, as horus simulate
        assert row["tenancy_source"] == "spec" and row["tenancy_charge"] == "equal" and row["queues"] == 2
        assert row["quota_violation_s"] == 0 and 0 < row["jain_index"] <= 1
        assert row["jobs_completed"] == 6
    header = (out / "table.txt").read_text().splitlines()[0]
    assert all(h in header for h in ("tenancy", "Jain", "min attain %", "quota viol s")) and "spec" in log
    means = json.loads((out / "sweep.json").read_text())["means"]
    assert {m["tenancy_source"] for m in means} == {"spec"} and all(m["quota_violation_s"] == 0 for m in means)
    page = (out / "sweep.html").read_text()
    assert "t.csv on c.yaml, tenancy spec" in page and "Jain&#x27;s index" in page and "quota violations (s)" in page
    # the cell is the simulation horus simulate runs under the same tenancy
    assert main(["simulate", "--policy", "horus", "--trace", str(trace), "--cluster", str(spec), "--no-progress",
                 "--out", str(tmp_path / "sim")]) == 0
    simulated = json.loads((tmp_path / "sim" / "summary.json").read_text())["policies"]["horus"]
    (cell,) = [row for row in rows if row["policy"] == "horus"]
    for key in ("mean_jct_s", "makespan_s", *TENANCY_FIGURES):
        assert cell[key] == pytest.approx(simulated[key]), key


def test_sweep_tenancy_off_and_tenancy_free_rows_are_unchanged(tmp_path):
    spec, plain = tmp_path / "c.yaml", tmp_path / "plain.yaml"
    spec.write_text(SPEC + QUOTAS)
    plain.write_text(SPEC)
    trace = tenant_trace(tmp_path / "t.csv")
    off, _ = sweep_json(["--policy", "fifo-exclusive", "--trace", str(trace), "--cluster", str(spec),
                         "--tenancy", "off", "--out", str(tmp_path / "off")])
    free, _ = sweep_json(["--policy", "fifo-exclusive", "--trace", str(trace), "--cluster", str(plain),
                          "--out", str(tmp_path / "free")])
    assert not any(key in off[0] for key in ("tenancy_source", "tenancy_charge", *TENANCY_FIGURES))
    assert off[0].keys() == free[0].keys() and off[0]["mean_jct_s"] == pytest.approx(free[0]["mean_jct_s"])
    assert "Jain" not in (tmp_path / "off" / "table.txt").read_text()
    assert "jain_index" not in json.loads((tmp_path / "free" / "sweep.json").read_text())["means"][0]


def test_sweep_tenancy_trace_and_file_per_cell(tmp_path):
    spec, plain = tmp_path / "c.yaml", tmp_path / "plain.yaml"
    spec.write_text(SPEC + QUOTAS)
    plain.write_text(SPEC)
    trace = tenant_trace(tmp_path / "t.csv", ("a", "b", None, "b"))
    cell = Cell("fifo-exclusive", str(trace), 0, str(plain))
    row = run_cell(cell, SweepSettings(tenancy="trace", tenancy_charge="util"))  # built from the cell's jobs
    assert (row["tenancy_source"], row["tenancy_charge"], row["queues"]) == ("trace", "util", 3)
    assert row["quota_violation_s"] == 0
    assert main(["simulate", "--policy", "fifo-exclusive", "--trace", str(trace), "--cluster", str(plain),
                 "--tenancy", "trace", "--tenancy-charge", "util", "--no-progress", "--out", str(tmp_path / "sim")]) == 0
    simulated = json.loads((tmp_path / "sim" / "summary.json").read_text())["policies"]["fifo-exclusive"]
    assert row["mean_jct_s"] == pytest.approx(simulated["mean_jct_s"])
    for key in ("contended_h", "min_guarantee_attainment", "reclaim_preemptions"):  # Jain's: NaN, never contended
        assert row[key] == pytest.approx(simulated[key]), key
    quotas = tmp_path / "q.yaml"  # a FILE applies to every cluster, with or without a section of its own
    quotas.write_text(QUOTAS.replace("{name: b, guaranteed: 4}", "{name: b, guaranteed: 2}"))
    rows, _ = sweep_json(["--policy", "fifo-exclusive", "--trace", str(tenant_trace(tmp_path / "u.csv")),
                          "--cluster", str(spec), "--cluster", str(plain), "--tenancy", str(quotas),
                          "--out", str(tmp_path / "file")])
    assert [r["tenancy_source"] for r in rows] == [str(quotas)] * 2 and all(r["queues"] == 2 for r in rows)
    assert pickle.loads(pickle.dumps(SweepSettings(tenancy=str(quotas)))) == SweepSettings(tenancy=str(quotas))


def test_sweep_tenancy_errors_come_before_the_first_cell(tmp_path):
    from pathlib import Path

    from cli_helpers import assert_clear, run

    spec, plain = tmp_path / "c.yaml", tmp_path / "plain.yaml"
    spec.write_text(SPEC + QUOTAS)
    plain.write_text(SPEC)
    good = tenant_trace(tmp_path / "t.csv")
    bad = tenant_trace(tmp_path / "u.csv", ("a", "b", "a", None, "c"))
    priority = tmp_path / "p.csv"
    priority.write_text("job_id,submit_time,num_gpus,model,batch_size,duration_s,queue,priority\n"
                        "j0,0,1,,,600,a,\nj1,5,1,,,600,b,urgent\n")
    nodes = Path(__file__).parent / "fixtures" / "traces" / "good_openb_nodes.csv"
    base = ["sweep", "--no-ray", "--policy", "fifo-exclusive", "--out", str(tmp_path / "out")]
    for argv, needles in (
        (["--trace", str(good), "--trace", str(bad), "--cluster", str(spec)],  # the second trace, as simulate says it
         [f"{bad}: line 6, job 'j4': unknown queue 'c' for --tenancy spec (known: a, b)"]),
        (["--trace", str(good), "--cluster", str(plain), "--tenancy", str(spec), "--trace", str(bad)],
         [f"{bad}: line 6, job 'j4': unknown queue 'c' for --tenancy {spec}"]),
        (["--trace", str(good), "--cluster", str(spec), "--cluster", str(plain), "--tenancy", "spec"],
         [f"--tenancy: spec: the cluster spec ({plain}) has no tenancy section"]),
        (["--trace", str(good), "--cluster", str(nodes), "--tenancy", "spec"],
         [f"--tenancy: spec: the cluster spec ({nodes}) has no tenancy section"]),
        (["--tenancy", "spec"], ["--tenancy: spec: the cluster spec (embedded default) has no tenancy section"]),
        (["--trace", str(priority), "--tenancy", "trace"], [f"{priority}: line 3, job 'j1': unknown priority class "
                                                             "'urgent' for --tenancy trace"]),
        (["--tenancy", "off", "--tenancy-charge", "util"], ["--tenancy-charge: applies to a tenancy, and --tenancy is off"]),
        (["--tenancy", str(tmp_path / "none.yaml")], ["--tenancy", "none.yaml: no such file"]),
        (["--tenancy", str(good)], [f"{good}: "]),
    ):
        rc, out, err = run([*base, *argv])
        assert_clear(rc, err, *needles)
        assert "sweep of" not in out and not (tmp_path / "out").exists()


def test_an_undefined_figure_prints_as_a_dash_not_nan():
    """A sweep's mean of a figure no seed defined (Jain's index where queues never contended) is NaN in its frame;
    the table prints it as ``-``, as ``horus simulate`` prints a None."""
    from horus.sim.commands import TENANCY_COLUMNS, format_table

    table = format_table({"fifo-exclusive": {"jain_index": float("nan"), "min_guarantee_attainment": 1.0,
                                             "tenancy_source": "trace"}}, TENANCY_COLUMNS)
    row = table.splitlines()[2].split()
    assert row[:4] == ["fifo-exclusive", "trace", "-", "100.0"] and "nan" not in row
