"""Online correction in the live service (docs/service.md, "Online correction"): a real `horus serve` with one fake
GPU, told to learn from it (``--online-correction on``; the default ``auto`` learns from real GPUs only). Fake GPUs report what their stand-in device does (utilization: the CPU share of the job's processes; memory:
their resident set; ``horus.agent.gpus.FakeTelemetry``), so a job's observation is far from the physical
predictor's GPU numbers: the first job of a type shows the error, the second must be predicted within half of it.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import httpx
from service_helpers import Server, kill_job_processes, metrics, wait_for

QUANTITIES = ("util", "mem_mib", "iter_time_s")


def command(iterations: int, sleep_s: float = 0.05) -> list[str]:
    """A job that reports ``iterations`` iterations, one every ``sleep_s`` seconds."""
    script = f"import time, horus\nfor i in range(1, {iterations + 1}):\n    time.sleep({sleep_s})\n    horus.report(i)"
    return [sys.executable, "-c", script]


def submit(http: httpx.Client, model: str, iterations: int, **extra: Any) -> str:
    body = {"command": command(iterations), "model": model, "batch_size": 32, "iterations": iterations, **extra}
    response = http.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def finished(http: httpx.Client, job_id: str) -> dict[str, Any]:
    return wait_for(lambda: (j := http.get(f"/v1/jobs/{job_id}").json())["state"] == "finished" and j,
                    timeout_s=60, what=f"job {job_id} to finish")


def stored(state_dir: Path, job_id: str) -> dict[str, dict[str, Any]]:
    """The store's observations of a job, read from the file as the server left it."""
    db = sqlite3.connect(f"file:{state_dir / 'horus.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        return {r["quantity"]: dict(r) for r in db.execute("SELECT * FROM observations WHERE job_id = ?",
                                                           (int(job_id),))}
    finally:
        db.close()


def error(row: dict[str, Any]) -> float:
    return abs(row["believed"] - row["observed"])


def test_the_second_job_of_a_type_is_predicted_within_half_the_first_ones_error(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = Server(state, "--online-correction", "on", fake_gpus=1).start()
    try:
        with server.client() as http:
            first = finished(http, submit(http, "resnet50", 50))
            rows1 = stored(state, first["id"])
            assert set(rows1) == set(QUANTITIES), rows1  # utilization, peak memory and iteration time observed
            assert all(r["believed"] == r["predicted"] for r in rows1.values())  # nothing corrected it yet
            assert {q: v["observed"] for q, v in first["observation"].items() if q in QUANTITIES} == \
                {q: r["observed"] for q, r in rows1.items()}

            second_id = submit(http, "resnet50", 50)
            queued = http.get(f"/v1/jobs/{second_id}").json()["predicted"]
            assert {c["source"] for c in queued["correction"].values()} == {"type"}
            finished(http, second_id)
            rows2 = stored(state, second_id)
            for q in QUANTITIES:
                assert error(rows2[q]) <= 0.5 * error(rows1[q]), (q, rows1[q], rows2[q])
                assert rows2[q]["predicted"] == rows1[q]["predicted"]  # the same raw prediction, corrected
            assert metrics(http)[("horus_prediction_error_count", (("quantity", "mem_mib"),))] == 2
            other = http.post("/v1/jobs", json={"command": ["true"], "model": "a3c", "batch_size": 32}).json()
            assert {c["source"] for c in other["predicted"]["correction"].values()} == {"gpu"}  # the same GPU type
            http.post(f"/v1/jobs/{other['id']}/cancel")  # nothing it showed changes the corrections after this
            before = http.get(f"/v1/jobs/{second_id}").json()["predicted"]

        server.kill9()  # every observation was one committed transaction: nothing is lost
        server.start()
        with server.client() as http:
            after = http.get(f"/v1/jobs/{second_id}").json()["predicted"]
            assert after == before and after["correction"]["mem_mib"]["observations"] == 2
    finally:
        server.stop()
        kill_job_processes(state)


def test_a_colocated_run_does_not_feed_solo_corrections(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = Server(state, "--online-correction", "on", fake_gpus=1).start()
    try:
        with server.client() as http:
            longer = submit(http, "ncf", 200, gpu_fraction=0.5)  # 10 s, half the GPU
            wait_for(lambda: http.get(f"/v1/jobs/{longer}").json()["state"] == "running", what="the first job")
            # its solo observations are stored when first seen: wait for all three before anything joins it (on a
            # loaded machine the first report may come late, and the type would then have no source for it)
            wait_for(lambda: set(stored(state, longer)) == set(QUANTITIES), timeout_s=30,
                     what="the first job's solo observations")
            shared = submit(http, "a3c", 30, gpu_fraction=0.5)  # beside it on the one GPU, from start to end
            job = finished(http, shared)
            assert http.get(f"/v1/jobs/{longer}").json()["state"] == "running"
            assert stored(state, shared) == {} and "observation" not in job
            # its type's corrections come from the other job's solo run on this GPU type, none from its own
            assert {c["source"] for c in job["predicted"]["correction"].values()} == {"gpu"}
            assert set(stored(state, longer)) <= set(QUANTITIES)
            http.post(f"/v1/jobs/{longer}/cancel")
    finally:
        server.stop()
        kill_job_processes(state)
