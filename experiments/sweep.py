"""The evaluation sweep: load x truth x interference scale x seed, every comparison with its ablation and bound.

Workloads come from ``horus trace generate`` (Poisson streams at offered loads 0.6 / 1.0 / 1.5 / 2.5, and a
work-bound batch; 400 jobs each) on the embedded 64-GPU cluster. Worlds: the calibrated ``parametric``
truth at interference scales 0.5 / 1 / 2 (cheap -> dear co-location) and, when ../shared/data is present,
Gavel's measured V100 pairs (``gavel``). Policies: FIFO-exclusive, SJF-exclusive, Tiresias, Horus and
Horus-FIFO each with its co-location-off ablation (``horus-solo``, ``horus-fifo-solo``), the paper's rule
(``horus-paper``), the faithful Gandiva and the old greedy packer, geng (IASP trained on Gavel's P100 pairs,
never on the pairs a truth replays) and the truth-reading ``oracle-truth``. Every cell also reports the
makespan and mean-JCT lower bounds; the goal table of issue 14 is computed from the cells.

    python experiments/sweep.py [--seeds 3] [--jobs 400] [--workers 2]

Writes experiments/results/sweep.json (every cell's summaries), sweep.md (one table per world and
workload: mean over seeds, and each policy's change against FIFO-exclusive and against its own ablation),
sweep_jct.png (mean JCT vs offered load) and sweep_report.html (all of it on one self-contained page).
Per-cell outputs (tables, plots, report.html) go to results/sweep/ (not committed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GAVEL = ROOT.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"
OUT = ROOT / "experiments" / "results"
POLICIES = ["fifo-exclusive", "sjf-exclusive", "tiresias", "horus", "horus-solo=horus", "horus-fifo",
            "horus-fifo-solo=horus-fifo", "horus-paper", "gandiva", "gandiva-greedy", "geng", "oracle-truth"]
OPTIONS: dict[str, dict[str, Any]] = {"horus-solo": {"colocate": False}, "horus-fifo-solo": {"colocate": False}}
ABLATION = {"horus": "horus-solo", "horus-fifo": "horus-fifo-solo"}
SATURATED = (("stream", 2.5), ("batch", 1.0))
WORKLOADS = [("stream", 0.6), ("stream", 1.0), ("stream", 1.5), ("stream", 2.5), ("batch", 1.0)]
METRICS = ("makespan_s", "mean_jct_s", "median_jct_s", "p95_jct_s", "mean_wait_s", "p95_wait_s", "goodput",
           "gpu_busy_mean", "gpu_busy_allocated_mean", "colocated_share", "mean_slowdown", "p95_slowdown",
           "max_stretch", "oom_failures", "preemptions", "makespan_lower_bound_s", "mean_jct_lower_bound_s",
           "makespan_exclusive_bound_s", "mean_jct_exclusive_bound_s")


def worlds(with_gavel: bool) -> list[tuple[str, float]]:
    out = [("parametric", 0.5), ("parametric", 1.0), ("parametric", 2.0)]
    return out + [("gavel", 1.0)] if with_gavel else out


def train_geng_model() -> str:
    """geng's IASP interference model, trained on Gavel's *P100* pairs: disjoint from the V100 pairs the
    ``gavel`` truth replays (``horus.sim.leakage`` refuses a model trained on them) and from the V100 fit of
    the parametric law. Trained afresh on every sweep (2 s, deterministic): a model left in ``results/`` by
    older code once made the committed geng figures irreproducible from a clean clone."""
    out = ROOT / "results" / "iasp-p100"
    if out.exists():
        shutil.rmtree(out)
    subprocess.run([sys.executable, "-m", "horus.cli", "interference", "train", "--gavel", str(GAVEL),
                    "--gpu", "p100", "--model", "iasp", "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    return str(out)


def run_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """One (workload, world, seed): generate the trace, simulate every policy, return the summaries."""
    from horus.clusterspec import load_cluster
    from horus.plugins import load_all
    from horus.predict.analytic import AnalyticPredictor
    from horus.sim.engine import SimConfig
    from horus.sim.runner import run_comparison
    from horus.traces import load_trace, materialize
    from horus.traces.generate import WorkloadSpec, generate_workload, write_trace
    from horus.traces.sampler import SAMPLERS
    from horus.truth.base import TRUTH_MODELS
    from horus.truth.scaled import ScaledInterference

    load_all("horus.truth")
    folder = ROOT / "results" / "sweep" / cell["name"]
    folder.mkdir(parents=True, exist_ok=True)
    cluster = load_cluster(ROOT / "src" / "horus" / "data" / "default_cluster.yaml")
    spec = WorkloadSpec(kind=cell["kind"], num_jobs=cell["jobs"], load=cell["load"], cluster_gpus=cluster.num_gpus,
                        seed=cell["seed"])
    rows, workload = generate_workload(spec)
    trace_path = folder / "trace.csv"
    write_trace(trace_path, rows, spec, workload)
    truth = (TRUTH_MODELS.create("gavel", path=GAVEL, gpus=["v100"]) if cell["truth"] == "gavel"
             else TRUTH_MODELS.create("parametric", seed=cell["seed"]))
    if cell["scale"] != 1.0:
        truth = ScaledInterference(truth, cell["scale"])
    jobs = materialize(load_trace(trace_path, "horus"), truth, SAMPLERS.create("by-size-duration", seed=cell["seed"]),
                       cluster.gpus[0].gpu_type, seed=cell["seed"])
    began = time.perf_counter()
    options = dict(OPTIONS)
    if cell.get("geng_model"):
        options["geng"] = {"model_dir": cell["geng_model"]}
    summary = run_comparison(jobs, cluster, POLICIES, truth, AnalyticPredictor(), SimConfig(), folder,
                             {"trace": {"path": str(trace_path), "generated": workload}, "seed": cell["seed"]},
                             policy_options=options)
    from horus.sim.metrics import below_bounds

    below = {p: lines for p, v in summary["policies"].items() if (lines := below_bounds(v))}
    return {**cell, "workload": workload, "wall_s": time.perf_counter() - began, "below_lower_bound": below,
            "policies": {p: {m: v.get(m) for m in METRICS} for p, v in summary["policies"].items()}}


def below_bound_markdown(cells: list[dict[str, Any]]) -> str:
    """Every (cell, policy) that finished below a bound valid for every schedule: none, unless a bound, the
    engine or a truth's contract is wrong (docs/metrics.md, "Lower bounds")."""
    found = [f"- {c['name']} / {p}: {'; '.join(lines)}" for c in cells
             for p, lines in sorted(c.get("below_lower_bound", {}).items())]
    head = ["", "## Cells below the valid lower bound", ""]
    return "\n".join([*head, *(found or ["none"])]) + "\n"


