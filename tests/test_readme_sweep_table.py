"""The README's sweep tables say what ``experiments/results/sweep.json`` says.

Every row of the README's policy-change table (world x workload: mean JCT change against FIFO-exclusive, the
ablation in brackets, Horus's makespan change) and every cell of its goal table is recomputed from the committed
sweep's aggregate and goals, rounded as the README rounds them. A hand-edited figure, or a sweep re-run without
its README, fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SWEEP = json.loads((ROOT / "experiments" / "results" / "sweep.json").read_text())
WORLDS = {"gavel V100 pairs": ("gavel", 1.0), "parametric x0.5": ("parametric", 0.5),
          "parametric x1": ("parametric", 1.0), "parametric x2": ("parametric", 2.0)}
WORKLOADS = {"load 1.5": ("stream", 1.5), "load 2.5": ("stream", 2.5), "batch": ("batch", 1.0)}


def percent(x: float, digits: int = 0) -> str:
    text = f"{x * 100:+.{digits}f} %"
    if float(text[:-2]) == 0:
        text = ("−" if x < 0 else "+") + text[1:]
    return text.replace("-", "−")


def table_rows() -> list[list[str]]:
    rows = []
    for line in README.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 12 and cells[0] in WORLDS and cells[1] in WORKLOADS:
            rows.append(cells)
    return rows


def test_the_readme_has_the_sweep_table() -> None:
    assert len(table_rows()) == 10


@pytest.mark.parametrize("row", table_rows(), ids=lambda r: f"{r[0]}-{r[1]}")
def test_each_policy_change_matches_the_sweep(row: list[str]) -> None:
    header = next(line for line in README.splitlines() if line.startswith("| world | workload | horus |"))
    policies = [c.strip() for c in header.strip().strip("|").split("|")][2:-1]
    aggregate = {(r["truth"], r["scale"], r["kind"], r["load"], r["policy"]): r for r in SWEEP["aggregate"]}
    key = (*WORLDS[row[0]], *WORKLOADS[row[1]])
    for policy, cell in zip(policies, row[2:-1]):
        found = aggregate[(*key, policy)]
        want = percent(found["mean_jct_s_vs_fifo"])
        if "mean_jct_s_vs_ablation" in found:
            want += f" ({percent(found['mean_jct_s_vs_ablation'])})"
        assert cell == want, f"{row[0]} {row[1]} {policy}"
    assert row[-1] == percent(aggregate[(*key, "horus")]["makespan_s_vs_fifo"])


def test_the_goal_table_matches_the_sweep() -> None:
    goals = {(g["world"], g["workload"], g["target"]): g for g in SWEEP["goals"]}
    lines = {
        "Horus vs FIFO-exclusive makespan ≤ −20 %": "horus vs fifo-exclusive, makespan",
        "Horus vs FIFO-exclusive mean JCT ≤ −40 %": "horus vs fifo-exclusive, mean JCT",
        "Horus vs its ablation mean JCT ≤ −10 %": "horus vs its ablation (horus-solo), mean JCT",
        "Horus vs faithful Gandiva mean JCT ≤ −10 %": "horus vs gandiva, mean JCT",
        "SJF-ordered Horus vs Tiresias mean JCT ≤ +5 %": "horus (SJF order) vs tiresias, mean JCT",
        "... and shorter makespan than Tiresias": "horus (SJF order) vs tiresias, makespan",
    }
    columns = [("gavel x1.0", "stream 2.5"), ("gavel x1.0", "batch 1.0"), ("parametric x1.0", "stream 2.5"),
               ("parametric x1.0", "batch 1.0")]
    checked = 0
    for line in README.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] not in lines:
            continue
        for (world, workload), cell in zip(columns, cells[1:]):
            goal = goals[(world, workload, lines[cells[0]])]
            value, verdict = re.fullmatch(r"(\S+ %) (\*\*no\*\*|yes)", cell).groups()
            assert value == percent(goal["measured"], 1), f"{cells[0]} {world} {workload}"
            assert verdict == ("yes" if goal["met"] else "**no**")
            checked += 1
    assert checked == 24
