"""The web console in a real browser: headless Chromium (the distribution's package, driven by Playwright) against
a real `horus serve --fake-gpus 1` with running jobs of two users. Screenshots go to build/test-artifacts/console/.

Skipped, with the reason, only where Playwright or a Chromium executable cannot be had (`.ci/run` installs
Debian's `chromium` before the tests)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service_helpers import Server, kill_job_processes, wait_for

ARTIFACTS = Path(__file__).resolve().parent.parent / "build" / "test-artifacts" / "console"
LIGHT = {"model": "a3c", "batch_size": 32}  # predicted ~7 % utilization: jobs share the one GPU
# a job that reports an iteration every 0.2 s for a minute
TRAIN = [sys.executable, "-c", "import time, horus\nfor i in range(300):\n    horus.report(i + 1)\n    time.sleep(0.2)"]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium executable on PATH (Debian: apt-get install chromium; .ci/run does this)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    server = Server(tmp_path_factory.mktemp("console") / "state", fake_gpus=1).start()
    tokens = {}
    for name in ("alice", "bob"):
        done = subprocess.run([sys.executable, "-m", "horus.cli", "token", "create", "--name", name, "--role", "user",
                               "--state-dir", str(server.state_dir)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        tokens[name] = done.stdout.strip()
    alice = server.client(token=tokens["alice"])
    bob = server.client(token=tokens["bob"])
    a = alice.post("/v1/jobs", json={"command": TRAIN, "name": "alice-train", "iterations": 300, **LIGHT}).json()
    b = bob.post("/v1/jobs", json={"command": ["sleep", "120"], "name": "bob-secret-name",
                                   "env": {"DB_PASSWORD": "hunter2"}, **LIGHT}).json()
    admin = server.client()
    wait_for(lambda: all(admin.get(f"/v1/jobs/{j['id']}").json()["state"] == "running" for j in (a, b)),
             what="both jobs run")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield {"server": server, "tokens": tokens, "alice_job": a["id"], "bob_job": b["id"]}
    server.stop()
    kill_job_processes(server.state_dir)


def sign_in(browser: object, url: str, token: str) -> object:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(url + "/")
    assert page.url.endswith("/login")  # not signed in: sent to the sign-in page
    page.fill("#token", token)
    page.click("#sign-in")
    page.wait_for_url(url + "/")
    return page


def test_a_wrong_token_is_refused(browser: object, cluster: dict) -> None:
    url = cluster["server"].url
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(url + "/login")
    page.fill("#token", "x" * 43)
    page.click("#sign-in")
    assert page.locator("#login-error").inner_text() == "wrong token"
    page.goto(url + "/queue")
    assert page.url.endswith("/login")
    # an agent-side or API client with no session gets nothing either
    assert httpx.get(url + "/v1/jobs", follow_redirects=False).status_code == 401
    page.screenshot(path=str(ARTIFACTS / "wrong-token.png"))
    page.close()


def test_the_cluster_map_shows_the_shared_gpu_without_revealing_the_other_user(browser: object,
                                                                                  cluster: dict) -> None:
    page = sign_in(browser, cluster["server"].url, cluster["tokens"]["alice"])
    page.wait_for_selector(".tile.shared")
    tile = page.locator(".tile.shared").first
    text = tile.inner_text()
    assert "shared ×2" in text and "alice-train" in text and "another user's job" in text
    assert "pred" in text and "obs" in text  # predicted vs observed bars
    # fake GPUs observe their stand-in device: the jobs' CPU share and resident memory (no NVML here)
    memory = page.locator(".tile.shared .label").nth(1)
    wait_for(lambda: "MiB" in memory.inner_text().split("obs")[-1], 15, 0.3, "an observed memory value")
    content = page.content()
    assert "bob-secret-name" not in content and "hunter2" not in content and "bob" not in page.inner_text("main")
    assert page.locator("#who").inner_text() == "alice (user)"
    page.screenshot(path=str(ARTIFACTS / "cluster-map.png"), full_page=True)
    # the co-location ledger lists the running set, the other user's job without its id
    page.click("nav a[data-nav=ledger]")
    page.wait_for_selector("#ledger tbody tr")
    row = page.locator("#ledger tbody tr").first.inner_text()
    assert "running" in row and str(cluster["alice_job"]) in row and "other" in row
    page.screenshot(path=str(ARTIFACTS / "ledger.png"), full_page=True)
    # another user's job page shows nothing of it
    page.goto(f"{cluster['server'].url}/jobs/{cluster['bob_job']}")
    wait_for(lambda: "failed" in page.locator("#updated").inner_text(), 15, what="the page to say it failed")
    assert "bob-secret-name" not in page.content() and "hunter2" not in page.content()
    page.context.close()


def test_the_job_page_follows_progress_and_cancel_works(browser: object, cluster: dict) -> None:
    url, job = cluster["server"].url, cluster["alice_job"]
    page = sign_in(browser, url, cluster["tokens"]["alice"])
    page.goto(f"{url}/jobs/{job}")
    page.wait_for_selector("#progress")
    first = page.locator("#progress").inner_text()
    # the page re-renders by itself as progress arrives (no reload; the CSP forbids eval, so polled from here)
    wait_for(lambda: page.locator("#progress").inner_text() != first, 15, 0.2, "the progress to move")
    assert "ETA" in page.locator("#progress").inner_text()
    assert page.locator("#prediction").inner_text().count("%") >= 1
    page.screenshot(path=str(ARTIFACTS / "job-page.png"), full_page=True)
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#cancel")
    wait_for(lambda: "cancelled" in page.locator("h1").inner_text(), 15, 0.2, "the page to say cancelled")
    admin = cluster["server"].client()
    assert admin.get(f"/v1/jobs/{job}").json()["state"] == "cancelled"
    assert admin.get(f"/v1/jobs/{cluster['bob_job']}").json()["state"] == "running"  # only her own
    page.screenshot(path=str(ARTIFACTS / "job-cancelled.png"), full_page=True)
    # the queue page lists it as finished with its reason
    page.goto(url + "/queue")
    page.wait_for_selector("#finished tbody tr")
    assert "cancelled by user" in page.locator("#finished").inner_text()
    page.screenshot(path=str(ARTIFACTS / "queue.png"), full_page=True)
    page.context.close()


def test_a_session_cannot_write_without_the_console_header(browser: object, cluster: dict) -> None:
    """A cross-site form post carries no custom header: a cookie alone never cancels a job."""
    url = cluster["server"].url
    page = sign_in(browser, url, cluster["tokens"]["bob"])
    status = page.evaluate(f"fetch('/v1/jobs/{cluster['bob_job']}/cancel', {{method: 'POST'}}).then(r => r.status)")
    assert status == 403
    assert cluster["server"].client().get(f"/v1/jobs/{cluster['bob_job']}").json()["state"] == "running"
    page.click("#logout")
    page.wait_for_url(url + "/login")
    page.goto(url + "/")
    assert page.url.endswith("/login")  # the session is gone
    page.context.close()
