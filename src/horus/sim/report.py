"""``report.html``: one self-contained page per run (tables, charts, GPU timeline, the manifest) for a browser.

No template engine and no external files: the charts and the GPU timeline are inline SVG drawn by an inline
script from data embedded in the page (one policy highlighted at a time, chosen in a selector, so 14 policies stay
readable), and the PNG plots are embedded as data URIs, so the page can be mailed or attached to a review as it is.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from horus.sim.gpu_timeline import MAX_BARS, timeline_payload

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
    ("oom_restarts", "OOM restarts", 1, "{:.0f}"),
    ("oom_lost_job_h", "job-h lost to OOM", 1, "{:.2f}"),
    ("preemptions", "preemptions", 1, "{:.0f}"),
    ("jobs_failed", "failed", 1, "{:.0f}"),
    ("jobs_rejected", "rejected", 1, "{:.0f}"),
)
BOUNDS = {"makespan_s": "makespan_lower_bound_s", "mean_jct_s": "mean_jct_lower_bound_s"}  # any schedule
EXCLUSIVE_BOUNDS = {"makespan_s": "makespan_exclusive_bound_s", "mean_jct_s": "mean_jct_exclusive_bound_s"}
# (row label, metric -> summary key): the valid bounds, then those of schedules that never co-locate
BOUND_ROWS = (("lower bound", BOUNDS), ("exclusive bound (no sharing)", EXCLUSIVE_BOUNDS))
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1400px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.table-wrap { overflow-x: auto; max-width: 100%; margin: 0.5em 0; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th { white-space: normal; min-width: 4em; vertical-align: bottom; background: #fafafa; }
th:first-child, td:first-child { text-align: left; position: sticky; left: 0; background: #fff; white-space: nowrap; }
tr.bound td { font-style: italic; background: #f4f4f4; }
td.best { font-weight: bold; background: #e8f4e8; }
tr.chosen td { background: #fff6d5; } tr.chosen td.best { background: #dcefc8; }
tr[data-policy] { cursor: pointer; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
pre { background: #f7f7f7; padding: 1em; overflow-x: auto; font-size: 0.8em; }
.note { color: #555; font-size: 0.9em; }
.controls { position: sticky; top: 0; background: #fff; padding: 0.4em 0; border-bottom: 1px solid #eee; z-index: 2; }
.legend { display: flex; flex-wrap: wrap; gap: 0.3em 0.9em; font-size: 0.85em; margin: 0.4em 0; }
.legend label { cursor: pointer; white-space: nowrap; }
.legend .sw { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.3em; vertical-align: -0.1em; }
.legend label.chosen { font-weight: bold; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
.chart { flex: 1 1 420px; min-width: 320px; } .chart h3 { font-size: 0.95em; margin: 0.3em 0; }
.chart svg, .gantt svg { width: 100%; height: auto; display: block; }
.gantt { overflow-x: auto; } .gantt svg { min-width: 700px; }
svg text { font-size: 10px; fill: #444; }
"""
LOWER_IS_BETTER = {"makespan_s", "mean_jct_s", "median_jct_s", "p95_jct_s", "mean_wait_s", "p95_wait_s",
                   "mean_slowdown", "p95_slowdown", "oom_failures", "oom_restarts", "oom_lost_job_h", "jobs_failed"}


