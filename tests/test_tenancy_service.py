"""Queues (tenants) in the live service, against a real `horus serve --tenancy FILE` on 127.0.0.1 with two fake GPUs
and real job processes: only admins change queues and priority classes; unknown names on submission are 409s; a
queue within its guarantee reclaims GPUs another queue borrowed, in one scheduling step; the per-queue metrics; the
queues survive kill -9 (the store wins over the file after the first start); the CLI verbs; the store migrations;
a queue's users (a user it does not list gets a 403 and nothing is stored; admins submit anywhere)."""

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
from service_helpers import Server, kill_job_processes, metrics, wait_for

from horus.service.store import SCHEMA_VERSION, NewJob, Store

HEAVY = {"model": "resnet50", "batch_size": 64}  # predicted ~100 % utilization: never shares a GPU
TENANCY = """\
tenancy:
  queues:
    - {name: a, guaranteed: 1}
    - {name: b, guaranteed: 1, weight: 2}
  priority_classes:
    - {name: normal, value: 0}
    - {name: high, value: 10, preemptible: false}
"""


def horus(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # rich tables at full width
    return subprocess.run([sys.executable, "-m", "horus.cli", *args], capture_output=True, text=True, timeout=60,
                          env=env, check=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("tenancy")
    (root / "cluster.yaml").write_text(TENANCY)
    s = Server(root / "state", "--policy", "fifo-exclusive", "--predictor", "analytic", "--lease-s", "5",
               "--grace-s", "1", "--tenancy", str(root / "cluster.yaml"), fake_gpus=2).start()
    yield s
    s.stop()
    kill_job_processes(root)


@pytest.fixture(scope="module")
def user(server: Server) -> str:
    made = horus("token", "create", "--name", "alice", "--role", "user", "--state-dir", str(server.state_dir))
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def queues(client: httpx.Client) -> dict[str, dict]:
    response = client.get("/v1/queues")
    assert response.status_code == 200, response.text
    return {q["name"]: q for q in response.json()["queues"]}


def test_the_tenancy_file_seeds_queues_and_classes(server: Server) -> None:
    with server.client() as admin:
        found = queues(admin)
        classes = {c["name"]: c for c in admin.get("/v1/priority-classes").json()["priority_classes"]}
    assert list(found) == ["a", "b"] and found["a"]["default"] and not found["b"]["default"]
    assert found["a"]["guaranteed"] == {"*": 1.0} and found["b"]["weight"] == 2.0
    assert found["a"]["borrow_limit"] is None and found["a"]["charged_gpus"] == 0.0
    assert classes["high"] == {"name": "high", "value": 10, "preemptible": False, "default": False, "stored": True}
    assert classes["normal"]["default"] and not classes["normal"]["stored"]  # the built-in class


def test_only_an_admin_changes_queues_and_classes(server: Server, user: str) -> None:
    with server.client() as admin, server.client(token=user) as alice:
        assert alice.put("/v1/queues/c", json={"guaranteed": 1}).status_code == 403
        assert alice.put("/v1/priority-classes/low", json={"value": -5}).status_code == 403
        assert "c" not in queues(admin)
        created = admin.put("/v1/queues/c", json={"guaranteed": {"V100": 0.5}, "borrow_limit": 0})
        assert created.status_code == 201, created.text
        assert created.json()["guaranteed"] == {"V100": 0.5} and created.json()["borrow_limit"] == 0.0
        replaced = admin.put("/v1/queues/c", json={"guaranteed": 0, "weight": 3})
        assert replaced.status_code == 200 and replaced.json()["weight"] == 3.0
        assert list(queues(alice)) == ["a", "b", "c"]  # a user lists
        assert alice.delete("/v1/queues/c").status_code == 403
        assert admin.put("/v1/priority-classes/low", json={"value": -5}).status_code == 201
        assert admin.delete("/v1/queues/c").json() == {"deleted": "c"}
        assert admin.delete("/v1/queues/c").status_code == 404
        assert admin.delete("/v1/priority-classes/low").status_code == 200
        assert admin.delete("/v1/priority-classes/normal").status_code == 404  # built in: nothing stored
        # outside the schema: 422
        assert admin.put("/v1/queues/bad name!", json={"guaranteed": 1}).status_code == 422
        assert admin.put("/v1/queues/d", json={"guaranteed": -1}).status_code == 422
        assert admin.put("/v1/queues/d", json={"guaranteed": {}}).status_code == 422
        assert admin.put("/v1/priority-classes/p", json={"value": 1.5}).status_code == 422
        assert list(queues(admin)) == ["a", "b"]


def test_unknown_queue_or_class_on_submission_is_409_and_a_malformed_name_422(server: Server, user: str) -> None:
    with server.client(token=user) as alice:
        before = alice.get("/v1/jobs").json()["counts"]
        for field, name in (("queue", "nosuch"), ("priority", "urgent")):
            response = alice.post("/v1/jobs", json={"command": ["true"], field: name})
            assert response.status_code == 409, response.text
            detail = response.json()["detail"]
            assert detail.startswith(f"{field}: unknown") and repr(name) in detail, detail
        assert alice.post("/v1/jobs", json={"command": ["true"], "queue": "no spaces"}).status_code == 422
        assert alice.get("/v1/jobs").json()["counts"] == before  # nothing was stored


def test_a_queue_within_its_guarantee_reclaims_borrowed_gpus_in_one_step(server: Server, user: str) -> None:
    """Queue a (guaranteed 1) borrows the second GPU; a third job of a is held for its quota. Queue b (guaranteed 1)
    submits: in the same scheduling step one job of a is preempted (reclaimed) and b's job starts on its GPU."""
    with server.client() as admin, server.client(token=user) as alice:
        sleep = {"command": ["sleep", "600"], **HEAVY}
        a1, a2 = (admin.post("/v1/jobs", json={**sleep, "queue": "a"}).json() for _ in range(2))
        wait_for(lambda: all(admin.get(f"/v1/jobs/{j['id']}").json()["state"] == "running" for j in (a1, a2)),
                 20, what="queue a fills the cluster (borrowing one GPU)")
        assert (queues(admin)["a"]["charged_gpus"], queues(admin)["a"]["running_jobs"]) == (2.0, 2)
        a3 = admin.post("/v1/jobs", json=sleep).json()  # no queue: the default queue, a
        assert a3["queue"] == "a" and a3["priority"] == "normal"
        # no other queue waits: the policy sees it (admitted at the next step), to borrow a GPU when one frees
        wait_for(lambda: (admin.get(f"/v1/jobs/{a3['id']}").json().get("waiting") or {}).get("code")
                 == "waiting-for-gpus", 10, what="a3 admitted")
        b1 = alice.post("/v1/jobs", json={**sleep, "queue": "b"}).json()
        assert b1["queue"] == "b"
        b_run = wait_for(lambda: (j := alice.get(f"/v1/jobs/{b1['id']}").json())["state"] == "running" and j, 10,
                         what="b's job runs")
        jobs = {j["id"]: admin.get(f"/v1/jobs/{j['id']}").json() for j in (a1, a2)}
        reclaimed = [j for j in jobs.values() if j["state"] == "queued"]
        assert len(reclaimed) == 1 and sum(j["state"] == "running" for j in jobs.values()) == 1
        event = reclaimed[0]["events"][-1]
        assert event["kind"] == "requeued:preempted" and event["by"] == "tenancy" and event["queue"] == "a"
        started = b_run["events"][-1]
        assert started["kind"] == "started"
        assert started["time"] == event["time"]  # the same scheduling step
        assert started["time"] - b_run["submitted"] < 2.0  # the submission woke the scheduler
        assert started["placement"] == [b for b in reclaimed[0]["events"] if b["kind"] == "started"][-1]["placement"]
        # held while b waited; admitted again once only a waits (the policy then sees them, no GPU is idle)
        assert reclaimed[0]["waiting"]["code"] in ("queue-over-quota", "waiting-for-gpus")
        view = queues(admin)
        assert (view["a"]["charged_gpus"], view["a"]["reclaimed"]) == (1.0, 1)
        assert (view["b"]["charged_gpus"], view["b"]["held_jobs"], view["b"]["running_jobs"]) == (1.0, 0, 1)
        listed = {j["id"]: j for j in admin.get("/v1/jobs", params={"brief": True}).json()["jobs"]}
        assert listed[b1["id"]]["queue"] == "b"
        assert listed[a3["id"]]["waiting"]["code"] in ("queue-over-quota", "waiting-for-gpus")
        # the per-queue metrics
        m = metrics(admin)
        assert m[("horus_queue_reclaims_total", (("queue", "a"),))] == 1.0
        assert ("horus_queue_reclaims_total", (("queue", "b"),)) not in m
        for q in ("a", "b"):
            assert m[("horus_queue_guaranteed_gpus", (("queue", q),))] == 1.0
            assert m[("horus_queue_charged_gpus", (("queue", q),))] == 1.0
        assert m[("horus_queue_held_jobs", (("queue", "b"),))] == 0.0
        assert all(("horus_queue_fair_deficit_gpu_hours", (("queue", q),)) in m for q in ("a", "b"))
        # a's two waiting jobs are either held or admitted (reserved), never both, never lost
        assert m[("horus_queue_held_jobs", (("queue", "a"),))] + m[("horus_queue_reserved_gpus", (("queue", "a"),))] \
            == 2.0
        assert m[("horus_queue_length", ())] == 2.0  # held jobs wait too
        # a queue with queued or running jobs is not deleted; neither is a class they use
        busy = admin.delete("/v1/queues/a")
        assert busy.status_code == 409 and "queue 'a' has 3 queued or running jobs" in busy.json()["detail"]
        assert admin.delete("/v1/queues/b").status_code == 409


def test_queues_and_jobs_survive_kill9_and_the_store_wins_over_the_file(server: Server) -> None:
    (server.state_dir.parent / "cluster.yaml").write_text("tenancy:\n  queues:\n    - {name: z, guaranteed: 2}\n")
    with server.client() as admin:
        before = queues(admin)
        jobs = {j["id"]: (j["state"], j["queue"]) for j in admin.get("/v1/jobs").json()["jobs"]}
    # the jobs the reclaim test above left running (one per queue): this test continues its scenario
    assert sorted(q for state, q in jobs.values() if state == "running") == ["a", "b"], \
        f"needs the reclaim test's running jobs (run the whole module): {jobs}"
    server.kill9()
    server.start()
    with server.client() as admin:
        after = wait_for(lambda: (q := queues(admin))["a"]["running_jobs"] + q["b"]["running_jobs"] == 2 and q, 60,
                         what="the running jobs adopted again")
        assert list(after) == ["a", "b"]  # the changed file did not replace the store's queues
        for name in after:
            assert {k: after[name][k] for k in ("guaranteed", "borrow_limit", "weight", "default")} == \
                   {k: before[name][k] for k in ("guaranteed", "borrow_limit", "weight", "default")}
        assert "high" in {c["name"] for c in admin.get("/v1/priority-classes").json()["priority_classes"]}
        assert {j["id"]: (j["state"], j["queue"]) for j in admin.get("/v1/jobs").json()["jobs"]} == jobs
        assert (after["a"]["charged_gpus"], after["b"]["charged_gpus"]) == (1.0, 1.0)
        assert "ignored: this store was seeded before" in server.log.read_text()
        # a queue replaced with a lower limit gives back what it is charged above it at the next step
        running = next(j for j in admin.get("/v1/jobs", params={"state": "running"}).json()["jobs"]
                       if j["queue"] == "a")
        assert admin.put("/v1/queues/a", json={"guaranteed": 0, "borrow_limit": 0}).status_code == 200
        given = wait_for(lambda: (j := admin.get(f"/v1/jobs/{running['id']}").json())["state"] == "queued" and j, 30,
                         what="queue a gives its job back")
        assert given["events"][-1]["kind"] == "requeued:preempted" and given["events"][-1]["by"] == "tenancy"
        assert metrics(admin)[("horus_queue_reclaims_total", (("queue", "a"),))] == 1.0  # since this start
        assert (queues(admin)["a"]["charged_gpus"], queues(admin)["a"]["held_jobs"]) == (0.0, 3)
        for job_id, (state, _) in jobs.items():
            if state in ("queued", "running"):
                assert admin.post(f"/v1/jobs/{job_id}/cancel").status_code == 200
        assert admin.delete("/v1/queues/b").status_code == 200  # no job of it left


def test_cli_verbs(server: Server) -> None:
    client = ("--server", server.url, "--token-file", str(server.state_dir / "token"))
    made = horus("queue", "create", "gpu-team", "--guaranteed", "1", "--type", "V100", "--borrow-limit", "0.5",
                 "--weight", "2", *client)
    assert made.returncode == 0, made.stderr
    listed = horus("queue", "list", *client)
    assert listed.returncode == 0 and "gpu-team" in listed.stdout and "1 V100" in listed.stdout
    assert horus("priority-class", "create", "urgent", "--value", "50", "--no-preempt", *client).returncode == 0
    classes = horus("priority-class", "list", *client)
    assert "urgent" in classes.stdout and "no" in classes.stdout.splitlines()[1]
    sub = horus("submit", "--queue", "gpu-team", "--priority", "urgent", "--model", "a3c", *client, "--json", "--",
                "sleep", "600")
    assert sub.returncode == 0, sub.stderr
    unknown = horus("submit", "--queue", "nosuch", *client, "--", "true")
    assert unknown.returncode == 2 and "unknown queue 'nosuch'" in unknown.stderr
    bad = horus("queue", "create", "x y", "--guaranteed", "1", *client)
    assert bad.returncode == 2 and "NAME" in bad.stderr
    jobs = horus("jobs", *client)
    assert "gpu-team/urgent" in jobs.stdout
    busy = horus("queue", "delete", "gpu-team", *client)
    assert busy.returncode == 2 and "HTTP 409" in busy.stderr
    job_id = json.loads(sub.stdout)["id"]
    assert horus("cancel", job_id, *client).returncode == 0
    assert horus("queue", "delete", "gpu-team", *client).returncode == 0
    assert horus("priority-class", "delete", "urgent", *client).returncode == 0


def test_a_schema_3_store_gains_queue_and_priority_columns(tmp_path: Path) -> None:
    """A store written before tenants existed opens; its jobs name no queue (the defaults) and keep running."""
    path = tmp_path / "horus.db"
    store = Store(path)
    old = store.submit(NewJob(model="m", batch_size=1, num_gpus=1, command=["x"]), 1.0)[0]
    store.close()
    with sqlite3.connect(path) as db:  # what schema 3 wrote: no queue nor priority, no tenancy tables
        db.execute("ALTER TABLE jobs DROP COLUMN queue")
        db.execute("ALTER TABLE jobs DROP COLUMN priority")
        db.execute("DROP TABLE queues")
        db.execute("DROP TABLE priority_classes")
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    again = Store(path)
    row = again.job(old.id)
    assert row is not None and (row.queue, row.priority, row.state) == (None, None, "queued")
    assert again.queues() == [] and again.put_queue("q", {"*": 1.0}, None, 1.0, 2.0)
    new = again.submit(NewJob(model="m", batch_size=1, num_gpus=1, command=["x"], queue="q", priority="high"), 3.0)[0]
    assert (new.queue, new.priority) == ("q", "high")
    assert again.delete_queue("q", default="q") == 2  # the old job (no queue: the default) and the new one
    again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)


# ---- a queue's users: which user tokens may submit into it (admins always may) ----------------------------------
BOUND = """\
tenancy:
  queues:
    - {name: research, guaranteed: 1, users: [alice, carol]}
    - {name: open, guaranteed: 1}
"""


@pytest.fixture(scope="module")
def bound(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, str]]:
    """A server whose default queue, research, takes jobs from alice and carol only; (server, alice's token,
    bob's token)."""
    root = tmp_path_factory.mktemp("bound")
    (root / "cluster.yaml").write_text(BOUND)
    s = Server(root / "state", "--policy", "fifo-exclusive", "--predictor", "analytic", "--tenancy",
               str(root / "cluster.yaml"), fake_gpus=2).start()
    tokens = []
    for name in ("alice", "bob"):
        made = horus("token", "create", "--name", name, "--role", "user", "--state-dir", str(s.state_dir))
        assert made.returncode == 0, made.stderr
        tokens.append(made.stdout.strip())
    yield s, tokens[0], tokens[1]
    s.stop()
    kill_job_processes(root)


