"""``report.html``: one self-contained page per run (tables, plots embedded, the manifest) for a browser.

No template engine and no external files: the PNG plots are embedded as data URIs, so the page can be
mailed or attached to a review as it is.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# (summary key, header, scale, format): scale 1/3600 turns seconds into hours, 100 fractions into percent.
COLUMNS: tuple[tuple[str, str, float, str], ...] = (
    ("makespan_s", "makespan (h)", 1 / 3600, "{:.2f}"),
    ("mean_jct_s", "mean JCT (h)", 1 / 3600, "{:.2f}"),
    ("median_jct_s", "median JCT (h)", 1 / 3600, "{:.2f}"),
    ("p95_jct_s", "p95 JCT (h)", 1 / 3600, "{:.2f}"),
    ("mean_wait_s", "mean wait (h)", 1 / 3600, "{:.2f}"),
    ("p95_wait_s", "p95 wait (h)", 1 / 3600, "{:.2f}"),
    ("goodput", "goodput (%)", 100, "{:.1f}"),
    ("gpu_util_mean", "GPU util (%)", 100, "{:.1f}"),
    ("gpu_busy_mean", "GPU busy (%)", 100, "{:.1f}"),
    ("gpu_busy_allocated_mean", "busy per allocated GPU (%)", 100, "{:.1f}"),
    ("colocated_share", "co-located (%)", 100, "{:.1f}"),
    ("mean_slowdown", "mean slowdown", 1, "{:.3f}"),
    ("p95_slowdown", "p95 slowdown", 1, "{:.3f}"),
    ("oom_failures", "OOM starts", 1, "{:.0f}"),
    ("preemptions", "preemptions", 1, "{:.0f}"),
    ("jobs_failed", "failed", 1, "{:.0f}"),
    ("jobs_rejected", "rejected", 1, "{:.0f}"),
)
BOUNDS = {"makespan_s": "makespan_lower_bound_s", "mean_jct_s": "mean_jct_lower_bound_s"}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.bound td { font-style: italic; background: #f4f4f4; }
td.best { font-weight: bold; background: #e8f4e8; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
pre { background: #f7f7f7; padding: 1em; overflow-x: auto; font-size: 0.8em; }
.note { color: #555; font-size: 0.9em; }
"""
LOWER_IS_BETTER = {"makespan_s", "mean_jct_s", "median_jct_s", "p95_jct_s", "mean_wait_s", "p95_wait_s",
                   "mean_slowdown", "p95_slowdown", "oom_failures", "jobs_failed"}


def _cell(value: Any, scale: float, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(float(value) * scale)


def summary_table(policies: Mapping[str, Mapping[str, Any]]) -> str:
    """The comparison table as HTML; the best value of each column is highlighted, the lower bound is a row."""
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h, _, _ in COLUMNS)
    best: dict[str, float] = {}
    for key, *_ in COLUMNS:
        values = [float(m[key]) for m in policies.values() if isinstance(m.get(key), (int, float))
                  and not math.isnan(float(m[key]))]
        if values and key in LOWER_IS_BETTER | {"goodput"}:
            best[key] = min(values) if key in LOWER_IS_BETTER else max(values)
    rows = []
    for name, metrics in policies.items():
        cells = []
        for key, _, scale, fmt in COLUMNS:
            value = metrics.get(key)
            mark = ' class="best"' if key in best and value is not None and float(value) == best[key] else ""
            cells.append(f"<td{mark}>{_cell(value, scale, fmt)}</td>")
        rows.append(f"<tr><td>{html.escape(name)}</td>{''.join(cells)}</tr>")
    first = next(iter(policies.values()), {})
    if any(b in first for b in BOUNDS.values()):
        cells = "".join(f"<td>{_cell(first.get(BOUNDS.get(k, '')), s, f)}</td>" for k, _, s, f in COLUMNS)
        rows.append(f'<tr class="bound"><td>lower bound</td>{cells}</tr>')
    return f"<table><tr><th>policy</th>{head}</tr>{''.join(rows)}</table>"


def embedded_image(path: Path) -> str:
    """A PNG as an HTML figure with the image inlined (data URI), so the page stays self-contained."""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}"></figure>'


def write_report(path: Path, title: str, summary: Mapping[str, Any], manifest: Mapping[str, Any],
                 images: Sequence[Path], notes: Sequence[str] = ()) -> Path:
    """Write ``path`` (report.html): title, comparison table, plots, notes and the full manifest."""
    policies = summary.get("policies", {})
    described = manifest.get("policies", {})
    descriptions = "".join(
        f"<li><b>{html.escape(name)}</b>: <code>{html.escape(json.dumps(desc, default=str))}</code></li>"
        for name, desc in described.items())
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='note'>{summary.get('num_jobs', '?')} jobs on {summary.get('num_gpus', '?')} GPUs; truth "
        f"<b>{html.escape(str(manifest.get('truth', {}).get('name', '?')))}</b>, predictor "
        f"<b>{html.escape(str(manifest.get('predictor', {}).get('name', '?')))}</b>; created "
        f"{html.escape(str(manifest.get('created', '')))}. All metrics are true values from the simulated world "
        f"(docs/metrics.md); best value per column highlighted.</p>",
        "<h2>Comparison</h2>", summary_table(policies),
        *(f"<p class='note'>{html.escape(n)}</p>" for n in notes),
        "<h2>Plots</h2>", *(embedded_image(p) for p in images if p.exists()),
        "<h2>Policies</h2>", f"<ul>{descriptions}</ul>",
        "<h2>Manifest</h2><details><summary>what produced this run</summary>",
        f"<pre>{html.escape(json.dumps(manifest, indent=2, default=str))}</pre></details>",
        "</body></html>",
    ]
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