def _cell(value: Any, scale: float, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(float(value) * scale)


def summary_table(policies: Mapping[str, Mapping[str, Any]], chosen: str | None = None) -> str:
    """The comparison table as HTML in a horizontally scrolling box (``div.table-wrap``): the best value of each
    column is highlighted, the bounds are rows (``BOUND_ROWS``), each policy row carries ``data-policy`` (the page's
    selector highlights ``chosen``)."""
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
        attrs = f' data-policy="{html.escape(name)}"' + (' class="chosen"' if name == chosen else "")
        rows.append(f"<tr{attrs}><td>{html.escape(name)}</td>{''.join(cells)}</tr>")
    first = next(iter(policies.values()), {})
    for label, bounds in BOUND_ROWS:
        if any(b in first for b in bounds.values()):
            cells = "".join(f"<td>{_cell(first.get(bounds.get(k, '')), s, f)}</td>" for k, _, s, f in COLUMNS)
            rows.append(f'<tr class="bound"><td>{label}</td>{cells}</tr>')
    return f"<div class='table-wrap'><table><tr><th>policy</th>{head}</tr>{''.join(rows)}</table></div>"


# Per-queue table of a run with a tenancy (columns of SimResult.queues, horus.sim.queues; docs/tenancy.md).
QUEUE_COLUMNS: tuple[tuple[str, str, float, str], ...] = (
    ("jobs", "jobs", 1, "{:.0f}"),
    ("completed", "completed", 1, "{:.0f}"),
    ("mean_jct_h", "mean JCT (h)", 1, "{:.2f}"),
    ("p95_jct_h", "p95 JCT (h)", 1, "{:.2f}"),
    ("mean_wait_h", "mean wait (h)", 1, "{:.2f}"),
    ("p95_wait_h", "p95 wait (h)", 1, "{:.2f}"),
    ("guaranteed_gpus", "guaranteed GPUs", 1, "{:g}"),
    ("borrow_limit", "borrow limit (GPUs)", 1, "{:g}"),
    ("weight", "weight", 1, "{:g}"),
    ("used_gpu_h", "GPU-h used", 1, "{:.1f}"),
    ("guarantee_attainment", "guarantee attainment (%)", 100, "{:.1f}"),
    ("contended_share_ratio", "received / fair share while contended", 1, "{:.3f}"),
    ("over_limit_s", "over limit (s)", 1, "{:.0f}"),
    ("reclaimed", "reclaimed", 1, "{:.0f}"),
    ("priority_preempted", "priority-preempted", 1, "{:.0f}"),
    ("order_preempted", "preempted by own queue's order", 1, "{:.0f}"),
)
# Run-level tenancy figures (SimResult.summary, horus.sim.queues.tenancy_summary).
TENANCY_COLUMNS: tuple[tuple[str, str, float, str], ...] = (
    ("jain_index", "Jain's index while contended", 1, "{:.3f}"),
    ("contended_h", "contended (h)", 1, "{:.2f}"),
    ("min_guarantee_attainment", "worst guarantee attainment (%)", 100, "{:.1f}"),
    ("quota_violation_s", "quota violation (s)", 1, "{:.0f}"),
    ("reclaim_preemptions", "reclaim preemptions", 1, "{:.0f}"),
    ("priority_preemptions", "priority preemptions", 1, "{:.0f}"),
)


def queue_section(results: Mapping[str, Any]) -> str:
    """The tenancy section: run-level figures per policy, then one row per (policy, queue); '' without queues."""
    runs = {name: r for name, r in results.items() if len(getattr(r, "queues", ()))}
    if not runs:
        return ""

    def table(columns: Sequence[tuple[str, str, float, str]], rows: list[tuple[list[str], Mapping[str, Any]]],
              keys: Sequence[str]) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in keys) + "".join(
            f"<th>{html.escape(h)}</th>" for _, h, _, _ in columns)
        body = "".join("<tr>" + "".join(f"<td style='white-space:nowrap'>{html.escape(k)}</td>" for k in label)
                       + "".join(f"<td>{_cell(values.get(c), s, f)}</td>" for c, _, s, f in columns) + "</tr>"
                       for label, values in rows)
        return f"<div class='table-wrap'><table><tr>{head}</tr>{body}</table></div>"

    figures = table(TENANCY_COLUMNS, [([name], r.summary) for name, r in runs.items()], ["policy"])
    per_queue = table(QUEUE_COLUMNS, [([name, str(row["queue"])], row) for name, r in runs.items()
                                      for row in r.queues.to_dict("records")], ["policy", "queue"])
    return ("<h2>Queues (tenancy)</h2><p class='note'>Every policy ran under the same tenancy (manifest: "
            "<code>tenancy</code>); definitions in docs/tenancy.md. Guarantee attainment: guaranteed GPU time "
            "received / demanded; over limit: seconds a queue was charged beyond its guarantee plus borrowing "
            "limit (0 when quotas held).</p>" + figures + per_queue)


def embedded_image(path: Path) -> str:
    """A PNG as an HTML figure with the image inlined (data URI), so the page stays self-contained."""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}"></figure>'


# Distinct colours for up to 20 policies (a chosen one keeps its colour, the others turn grey).
PALETTE: tuple[str, ...] = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#393b79",
    "#637939", "#843c39", "#7b4173", "#000000", "#e6550d", "#31a354", "#756bb1", "#636363", "#b5cf6b", "#de9ed6",
)
MAX_SERIES_POINTS = 400  # per policy and chart: the page stays small whatever the run's length