def _count(client: httpx.Client) -> int:
    return len(client.get("/v1/jobs").json()["jobs"])


def test_a_queues_users_bind_who_submits_into_it(bound: tuple[Server, str, str]) -> None:
    server, alice_token, bob_token = bound
    job = {"command": ["true"]}
    with server.client() as admin, server.client(token=alice_token) as alice, \
            server.client(token=bob_token) as bob:
        assert alice.post("/v1/jobs", json={**job, "queue": "research"}).status_code == 201
        before = _count(admin)
        refused = bob.post("/v1/jobs", json={**job, "queue": "research"})
        assert refused.status_code == 403, refused.text
        assert refused.json()["detail"] == ("user 'bob' may not submit into queue 'research' (its users: alice, "
                                            "carol); ask an admin (horus queue create research --user bob)")
        default = bob.post("/v1/jobs", json=job)  # no queue: the default queue, research
        assert default.status_code == 403 and "queue 'research'" in default.json()["detail"]
        keyed = bob.post("/v1/jobs", json={**job, "idempotency_key": "k1"})
        assert keyed.status_code == 403
        assert _count(admin) == before  # nothing was stored
        opened = bob.post("/v1/jobs", json={**job, "queue": "open"})  # a queue without users: every user
        assert opened.status_code == 201 and opened.json()["queue"] == "open"
        assert admin.post("/v1/jobs", json={**job, "queue": "research"}).status_code == 201  # admins: anywhere
        assert alice.post("/v1/jobs", json=job).json()["queue"] == "research"
        # an unknown queue stays a 409, whoever asks
        assert bob.post("/v1/jobs", json={**job, "queue": "nosuch"}).status_code == 409
        found = queues(bob)  # users see the lists
        assert found["research"]["users"] == ["alice", "carol"] and found["open"]["users"] == []


