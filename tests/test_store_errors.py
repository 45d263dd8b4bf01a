"""A store that cannot write, or cannot be trusted (issue 22): writes that fail are 503s with one line and
``/healthz`` says ``degraded`` until the store writes again, nothing stored is lost; a corrupt or empty
``horus.db`` is refused at open with one line naming the file (``horus serve`` exits 2 with it)."""

from __future__ import annotations

import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from service_helpers import Server, free_port, kill_job_processes, wait_for

from horus.service.store import NewJob, Store, StoreError, StoreUnavailable


def _job(i: int, arg: int = 16) -> NewJob:
    return NewJob(model="", batch_size=0, num_gpus=1, command=["true", "x" * arg], name=f"job-{i}")


def _filled(path: Path, jobs: int = 300) -> Path:
    store = Store(path)
    for i in range(jobs):
        store.submit(_job(i, 2000), float(i))
    store.close()  # the last connection: the WAL is checkpointed into the file
    assert not Path(f"{path}-wal").exists()
    return path


# ---- a store that cannot write ----------------------------------------------------------------------------
def test_a_full_store_refuses_writes_keeps_what_it_has_and_recovers(tmp_path: Path) -> None:
    """Disk full, through SQLite's own limit on the database size (``PRAGMA max_page_count``)."""
    store = Store(tmp_path / "horus.db")
    kept = [store.submit(_job(i), 1.0)[0].id for i in range(5)]
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreUnavailable, match="database or disk is full"):
        for i in range(10_000):
            store.submit(_job(i, 3000), 2.0)
    assert store.write_error == "database or disk is full" and store.write_failures == 1
    assert not store.probe() or store.write_error is None  # a probe may fit in the last page
    stored = [r.id for r in store.jobs()]
    assert stored[:5] == kept and store.counts() == {"queued": len(stored)}
    assert not store._db.in_transaction  # rolled back: the next write starts cleanly
    store._db.execute("PRAGMA max_page_count = 1073741823")
    assert store.probe() and store.write_error is None
    store.submit(_job(99), 3.0)
    store.close()
    with sqlite3.connect(tmp_path / "horus.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _set_file_size_limit(pid: int, limit: int) -> None:
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="needs prlimit (Linux)")
def test_a_server_whose_disk_refuses_writes_answers_503_and_recovers(tmp_path: Path) -> None:
    """The real server, its files made unwritable from outside (``RLIMIT_FSIZE`` = 0 set with prlimit: every write
    to a file fails as on a full disk; Python ignores SIGXFSZ). Submissions are 503 with one line, reads go on,
    ``/healthz`` is ``degraded``; when writes work again the server is ``ok`` within a few seconds, acknowledged
    jobs are all there, the refused ones are not, and the file is intact."""
    srv = Server(tmp_path / "state", "--lease-s", "5", fake_gpus=1).start()
    try:
        with srv.client(timeout_s=30) as api:
            first = api.post("/v1/jobs", json={"command": ["true"], "name": "before"})
            assert first.status_code == 201
            wait_for(lambda: api.get(f"/v1/jobs/{first.json()['id']}").json()["state"] == "finished", 30,
                     what="the first job to finish")
            _set_file_size_limit(srv.proc.pid, 0)
            refused = api.post("/v1/jobs", json={"command": ["true"], "name": "refused"})
            assert refused.status_code == 503, refused.text
            detail = refused.json()["detail"]
            assert isinstance(detail, str) and "\n" not in detail and "cannot write" in detail, detail
            health = api.get("/healthz")
            assert health.status_code == 503 and health.json()["status"] == "degraded", health.text
            assert "cannot write" in health.json()["store"]
            assert api.get("/v1/jobs").status_code == 200 and api.get("/v1/cluster").status_code == 200
            time.sleep(2.5)  # the scheduling loop probes the store meanwhile: still degraded
            assert api.get("/healthz").status_code == 503
            _set_file_size_limit(srv.proc.pid, resource.RLIM_INFINITY)
            wait_for(lambda: api.get("/healthz").status_code == 200, 10, what="healthz back to ok")
            after = api.post("/v1/jobs", json={"command": ["true"], "name": "after"})
            assert after.status_code == 201
            wait_for(lambda: api.get(f"/v1/jobs/{after.json()['id']}").json()["state"] == "finished", 30,
                     what="a job submitted after the outage to run")
            names = [j["name"] for j in api.get("/v1/jobs").json()["jobs"]]
            assert names == ["after", "before"]
    finally:
        srv.stop()
        kill_job_processes(tmp_path)
    assert "Traceback" not in srv.log.read_text()
    with sqlite3.connect(srv.state_dir / "horus.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# ---- a store that cannot be trusted ------------------------------------------------------------------------
def test_a_new_store_is_created_whole(tmp_path: Path) -> None:
    store = Store(tmp_path / "horus.db")
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["horus.db"]  # no temporary file left
    assert Store(tmp_path / "horus.db").counts() == {}


def test_an_empty_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "horus.db"
    path.touch()
    with pytest.raises(StoreError) as refused:
        Store(path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and "empty file" in message and "delete it" in message
    assert path.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["horus.db"]


def _corrupt(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 2)
        fh.write(b"\xff" * 3 * 4096)  # three pages of garbage (4 KiB pages)


def test_a_corrupt_file_is_refused_with_one_line(tmp_path: Path) -> None:
    path = _filled(tmp_path / "horus.db")
    _corrupt(path)
    with pytest.raises(StoreError) as refused:
        Store(path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and "corrupt" in message, message


def _serve(state_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "horus.cli", "serve", "--state-dir", str(state_dir), "--fake-gpus",
                           "1", "--port", str(free_port())], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("damage", ["empty", "corrupt"])
def test_serve_refuses_a_damaged_store_with_one_line(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "state" / "horus.db"
    path.parent.mkdir()
    if damage == "empty":
        path.touch()
    else:
        _corrupt(_filled(path))
    before = path.read_bytes()
    done = _serve(path.parent)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("horus: error: --state-dir:") and str(path) in lines[0], lines
    assert ("empty file" if damage == "empty" else "corrupt") in lines[0]
    assert path.read_bytes() == before  # left as it was