def aggregate(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and std over seeds per (world, workload, policy), with changes against FIFO-exclusive and the ablation."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for cell in cells:
        groups.setdefault((cell["truth"], cell["scale"], cell["kind"], cell["load"]), []).append(cell)
    rows = []
    for (truth, scale, kind, load), members in sorted(groups.items()):
        for label in members[0]["policies"]:
            values = {m: [c["policies"][label].get(m) for c in members] for m in METRICS}
            row: dict[str, Any] = {"truth": truth, "scale": scale, "kind": kind, "load": load, "policy": label,
                                   "seeds": len(members)}
            for m, vs in values.items():
                arr = np.array([np.nan if v is None else v for v in vs], dtype=float)
                row[m] = float(np.nanmean(arr)) if np.isfinite(arr).any() else None
                row[f"{m}_std"] = float(np.nanstd(arr)) if np.isfinite(arr).any() else None
            for ref_name, ref in (("vs_fifo", "fifo-exclusive"), ("vs_ablation", ABLATION.get(label))):
                if ref is None:
                    continue
                for m in ("makespan_s", "mean_jct_s"):  # per-seed relative change, then the mean
                    changes = [c["policies"][label][m] / c["policies"][ref][m] - 1 for c in members]
                    row[f"{m}_{ref_name}"] = float(np.mean(changes))
            rows.append(row)
    return rows


def relative(cells: list[dict[str, Any]], policy: str, ref: str, metric: str) -> float | None:
    """Mean over ``cells`` (seeds) of policy / ref - 1 on ``metric``; None if either is missing."""
    pairs = [(c["policies"].get(policy, {}).get(metric), c["policies"].get(ref, {}).get(metric)) for c in cells]
    changes = [a / b - 1 for a, b in pairs if a is not None and b]
    return float(np.mean(changes)) if changes and len(changes) == len(cells) else None


def goals(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's targets, per calibrated world (scale 1) and saturated workload, measured on these cells.

    Each entry: world, workload, target, measured mean per-seed change, met (bool)."""
    out: list[dict[str, Any]] = []
    by_world: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for cell in cells:
        if cell["scale"] == 1.0:
            by_world.setdefault((cell["truth"], cell["scale"]), []).append(cell)
    for (truth, scale), members in sorted(by_world.items()):
        for kind, load in SATURATED:
            group = [c for c in members if c["kind"] == kind and c["load"] == load]
            if not group:
                continue
            checks = [("horus vs fifo-exclusive, makespan", relative(group, "horus", "fifo-exclusive", "makespan_s"),
                       lambda v: v <= -0.20, "<= -20 %"),
                      ("horus vs fifo-exclusive, mean JCT", relative(group, "horus", "fifo-exclusive", "mean_jct_s"),
                       lambda v: v <= -0.40, "<= -40 %"),
                      ("horus vs its ablation (horus-solo), mean JCT",
                       relative(group, "horus", "horus-solo", "mean_jct_s"), lambda v: v <= -0.10, "<= -10 %"),
                      ("horus vs gandiva, mean JCT", relative(group, "horus", "gandiva", "mean_jct_s"),
                       lambda v: v <= -0.10, "<= -10 %"),
                      ("horus (SJF order) vs tiresias, mean JCT", relative(group, "horus", "tiresias", "mean_jct_s"),
                       lambda v: v <= 0.05, "<= +5 %"),
                      ("horus (SJF order) vs tiresias, makespan", relative(group, "horus", "tiresias", "makespan_s"),
                       lambda v: v < 0.0, "< 0 %")]
            for target, value, test, bound in checks:
                out.append({"world": f"{truth} x{scale}", "workload": f"{kind} {load}", "target": target,
                            "bound": bound, "measured": value, "met": None if value is None else bool(test(value))})
        worst = [(relative([c for c in members if (c["kind"], c["load"]) == (k, lo)], "horus", "horus-solo",
                           "mean_jct_s"), f"{k} {lo}") for k, lo in sorted({(c["kind"], c["load"]) for c in members})]
        worst = [w for w in worst if w[0] is not None]
        if worst:
            value, where = max(worst)
            out.append({"world": f"{truth} x{scale}", "workload": f"worst load ({where})",
                        "target": "horus vs its ablation at any load, mean JCT", "bound": "<= +3 %",
                        "measured": value, "met": value <= 0.03})
    return out


def goals_markdown(entries: list[dict[str, Any]]) -> str:
    lines = ["## Goals of issue 14 (mean per-seed change; calibrated worlds, interference x1)", "",
             "| world | workload | target | bound | measured | met |", "|---|---|---|---|---|---|"]
    for e in entries:
        value = "-" if e["measured"] is None else f"{100 * e['measured']:+.1f} %"
        met = "-" if e["met"] is None else ("yes" if e["met"] else "**no**")
        lines.append(f"| {e['world']} | {e['workload']} | {e['target']} | {e['bound']} | {value} | {met} |")
    return "\n".join(lines) + "\n"


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f} h"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# Sweep results (experiments/sweep.py)", "",
             "Mean over seeds; hours. `vs FIFO` and `vs ablation` are mean per-seed relative changes of mean JCT "
             "(negative = better); the ablation is the same policy with co-location off. `LB` = lower bound valid for "
             "every schedule (co-located ones included); `exclusive` = the bound of schedules that never share a "
             "GPU (docs/metrics.md).", ""]
    current = None
    for r in rows:
        key = (r["truth"], r["scale"], r["kind"], r["load"])
        if key != current:
            current = key
            load = f"offered load {r['load']}" if r["kind"] == "stream" else "batch (work-bound)"
            lines += ["", f"## {r['truth']} truth, interference x{r['scale']}, {load}", "",
                      f"LB makespan {r['makespan_lower_bound_s'] / 3600:.2f} h (exclusive "
                      f"{_hours(r.get('makespan_exclusive_bound_s'))}), LB mean JCT "
                      f"{r['mean_jct_lower_bound_s'] / 3600:.2f} h (exclusive "
                      f"{_hours(r.get('mean_jct_exclusive_bound_s'))})", "",
                      "| policy | makespan h | mean JCT h | p95 JCT h | mean wait h | goodput % | co-located % | "
                      "max stretch | JCT vs FIFO | JCT vs ablation | makespan vs FIFO |",
                      "|---|---|---|---|---|---|---|---|---|---|---|"]

        def pct(x: float | None) -> str:
            return "-" if x is None else f"{100 * x:+.1f} %"

        lines.append(
            f"| {r['policy']} | {r['makespan_s'] / 3600:.2f} ± {r['makespan_s_std'] / 3600:.2f} | "
            f"{r['mean_jct_s'] / 3600:.2f} ± {r['mean_jct_s_std'] / 3600:.2f} | {r['p95_jct_s'] / 3600:.2f} | "
            f"{r['mean_wait_s'] / 3600:.2f} | {100 * r['goodput']:.1f} | {100 * r['colocated_share']:.0f} | "
            f"{r['max_stretch']:.1f} | {pct(r.get('mean_jct_s_vs_fifo'))} | {pct(r.get('mean_jct_s_vs_ablation'))} | "
            f"{pct(r.get('makespan_s_vs_fifo'))} |")
    return "\n".join(lines) + "\n"


def report(rows: list[dict[str, Any]], targets: list[dict[str, Any]], meta: dict[str, Any], path: Path,
           image: Path) -> None:
    """``sweep_report.html``: the goal table, one comparison table per world and workload (means over seeds,
    lower bounds as a row), the plot and what produced it; self-contained (the plot is embedded)."""
    import html

    from horus.sim.report import STYLE, embedded_image, summary_table

    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Horus sweep</title>",
             f"<style>{STYLE}</style></head><body><h1>Horus evaluation sweep</h1>",
             f"<p class='note'>{html.escape(meta['command'])}; {meta['cells']} cells in {meta['wall_s']:.0f} s. "
             "Means over "
             "seeds of true values from the simulated world (docs/metrics.md); the ablation of a policy is the same "
             "policy with co-location off.</p>", "<h2>Goals of issue 14</h2><table><tr><th>world</th><th>workload</th>"
             "<th>target</th><th>bound</th><th>measured</th><th>met</th></tr>"]
    for e in targets:
        value = "-" if e["measured"] is None else f"{100 * e['measured']:+.1f} %"
        met = "-" if e["met"] is None else ("yes" if e["met"] else "<b>no</b>")
        parts.append(f"<tr><td>{html.escape(e['world'])}</td><td>{html.escape(e['workload'])}</td>"
                     f"<td>{html.escape(e['target'])}</td><td>{html.escape(e['bound'])}</td><td>{value}</td>"
                     f"<td>{met}</td></tr>")
    parts += ["</table>", "<h2>Mean JCT against offered load</h2>", embedded_image(image)]
    groups: dict[tuple, dict[str, dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["truth"], r["scale"], r["kind"], r["load"]), {})[r["policy"]] = r
    for (truth, scale, kind, load), policies in groups.items():
        what = f"offered load {load}" if kind == "stream" else "batch (work-bound)"
        parts += [f"<h2>{html.escape(truth)} truth, interference x{scale}, {what}</h2>", summary_table(policies)]
    parts.append("</body></html>")
    path.write_text("".join(parts))


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["truth"], r["scale"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (truth, scale) in zip(axes[0], panels):
        ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)  # 13+ policies: no colour twice
        for label in dict.fromkeys(r["policy"] for r in rows):
            pts = sorted((r["load"], r["mean_jct_s"] / 3600) for r in rows if r["truth"] == truth
                         and r["scale"] == scale and r["kind"] == "stream" and r["policy"] == label)
            if pts:
                ax.plot(*zip(*pts), marker="o", lw=1, label=label, ls="--" if "solo" in label else "-")
        ax.set_title(f"{truth}, interference x{scale}", fontsize=9)
        ax.set_xlabel("offered load")
        ax.set_ylabel("mean JCT (h)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    geng_model = train_geng_model() if GAVEL.is_file() else None
    cells = [{"name": f"{truth}-x{scale}-{kind}-{load}-s{seed}", "truth": truth, "scale": scale, "kind": kind,
              "load": load, "seed": seed, "jobs": args.jobs, "geng_model": geng_model}
             for truth, scale in worlds(GAVEL.is_file()) for kind, load in WORKLOADS for seed in range(args.seeds)]
    began = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = []
        for i, result in enumerate(pool.map(run_cell, cells), start=1):
            results.append(result)
            print(f"[{i}/{len(cells)}] {result['name']} ({result['wall_s']:.0f} s)", file=sys.stderr, flush=True)
    rows = aggregate(results)
    OUT.mkdir(parents=True, exist_ok=True)
    targets = goals(results)
    (OUT / "sweep.json").write_text(json.dumps({"command": " ".join(sys.argv), "policies": POLICIES,
                                                "options": OPTIONS, "cells": results, "aggregate": rows,
                                                "goals": targets,
                                                "wall_s": time.perf_counter() - began}, indent=1) + "\n")
    (OUT / "sweep.md").write_text(markdown(rows) + "\n" + goals_markdown(targets) + below_bound_markdown(results))
    plot(rows, OUT / "sweep_jct.png")
    report(rows, targets, {"command": " ".join(sys.argv), "cells": len(results), "wall_s": time.perf_counter() - began},
           OUT / "sweep_report.html", OUT / "sweep_jct.png")
    print(f"wrote {OUT / 'sweep.json'}, sweep.md, sweep_jct.png in {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
