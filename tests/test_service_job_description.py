"""The live service keeps a job's input size, precision and optimizer: REST and `horus submit` take them, the store
keeps them (schema 5; a schema-4 store migrates), the scheduler predicts with them, `horus job(s)` show them."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_helpers import Server, kill_job_processes

from horus.service.store import SCHEMA_VERSION, NewJob, Store

PY = sys.executable
CIFAR = {"model": "resnet18", "batch_size": 128, "input_size": 32, "precision": "amp", "optimizer": "sgd"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("serve")
    srv = Server(root / "state", "--predictor", "physical").start()  # 2 fake V100s
    yield srv
    srv.stop()
    kill_job_processes(root)


@pytest.fixture
def api(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def horus(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HORUS_SERVER": server.url, "HORUS_TOKEN": server.token, "COLUMNS": "250"}
    return subprocess.run([PY, "-m", "horus.cli", *args], capture_output=True, text=True, env=env, timeout=60, check=False)


def test_rest_keeps_the_description_and_predicts_with_it(api: httpx.Client) -> None:
    posted = api.post("/v1/jobs", json={"command": ["sleep", "60"], **CIFAR})
    assert posted.status_code == 201, posted.text
    job = posted.json()
    assert (job["input_size"], job["precision"], job["optimizer"]) == (32, "amp-fp16", "sgd")  # alias stored canonical
    full = api.post("/v1/jobs", json={"command": ["sleep", "60"], "model": "resnet18", "batch_size": 128}).json()
    assert (full["input_size"], full["precision"], full["optimizer"]) == (None, None, None)
    assert job["predicted"]["mem_mib"] < full["predicted"]["mem_mib"]  # 32 px, no Adam moments, AMP
    assert job["predicted"]["iter_time_s"] < full["predicted"]["iter_time_s"]
    read = api.get(f"/v1/jobs/{job['id']}").json()
    assert (read["input_size"], read["precision"], read["optimizer"]) == (32, "amp-fp16", "sgd")
    assert read["predicted"] == job["predicted"]  # the scheduler's JobSpec carries them, not only the store
    brief = {j["id"]: j for j in api.get("/v1/jobs", params={"brief": "true"}).json()["jobs"]}
    assert (brief[job["id"]]["input_size"], brief[job["id"]]["precision"]) == (32, "amp-fp16")
    for j in (job, full):
        api.post(f"/v1/jobs/{j['id']}/cancel")


@pytest.mark.parametrize("fields, status, names", [
    ({"model": "resnet18", "precision": "int8"}, 422, ("precision",)),
    ({"model": "resnet18", "optimizer": "lamb"}, 422, ("optimizer",)),
    ({"model": "resnet18", "input_size": 0}, 422, ("input_size",)),
    ({"model": "resnet18", "input_size": 65537}, 422, ("input_size",)),
    ({"model": "resnet18", "input_size": "32"}, 422, ("input_size",)),
    ({"model": "resnet18", "input_size": 16}, 409, ("input_size", "at least 32")),
    ({"input_size": 32}, 409, ("input_size", "model")),
    ({"precision": "bf16"}, 409, ("precision", "model")),
])
def test_bad_descriptions_are_4xx_naming_the_field(api: httpx.Client, fields: dict, status: int,
                                                   names: tuple[str, ...]) -> None:
    response = api.post("/v1/jobs", json={"command": ["true"], **fields})
    assert response.status_code == status, response.text
    assert all(name in response.text for name in names), response.text


def test_cli_submit_job_and_jobs_show_the_description(server: Server) -> None:
    sub = horus(server, "submit", "--model", "resnet18", "--batch-size", "128", "--input-size", "32", "--precision",
                "bfloat16", "--optimizer", "momentum", "--json", "--", "sleep", "60")
    assert sub.returncode == 0, sub.stderr
    job = json.loads(sub.stdout)
    assert (job["input_size"], job["precision"], job["optimizer"]) == (32, "bf16", "momentum")
    shown = horus(server, "job", job["id"])
    assert shown.returncode == 0 and "input_size" in shown.stdout and "bf16" in shown.stdout
    assert "momentum" in shown.stdout
    listed = horus(server, "jobs")
    assert listed.returncode == 0 and "resnet18/b128/s32/bf16/momentum" in listed.stdout, listed.stdout
    assert horus(server, "cancel", job["id"]).returncode == 0


@pytest.mark.parametrize("argv, names", [
    (["--model", "resnet18", "--input-size", "16"], ("--input-size", "at least 32")),
    (["--model", "resnet18", "--precision", "int8"], ("--precision",)),
    (["--model", "resnet18", "--optimizer", "lamb"], ("--optimizer",)),
    (["--input-size", "32"], ("--input-size", "--model")),
])
def test_cli_submit_refuses_bad_descriptions_in_one_line(server: Server, argv: list[str],
                                                         names: tuple[str, ...]) -> None:
    result = horus(server, "submit", *argv, "--", "true")
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert all(name in last for name in names), result.stderr


def test_a_schema_4_store_migrates_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "horus.db"
    store = Store(path)
    old = [store.submit(NewJob(model="resnet50", batch_size=64, num_gpus=1, command=["x"]), float(t))[0]
           for t in range(3)]
    store.close()
    with sqlite3.connect(path) as db:  # what schema 4 wrote: no input_size, precision, optimizer
        for column in ("input_size", "precision", "optimizer"):
            db.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    again = Store(path)
    rows = [again.job(j.id) for j in old]
    assert all(r is not None and (r.model, r.batch_size, r.state) == ("resnet50", 64, "queued") for r in rows)
    assert all((r.input_size, r.precision, r.optimizer) == (None, None, None) for r in rows if r)
    new = again.submit(NewJob(model="resnet18", batch_size=8, num_gpus=1, command=["x"], input_size=32,
                              precision="tf32", optimizer="adamw"), 9.0)[0]
    assert (new.input_size, new.precision, new.optimizer) == (32, "tf32", "adamw")
    again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert SCHEMA_VERSION >= 5 and db.execute("SELECT COUNT(*) FROM jobs").fetchone() == (4,)