def test_queue_users_change_over_rest_and_bad_lists_are_422(bound: tuple[Server, str, str]) -> None:
    server, alice_token, bob_token = bound
    with server.client() as admin, server.client(token=alice_token) as alice, \
            server.client(token=bob_token) as bob:
        replaced = admin.put("/v1/queues/open", json={"guaranteed": 1, "users": ["bob"]})
        assert replaced.status_code == 200 and replaced.json()["users"] == ["bob"]
        assert alice.post("/v1/jobs", json={"command": ["true"], "queue": "open"}).status_code == 403
        assert bob.post("/v1/jobs", json={"command": ["true"], "queue": "open"}).status_code == 201
        assert alice.put("/v1/queues/open", json={"guaranteed": 1}).status_code == 403  # only admins change them
        for users in (["bad name"], ["bob", "bob"], "bob", [""], ["x" * 65], [7]):
            bad = admin.put("/v1/queues/open", json={"guaranteed": 1, "users": users})
            assert bad.status_code == 422, (users, bad.text)
            assert "users" in json.dumps(bad.json()["detail"]), bad.text
        assert queues(admin)["open"]["users"] == ["bob"]  # unchanged by the refused bodies
        cleared = admin.put("/v1/queues/open", json={"guaranteed": 1})  # re-created without users: every user
        assert cleared.status_code == 200 and cleared.json()["users"] == []
        assert alice.post("/v1/jobs", json={"command": ["true"], "queue": "open"}).status_code == 201
        many = [f"u{i}" for i in range(12)]  # a long list: the refusal names ten of them, on one line
        assert admin.put("/v1/queues/open", json={"guaranteed": 1, "users": many}).status_code == 200
        long = bob.post("/v1/jobs", json={"command": ["true"], "queue": "open"})
        assert long.status_code == 403 and "(its users: u0, u1, u2, u3, u4, u5, u6, u7, u8, u9 and 2 more)" in \
            long.json()["detail"], long.text
        assert admin.put("/v1/queues/open", json={"guaranteed": 1, "users": ["bob"]}).status_code == 200


