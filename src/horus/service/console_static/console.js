// Horus console: fetches the API's JSON with the session cookie and renders it. No framework; every text
// from the server goes through textContent (never innerHTML).
"use strict";
(function () {
  const body = document.body;
  const page = body.dataset.page;
  const pollMs = Number(body.dataset.poll || 1500);
  const app = document.getElementById("app");

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = String(v);
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  const svgNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) {
    const node = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    return node;
  }
  const pct = (x) => (x === null || x === undefined ? "-" : Math.round(x * 100) + "%");
  const mib = (x) => (x === null || x === undefined ? "-" : x >= 1024 ? (x / 1024).toFixed(1) + " GiB" : Math.round(x) + " MiB");
  const num = (x, d = 2) => (x === null || x === undefined ? "-" : Number(x).toFixed(d));
  const when = (t) => (t ? new Date(t * 1000).toLocaleTimeString() : "-");
  function dur(s) {
    if (s === null || s === undefined || !isFinite(s)) return "-";
    s = Math.max(0, s);
    if (s < 90) return Math.round(s) + " s";
    if (s < 5400) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }
  function jobLink(id, label) {
    return id === null || id === undefined ? el("span", { class: "muted", text: "another user's job" })
      : el("a", { href: "/jobs/" + encodeURIComponent(id), text: label || "job " + id });
  }
  function table(headers, rows, id) {
    const head = el("tr", {}, ...headers.map((h) => el("th", { text: h })));
    const tbody = el("tbody");
    const frag = document.createDocumentFragment();
    for (const r of rows) {
      const tr = document.createElement("tr");
      for (const c of r) {
        if (c instanceof Node && c.tagName === "TD") { tr.append(c); continue; }
        const td = document.createElement("td");
        if (c instanceof Node) td.append(c); else td.textContent = c === null || c === undefined ? "" : String(c);
        tr.append(td);
      }
      frag.append(tr);
    }
    tbody.append(frag);
    return el("div", { class: "table-wrap" }, el("table", { id: id }, el("thead", {}, head), tbody));
  }
  function bar(kind, pred, obs, cap) {
    const scale = (x) => (x === null || x === undefined ? 0 : Math.min(100, (100 * x) / cap));
    return el("div", { class: "bar " + kind, title: "predicted (top) / observed (bottom)" },
      el("span", { class: "pred", style: null, "data-w": scale(pred) }),
      el("span", { class: "obs", "data-w": scale(obs) }));
  }
  function sizeBars(root) {  // widths set through the CSSOM: allowed by the CSP (no inline style attributes)
    for (const s of root.querySelectorAll("[data-w]")) s.style.width = s.dataset.w + "%";
  }
  function progress(done, total) {
    if (!total) return el("span", { class: "muted", text: Math.round(done || 0) + " it" });
    const f = Math.max(0, Math.min(1, (done || 0) / total));
    return el("span", {}, el("span", { class: "progress", title: pct(f) }, el("span", { "data-w": 100 * f })), " " + pct(f));
  }
  function eta(job) {
    if (!job.iterations || !job.observed_rate) return "-";
    return dur((job.iterations - (job.iterations_done || 0)) / job.observed_rate);
  }

  async function api(path, opts) {
    const r = await fetch(path, Object.assign({ credentials: "same-origin", headers: { "X-Horus-Console": "1" } }, opts || {}));
    if (r.status === 401 || r.status === 403) { window.location.href = "/login"; throw new Error("signed out"); }
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }

  // a listing the server cut at its byte budget ("truncated") continues below job "next"
  async function jobs(query, limit) {
    let page = await api("/v1/jobs?" + query + "&limit=" + limit);
    let all = page.jobs;
    while (page.truncated && page.next && all.length < limit) {
      page = await api("/v1/jobs?" + query + "&limit=" + (limit - all.length) + "&before=" + page.next);
      all = all.concat(page.jobs);
    }
    return { jobs: all, counts: page.counts };
  }

  // ---- pages ----
  async function cluster() {
    const c = await api("/v1/cluster");
    const gpus = c.gpus;
    const shared = gpus.filter((g) => g.jobs.length > 1).length;
    const busy = gpus.filter((g) => g.jobs.length > 0).length;
    const out = [el("div", { class: "summary" },
      el("div", {}, el("b", { text: gpus.length }), "GPUs"), el("div", {}, el("b", { text: busy }), "busy"),
      el("div", { id: "shared-count" }, el("b", { text: shared }), "shared"),
      el("div", {}, el("b", { text: c.running }), "jobs running"), el("div", {}, el("b", { text: c.queued }), "queued"),
      el("div", {}, el("b", { text: c.policy }), "policy"))];
    const byAgent = new Map();
    for (const g of gpus) { if (!byAgent.has(g.agent)) byAgent.set(g.agent, []); byAgent.get(g.agent).push(g); }
    for (const [agent, list] of byAgent) {
      const grid = el("div", { class: "grid" });
      for (const g of list) grid.append(tile(g));
      out.push(el("section", { class: "agent" }, el("h2", { text: agent + " (" + list.length + " GPUs)" }), grid));
    }
    if (!gpus.length) out.push(el("p", { class: "muted", text: "No machines yet: start `horus serve --fake-gpus 4` or join one with `horus agent`." }));
    return out;
  }
  function tile(g) {
    const sharedSet = g.jobs.length > 1;
    const free = g.memory_mib - (g.observed_mem_mib !== null && g.observed_mem_mib !== undefined ? g.observed_mem_mib : g.predicted_mem_mib);
    const head = el("div", { class: "head" }, el("span", { text: "GPU " + g.local_index + " · " + g.type }),
      sharedSet ? el("span", { class: "badge shared", text: "shared ×" + g.jobs.length }) : null,
      g.mark ? el("span", { class: "badge mark", text: g.mark.kind === "oom" ? "OOM" : "unpacked", title: "at " + when(g.mark.time) }) : null);
    const list = el("ul");
    for (const j of g.jobs) list.append(el("li", {}, jobLink(j.id, (j.name || "job " + j.id)),
      " " + (j.model ? j.model + " · " : "") + "pred " + pct(j.predicted_util)));
    return el("div", { class: "tile" + (sharedSet ? " shared" : "") + (g.jobs.length ? "" : " idle"), "data-gpu": g.index },
      head, g.jobs.length ? list : el("div", { class: "muted", text: "idle" }),
      el("div", { class: "label", text: "util: pred " + pct(g.predicted_util) + " · obs " + pct(g.observed_util) }),
      bar("util", g.predicted_util, g.observed_util, 1),
      el("div", { class: "label", text: "memory: pred " + mib(g.predicted_mem_mib) + " · obs " + mib(g.observed_mem_mib) }),
      bar("mem", g.predicted_mem_mib, g.observed_mem_mib, g.memory_mib),
      el("div", { class: "label", text: "free " + mib(free) + " of " + mib(g.memory_mib) }));
  }

  const PAGE_ROWS = 500;  // rows per table page: 5,000 jobs stay one fetch, the DOM stays small
  const pages = { waiting: 0, running: 0 };
  function paged(name, rows, render) {
    const count = Math.max(1, Math.ceil(rows.length / PAGE_ROWS));
    pages[name] = Math.min(pages[name], count - 1);
    const first = pages[name] * PAGE_ROWS;
    const shown = rows.slice(first, first + PAGE_ROWS).map((r, i) => render(r, first + i));
    const move = (d) => () => { pages[name] = Math.max(0, Math.min(count - 1, pages[name] + d)); refresh(); };
    const pager = count > 1 ? el("p", { class: "pager", id: name + "-pager" },
      el("button", { onclick: move(-1), disabled: pages[name] === 0 }, "previous"),
      " rows " + (first + 1) + "-" + (first + shown.length) + " of " + rows.length + " ",
      el("button", { onclick: move(1), disabled: pages[name] === count - 1 }, "next")) : null;
    return [shown, pager];
  }

  async function queue() {
    const [live, done] = await Promise.all([
      jobs("state=queued&state=running&brief=true", 100000),
      jobs("state=finished&state=failed&state=cancelled&brief=true", 200)]);
    const waiting = live.jobs.filter((j) => j.state === "queued").sort((a, b) => a.queued_since - b.queued_since || a.id - b.id);
    const running = live.jobs.filter((j) => j.state === "running").sort((a, b) => a.id - b.id);
    const now = Date.now() / 1000;
    const [waitRows, waitPager] = paged("waiting", waiting, (j, i) => [i + 1, jobLink(j.id, j.name || "job " + j.id),
      j.owner || "-", j.model || "-", j.num_gpus, dur(now - j.queued_since), el("td", { class: "wrap", text: j.waiting ? j.waiting.message : "-" })]);
    const [runRows, runPager] = paged("running", running, (j) => [jobLink(j.id, j.name || "job " + j.id),
      j.owner || "-", j.model || "-", j.num_gpus, j.placement.map((p) => p.agent + ":" + p.gpu).join(" "),
      progress(j.iterations_done, j.iterations), num(j.observed_rate), eta(j)]);
    return [
      el("h2", { text: "Waiting (" + waiting.length + ")" }),
      el("p", { class: "muted", text: "Position is the order the jobs were queued in; the policy may start them in another order." }),
      waitPager, table(["#", "job", "owner", "model", "GPUs", "waiting", "why it waits"], waitRows, "waiting"),
      el("h2", { text: "Running (" + running.length + ")" }),
      runPager, table(["job", "owner", "model", "GPUs", "placement", "progress", "rate (it/s)", "ETA"], runRows, "running"),
      el("h2", { text: "Finished (newest " + done.jobs.length + ")" }),
      table(["job", "owner", "state", "ended", "took", "reason"], done.jobs.map((j) => [jobLink(j.id, j.name || "job " + j.id), j.owner || "-", j.state,
        when(j.ended), dur((j.ended || now) - j.submitted), el("td", { class: "wrap", text: j.reason || "" })]), "finished"),
    ];
  }

  async function job() {
    const id = body.dataset.job;
    const j = await api("/v1/jobs/" + encodeURIComponent(id));
    const pred = j.predicted || {};
    const predRate = pred.iter_time_s ? 1 / pred.iter_time_s : null;
    const last = (j.history || []).slice(-1)[0] || {};
    const out = [el("h1", { text: (j.name ? j.name + " " : "") + "(job " + j.id + ") — " + j.state })];
    if (j.state === "queued" || j.state === "running") {
      out.push(el("p", {}, el("button", { class: "danger", id: "cancel", onclick: async (ev) => {
        ev.target.disabled = true;
        if (!window.confirm("Cancel job " + j.id + "?")) { ev.target.disabled = false; return; }
        await api("/v1/jobs/" + encodeURIComponent(j.id) + "/cancel", { method: "POST" });
        refresh();
      } }, "Cancel job")));
    }
    out.push(el("dl", {},
      el("dt", { text: "command" }), el("dd", {}, el("code", { text: (j.command || []).join(" ") })),
      el("dt", { text: "owner" }), el("dd", { text: j.owner || "-" }),
      el("dt", { text: "model" }), el("dd", { text: (j.model || "-") + (j.model ? " (batch " + j.batch_size + ")" : "") }),
      el("dt", { text: "GPUs" }), el("dd", { text: j.num_gpus + (j.placement.length ? " on " + j.placement.map((p) => p.agent + ":" + p.gpu).join(" ") : "") }),
      el("dt", { text: "progress" }), el("dd", { id: "progress" }, progress(j.iterations_done, j.iterations), " · ETA " + eta(j)),
      el("dt", { text: "attempt" }), el("dd", { text: j.attempt + " (preemptions " + j.preemptions + ", OOM " + j.oom_failures + ", lost " + j.lost_runs + ")" }),
      j.waiting ? el("dt", { text: "why it waits" }) : null, j.waiting ? el("dd", { text: j.waiting.message }) : null,
      j.reason ? el("dt", { text: "reason" }) : null, j.reason ? el("dd", { id: "reason", text: j.reason }) : null));
    out.push(el("h2", { text: "Prediction vs observed" }),
      table(["", "predicted", "observed"], [
        ["rate (it/s, solo)", num(predRate), num(j.observed_rate)],
        ["GPU utilization", pct(pred.util), pct(last.gpu_util) + (last.gpu_util !== undefined ? " (whole GPU)" : "")],
        ["peak memory", mib(pred.mem_mib), mib(last.gpu_mem_mib) + (last.gpu_mem_mib !== undefined ? " (whole GPU)" : "")]], "prediction"));
    if ((j.history || []).length > 1) out.push(chart(j.history, predRate));
    const starts = (j.events || []).filter((e) => e.kind === "started");
    out.push(el("h2", { text: "Placement history" }),
      table(["attempt", "started", "placement"], starts.map((e) => [e.attempt, when(e.time), (e.placement || []).map((p) => p[0] + ":" + p[1]).join(" ")]), "placements"),
      el("h2", { text: "Events" }),
      table(["time", "event", "attempt", "detail"], (j.events || []).map((e) => [when(e.time), e.kind, e.attempt,
        el("td", { class: "wrap", text: Object.entries(e).filter(([k]) => !["time", "kind", "attempt", "log_tail"].includes(k)).map(([k, v]) => k + "=" + JSON.stringify(v)).join(" ") })]), "events"));
    const tail = j.log_tail || ((j.events || []).filter((e) => e.log_tail).slice(-1)[0] || {}).log_tail;
    out.push(el("h2", { text: "Log tail" }), tail ? el("pre", { id: "log", text: tail }) : el("p", { class: "muted", text: "No log yet (the agent sends the last lines when an attempt ends)." }));
    return out;
  }
  function chart(history, predRate) {
    const w = 640, h = 160, pad = 30;
    const t0 = history[0].time, t1 = history[history.length - 1].time;
    const ymax = Math.max(predRate || 0, ...history.map((p) => p.rate || 0)) * 1.1 || 1;
    const x = (t) => pad + ((w - 2 * pad) * (t - t0)) / Math.max(1e-9, t1 - t0);
    const y = (v) => h - pad + (-(h - 2 * pad) * v) / ymax;
    const s = svg("svg", { class: "chart", width: w, height: h, viewBox: "0 0 " + w + " " + h, id: "rate-chart" });
    const pts = history.filter((p) => p.rate > 0).map((p) => x(p.time).toFixed(1) + "," + y(p.rate).toFixed(1)).join(" ");
    s.append(svg("polyline", { points: pts, fill: "none", stroke: "#1f6feb", "stroke-width": 2 }));
    if (predRate) s.append(svg("line", { x1: pad, x2: w - pad, y1: y(predRate), y2: y(predRate), stroke: "#8aa4d6", "stroke-dasharray": "4 3" }));
    const label = svg("text", { x: pad, y: 14, "font-size": 11, fill: "#667085" });
    label.textContent = "observed rate (solid) vs predicted solo rate (dashed), it/s; max " + ymax.toFixed(2);
    s.append(label);
    return el("div", {}, s);
  }

  async function ledger() {
    const l = await api("/v1/colocations?limit=1000");
    return [el("h2", { text: "Co-location ledger (" + l.sets.length + " sets)" }),
      el("p", { class: "muted", text: "Combined normalized throughput: the sum over the set of each job's rate over its solo rate (1.0 = no gain; 2.0 = two jobs at full speed). Predicted by the summed-utilization rule; observed from telemetry." }),
      table(["set", "GPU", "jobs", "started", "for", "predicted", "observed", "samples", "outcome"], l.sets.map((s) => [s.id, s.agent + ":" + s.local_index + " " + s.gpu_type,
        el("td", {}, ...s.jobs.flatMap((id, i) => [i ? " + " : null, jobLink(id, String(id === null ? "other" : id))])),
        when(s.started), dur(s.duration_s), num(s.predicted), num(s.observed), s.samples, s.outcome]), "ledger")];
  }

  const render = { cluster, queue, job, ledger };
  let timer = null;
  async function refresh() {
    clearTimeout(timer);
    try {
      const nodes = await render[page]();
      const frag = document.createDocumentFragment();
      frag.append(...nodes);
      sizeBars(frag);
      app.replaceChildren(frag);
      document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
      body.dataset.rendered = String(Number(body.dataset.rendered || 0) + 1);
    } catch (err) {
      document.getElementById("updated").textContent = "update failed: " + err.message;
    }
    timer = setTimeout(refresh, pollMs);
  }
  for (const a of document.querySelectorAll("nav a")) if (a.dataset.nav === page) a.classList.add("active");
  api("/v1/whoami").then((w) => { document.getElementById("who").textContent = w.name + " (" + w.role + ")"; }).catch(() => {});
  refresh();
})();
