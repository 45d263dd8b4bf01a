"""The README's sweep tables say what ``experiments/results/sweep.json`` says.

Every row of the README's policy-change table (world x workload: mean JCT change against FIFO-exclusive, the
ablation in brackets, Horus's p95 JCT change), every row of its equal-information table (no sizes / exact sizes) and
every row of its goal table is recomputed from the committed sweep's aggregate and goals, rounded as the README
rounds them. A hand-edited figure, or a sweep re-run without its README, fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SWEEP = json.loads((ROOT / "experiments" / "results" / "sweep.json").read_text())
WORLDS = {"parametric x1": ("parametric", 1.0), "parametric x2": ("parametric", 2.0),
          "gavel V100 pairs": ("gavel", 1.0), "gavel, 30 % pairs lose": ("gavel+losing0.3", 1.0)}
WORKLOADS = {"load 1.5": ("stream", 1.5), "load 2.5": ("stream", 2.5), "batch": ("batch", 1.0)}
AGGREGATE = {(r["truth"], r["scale"], r["kind"], r["load"], r["policy"]): r for r in SWEEP["aggregate"]}


def percent(x: float, digits: int = 0) -> str:
    text = f"{x * 100:+.{digits}f} %"
    if float(text[:-2]) == 0:
        text = ("−" if x < 0 else "+") + text[1:]
    return text.replace("-", "−")


def rows_of(header_start: str) -> tuple[list[str], list[list[str]]]:
    """(column names, rows) of the README table whose header line starts with ``header_start``."""
    lines = README.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    header = [c.strip() for c in lines[start].strip().strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return header, rows


def with_ablation(found: dict) -> str:
    want = percent(found["mean_jct_s_vs_fifo"])
    if "mean_jct_s_vs_ablation" in found:
        want += f" ({percent(found['mean_jct_s_vs_ablation'])})"
    return want


def test_the_readme_has_the_sweep_tables() -> None:
    assert len(rows_of("| world | workload | horus |")[1]) == 12
    assert len(rows_of("| world | workload | horus-las [none] |")[1]) == 8


@pytest.mark.parametrize("row", rows_of("| world | workload | horus |")[1], ids=lambda r: f"{r[0]}-{r[1]}")
def test_each_policy_change_matches_the_sweep(row: list[str]) -> None:
    header, _ = rows_of("| world | workload | horus |")
    key = (*WORLDS[row[0]], *WORKLOADS[row[1]])
    for policy, cell in zip(header[2:-1], row[2:-1]):
        assert cell == with_ablation(AGGREGATE[(*key, policy)]), f"{row[0]} {row[1]} {policy}"
    assert row[-1] == percent(AGGREGATE[(*key, "horus")]["p95_jct_s_vs_fifo"])


@pytest.mark.parametrize("row", rows_of("| world | workload | horus-las [none] |")[1], ids=lambda r: f"{r[0]}-{r[1]}")
def test_each_information_row_matches_the_sweep(row: list[str]) -> None:
    header, _ = rows_of("| world | workload | horus-las [none] |")
    key = (*WORLDS[row[0]], *WORKLOADS[row[1]])
    for policy, cell in zip(header[2:], row[2:]):
        assert cell == with_ablation(AGGREGATE[(*key, policy)]), f"{row[0]} {row[1]} {policy}"


def test_the_goal_table_matches_the_sweep() -> None:
    _, rows = rows_of("| world | workload | target | bound | measured | met |")
    goals = SWEEP["goals"]
    assert len(rows) == len(goals)
    for row, goal in zip(rows, goals):
        assert row[:4] == [goal["world"], goal["workload"], goal["target"], goal["bound"]]
        value = f"{goal['measured']:+.0f}" if goal.get("count") else percent(goal["measured"], 1)
        assert row[4] == value.replace("-", "−"), row
        assert row[5] == ("yes" if goal["met"] else "**no**")


def test_the_generator_leaves_the_readme_as_it_is() -> None:
    """``experiments/readme_tables.py`` (what ``sweep.py`` runs after a sweep) rewrites the three tables to what the
    README holds: the tables above and the generator agree, and a sweep re-run rewrites them in place."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "experiments" / "readme_tables.py")
    assert spec is not None and spec.loader is not None
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    assert tables.rewrite(README, SWEEP) == README
    # a changed figure in the sweep shows in the rewritten README
    changed = json.loads(json.dumps(SWEEP))
    row = next(r for r in changed["aggregate"] if (r["truth"], r["scale"], r["kind"], r["load"], r["policy"])
               == ("parametric", 1.0, "stream", 2.5, "horus"))
    row["mean_jct_s_vs_fifo"] = -0.99
    assert "| parametric x1 | load 2.5 | −99 %" in tables.rewrite(README, changed)