def test_queue_users_survive_a_restart(bound: tuple[Server, str, str]) -> None:
    server, _, bob_token = bound
    server.kill9()
    server.start()
    with server.client() as admin, server.client(token=bob_token) as bob:
        found = queues(admin)
        assert found["research"]["users"] == ["alice", "carol"] and found["open"]["users"] == ["bob"]
        assert bob.post("/v1/jobs", json={"command": ["true"]}).status_code == 403
        assert bob.post("/v1/jobs", json={"command": ["true"], "queue": "open"}).status_code == 201


def test_queue_users_cli(bound: tuple[Server, str, str]) -> None:
    server, _, _ = bound
    client = ("--server", server.url, "--token-file", str(server.state_dir / "token"))
    made = horus("queue", "create", "team", "--guaranteed", "0", "--user", "alice", "--user", "dave", *client)
    assert made.returncode == 0 and "users alice, dave" in made.stdout, made.stderr
    listed = horus("queue", "list", *client)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[1]: line for line in listed.stdout.splitlines() if line.startswith("│")}
    assert "alice, dave" in rows["team"] and "alice, carol" in rows["research"], listed.stdout
    assert horus("queue", "create", "team", "--guaranteed", "0", *client).returncode == 0  # replaced: no list
    again = json.loads(horus("queue", "list", "--json", *client).stdout)
    assert next(q for q in again["queues"] if q["name"] == "team")["users"] == []
    assert "every user" in horus("queue", "list", *client).stdout
    for bad in (["--user", "x y"], ["--user", "al", "--user", "al"]):
        refused = horus("queue", "create", "team", "--guaranteed", "0", *bad, *client)
        assert refused.returncode == 2 and "--user" in refused.stderr, refused.stderr
    assert horus("queue", "delete", "team", *client).returncode == 0


