"""The evaluation sweep: world x workload x seed x what the policies know, every comparison with its ablation and bound.

Workloads come from ``horus trace generate`` (Poisson streams at offered loads 0.6 / 1.0 / 1.5 / 2.5 and a work-bound
batch; 400 jobs each) on the embedded 64-GPU cluster. Worlds, chosen so that co-locating can lose as well as gain:
the calibrated ``parametric`` truth at interference x1 and x2 and, when ../shared/data is present, Gavel's measured
V100 pairs (``gavel``) as they are and with a seeded 30 % of type pairs losing (``--losing-pairs 0.3``: such a set
delivers 0.6-0.95 of one GPU). Every world runs with the realistic defaults of ``horus simulate`` (``WORLD``): job
sizes as the user states them (``estimate``: early termination and misjudgement, ``horus.sim.sizes``), noisy
telemetry with warm-up and report period, and true peak memory deviating from the predictor's formula, so OOM is
possible.

Three information settings, each with the policies that make sense there (``GROUPS``): ``estimate`` (every policy
reads the same stated lengths), ``none`` (no length at all: only size-free policies; ``horus-las`` against
``tiresias``) and ``exact`` (the clairvoyant length: what perfect knowledge would buy SJF and Horus). Labels of the
last two carry ``[none]`` / ``[exact]``. ``oracle-truth`` reads the truth (true lengths included). geng's IASP model
is trained on Gavel's P100 pairs, never on the pairs a truth replays. Every cell reports the valid lower bounds and
is checked against them; the goal table of issue 23 is computed from the cells.

    python experiments/sweep.py [--seeds 3] [--jobs 400] [--workers 2]

Writes experiments/results/sweep.json (every cell's summaries), sweep.md (one table per world and workload: mean over
seeds, each policy's change against FIFO-exclusive and against its own ablation), sweep_jct.png (mean JCT vs offered
load) and sweep_report.html (all of it on one self-contained page). Per-cell outputs go to results/sweep/ (not
committed). With the default ``--out``, the README's sweep tables are rewritten from it (``readme_tables.py``).
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
GROUPS: dict[str, list[str]] = {
    "estimate": ["fifo-exclusive", "sjf-exclusive", "tiresias", "horus", "horus-solo=horus", "horus-las",
                 "horus-las-solo=horus-las", "horus-fifo", "horus-paper", "gandiva", "gandiva-greedy", "geng",
                 "oracle-truth"],
    "none": ["fifo-exclusive", "tiresias", "horus-las", "horus-las-solo=horus-las", "gandiva"],
    "exact": ["sjf-exclusive", "horus", "horus-solo=horus"],
}
POLICIES = [label if info == "estimate" else f"{label.partition('=')[0]} [{info}]"
            for info, labels in GROUPS.items() for label in labels]
OPTIONS: dict[str, dict[str, Any]] = {"horus-solo": {"colocate": False}, "horus-las-solo": {"colocate": False}}
ABLATION = {"horus": "horus-solo", "horus-las": "horus-las-solo", "horus [exact]": "horus-solo [exact]",
            "horus-las [none]": "horus-las-solo [none]"}
SATURATED = (("stream", 2.5), ("batch", 1.0))
WORKLOADS = [("stream", 0.6), ("stream", 1.0), ("stream", 1.5), ("stream", 2.5), ("batch", 1.0)]
WORLD: dict[str, Any] = {"telemetry": "noisy"}  # SimConfig options besides sizes (the CLI's defaults; seeded per cell)
METRICS = ("makespan_s", "mean_jct_s", "median_jct_s", "p95_jct_s", "mean_wait_s", "p95_wait_s", "goodput",
           "gpu_busy_mean", "gpu_busy_allocated_mean", "gpu_h_per_job", "colocated_share", "mean_slowdown",
           "p95_slowdown", "max_stretch", "oom_failures", "oom_restarts", "oom_lost_job_h", "preemptions", "jobs_failed",
           "makespan_lower_bound_s", "mean_jct_lower_bound_s", "makespan_exclusive_bound_s",
           "mean_jct_exclusive_bound_s", "makespan_job_term_s")


def worlds(with_gavel: bool) -> list[tuple[str, float, float]]:
    """(truth, interference scale, losing-pair share) of every world."""
    out = [("parametric", 1.0, 0.0), ("parametric", 2.0, 0.0)]
    return out + [("gavel", 1.0, 0.0), ("gavel", 1.0, 0.3)] if with_gavel else out


def world_name(truth: str, scale: float, losing: float) -> str:
    return f"{truth}" + (f"+losing{losing:g}" if losing else "")


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


def build_world(cell: dict[str, Any]) -> Any:
    """The cell's truth: the named model with its memory deviated, its interference scale and losing pairs
    (``horus simulate``'s options and defaults)."""
    from horus.plugins import load_all
    from horus.truth.base import TRUTH_MODELS
    from horus.truth.losing_pairs import LosingPairs
    from horus.truth.memory_deviation import MemoryDeviation
    from horus.truth.scaled import ScaledInterference

    load_all("horus.truth")
    truth = (TRUTH_MODELS.create("gavel", path=GAVEL, gpus=["v100"]) if cell["truth"] == "gavel"
             else TRUTH_MODELS.create("parametric", seed=cell["seed"], memory_overhead=False))
    truth = MemoryDeviation(truth, seed=cell["seed"])  # true memory off the predictor's formula (docs/truth.md)
    if cell["scale"] != 1.0:
        truth = ScaledInterference(truth, cell["scale"])
    if cell["losing"]:
        truth = LosingPairs(truth, cell["losing"], seed=cell["seed"])
    return truth


def run_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """One (world, workload, seed): generate the trace, simulate every group's policies, return the summaries."""
    from horus.clusterspec import load_cluster
    from horus.predict.analytic import AnalyticPredictor
    from horus.sim.engine import SimConfig
    from horus.sim.metrics import below_bounds
    from horus.sim.runner import run_comparison
    from horus.traces import load_trace, materialize
    from horus.traces.generate import WorkloadSpec, generate_workload, write_trace
    from horus.traces.sampler import SAMPLERS

    folder = ROOT / "results" / "sweep" / cell["name"]
    folder.mkdir(parents=True, exist_ok=True)
    cluster = load_cluster(ROOT / "src" / "horus" / "data" / "default_cluster.yaml")
    spec = WorkloadSpec(kind=cell["kind"], num_jobs=cell["jobs"], load=cell["load"], cluster_gpus=cluster.num_gpus,
                        seed=cell["seed"])
    rows, workload = generate_workload(spec)
    trace_path = folder / "trace.csv"
    write_trace(trace_path, rows, spec, workload)
    truth = build_world(cell)
    jobs = materialize(load_trace(trace_path, "horus"), truth, SAMPLERS.create("by-size-duration", seed=cell["seed"]),
                       cluster.gpus[0].gpu_type, seed=cell["seed"])
    began = time.perf_counter()
    options = dict(OPTIONS)
    if cell.get("geng_model"):
        options["geng"] = {"model_dir": cell["geng_model"]}
    policies: dict[str, dict[str, Any]] = {}
    for info, labels in GROUPS.items():
        if not cell.get("geng_model"):
            labels = [label for label in labels if label != "geng"]
        config = SimConfig(sizes=info, sizes_seed=cell["seed"], telemetry_options={"seed": cell["seed"]}, **WORLD)
        summary = run_comparison(jobs, cluster, labels, truth, AnalyticPredictor(), config, folder / info,
                                 {"trace": {"path": str(trace_path), "generated": workload}, "seed": cell["seed"]},
                                 policy_options=options)
        for label, values in summary["policies"].items():
            policies[label if info == "estimate" else f"{label} [{info}]"] = values
    below = {p: lines for p, v in policies.items() if (lines := below_bounds(v))}
    return {**cell, "workload": workload, "wall_s": time.perf_counter() - began, "below_lower_bound": below,
            "policies": {p: {m: v.get(m) for m in METRICS} for p, v in policies.items()}}


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
        groups.setdefault((cell["world"], cell["scale"], cell["kind"], cell["load"]), []).append(cell)
    rows = []
    for (world, scale, kind, load), members in sorted(groups.items()):
        pinned = all(is_pinned(c) for c in members)
        for label in members[0]["policies"]:
            values = {m: [c["policies"][label].get(m) for c in members] for m in METRICS}
            row: dict[str, Any] = {"truth": world, "scale": scale, "kind": kind, "load": load, "policy": label,
                                   "seeds": len(members), "makespan_pinned": pinned}
            for m, vs in values.items():
                arr = np.array([np.nan if v is None else v for v in vs], dtype=float)
                row[m] = float(np.nanmean(arr)) if np.isfinite(arr).any() else None
                row[f"{m}_std"] = float(np.nanstd(arr)) if np.isfinite(arr).any() else None
            fifo = "fifo-exclusive [none]" if label.endswith("[none]") else "fifo-exclusive"
            for ref_name, ref in (("vs_fifo", fifo), ("vs_ablation", ABLATION.get(label))):
                if ref is None or ref not in members[0]["policies"]:
                    continue
                for m in ("makespan_s", "mean_jct_s", "p95_jct_s"):  # per-seed relative change, then the mean
                    changes = [c["policies"][label][m] / c["policies"][ref][m] - 1 for c in members]
                    row[f"{m}_{ref_name}"] = float(np.mean(changes))
            rows.append(row)
    return rows


def is_pinned(cell: dict[str, Any], tolerance: float = 0.03) -> bool:
    """Whether one long job pins the makespan: every policy's makespan within ``tolerance`` of the bound's per-job
    term (its arrival plus its own fastest run), so no schedule can move it."""
    values = [v for v in cell["policies"].values() if v.get("makespan_job_term_s")]
    return bool(values) and all(v["makespan_s"] <= v["makespan_job_term_s"] * (1 + tolerance) for v in values)


def relative(cells: list[dict[str, Any]], policy: str, ref: str, metric: str) -> float | None:
    """Mean over ``cells`` (seeds) of policy / ref - 1 on ``metric``; None if either is missing."""
    pairs = [(c["policies"].get(policy, {}).get(metric), c["policies"].get(ref, {}).get(metric)) for c in cells]
    changes = [a / b - 1 for a, b in pairs if a is not None and b]
    return float(np.mean(changes)) if changes and len(changes) == len(cells) else None


def total(cells: list[dict[str, Any]], policy: str, metric: str) -> float | None:
    values = [c["policies"].get(policy, {}).get(metric) for c in cells]
    return None if any(v is None for v in values) else float(sum(values))


def goals(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 23's targets per world, measured on these cells. Each entry: world, workload, target, bound, measured
    (mean per-seed change, or a count), met (bool)."""
    out: list[dict[str, Any]] = []
    below = sum(len(c.get("below_lower_bound", {})) for c in cells)
    out.append({"world": "every world", "workload": f"all {len(cells)} cells", "target":
                "runs below the valid lower bound", "bound": "= 0", "measured": float(below), "met": below == 0,
                "count": True})
    by_world: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        by_world.setdefault(f"{cell['world']} x{cell['scale']:g}", []).append(cell)
    for world, members in by_world.items():
        for kind, load in SATURATED:
            group = [c for c in members if c["kind"] == kind and c["load"] == load]
            if not group:
                continue
            checks = [("horus vs its ablation (horus-solo), mean JCT", "horus", "horus-solo", -0.10, "<= -10 %"),
                      ("horus vs gandiva, mean JCT", "horus", "gandiva", -0.10, "<= -10 %"),
                      ("horus-las vs tiresias, no sizes, mean JCT", "horus-las [none]", "tiresias [none]", -0.15,
                       "<= -15 %")]
            for target, policy, ref, limit, bound in checks:
                value = relative(group, policy, ref, "mean_jct_s")
                out.append({"world": world, "workload": f"{kind} {load}", "target": target, "bound": bound,
                            "measured": value, "met": None if value is None else bool(value <= limit)})
        worst = [(relative([c for c in members if (c["kind"], c["load"]) == (k, lo)], "horus", "horus-solo",
                           "mean_jct_s"), f"{k} {lo}") for k, lo in sorted({(c["kind"], c["load"]) for c in members})]
        worst = [w for w in worst if w[0] is not None]
        if worst:
            value, where = max(worst)
            out.append({"world": world, "workload": f"worst load ({where})",
                        "target": "horus vs its ablation at any load, mean JCT", "bound": "<= +3 %",
                        "measured": value, "met": value <= 0.03})
        ooms = total(members, "horus", "oom_restarts"), total(members, "gandiva", "oom_restarts")
        if None not in ooms:
            out.append({"world": world, "workload": "all loads and seeds", "target":
                        f"OOM restarts: horus {ooms[0]:.0f} vs gandiva {ooms[1]:.0f}", "bound": "horus <= gandiva",
                        "measured": ooms[0] - ooms[1], "met": ooms[0] <= ooms[1], "count": True})
    return out


def _value(entry: dict[str, Any]) -> str:
    if entry["measured"] is None:
        return "-"
    return f"{entry['measured']:+.0f}" if entry.get("count") else f"{100 * entry['measured']:+.1f} %"


def goals_markdown(entries: list[dict[str, Any]]) -> str:
    lines = [("## Goals of issue 23 (mean per-seed change; realistic information: stated sizes, noisy telemetry, "
              "deviating memory)"), "",
             "| world | workload | target | bound | measured | met |", "|---|---|---|---|---|---|"]
    for e in entries:
        met = "-" if e["met"] is None else ("yes" if e["met"] else "**no**")
        lines.append(f"| {e['world']} | {e['workload']} | {e['target']} | {e['bound']} | {_value(e)} | {met} |")
    return "\n".join(lines) + "\n"


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f} h"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# Sweep results (experiments/sweep.py)", "",
             "Mean over seeds; hours. Every policy reads the job lengths users state (`estimate`), except rows "
             "marked `[none]` (no length known) and `[exact]` (the true length); `oracle-truth` reads the truth. "
             "`vs FIFO` and `vs ablation` are mean per-seed relative changes of mean JCT (negative = better; `[none]` "
             "rows against `fifo-exclusive [none]`, which decides the same as `fifo-exclusive`); the ablation is the "
             "same policy with co-location off. `LB` = lower bound valid for every schedule (co-located ones "
             "included); `exclusive` = the bound of schedules that never share a GPU (docs/metrics.md). A workload "
             "is *pinned* when every policy's makespan is within 3 % of one job's own arrival plus fastest run.", ""]
    current = None
    for r in rows:
        key = (r["truth"], r["scale"], r["kind"], r["load"])
        if key != current:
            current = key
            load = f"offered load {r['load']}" if r["kind"] == "stream" else "batch (work-bound)"
            pinned = " — makespan pinned by one job" if r.get("makespan_pinned") else ""
            lines += ["", f"## {r['truth']} truth, interference x{r['scale']:g}, {load}{pinned}", "",
                      f"LB makespan {r['makespan_lower_bound_s'] / 3600:.2f} h (exclusive "
                      f"{_hours(r.get('makespan_exclusive_bound_s'))}), LB mean JCT "
                      f"{r['mean_jct_lower_bound_s'] / 3600:.2f} h (exclusive "
                      f"{_hours(r.get('mean_jct_exclusive_bound_s'))})", "",
                      "| policy | mean JCT h | p95 JCT h | mean wait h | GPU-h/job | busy/alloc % | co-located % | "
                      "OOM restarts | makespan h | JCT vs FIFO | JCT vs ablation |",
                      "|---|---|---|---|---|---|---|---|---|---|---|"]

        def pct(x: float | None) -> str:
            return "-" if x is None else f"{100 * x:+.1f} %"

        def num(x: float | None, fmt: str, scale: float = 1.0) -> str:
            return "-" if x is None else fmt.format(x * scale)

        lines.append(
            f"| {r['policy']} | {r['mean_jct_s'] / 3600:.2f} ± {r['mean_jct_s_std'] / 3600:.2f} | "
            f"{r['p95_jct_s'] / 3600:.2f} | {r['mean_wait_s'] / 3600:.2f} | {num(r.get('gpu_h_per_job'), '{:.2f}')} | "
            f"{num(r.get('gpu_busy_allocated_mean'), '{:.1f}', 100)} | {100 * r['colocated_share']:.0f} | "
            f"{num(r.get('oom_restarts'), '{:.1f}')} | {r['makespan_s'] / 3600:.2f} | "
            f"{pct(r.get('mean_jct_s_vs_fifo'))} | {pct(r.get('mean_jct_s_vs_ablation'))} |")
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
             "policy with co-location off; rows marked [none] / [exact] had no / the true job lengths, the others the "
             "lengths users state.</p>", "<h2>Goals of issue 23</h2><table><tr><th>world</th><th>workload</th>"
             "<th>target</th><th>bound</th><th>measured</th><th>met</th></tr>"]
    for e in targets:
        value = _value(e)
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
        pinned = " (makespan pinned by one job)" if next(iter(policies.values())).get("makespan_pinned") else ""
        parts += [f"<h2>{html.escape(truth)} truth, interference x{scale:g}, {what}{pinned}</h2>",
                  summary_table(policies)]
    parts.append("</body></html>")
    path.write_text("".join(parts))


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["truth"], r["scale"]) for r in rows})
    settings = (("stated sizes", lambda p: "[" not in p), ("no sizes", lambda p: p.endswith("[none]")))
    fig, axes = plt.subplots(len(settings), len(panels), figsize=(4.2 * len(panels), 3.4 * len(settings)),
                             squeeze=False)
    for row_axes, (setting, chosen) in zip(axes, settings):
        for ax, (truth, scale) in zip(row_axes, panels):
            ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)  # 13+ policies: no colour twice
            for label in dict.fromkeys(r["policy"] for r in rows if chosen(r["policy"])):
                pts = sorted((r["load"], r["mean_jct_s"] / 3600) for r in rows if r["truth"] == truth
                             and r["scale"] == scale and r["kind"] == "stream" and r["policy"] == label)
                if pts:
                    ax.plot(*zip(*pts), marker="o", lw=1, label=label, ls="--" if "solo" in label else "-")
            ax.set_title(f"{truth}, interference x{scale:g}; {setting}", fontsize=9)
            ax.set_xlabel("offered load")
            ax.set_ylabel("mean JCT (h)")
            ax.grid(alpha=0.3)
        row_axes[-1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, default=OUT, help="where the results go (default experiments/results)")
    args = parser.parse_args()
    out = args.out
    geng_model = train_geng_model() if GAVEL.is_file() else None
    cells = [{"name": f"{world_name(truth, scale, losing)}-x{scale}-{kind}-{load}-s{seed}",
              "world": world_name(truth, scale, losing), "truth": truth, "scale": scale, "losing": losing,
              "kind": kind, "load": load, "seed": seed, "jobs": args.jobs, "geng_model": geng_model}
             for truth, scale, losing in worlds(GAVEL.is_file()) for kind, load in WORKLOADS
             for seed in range(args.seeds)]
    began = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = []
        for i, result in enumerate(pool.map(run_cell, cells), start=1):
            results.append(result)
            print(f"[{i}/{len(cells)}] {result['name']} ({result['wall_s']:.0f} s)", file=sys.stderr, flush=True)
    rows = aggregate(results)
    out.mkdir(parents=True, exist_ok=True)
    targets = goals(results)
    (out / "sweep.json").write_text(json.dumps({"command": " ".join(sys.argv), "policies": POLICIES,
                                                "groups": GROUPS, "world": WORLD,
                                                "options": OPTIONS, "cells": results, "aggregate": rows,
                                                "goals": targets,
                                                "wall_s": time.perf_counter() - began}, indent=1) + "\n")
    (out / "sweep.md").write_text(markdown(rows) + "\n" + goals_markdown(targets) + below_bound_markdown(results))
    plot(rows, out / "sweep_jct.png")
    report(rows, targets, {"command": " ".join(sys.argv), "cells": len(results), "wall_s": time.perf_counter() - began},
           out / "sweep_report.html", out / "sweep_jct.png")
    print(f"wrote {out / 'sweep.json'}, sweep.md, sweep_jct.png in {time.perf_counter() - began:.0f} s")
    if out.resolve() == OUT.resolve():  # the committed sweep: the README's tables follow it
        from readme_tables import main as rewrite_readme
        rewrite_readme([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
