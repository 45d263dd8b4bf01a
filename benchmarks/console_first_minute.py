"""A newcomer's first minute, timed: `horus serve --fake-gpus N`, the example job submitted M times with
`horus submit`, then the console (headless system Chromium) until a GPU tile shows a shared set with predicted and
observed values.

    python benchmarks/console_first_minute.py [--fake-gpus 1] [--submissions 2]

Under the default policy jobs share a GPU only when that saves waiting: with 4 idle fake GPUs two jobs each get
their own, so the shared view needs more submissions than GPUs (e.g. --fake-gpus 4 --submissions 5).
Writes benchmarks/results/console_first_minute_<N>gpus_<M>jobs.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fake-gpus", type=int, default=1)
    parser.add_argument("--submissions", type=int, default=2)
    parser.add_argument("--model", default="a3c", help="model the submissions declare (default a3c: light enough "
                        "that two share a GPU; two resnet18_cifar, predicted 82 %% each, do not)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from service_helpers import Server, kill_job_processes

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        server = Server(Path(tmp) / "state", fake_gpus=args.fake_gpus).start(timeout_s=60)
        up = time.perf_counter() - t0
        env = {**os.environ, "HORUS_SERVER": server.url}
        try:
            for _ in range(args.submissions):
                subprocess.run([sys.executable, "-m", "horus.cli", "submit", "--token-file",
                                str(server.state_dir / "token"), "--model", args.model, "--batch-size", "32",
                                "--iterations", "3000", "--", sys.executable, "examples/train.py", "--iterations",
                                "3000"], check=True, env=env, cwd=ROOT, capture_output=True)
            submitted = time.perf_counter() - t0
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
                page = browser.new_page()
                page.goto(server.url + "/login")
                page.fill("#token", server.token)
                page.click("#sign-in")
                page.wait_for_selector(".tile.shared", timeout=120_000)
                shared = time.perf_counter() - t0
                memory = page.locator(".tile.shared .label").nth(1)
                deadline = time.monotonic() + 60
                while "MiB" not in memory.inner_text().split("obs")[-1] and time.monotonic() < deadline:
                    time.sleep(0.2)
                observed = time.perf_counter() - t0
                tile = page.locator(".tile.shared").first.inner_text()
                browser.close()
        finally:
            server.stop()
            kill_job_processes(server.state_dir)
    result = {"benchmark": "console_first_minute", "command": " ".join(["python", *sys.argv]),
              "fake_gpus": args.fake_gpus, "submissions": args.submissions, "model": args.model, "server_up_s": round(up, 2),
              "submitted_s": round(submitted, 2), "shared_tile_visible_s": round(shared, 2),
              "observed_values_visible_s": round(observed, 2), "tile_text": tile,
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out = args.out or ROOT / "benchmarks" / "results" / f"console_first_minute_{args.fake_gpus}gpus_" \
                            f"{args.submissions}jobs.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