def test_queue_users_in_yaml_are_checked_and_named() -> None:
    from horus.errors import HorusInputError
    from horus.tenancy import parse_tenancy

    good = parse_tenancy({"queues": [{"name": "r", "users": ["alice", "bob.b"]}, {"name": "o"}]}, "c.yaml")
    assert good.queues["r"].users == ("alice", "bob.b") and good.queues["o"].users == ()
    assert good.queues["r"].describe()["users"] == ["alice", "bob.b"]
    assert "users" not in good.queues["o"].describe()  # simulator manifests without users are unchanged
    for users, where in ((["alice", "no way"], "tenancy.queues[0].users[1]"),
                         (["alice", "alice"], "tenancy.queues[0].users[1]"),
                         ("alice", "tenancy.queues[0].users"), ([None], "tenancy.queues[0].users[0]"),
                         (["x" * 65], "tenancy.queues[0].users[0]")):
        with pytest.raises(HorusInputError) as err:
            parse_tenancy({"queues": [{"name": "r", "users": users}]}, "c.yaml")
        text = str(err.value)
        assert f"c.yaml: {where}:" in text and "\n" not in text, text


def test_a_schema_6_store_gains_queue_users(tmp_path: Path) -> None:
    """A store written before queues had users opens; its queues take jobs from every user."""
    path = tmp_path / "horus.db"
    store = Store(path)
    assert store.put_queue("q", {"*": 1.0}, None, 1.0, 1.0)
    store.close()
    with sqlite3.connect(path) as db:  # what schema 6 wrote: no queues.users
        db.execute("ALTER TABLE queues DROP COLUMN users")
        db.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    again = Store(path)
    assert again.queues() == [{"name": "q", "guaranteed": {"*": 1.0}, "borrow_limit": None, "weight": 1.0,
                               "users": []}]
    assert not again.put_queue("q", {"*": 1.0}, None, 1.0, 2.0, users=["alice"])
    assert again.put_queue("r", {"*": 1.0}, None, 1.0, 3.0)
    assert [q["users"] for q in again.queues()] == [["alice"], []]
    again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert SCHEMA_VERSION == 7