def _downsample(xs: Sequence[float], ys: Sequence[float], limit: int = MAX_SERIES_POINTS) -> list[list[float]]:
    """At most ``limit`` evenly spaced points (first and last kept), rounded for a compact page."""
    n = len(xs)
    if n == 0:
        return []
    keep = range(n) if n <= limit else sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})
    return [[round(float(xs[i]), 4), round(float(ys[i]), 4)] for i in keep]


def _origin(results: Mapping[str, Any]) -> float:
    """The first submission of the run (every policy ran the same jobs): time 0 of every chart."""
    starts = [float(r.jobs["submit"].min()) for r in results.values() if len(r.jobs)]
    return min(starts) if starts else 0.0


def default_policy(policies: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The policy highlighted when the page opens: the lowest mean JCT (the first policy if none has one)."""
    scored = [(float(m["mean_jct_s"]), name) for name, m in policies.items()
              if isinstance(m.get("mean_jct_s"), (int, float)) and math.isfinite(float(m["mean_jct_s"]))]
    return min(scored)[1] if scored else next(iter(policies), None)


def report_data(results: Mapping[str, Any], gpu_names: Sequence[str], chosen: str | None,
                max_bars: int = MAX_BARS) -> dict[str, Any]:
    """What the page's script draws (JSON-ready): per policy the utilization and queue series, the JCT CDF and the
    GPU timeline (``horus.sim.gpu_timeline.timeline_payload``); GPU labels and the shared job list."""
    import numpy as np

    origin = _origin(results)
    names = list(results)
    job_index: dict[str, int] = {}
    series: dict[str, dict[str, list[list[float]]]] = {}
    gantt: dict[str, dict[str, Any]] = {}
    for name, result in results.items():
        tl = result.timeline
        hours = (tl["time"].to_numpy(float) - origin) / 3600.0 if len(tl) else np.array([])
        jct = np.sort(result.jobs["jct"].dropna().to_numpy(float)) / 3600.0
        frac = np.arange(1, len(jct) + 1) / max(1, len(jct))
        series[name] = {"util": _downsample(hours, tl["gpu_util"].to_numpy(float) * 100 if len(tl) else []),
                        "queue": _downsample(hours, tl["queue_len"].to_numpy(float) if len(tl) else []),
                        "cdf": _downsample(jct, frac)}
        placements = getattr(result, "placements", None)
        if placements is not None:
            gantt[name] = timeline_payload(placements, origin, job_index, max_bars)
    types = {}
    for result in results.values():
        types.update(zip(result.jobs["job_id"].astype(str), result.jobs["job_type"].astype(str)))
    jobs = [[job_id, types.get(job_id, "")] for job_id in sorted(job_index, key=job_index.__getitem__)]
    return {"policies": names, "colors": {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)},
            "chosen": chosen if chosen in results else (names[0] if names else None), "series": series,
            "gantt": gantt, "gpus": list(gpu_names), "jobs": jobs, "max_bars": max_bars}


def _json_for_script(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">`` (no ``</script>`` can close it early)."""
    return json.dumps(data, separators=(",", ":"), default=str).replace("<", "\\u003c")


def interactive_section(data: Mapping[str, Any]) -> str:
    """Policy selector, legend, the three comparison charts and the GPU timeline (inline SVG drawn by an inline
    script from the embedded data: no network, no library)."""
    options = "".join(f"<option{' selected' if n == data['chosen'] else ''}>{html.escape(n)}</option>"
                      for n in data["policies"])
    bars = sum(g["shown"] for g in data["gantt"].values())
    cut = [f"{n} ({g['shown']:,} of {g['total']:,}, up to {g['until_h']:.1f} h)"
           for n, g in data["gantt"].items() if g["cut"]]
    cap_note = (f"At most {data['max_bars']:,} residencies are drawn per policy; the timeline stops where the "
                f"first one left out begins: {'; '.join(cut)}." if cut
                else f"Every residency is drawn ({bars:,} over all policies).")
    return f"""
<div class="controls"><label>Policy: <select id="policy">{options}</select></label>
 <label><input type="checkbox" id="focus" checked> grey out the other policies</label>
 <span class="note">(click a line, a legend name or a table row to choose; the box hides a policy)</span>
 <div class="legend" id="legend"></div></div>
<noscript><p class="note">The charts and the GPU timeline are drawn by the page's script; the static plots are
below.</p></noscript>
<div class="charts">
 <div class="chart"><h3>Mean true GPU utilization (%) over time (h)</h3><div id="chart-util"></div></div>
 <div class="chart"><h3>Queued jobs over time (h)</h3><div id="chart-queue"></div></div>
 <div class="chart"><h3>Completed jobs (fraction) by JCT (h, log scale)</h3><div id="chart-cdf"></div></div>
</div>
<h2>GPU timeline</h2>
<p class="note">One row per GPU (nodes separated by lines), one bar per job residency, coloured by job (hover for
the job, its type and times); jobs sharing a GPU are stacked in its row, over a pink background with a
<span style="color:#b00020">&#9644;</span> red line below: the GPU is co-located (two or more jobs); <b>|</b> black tick: the policy preempted the job there (unpack, migrate or priority);
<span style="color:#b00020">&#10005;</span>: a start that failed out of memory. {html.escape(cap_note)}</p>
<p><label>from <input id="t0" type="number" step="any" min="0" size="6"> h</label>
 <label>to <input id="t1" type="number" step="any" min="0" size="6"> h</label>
 <button id="reset" type="button">whole run</button> <span id="gantt-info" class="note"></span></p>
<div class="gantt" id="gantt"></div>
<script type="application/json" id="horus-data">{_json_for_script(data)}</script>
<script>{SCRIPT}</script>"""


SCRIPT = r"""
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('horus-data').textContent);
  const NS = 'http://www.w3.org/2000/svg';
  const hidden = new Set();
  let chosen = D.chosen;
  const $ = (id) => document.getElementById(id);
  function el(tag, attrs, parent, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function ticks(lo, hi, n) {
    const span = (hi - lo) || 1, mag = Math.pow(10, Math.floor(Math.log10(span / n)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= n) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(10));
    return out;
  }
  function logTicks(lo, hi) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      const v = Math.pow(10, e);
      if (v >= lo && v <= hi) out.push(v);
    }
    return out.length ? out : [lo, hi];
  }
  const fmt = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : String(+v.toPrecision(3)));
  const visible = () => D.policies.filter((n) => !hidden.has(n));
  function lineChart(id, key, logx) {
    const box = $(id);
    box.innerHTML = '';
    const W = 560, H = 270, m = { l: 46, r: 10, t: 8, b: 30 };
    const names = visible();
    let x0 = Infinity, x1 = -Infinity, y0 = 0, y1 = -Infinity;
    for (const n of names) for (const [x, y] of D.series[n][key]) {
      if (logx && x <= 0) continue;
      x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
    }
    if (!isFinite(x0)) { box.textContent = 'no data'; return; }
    if (x1 === x0) x1 = x0 + 1;
    if (y1 <= y0) y1 = y0 + 1;
    const lx = (v) => (logx ? Math.log10(v) : v);
    const X = (v) => m.l + (lx(v) - lx(x0)) / (lx(x1) - lx(x0)) * (W - m.l - m.r);
    const Y = (v) => H - m.b - (v - y0) / (y1 - y0) * (H - m.t - m.b);
    const svg = el('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img' }, box);
    for (const v of ticks(y0, y1, 5)) {
      el('line', { x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v), stroke: '#eee' }, svg);
      el('text', { x: m.l - 4, y: Y(v) + 3, 'text-anchor': 'end' }, svg, fmt(v));
    }
    for (const v of (logx ? logTicks(x0, x1) : ticks(x0, x1, 7))) {
      el('line', { x1: X(v), x2: X(v), y1: m.t, y2: H - m.b, stroke: '#eee' }, svg);
      el('text', { x: X(v), y: H - m.b + 13, 'text-anchor': 'middle' }, svg, fmt(v));
    }
    el('rect', { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, fill: 'none', stroke: '#bbb' }, svg);
    const focus = $('focus').checked;
    const order = names.filter((n) => n !== chosen).concat(names.includes(chosen) ? [chosen] : []);
    for (const n of order) {
      let d = '';
      for (const [x, y] of D.series[n][key]) {
        if (logx && x <= 0) continue;
        const px = X(x).toFixed(1), py = Y(y).toFixed(1);
        d += d ? `H${px}V${py}` : `M${px},${py}`;
      }
      const me = n === chosen;
      const path = el('path', { d, fill: 'none', stroke: focus && !me ? '#cfcfcf' : D.colors[n],
        'stroke-width': me ? 2.4 : 1.1, 'stroke-linejoin': 'round' }, svg);
      path.style.cursor = 'pointer';
      path.addEventListener('click', () => choose(n));
      el('title', {}, path, n);
    }
  }
  function legend() {
    const box = $('legend');
    box.innerHTML = '';
    for (const n of D.policies) {
      const item = document.createElement('label');
      if (n === chosen) item.className = 'chosen';
      const box2 = document.createElement('input');
      box2.type = 'checkbox'; box2.checked = !hidden.has(n); box2.title = 'show / hide ' + n;
      box2.addEventListener('change', () => { if (box2.checked) hidden.delete(n); else hidden.add(n); charts(); });
      const name = document.createElement('span');
      name.innerHTML = `<span class="sw" style="background:${D.colors[n]}"></span>`;
      name.appendChild(document.createTextNode(n));
      name.addEventListener('click', (ev) => { ev.preventDefault(); choose(n); });
      item.append(box2, name);
      box.appendChild(item);
    }
  }
  function charts() {
    lineChart('chart-util', 'util', false);
    lineChart('chart-queue', 'queue', false);
    lineChart('chart-cdf', 'cdf', true);
  }
  function jobColor(i) { return `hsl(${(i * 137.508) % 360},42%,70%)`; }
  function gantt() {
    const box = $('gantt'), info = $('gantt-info');
    box.innerHTML = '';
    const G = D.gantt[chosen];
    if (!G) { info.textContent = `no placements recorded for ${chosen}`; return; }
    let t0 = parseFloat($('t0').value), t1 = parseFloat($('t1').value);
    if (!isFinite(t0) || t0 < 0) t0 = 0;
    if (!isFinite(t1) || t1 <= t0) t1 = Math.max(G.until_h, t0 + 1e-3);
    const n = D.gpus.length, rh = Math.max(3, Math.min(18, Math.floor(900 / Math.max(1, n))));
    const W = 1150, m = { l: 86, r: 10, t: 6, b: 28 }, H = m.t + m.b + n * rh;
    const X = (t) => m.l + (Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0) * (W - m.l - m.r);
    const svg = el('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img' }, box);
    const every = Math.ceil(10 / rh);
    let node = null;
    D.gpus.forEach((label, g) => {
      const y = m.t + g * rh, here = label.split('/')[0];
      if (here !== node) {
        if (node !== null) el('line', { x1: 0, x2: W - m.r, y1: y, y2: y, stroke: '#888' }, svg);
        node = here;
      }
      if (g % every === 0) el('text', { x: m.l - 4, y: y + Math.min(rh, 10) - 1, 'text-anchor': 'end' }, svg, label);
    });
    for (const v of ticks(t0, t1, 10)) {
      el('line', { x1: X(v), x2: X(v), y1: m.t, y2: H - m.b, stroke: '#eee' }, svg);
      el('text', { x: X(v), y: H - m.b + 13, 'text-anchor': 'middle' }, svg, fmt(v));
    }
    el('text', { x: W - m.r, y: H - 3, 'text-anchor': 'end' }, svg, 'hours since the first submission');
    const inside = (s, e) => e >= t0 && s <= t1;
    const outcome = ['', ', preempted here', ', still running at the end'];
    let drawn = 0, shared = 0;
    for (const [g, s, e, k] of G.coloc) {
      if (!inside(s, e)) continue;
      shared++;
      const x = X(s), w = Math.max(0.8, X(e) - x), y = m.t + g * rh;
      el('rect', { x, y, width: w, height: rh, fill: '#f6c9cf' }, svg);
      const r = el('rect', { class: 'coloc', x, y: y + rh - Math.max(1.5, rh * 0.18), width: w,
        height: Math.max(1.5, rh * 0.18), fill: '#b00020' }, svg);
      el('title', {}, r, `${k} jobs share ${D.gpus[g]}: ${s}-${e} h`);
    }
    for (const [g, s, e, j, o, lane] of G.bars) {
      if (!inside(s, e)) continue;
      drawn++;
      const lanes = G.lanes[g] || 1, lh = (rh - Math.max(1.5, rh * 0.18)) / lanes;
      const x = X(s), r = el('rect', { x, y: m.t + g * rh + lane * lh + 0.3, width: Math.max(0.6, X(e) - x),
        height: Math.max(0.8, lh - 0.6), fill: jobColor(j), stroke: lh > 5 ? '#fff' : 'none', 'stroke-width': 0.5 }, svg);
      const job = D.jobs[j] || ['?', ''];
      el('title', {}, r, `${job[0]} (${job[1]}) on ${D.gpus[g]}: ${s}-${e} h${outcome[o]}`);
    }
    for (const [g, t, kind] of G.marks) {
      if (t < t0 || t > t1) continue;
      const x = X(t), y = m.t + g * rh;
      const mark = kind === 'oom'
        ? el('path', { d: `M${x - 3},${y}L${x + 3},${y + rh}M${x + 3},${y}L${x - 3},${y + rh}`, stroke: '#b00020',
          'stroke-width': 1.5 }, svg)
        : el('line', { x1: x, x2: x, y1: y, y2: y + rh, stroke: '#000', 'stroke-width': 1.5 }, svg);
      el('title', {}, mark, (kind === 'oom' ? 'out-of-memory start' : 'preempted') + ` on ${D.gpus[g]} at ${t} h`);
    }
    info.textContent = `${chosen}: ${drawn} residencies and ${shared} co-located intervals in view` +
      (G.cut ? ` (only the first ${G.shown} of ${G.total} residencies are in the page)` : '');
  }
  function choose(n) {
    chosen = n;
    $('policy').value = n;
    document.querySelectorAll('tr[data-policy]').forEach((tr) => tr.classList.toggle('chosen', tr.dataset.policy === n));
    legend(); charts(); gantt();
  }
  $('policy').addEventListener('change', (ev) => choose(ev.target.value));
  $('focus').addEventListener('change', charts);
  $('t0').addEventListener('change', gantt);
  $('t1').addEventListener('change', gantt);
  $('reset').addEventListener('click', () => { $('t0').value = ''; $('t1').value = ''; gantt(); });
  document.querySelectorAll('tr[data-policy]').forEach((tr) => tr.addEventListener('click', () => choose(tr.dataset.policy)));
  if (chosen !== null) choose(chosen);
})();
"""


def write_report(path: Path, title: str, summary: Mapping[str, Any], manifest: Mapping[str, Any],
                 images: Sequence[Path], notes: Sequence[str] = (), results: Mapping[str, Any] | None = None,
                 gpu_names: Sequence[str] | None = None, max_bars: int = MAX_BARS) -> Path:
    """Write ``path`` (report.html): title, comparison table, interactive charts and GPU timeline (with the runs'
    ``results``), static plots, notes and the full manifest."""
    policies = summary.get("policies", {})
    described = manifest.get("policies", {})
    descriptions = "".join(
        f"<li><b>{html.escape(name)}</b>: <code>{html.escape(json.dumps(desc, default=str))}</code></li>"
        for name, desc in described.items())
    chosen = default_policy(policies)
    interactive: list[str] = []
    if results:
        names = list(gpu_names) if gpu_names is not None else [f"gpu {i}" for i in range(int(summary.get("num_gpus", 0)))]
        interactive = ["<h2>Over time</h2>", interactive_section(report_data(results, names, chosen, max_bars))]
    pngs = [embedded_image(p) for p in images if p.exists()]
    static = (["<h2>Static plots</h2><details><summary>the same curves as PNG images, every policy overlaid</summary>",
               *pngs, "</details>"] if interactive else ["<h2>Plots</h2>", *pngs])
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='note'>{summary.get('num_jobs', '?')} jobs on {summary.get('num_gpus', '?')} GPUs; truth "
        f"<b>{html.escape(str(manifest.get('truth', {}).get('name', '?')))}</b>, predictor "
        f"<b>{html.escape(str(manifest.get('predictor', {}).get('name', '?')))}</b>; created "
        f"{html.escape(str(manifest.get('created', '')))}. All metrics are true values from the simulated world "
        f"(docs/metrics.md); best value per column highlighted"
        + (f"; the page opens on <b>{html.escape(chosen)}</b> (lowest mean JCT)" if interactive and chosen else "")
        + ".</p>",
        "<h2>Comparison</h2>", summary_table(policies, chosen if interactive else None),
        *(f"<p class='note'>{html.escape(n)}</p>" for n in notes),
        queue_section(results or {}),
        *interactive,
        *static,
        "<h2>Policies</h2>", f"<ul>{descriptions}</ul>",
        "<h2>Manifest</h2><details><summary>what produced this run</summary>",
        f"<pre>{html.escape(json.dumps(manifest, indent=2, default=str))}</pre></details>",
        "</body></html>",
    ]
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
