"""Rewrite the README's three sweep tables from ``experiments/results/sweep.json``.

    python experiments/readme_tables.py [--check]

The policy-change table (mean JCT change against FIFO-exclusive, the co-location-off ablation in brackets, Horus's
p95 JCT change), the equal-information table and issue 23's goal table are recomputed from the committed sweep's
aggregate and goals; the README's column headers and row order are kept. ``--check`` exits 1 when the README differs
(what ``tests/test_readme_sweep_table.py`` asserts). ``experiments/sweep.py`` calls this after every run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORLDS = {"parametric x1": ("parametric", 1.0), "parametric x2": ("parametric", 2.0),
          "gavel V100 pairs": ("gavel", 1.0), "gavel, 30 % pairs lose": ("gavel+losing0.3", 1.0)}
WORKLOADS = {"load 1.5": ("stream", 1.5), "load 2.5": ("stream", 2.5), "batch": ("batch", 1.0)}
POLICY_TABLE = "| world | workload | horus |"
INFORMATION_TABLE = "| world | workload | horus-las [none] |"
GOAL_TABLE = "| world | workload | target | bound | measured | met |"


def percent(x: float, digits: int = 0) -> str:
    """``x`` as a signed percentage with a typographic minus; a rounded zero keeps the sign of ``x``."""
    text = f"{x * 100:+.{digits}f} %"
    if float(text[:-2]) == 0:
        text = ("−" if x < 0 else "+") + text[1:]
    return text.replace("-", "−")


def with_ablation(found: dict) -> str:
    text = percent(found["mean_jct_s_vs_fifo"])
    if "mean_jct_s_vs_ablation" in found:
        text += f" ({percent(found['mean_jct_s_vs_ablation'])})"
    return text


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def rewrite(readme: str, sweep: dict) -> str:
    """``readme`` with the three tables' cells recomputed from ``sweep``; KeyError for a cell the sweep lacks,
    ValueError for a table the README lacks."""
    aggregate = {(r["truth"], r["scale"], r["kind"], r["load"], r["policy"]): r for r in sweep["aggregate"]}
    lines = readme.splitlines()

    def table(header_start: str) -> tuple[list[str], range]:
        start = next((i for i, line in enumerate(lines) if line.startswith(header_start)), None)
        if start is None:
            raise ValueError(f"the README has no table whose header starts {header_start!r}")
        end = start + 2
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        return _cells(lines[start]), range(start + 2, end)

    for header_start, p95 in ((POLICY_TABLE, True), (INFORMATION_TABLE, False)):
        header, rows = table(header_start)
        policies = header[2:-1] if p95 else header[2:]
        for i in rows:
            world, workload = _cells(lines[i])[:2]
            key = (*WORLDS[world], *WORKLOADS[workload])
            cells = [world, workload] + [with_ablation(aggregate[(*key, p)]) for p in policies]
            if p95:
                cells.append(percent(aggregate[(*key, "horus")]["p95_jct_s_vs_fifo"]))
            lines[i] = _row(cells)
    _, rows = table(GOAL_TABLE)
    goal_rows = []
    for goal in sweep["goals"]:
        value = f"{goal['measured']:+.0f}" if goal.get("count") else percent(goal["measured"], 1)
        goal_rows.append(_row([goal["world"], goal["workload"], goal["target"], goal["bound"],
                               value.replace("-", "−"), "yes" if goal["met"] else "**no**"]))
    lines[rows.start:rows.stop] = goal_rows
    return "\n".join(lines) + ("\n" if readme.endswith("\n") else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, default=ROOT / "experiments" / "results" / "sweep.json")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when the README's tables differ")
    args = parser.parse_args(argv)
    readme = args.readme.read_text()
    new = rewrite(readme, json.loads(args.sweep.read_text()))
    if args.check:
        if new != readme:
            print(f"{args.readme}: sweep tables differ from {args.sweep}; run python experiments/readme_tables.py",
                  file=sys.stderr)
            return 1
        return 0
    if new != readme:
        args.readme.write_text(new)
        print(f"{args.readme}: sweep tables rewritten from {args.sweep}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
