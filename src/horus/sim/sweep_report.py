"""``sweep.html``: one self-contained comparison page for a sweep (``horus sweep`` or ``experiments/sweep.py``).

Reads either sweep's JSON (``load_sweep``), groups the per-policy means by world and workload, and writes one
table per group (policies as rows, the best value per column marked, mean +- std over seeds) and inline SVG
plots: a heat map of each policy's mean JCT and makespan relative to the best policy of each group, and one bar
chart per group. No JavaScript, no network, no matplotlib.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from horus.errors import HorusInputError
from horus.sim.report import BOUND_ROWS, BOUNDS, STYLE

# (key, header, scale, format, better): better is "low", "high" or "" (no best marked).
SWEEP_COLUMNS: tuple[tuple[str, str, float, str, str], ...] = (
    ("mean_jct_s", "mean JCT (h)", 1 / 3600, "{:.2f}", "low"),
    ("p95_jct_s", "p95 JCT (h)", 1 / 3600, "{:.2f}", "low"),
    ("makespan_s", "makespan (h)", 1 / 3600, "{:.2f}", "low"),
    ("mean_wait_s", "mean wait (h)", 1 / 3600, "{:.2f}", "low"),
    ("gpu_util_mean", "GPU util (%)", 100, "{:.1f}", "high"),
    ("gpu_busy_mean", "GPU busy (%)", 100, "{:.1f}", "high"),
    ("goodput", "goodput (%)", 100, "{:.1f}", "high"),
    ("colocated_share", "co-located (%)", 100, "{:.1f}", ""),
    ("preemptions", "preemptions", 1, "{:.0f}", ""),
    ("oom_failures", "OOM starts", 1, "{:.0f}", "low"),
    ("oom_restarts", "OOM restarts", 1, "{:.1f}", "low"),
    ("gpu_h_per_job", "GPU-h per job", 1, "{:.2f}", "low"),
    # cells run under a tenancy (horus.sim.queues.tenancy_summary); absent from tenancy-free sweeps
    ("jain_index", "Jain's index", 1, "{:.3f}", "high"),
    ("min_guarantee_attainment", "worst attainment (%)", 100, "{:.1f}", "high"),
    ("quota_violation_s", "quota violations (s)", 1, "{:.0f}", "low"),
    ("reclaim_preemptions", "reclaims", 1, "{:.0f}", ""),
)
Groups = dict[str, dict[str, dict[str, Any]]]  # group label -> policy -> row (means, "<key>_std", "seeds")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def _name(path: str, default: str) -> str:
    return default if path == "default" else Path(path).name


def group_rows(rows: Sequence[Mapping[str, Any]]) -> Groups:
    """Per-policy mean rows of either sweep, grouped by world and workload (in first-seen order).

    ``horus sweep`` rows carry ``trace`` and ``cluster``; ``experiments/sweep.py`` rows carry ``truth``, ``scale``,
    ``kind`` and ``load``."""
    groups: Groups = {}
    for row in rows:
        if "truth" in row and "kind" in row:
            workload = f"offered load {row['load']}" if row["kind"] == "stream" else f"{row['kind']} {row['load']}"
            label = f"{row['truth']} truth, interference x{row.get('scale', 1.0)}, {workload}"
        else:
            label = (f"{_name(str(row.get('trace', 'default')), 'default workload')} on "
                     f"{_name(str(row.get('cluster', 'default')), 'default cluster')}"
                     + (f", tenancy {Path(str(row['tenancy_source'])).name}" if row.get("tenancy_source") else ""))
        groups.setdefault(label, {})[str(row["policy"])] = dict(row)
    return groups


def load_sweep(path: Path) -> dict[str, Any]:
    """``{"groups", "command", "source"}`` from a sweep JSON, or a ``horus sweep`` output folder (its
    ``sweep.json``, else its ``summary`` table). HorusInputError when it is neither."""
    source = path
    if path.is_dir():
        if (path / "sweep.json").is_file():
            source = path / "sweep.json"
        else:
            table = next((p for p in (path / "summary.parquet", path / "summary.csv") if p.is_file()), None)
            if table is None:
                raise HorusInputError(str(path), "no sweep.json or summary.parquet/csv in this folder (a horus sweep "
                                                 "--out folder was expected)")
            import pandas as pd

            frame = pd.read_parquet(table) if table.suffix == ".parquet" else pd.read_csv(table)
            return {"groups": group_rows(frame.to_dict("records")), "command": "", "source": str(table)}
    from horus.validation import MAX_CONFIG_BYTES, read_input_bytes

    raw = read_input_bytes(source, "a sweep JSON or a horus sweep --out folder", MAX_CONFIG_BYTES)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise HorusInputError(str(source), f"not a sweep JSON ({exc})") from None
    rows = data.get("means", data.get("aggregate")) if isinstance(data, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "policy" in r for r in rows):
        raise HorusInputError(str(source), "expected a sweep JSON with 'means' (horus sweep) or 'aggregate' "
                                           "(experiments/sweep.py): a list of per-policy rows")
    command = data.get("command", "")
    return {"groups": group_rows(rows), "command": " ".join(command) if isinstance(command, list) else str(command),
            "source": str(source)}


def _best(policies: Mapping[str, Mapping[str, Any]], key: str, better: str) -> float | None:
    values = [v for v in (_number(m.get(key)) for m in policies.values()) if v is not None]
    if not values or not better:
        return None
    return min(values) if better == "low" else max(values)


def group_table(policies: Mapping[str, Mapping[str, Any]]) -> str:
    """One group's table: policies as rows, the columns any of them has, best per column marked (bold, green; all
    that print equal to it), ``+- std`` over seeds where there were several, the bounds as last rows (``BOUND_ROWS``)."""
    columns = [c for c in SWEEP_COLUMNS if any(_number(m.get(c[0])) is not None for m in policies.values())]
    best = {key: _best(policies, key, better) for key, _, _, _, better in columns}
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h, _, _, _ in columns)
    rows = []
    for name, metrics in policies.items():
        cells = []
        for key, _, scale, fmt, _ in columns:
            value = _number(metrics.get(key))
            if value is None:
                cells.append("<td>-</td>")
                continue
            std = _number(metrics.get(f"{key}_std"))
            spread = (f" <small>&plusmn; {fmt.format(std * scale)}</small>"
                      if std and int(metrics.get("seeds", 1) or 1) > 1 else "")
            shown = fmt.format(value * scale)
            mark = ' class="best"' if best[key] is not None and shown == fmt.format(best[key] * scale) else ""
            cells.append(f"<td{mark}>{shown}{spread}</td>")
        seeds = metrics.get("seeds", "")
        rows.append(f"<tr><td>{html.escape(name)}</td><td>{html.escape(str(seeds))}</td>{''.join(cells)}</tr>")
    first = next(iter(policies.values()), {})
    for label, bounds in BOUND_ROWS:
        if any(_number(first.get(b)) is not None for b in bounds.values()):
            cells = "".join(f"<td>{fmt.format(_number(first.get(bounds[k])) * s)}</td>"
                            if k in bounds and _number(first.get(bounds[k])) is not None else "<td>-</td>"
                            for k, _, s, fmt, _ in columns)
            rows.append(f'<tr class="bound"><td>{label}</td><td></td>{cells}</tr>')
    return (f"<div class='table-wrap'><table><tr><th>policy</th><th>seeds</th>{head}</tr>{''.join(rows)}"
            f"</table></div>")


def _ratio_colour(ratio: float) -> str:
    """Green at 1 (the best), through yellow at 1.25, to red from 1.5 on."""
    t = min(1.0, max(0.0, (ratio - 1.0) / 0.5))
    if t < 0.5:
        r, g = int(120 + 270 * t), 200
    else:
        r, g = 235, int(200 - 260 * (t - 0.5))
    return f"rgb({min(r, 235)},{g},110)"


def heatmap(groups: Groups, key: str, label: str) -> str:
    """SVG heat map, policies x groups (numbered as in the page's list of groups): ``key`` relative to the best
    policy of each group (1.00 = best)."""
    policies = list(dict.fromkeys(p for rows in groups.values() for p in rows))
    labels = list(groups)
    cw, rh, left, top = 44, 18, 150, 20
    width, height = left + cw * len(labels) + 10, top + rh * len(policies) + 10
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
             f'role="img" aria-label="{html.escape(label)}">')]
    for j, group in enumerate(labels):
        x = left + cw * j + cw / 2
        parts.append(f'<text x="{x:.0f}" y="{top - 6}" text-anchor="middle" font-size="10">{j + 1}'
                     f'<title>{html.escape(group)}</title></text>')
    for i, policy in enumerate(policies):
        y = top + rh * i
        parts.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end" font-size="11">{html.escape(policy)}</text>')
        for j, group in enumerate(labels):
            rows = groups[group]
            best = _best(rows, key, "low")
            value = _number(rows.get(policy, {}).get(key))
            x = left + cw * j
            if value is None or not best:
                parts.append(f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{rh - 2}" fill="#eee"/>')
                continue
            ratio = value / best
            parts.append(f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{rh - 2}" fill="{_ratio_colour(ratio)}">'
                         f'<title>{html.escape(policy)}, {html.escape(group)}: {value / 3600:.2f} h '
                         f'({ratio:.2f} x the best)</title></rect>'
                         f'<text x="{x + cw / 2 - 1}" y="{y + 12}" text-anchor="middle" font-size="10">'
                         f'{ratio:.2f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(policies: Mapping[str, Mapping[str, Any]], key: str = "mean_jct_s") -> str:
    """SVG horizontal bars of ``key`` (hours) per policy, +- std whiskers, the best in green, the lower bound
    dashed."""
    values = {p: _number(m.get(key)) for p, m in policies.items()}
    known = {p: v for p, v in values.items() if v is not None}
    if not known:
        return ""
    bound = _number(next(iter(policies.values())).get(BOUNDS.get(key, "")))
    top_value = max([v + (_number(policies[p].get(f"{key}_std")) or 0) for p, v in known.items()]
                    + ([bound] if bound else [])) or 1.0
    left, width, rh = 150, 360, 16
    height = rh * len(values) + 24
    scale = (width - 44) / top_value  # room for the value printed after the longest bar
    best = min(known.values())
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {left + width} {height}" '
             f'width="{left + width}" role="img" aria-label="{html.escape(key)} by policy">')]
    for i, (policy, value) in enumerate(values.items()):
        y = 4 + rh * i
        parts.append(f'<text x="{left - 6}" y="{y + 11}" text-anchor="end" font-size="11">{html.escape(policy)}</text>')
        if value is None:
            continue
        colour = "#4a9a4a" if value == best else "#8aa9c8"
        parts.append(f'<rect x="{left}" y="{y}" width="{value * scale:.1f}" height="{rh - 4}" fill="{colour}">'
                     f'<title>{html.escape(policy)}: {value / 3600:.2f} h</title></rect>')
        std = _number(policies[policy].get(f"{key}_std"))
        if std:
            x0, x1, ym = left + (value - std) * scale, left + (value + std) * scale, y + (rh - 4) / 2
            parts.append(f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{ym}" y2="{ym}" stroke="#333"/>')
        parts.append(f'<text x="{left + value * scale + 4:.1f}" y="{y + 10}" font-size="9">{value / 3600:.2f}</text>')
    if bound:
        x = left + bound * scale
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="2" y2="{height - 18}" stroke="#b00020" '
                     f'stroke-dasharray="4 3"><title>lower bound {bound / 3600:.2f} h</title></line>')
    parts.append(f'<text x="{left}" y="{height - 4}" font-size="10">{html.escape(key.replace("_s", ""))} (h)'
                 f'{"; dashed: lower bound" if bound else ""}</text></svg>')
    return "".join(parts)


SWEEP_STYLE = ".pair { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; } svg { max-width: 100%; }"


def sweep_html(data: Mapping[str, Any], title: str = "Horus sweep") -> str:
    """The page: the heat maps, then per group its table and bar chart."""
    groups: Groups = data["groups"]
    index = "".join(f"<li><a href='#g{i}'>{html.escape(g)}</a> ({len(rows)} policies)</li>"
                    for i, (g, rows) in enumerate(groups.items()))
    note = (f"{data.get('command') or ''} (from {data['source']}). Means over seeds (+- standard deviation where "
            "there were several) of true values from the simulated world (docs/metrics.md); best value per column "
            "marked; times in hours.")
    scale = ("Columns: the worlds and workloads numbered above. 1.00 = the best policy of that column; green to "
             "red = up to 1.5 x worse.")
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
             "<meta name='viewport' content='width=device-width, initial-scale=1'>",
             f"<title>{html.escape(title)}</title><style>{STYLE}{SWEEP_STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>", f"<p class='note'>{html.escape(note)}</p>",
             f"<h2>Worlds and workloads</h2><ol>{index}</ol>",
             "<h2>Each policy against the best of its group</h2>", f"<p class='note'>{scale}</p>",
             "<div class='pair'><div><h3>mean JCT</h3>", heatmap(groups, "mean_jct_s", "mean JCT relative to best"),
             "</div><div><h3>makespan</h3>", heatmap(groups, "makespan_s", "makespan relative to best"),
             "</div></div>"]
    for i, (group, policies) in enumerate(groups.items()):
        parts += [f"<h2 id='g{i}'>{i + 1}. {html.escape(group)}</h2>", group_table(policies),
                  f"<div class='pair'>{bar_chart(policies, 'mean_jct_s')}{bar_chart(policies, 'makespan_s')}</div>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def write_sweep_report(source: Path, out: Path | None = None) -> Path:
    """Write the page for the sweep at ``source`` (JSON or folder) to ``out`` (default: ``sweep.html`` next to
    the JSON, or in the folder); return its path."""
    data = load_sweep(source)
    if not data["groups"]:
        raise HorusInputError(str(source), "the sweep has no rows")
    target = out or (source if source.is_dir() else source.parent) / "sweep.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(sweep_html(data), encoding="utf-8")
    return target
