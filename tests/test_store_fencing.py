"""Store: every transition is fenced by the job's state and attempt, so late or duplicate reports change nothing.

Also the reads (ordering, filters, counts, events), queue order across a restart as the live scheduler
rebuilds it, idempotent submission, progress of the running attempt only, agents, and refusing files that
are not a Horus store of this schema version. A generated interleaving of starts and stale/current
reports checks the fencing against an independent model.
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horus.predict.analytic import AnalyticPredictor
from horus.service.scheduler import LiveScheduler
from horus.service.store import FINAL_STATES, SCHEMA_VERSION, JobRow, NewJob, Store, StoreError

KINDS = {"preempted": "preemptions", "oom": "oom_failures", "lost": "lost_runs"}
# The generated interleavings commit thousands of fsync'ed transactions: on tmpfs where there is one.
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None


def new_job(**kwargs: object) -> NewJob:
    values: dict[str, object] = {"model": "resnet50", "batch_size": 32, "num_gpus": 1, "command": ["true"]}
    values.update(kwargs)
    return NewJob(**values)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = Store(tmp_path / "horus.db")
    yield s
    s.close()


def submitted(store: Store, now: float = 0.0, **kwargs: object) -> int:
    row, created = store.submit(new_job(**kwargs), now)
    assert created
    return row.id


def row(store: Store, job_id: int) -> JobRow:
    found = store.job(job_id)
    assert found is not None
    return found


def kinds(store: Store, job_id: int) -> list[tuple[str, int]]:
    return [(e["kind"], e["attempt"]) for e in store.events(job_id)]


def second_attempt(store: Store) -> int:
    """A job preempted in attempt 1 and running again as attempt 2 on ('b', 1)."""
    j = submitted(store)
    assert store.start(j, [("a", 0)], 1.0) == 1
    assert store.requeue(j, 1, 2.0, attained_gpu_s=1.0, iterations_done=10.0, kind="preempted")
    assert store.start(j, [("b", 1)], 3.0) == 2
    return j


# ---- fencing ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_late_requeue_of_an_old_attempt_changes_nothing(store: Store, kind: str) -> None:
    j = second_attempt(store)
    before, events = row(store, j), store.events(j)
    assert not store.requeue(j, 1, 9.0, attained_gpu_s=99.0, iterations_done=99.0, kind=kind)
    assert not store.requeue(j, 3, 9.0, attained_gpu_s=99.0, iterations_done=99.0, kind=kind)  # a future attempt
    after = row(store, j)
    assert after == before
    assert (after.state, after.attempt, after.placement, after.started) == ("running", 2, [("b", 1)], 3.0)
    assert (after.preemptions, after.oom_failures, after.lost_runs) == (1, 0, 0)
    assert store.events(j) == events


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_duplicate_requeue_report_counts_once(store: Store, kind: str) -> None:
    j = submitted(store)
    store.start(j, [("a", 0)], 1.0)
    assert store.requeue(j, 1, 2.0, attained_gpu_s=1.0, iterations_done=5.0, kind=kind)
    before = row(store, j)
    assert not store.requeue(j, 1, 3.0, attained_gpu_s=2.0, iterations_done=6.0, kind=kind)
    assert row(store, j) == before and getattr(before, KINDS[kind]) == 1
    assert kinds(store, j) == [("submitted", 0), ("started", 1), (f"requeued:{kind}", 1)]


def test_late_exit_of_an_old_attempt_changes_nothing(store: Store) -> None:
    j = second_attempt(store)
    before = row(store, j)
    for state in FINAL_STATES:
        assert not store.end(j, 1, 9.0, state, exit_code=0, attained_gpu_s=50.0, iterations_done=50.0)
    assert row(store, j) == before


@pytest.mark.parametrize("final", FINAL_STATES)
def test_a_final_state_is_never_left(store: Store, final: str) -> None:
    j = submitted(store)
    store.start(j, [("a", 0)], 1.0)
    assert store.end(j, None if final == "cancelled" else 1, 2.0, final, exit_code=3, reason="why")
    ended, events = row(store, j), store.events(j)
    for state in FINAL_STATES:  # late exit reports of the attempt, or of none
        assert not store.end(j, 1, 5.0, state, exit_code=0, reason="late")
        assert not store.end(j, None, 5.0, state)
    for kind in KINDS:
        assert not store.requeue(j, 1, 5.0, attained_gpu_s=9.0, iterations_done=9.0, kind=kind)
    assert store.start(j, [("a", 0)], 5.0) is None
    store.progress([(j, 1, 77.0)])
    assert row(store, j) == ended and store.events(j) == events
    assert (ended.state, ended.ended, ended.exit_code, ended.reason, ended.placement) == (final, 2.0, 3, "why", [])


def test_end_without_attempt_from_queued_and_running(store: Store) -> None:
    q = submitted(store, 0.0)
    r = submitted(store, 0.0)
    store.start(r, [("a", 0), ("a", 1)], 1.0)
    store.progress([(r, 1, 40.0)])
    assert store.end(q, None, 2.0, "cancelled", reason="by user")
    assert store.end(r, None, 3.0, "cancelled", attained_gpu_s=4.0)
    q_row, r_row = row(store, q), row(store, r)
    assert (q_row.state, q_row.ended, q_row.reason, q_row.attempt, q_row.exit_code) == ("cancelled", 2.0, "by user",
                                                                                        0, None)
    assert (r_row.state, r_row.ended, r_row.placement, r_row.attained_gpu_s) == ("cancelled", 3.0, [], 4.0)
    assert r_row.iterations_done == 40.0  # not given: kept
    assert q_row.attained_gpu_s == 0.0
    assert store.events(q)[-1] == {"time": 2.0, "kind": "cancelled", "attempt": 0, "reason": "by user"}
    assert store.events(r)[-1] == {"time": 3.0, "kind": "cancelled", "attempt": 1}


def test_end_of_the_current_attempt_records_exit_and_oom(store: Store) -> None:
    j = second_attempt(store)
    assert store.end(j, 2, 4.0, "failed", exit_code=137, reason="out of memory", oom=True, attained_gpu_s=7.5,
                     iterations_done=30.0)
    got = row(store, j)
    assert (got.state, got.exit_code, got.reason, got.oom_failures, got.attained_gpu_s, got.iterations_done) == (
        "failed", 137, "out of memory", 1, 7.5, 30.0)
    assert store.events(j)[-1] == {"time": 4.0, "kind": "failed", "attempt": 2, "exit_code": 137,
                                   "reason": "out of memory"}
    k = submitted(store)
    store.start(k, [("a", 0)], 1.0)
    assert store.end(k, 1, 2.0, "finished", exit_code=0)
    assert row(store, k).oom_failures == 0
    assert store.events(k)[-1] == {"time": 2.0, "kind": "finished", "attempt": 1, "exit_code": 0}


def test_end_rejects_a_non_final_state_and_unknown_jobs(store: Store) -> None:
    j = submitted(store)
    for state in ("queued", "running", "done"):
        with pytest.raises(ValueError, match="final"):
            store.end(j, None, 1.0, state)
    assert row(store, j).state == "queued" and len(store.events(j)) == 1
    assert not store.end(j + 1, None, 1.0, "cancelled")
    assert not store.end(j + 1, 1, 1.0, "finished")
    assert store.job(j + 1) is None and store.events(j + 1) == []


def test_start_only_from_queued_and_attempts_grow(store: Store) -> None:
    j = submitted(store, 0.5)
    assert store.start(j + 1, [("a", 0)], 1.0) is None
    assert store.start(j, [("a", 0), ("b", 2)], 1.0) == 1
    first = row(store, j)
    assert (first.state, first.placement, first.started, first.first_started) == (
        "running", [("a", 0), ("b", 2)], 1.0, 1.0)
    assert store.start(j, [("c", 0)], 1.5) is None  # already running: nothing changes
    assert row(store, j) == first
    store.progress([(j, 1, 25.0)])
    assert store.requeue(j, 1, 2.0, attained_gpu_s=2.0, iterations_done=30.0, kind="oom", detail={"mib": 17000})
    requeued = row(store, j)
    assert (requeued.state, requeued.placement, requeued.started, requeued.queued_since, requeued.reason) == (
        "queued", [], None, 2.0, "oom")
    assert (requeued.attained_gpu_s, requeued.iterations_done, requeued.oom_failures) == (2.0, 30.0, 1)
    assert store.start(j, [("c", 3)], 4.0) == 2
    second = row(store, j)
    assert (second.attempt, second.started, second.first_started, second.attempt_start_iterations) == (2, 4.0, 1.0,
                                                                                                      30.0)
    assert first.attempt_start_iterations == 0.0 and second.submitted == 0.5
    assert store.events(j) == [
        {"time": 0.5, "kind": "submitted", "attempt": 0},
        {"time": 1.0, "kind": "started", "attempt": 1, "placement": [["a", 0], ["b", 2]]},
        {"time": 2.0, "kind": "requeued:oom", "attempt": 1, "mib": 17000},
        {"time": 4.0, "kind": "started", "attempt": 2, "placement": [["c", 3]]},
    ]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_requeue_counts_its_kind(store: Store, kind: str) -> None:
    j = submitted(store)
    for attempt in (1, 2):
        store.start(j, [("a", 0)], float(attempt))
        assert store.requeue(j, attempt, attempt + 0.5, attained_gpu_s=attempt, iterations_done=attempt, kind=kind)
    got = asdict(row(store, j))
    assert {c: got[c] for c in KINDS.values()} == {c: 2 if c == KINDS[kind] else 0 for c in KINDS.values()}
    assert store.events(j)[-1] == {"time": 2.5, "kind": f"requeued:{kind}", "attempt": 2}
    with pytest.raises(KeyError):
        store.requeue(j, 2, 3.0, attained_gpu_s=0.0, iterations_done=0.0, kind="evicted")


def test_progress_updates_only_the_running_attempt(store: Store) -> None:
    j = second_attempt(store)
    q = submitted(store)
    store.progress([(j, 1, 500.0), (q, 0, 500.0), (j + 99, 1, 1.0)])  # stale attempt, a queued job, unknown
    assert row(store, j).iterations_done == 10.0 and row(store, q).iterations_done == 0.0
    store.progress([(j, 2, 12.5)])
    assert row(store, j).iterations_done == 12.5
    store.progress([])
    assert row(store, j).iterations_done == 12.5


# ---- reads ------------------------------------------------------------------------------------------------
def test_jobs_order_limit_states_and_counts(store: Store) -> None:
    ids = [submitted(store, float(i), name=f"j{i}") for i in range(6)]
    store.start(ids[1], [("a", 0)], 1.0)
    store.start(ids[4], [("a", 1)], 1.0)
    store.end(ids[2], None, 2.0, "cancelled")
    store.start(ids[5], [("a", 2)], 1.0)
    store.end(ids[5], 1, 3.0, "finished", exit_code=0)
    assert [r.id for r in store.jobs()] == ids
    assert [r.id for r in store.jobs(newest_first=True)] == ids[::-1]
    assert [r.id for r in store.jobs(newest_first=True, limit=3)] == [ids[5], ids[4], ids[3]]
    assert [r.id for r in store.jobs(limit=2)] == ids[:2]
    assert store.jobs(limit=0) == []
    assert [r.id for r in store.jobs(states=("queued",))] == [ids[0], ids[3]]
    assert [r.id for r in store.jobs(states=["running", "finished"], newest_first=True)] == [ids[5], ids[4], ids[1]]
    assert [r.id for r in store.jobs(states=("running", "queued"), limit=3)] == ids[:2] + [ids[3]]
    assert [r.id for r in store.jobs(states=())] == ids  # no filter
    assert store.counts() == {"queued": 2, "running": 2, "cancelled": 1, "finished": 1}
    assert [r.name for r in store.jobs(states=("cancelled",))] == ["j2"]


def test_rows_decode_what_was_submitted(store: Store) -> None:
    job = new_job(name="n", gpu_type="V100|T4", gpu_fraction=0.5, iterations=123.0, env={"A": "1"}, cwd="/w",
                  command=["python", "train.py"], num_gpus=2, batch_size=8, model="bert")
    got, created = store.submit(job, 7.0)
    assert created and got == row(store, got.id)
    assert (got.job_id, got.name, got.model, got.batch_size, got.num_gpus, got.gpu_type, got.gpu_fraction) == (
        str(got.id), "n", "bert", 8, 2, "V100|T4", 0.5)
    assert (got.iterations, got.command, got.env, got.cwd, got.state, got.attempt, got.placement) == (
        123.0, ["python", "train.py"], {"A": "1"}, "/w", "queued", 0, [])
    assert (got.submitted, got.queued_since, got.started, got.first_started, got.ended) == (7.0, 7.0, None, None, None)
    assert store.counts() == {"queued": 1} and store.job(got.id + 1) is None


def test_idempotency_key_returns_the_same_job(store: Store) -> None:
    first, created = store.submit(new_job(idem_key="k1", name="first"), 1.0)
    again, created_again = store.submit(new_job(idem_key="k1", name="second"), 2.0)
    assert created and not created_again and again == first and again.name == "first"
    other, created_other = store.submit(new_job(idem_key="k2"), 3.0)
    plain = [store.submit(new_job(), 4.0)[0].id for _ in range(2)]  # no key: always a new job
    assert created_other and other.id != first.id and len(set(plain)) == 2
    assert len(store.jobs()) == 4 and kinds(store, first.id) == [("submitted", 0)]


def test_queue_order_survives_a_restart_as_the_live_scheduler_sees_it(tmp_path: Path) -> None:
    path = tmp_path / "state" / "horus.db"
    store = Store(path)
    ids = [submitted(store, float(t)) for t in range(1, 6)]
    store.start(ids[0], [("gone", 0)], 6.0)
    store.requeue(ids[0], 1, 10.0, attained_gpu_s=4.0, iterations_done=8.0, kind="preempted")  # back of the queue
    store.start(ids[1], [("gone", 1)], 7.0)  # running on an agent that will not come back
    store.start(ids[3], [("gone", 2)], 8.0)
    store.end(ids[3], 1, 9.0, "finished", exit_code=0)
    store.close()

    reopened = Store(path)
    assert [r.id for r in reopened.jobs(states=("queued", "running"))] == [ids[0], ids[1], ids[2], ids[4]]
    live = LiveScheduler(reopened, AnalyticPredictor(), policy="fifo-exclusive", clock=lambda: 20.0)
    # queued by the time each (re)joined the queue: 3 and 5 waiting since submission, 1 since its preemption,
    # 2 since the restart found its machine gone
    assert list(live.state.queue) == [str(ids[2]), str(ids[4]), str(ids[0]), str(ids[1])]
    assert live.state.queue[str(ids[0])].attained_gpu_s == 4.0 and live.state.queue[str(ids[0])].preemptions == 1
    assert live.state.running == {}
    lost = row(reopened, ids[1])
    assert (lost.state, lost.lost_runs, lost.queued_since, lost.attempt) == ("queued", 1, 20.0, 1)
    assert row(reopened, ids[3]).state == "finished"
    reopened.close()

    again = Store(path)  # a second restart sees the same queue, in the same order
    live = LiveScheduler(again, AnalyticPredictor(), policy="fifo-exclusive", clock=lambda: 30.0)
    assert list(live.state.queue) == [str(ids[2]), str(ids[4]), str(ids[0]), str(ids[1])]
    assert [q.queued_since for q in live.state.queue.values()] == [3.0, 5.0, 10.0, 20.0]
    again.close()


# ---- agents and models ------------------------------------------------------------------------------------
def test_register_agent_keeps_its_seq_and_first_registration(store: Store) -> None:
    a = store.register_agent("a", "host-a", [{"index": 0}], 1.0)
    b = store.register_agent("b", "host-b", [], 2.0)
    assert (a.seq, b.seq, a.state, a.registered, a.changed) == (1, 2, "alive", 1.0, 1.0)
    store.agent_lost("a", 3.0)
    assert [(x.name, x.state, x.changed) for x in store.agents()] == [("a", "lost", 3.0), ("b", "alive", 2.0)]
    again = store.register_agent("a", "host-a2", [{"index": 0}, {"index": 1}], 4.0)
    assert (again.seq, again.registered, again.changed, again.state, again.hostname) == (1, 1.0, 4.0, "alive",
                                                                                         "host-a2")
    c = store.register_agent("c", "host-c", [], 5.0)
    assert c.seq == 3
    assert store.agents() == [again, b, c]
    store.agent_lost("nobody", 6.0)
    assert store.agents() == [again, b, c]


def test_models_are_added_once(store: Store) -> None:
    store.add_model("m", {"params": 1}, 1.0)
    store.add_model("m", {"params": 2}, 2.0)
    store.add_model("n", {"params": 3}, 3.0)
    assert store.models() == {"m": {"params": 1}, "n": {"params": 3}}


# ---- the file ---------------------------------------------------------------------------------------------
def test_state_survives_reopening_and_missing_folders_are_made(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "horus.db"
    store = Store(path)
    j = second_attempt(store)
    store.register_agent("a", "h", [], 1.0)
    before = row(store, j)
    store.close()
    again = Store(path)  # the folder exists now
    assert row(again, j) == before and [x.name for x in again.agents()] == ["a"]
    assert again.submit(new_job(), 5.0)[0].id == j + 1
    again.close()


def test_a_store_written_at_this_schema_version_opens(tmp_path: Path) -> None:
    path = tmp_path / "horus.db"
    Store(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    path2 = tmp_path / "old.db"
    with sqlite3.connect(path2) as db:  # a file written by another Horus of schema version 1
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    store = Store(path2)
    assert store.jobs() == []
    store.close()


def test_a_schema_1_store_with_jobs_is_migrated_and_keeps_them(tmp_path: Path) -> None:
    """A store written before owners and credentials existed opens, keeps its jobs (owner unknown) and is
    version 2 afterwards."""
    path = tmp_path / "horus.db"
    store = Store(path)
    j = store.submit(new_job(), 1.0)[0].id
    store.close()
    with sqlite3.connect(path) as db:  # make it what schema 1 wrote: no owner column
        db.execute("ALTER TABLE jobs DROP COLUMN owner")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    again = Store(path)
    old = again.job(j)
    assert old is not None and old.owner is None and old.state == "queued"
    mine = again.submit(NewJob(model="m", batch_size=1, num_gpus=1, command=["x"], owner="alice"), 2.0)[0]
    assert mine.owner == "alice" and [r.id for r in again.jobs(owner="alice")] == [mine.id]
    again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)


@pytest.mark.parametrize("version", ["0", str(SCHEMA_VERSION + 1)])
def test_another_schema_version_is_refused(tmp_path: Path, version: str) -> None:
    path = tmp_path / "horus.db"
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    with pytest.raises(StoreError, match=f"schema version {version}"):
        Store(path)


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "horus.db"
    path.write_bytes(b"this is not a database, just some text that is long enough " * 100)
    with pytest.raises(StoreError, match="not a usable Horus state file"):
        Store(path)


def test_a_failed_transaction_is_rolled_back_and_the_store_stays_usable(store: Store) -> None:
    with pytest.raises(RuntimeError, match="boom"), store.transaction() as db:
        db.execute("UPDATE jobs SET state = 'failed'")
        db.execute("INSERT INTO models VALUES ('m', '{}', 0)")
        raise RuntimeError("boom")
    assert store.models() == {}
    j = submitted(store)
    assert store.start(j, [("a", 0)], 1.0) == 1


def test_the_store_is_usable_from_other_threads(store: Store) -> None:
    j = submitted(store)
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(store.start(j, [("a", 0)], 1.0)))
    thread.start()
    thread.join(10)
    assert results == [1] and row(store, j).state == "running"


# ---- property: fencing under any interleaving ---------------------------------------------------------------
op = st.one_of(
    st.tuples(st.just("start"), st.integers(0, 2)),
    st.tuples(st.just("requeue"), st.integers(0, 2), st.integers(-2, 1), st.sampled_from(sorted(KINDS))),
    st.tuples(st.just("end"), st.integers(0, 2), st.one_of(st.none(), st.integers(-2, 1)),
              st.sampled_from(FINAL_STATES)),
    st.tuples(st.just("progress"), st.integers(0, 2), st.integers(-2, 1)),
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=25))
def test_any_interleaving_of_reports_is_fenced(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory(dir=SCRATCH) as folder:
        store = Store(Path(folder) / "horus.db")
        try:
            ids = [submitted(store, 0.0) for _ in range(3)]
            model = {j: {"state": "queued", "attempt": 0} for j in ids}
            expected_events = {j: [("submitted", 0)] for j in ids}
            for step, (name, which, *rest) in enumerate(ops, start=1):
                j, now = ids[which], float(step)
                want, before = model[j], row(store, j)
                others = {k: row(store, k) for k in ids if k != j}
                if name == "start":
                    ok = want["state"] == "queued"
                    got = store.start(j, [(f"agent{step}", 0)], now)
                    assert got == (want["attempt"] + 1 if ok else None)
                    if ok:
                        want.update(state="running", attempt=want["attempt"] + 1)
                        expected_events[j].append(("started", want["attempt"]))
                elif name == "requeue":
                    offset, kind = rest
                    attempt = want["attempt"] + offset
                    ok = want["state"] == "running" and offset == 0
                    assert store.requeue(j, attempt, now, attained_gpu_s=now, iterations_done=now, kind=kind) == ok
                    if ok:
                        want["state"] = "queued"
                        expected_events[j].append((f"requeued:{kind}", attempt))
                elif name == "end":
                    offset, final = rest
                    attempt = None if offset is None else want["attempt"] + offset
                    ok = want["state"] in ("queued", "running") and offset in (None, 0)
                    assert store.end(j, attempt, now, final, exit_code=step) == ok
                    if ok:
                        want["state"] = final
                        expected_events[j].append((final, want["attempt"]))
                else:
                    (offset,) = rest
                    ok = want["state"] == "running" and offset == 0
                    store.progress([(j, want["attempt"] + offset, now)])
                after = row(store, j)
                assert (after.state, after.attempt) == (want["state"], want["attempt"])
                assert after.attempt >= before.attempt
                if not ok:  # a refused or stale report leaves the row exactly as it was
                    assert after == before
                elif name == "progress":
                    assert after.iterations_done == now
                if before.state in FINAL_STATES:
                    assert after == before
                assert {k: row(store, k) for k in ids if k != j} == others
                assert kinds(store, j) == expected_events[j]
            assert store.counts() == {s: n for s in ("queued", "running", *FINAL_STATES)
                                      if (n := sum(m["state"] == s for m in model.values()))}
        finally:
            store.close()


def test_report_values_are_keyword_only(store: Store) -> None:
    """Attained service, iterations and the kind are never taken by position (they are easy to swap)."""
    j = submitted(store)
    store.start(j, [("a", 0)], 1.0)
    with pytest.raises(TypeError):
        store.requeue(j, 1, 2.0, 1.0, 10.0, "preempted")  # type: ignore[misc]
    with pytest.raises(TypeError):
        store.end(j, 1, 2.0, "finished", 1.0)  # type: ignore[misc]
    assert row(store, j).state == "running"
    assert store.end(job_id=j, attempt=1, now=2.0, state="finished", attained_gpu_s=1.0)
