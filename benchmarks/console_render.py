"""Console benchmark: page weight, time to first render and update period of the web console at scale.

A real ``horus serve --no-agent`` on 127.0.0.1 (state on disk) gets ``--agents`` agents of 8 fake GPUs each
(registered over the API; a long lease keeps them alive without heartbeats) and ``--jobs`` submissions over
HTTP; the policy starts what fits (running on the map), the rest waits (the queue page). Then headless
Chromium (the system ``chromium``, driven by Playwright) signs in and loads each page ``--repeats`` times:

* first render: navigation start to the first completed render of the page's data (``body[data-rendered]``);
* update: time between two consecutive re-renders while the page stays open (the poll period plus the
  fetch and render; goal <= 2 s);
* page weight: bytes of every response loaded up to the first render (HTML, script, style, JSON).

    python benchmarks/console_render.py [--agents 125] [--jobs 5000] [--policy horus]

Writes benchmarks/results/console_render.json (goal: first render <= 1 s, updates <= 2 s at 1,000 GPUs and
5,000 jobs).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
PAGES = {"cluster": "/", "queue": "/queue", "ledger": "/ledger"}


def fill(server: object, agents: int, jobs: int, threads: int = 4) -> dict:
    """Register the agents and submit the jobs; returns counts once the scheduler has settled."""
    from service_helpers import wait_for

    admin = server.client(timeout_s=120.0)  # type: ignore[attr-defined]
    for a in range(agents):
        gpus = [{"index": i, "uuid": f"GPU-{a}-{i}", "name": "fake V100", "memory_mib": 16384, "type": "V100",
                 "fake": True} for i in range(8)]
        response = admin.post("/v1/agents", json={"name": f"node{a:04d}", "hostname": f"node{a:04d}", "gpus": gpus})
        response.raise_for_status()
    mix = [("a3c", 32), ("resnet50", 64), ("resnet18_cifar", 32), ("lstm_lm", 8), ("ncf", 32), ("transformer", 64)]
    errors: list[str] = []

    def submit(part: int) -> None:
        client = server.client(timeout_s=120.0)  # type: ignore[attr-defined]
        for i in range(part, jobs, threads):
            model, batch = mix[i % len(mix)]
            r = client.post("/v1/jobs", json={"command": ["sleep", "3600"], "model": model, "batch_size": batch,
                                              "name": f"bench-{i}", "iterations": 1000 + i})
            if r.status_code != 201:
                errors.append(r.text[:200])

    started = time.perf_counter()
    workers = [threading.Thread(target=submit, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    submit_s = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} submissions failed; first: {errors[0]}")

    def settled() -> dict | None:
        counts = admin.get("/v1/jobs", params={"limit": 1}).json()["counts"]
        return counts if sum(counts.values()) == jobs and counts.get("running", 0) > 0 else None

    counts = wait_for(settled, 600.0, 0.5, "every submission stored and some started")
    time.sleep(3.0)
    return {"submit_s": round(submit_s, 2), "counts": admin.get("/v1/jobs", params={"limit": 1}).json()["counts"]}


def measure(url: str, token: str, repeats: int) -> dict:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium on PATH (Debian: apt-get install chromium)")
    out: dict[str, dict] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1600, "height": 1000})
        page = context.new_page()
        page.goto(url + "/login")
        page.fill("#token", token)
        page.click("#sign-in")
        page.wait_for_url(url + "/")
        for name, path in PAGES.items():
            firsts, weights, updates = [], [], []
            for _ in range(repeats):
                sizes: list[int] = []

                def count(response: object, sizes: list[int] = sizes) -> None:
                    try:
                        sizes.append(len(response.body()))  # type: ignore[attr-defined]
                    except Exception:  # noqa: BLE001 - a redirect or aborted response has no body
                        pass

                page.on("response", count)
                start = time.perf_counter()
                page.goto(url + path)
                page.wait_for_selector("body[data-rendered='1']", timeout=60_000)
                firsts.append(time.perf_counter() - start)
                page.remove_listener("response", count)
                page.wait_for_selector("body[data-rendered='2']", timeout=60_000)
                mark = time.perf_counter()
                page.wait_for_selector("body[data-rendered='3']", timeout=60_000)
                updates.append(time.perf_counter() - mark)
                weights.append(sum(sizes))
            out[name] = {"first_render_s": {"median": round(statistics.median(firsts), 3),
                                            "max": round(max(firsts), 3)},
                         "update_period_s": {"median": round(statistics.median(updates), 3),
                                             "max": round(max(updates), 3)},
                         "page_weight_bytes": {"median": int(statistics.median(weights))},
                         "dom_nodes": page.evaluate("document.getElementsByTagName('*').length")}
            if name == "queue" and page.locator("#waiting-pager").count():  # the next page of waiting jobs
                page.click("#waiting-pager button:nth-of-type(2)")
                page.wait_for_selector("#waiting tbody tr:first-child td:first-child:text-is('501')", timeout=10_000)
                out[name]["pager"] = page.locator("#waiting-pager").inner_text()
        browser.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=125, help="agents of 8 fake GPUs (default 125: 1,000 GPUs)")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--policy", default="horus")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "console_render.json")
    args = parser.parse_args()
    from service_helpers import Server

    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "state", "--no-agent", "--lease-s", "86000", "--policy", args.policy,
                        fake_gpus=0).start(timeout_s=60)
        try:
            filled = fill(server, args.agents, args.jobs)
            pages = measure(server.url, server.token, args.repeats)
        finally:
            server.stop()
    result = {"benchmark": "console_render", "command": " ".join(["python", *sys.argv]),
              "gpus": args.agents * 8, "jobs": args.jobs, "policy": args.policy, **filled, "pages": pages,
              "goal": {"first_render_s": 1.0, "update_period_s": 2.0},
              "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
