"""The live service's durable state: one SQLite file in WAL mode.

Tables: ``jobs`` (spec, command, owner, queue and priority class, state machine, attempts, placement,
attained service), ``events`` (every transition of every job), ``agents`` (registered machines and their GPUs),
``models`` (uploaded ONNX graphs' features), ``tokens`` (named credentials with a role, stored as
SHA-256 hashes), ``colocations`` (every set of jobs that shared a GPU: when, predicted and observed
combined throughput, how it ended), ``queues`` and ``priority_classes`` (the tenancy, docs/service.md; no queue:
no tenancy), ``observations`` (what telemetry saw of each job's solo utilization, peak memory and iteration time
beside its predictions: the online corrections are computed from them, ``horus.predict.corrected``). Every transition is one transaction that checks the
job's current state and attempt (``WHERE state = ? AND attempt = ?``), so a late or duplicate
report changes nothing: fencing is done by the database, not by memory. An acknowledged write
has been committed with ``synchronous=FULL`` before the reply, so it survives ``kill -9`` and
power loss.

Job states: ``queued`` -> ``running`` -> ``finished`` | ``failed`` | ``cancelled``; ``running`` ->
``queued`` again after a preemption, an out-of-memory exit or a lost agent (attempt + 1 at the
next start).
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 7
ROLES = ("admin", "user", "agent", "join")
IDEM_SEP = "\x1f"  # owner IDEM_SEP key
FINAL_STATES = ("finished", "failed", "cancelled")
JOB_STATES = ("queued", "running", *FINAL_STATES)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,       -- never reused
    idem_key TEXT UNIQUE,
    name TEXT,
    model TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    num_gpus INTEGER NOT NULL,
    gpu_type TEXT,
    gpu_fraction REAL,
    iterations REAL,
    command TEXT NOT NULL,                      -- JSON list of strings
    env TEXT NOT NULL,                          -- JSON object
    cwd TEXT,
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'finished', 'failed', 'cancelled')),
    attempt INTEGER NOT NULL DEFAULT 0,
    placement TEXT,                             -- JSON [[agent, local GPU index], ...] of the current attempt
    submitted REAL NOT NULL,
    queued_since REAL NOT NULL,
    started REAL,
    first_started REAL,
    ended REAL,
    attained_gpu_s REAL NOT NULL DEFAULT 0,     -- GPU-seconds before the current attempt
    iterations_done REAL NOT NULL DEFAULT 0,
    attempt_start_iterations REAL NOT NULL DEFAULT 0,  -- iterations done before the current attempt
    oom_failures INTEGER NOT NULL DEFAULT 0,
    preemptions INTEGER NOT NULL DEFAULT 0,
    lost_runs INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    reason TEXT,
    owner TEXT,                                 -- the submitting identity's name (NULL: before schema 2)
    secret_keys TEXT,                           -- JSON list of env names whose values reads never return
    queue TEXT,                                 -- tenant queue (NULL: the default queue; before schema 4)
    priority TEXT,                              -- priority class (NULL: the default class)
    input_size INTEGER,                         -- image side / sequence length (NULL: the catalog's; before 5)
    precision TEXT,                             -- fp32 | tf32 | amp-fp16 | bf16 (NULL: the predictor's default)
    optimizer TEXT                              -- horus.jobs.OPTIMIZERS (NULL: the predictor's default)
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL,
    time REAL NOT NULL,
    kind TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    detail TEXT NOT NULL                        -- JSON object
);
CREATE INDEX IF NOT EXISTS events_by_job ON events (job_id);
CREATE TABLE IF NOT EXISTS agents (
    name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,                -- registration order = node order in the cluster model
    hostname TEXT NOT NULL,
    gpus TEXT NOT NULL,                         -- JSON list of GPU descriptions
    state TEXT NOT NULL CHECK (state IN ('alive', 'lost')),
    registered REAL NOT NULL,
    changed REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS models (
    name TEXT PRIMARY KEY,
    info TEXT NOT NULL,                         -- JSON catalog row
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    name TEXT PRIMARY KEY,
    role TEXT NOT NULL CHECK (role IN ('admin', 'user', 'agent', 'join')),
    hash TEXT NOT NULL UNIQUE,                  -- hex SHA-256 of the token; the token itself is never stored
    created REAL NOT NULL,
    revoked REAL
);
CREATE TABLE IF NOT EXISTS colocations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent TEXT NOT NULL,
    local_index INTEGER NOT NULL,
    gpu_type TEXT NOT NULL,
    jobs TEXT NOT NULL,                         -- JSON list of job ids sharing the GPU
    started REAL NOT NULL,
    ended REAL,                                 -- NULL while the set runs
    predicted REAL,                             -- predicted combined normalized throughput
    observed REAL,                              -- mean observed combined normalized throughput
    samples INTEGER NOT NULL DEFAULT 0,
    outcome TEXT NOT NULL                       -- running | kept | unpacked | oom | lost | cancelled
);
CREATE TABLE IF NOT EXISTS queues (
    name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,                -- creation order: the first is the default queue unless one is named
    guaranteed TEXT NOT NULL,                   -- JSON {GPU type or "*": GPUs}
    borrow_limit REAL,                          -- GPUs beyond the guarantee (NULL: no limit but the cluster)
    weight REAL NOT NULL,
    created REAL NOT NULL,
    changed REAL NOT NULL,
    users TEXT NOT NULL DEFAULT '[]'            -- JSON list of the user-token names that may submit ([]: every user)
);
CREATE TABLE IF NOT EXISTS priority_classes (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL,
    preemptible INTEGER NOT NULL CHECK (preemptible IN (0, 1)),
    created REAL NOT NULL,
    changed REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS observations (
    job_id INTEGER NOT NULL,
    quantity TEXT NOT NULL CHECK (quantity IN ('util', 'mem_mib', 'iter_time_s')),
    attempt INTEGER NOT NULL,                   -- the attempt it was observed in (the latest replaces earlier ones)
    job_type TEXT NOT NULL,
    gpu_type TEXT NOT NULL,
    predicted REAL NOT NULL,                    -- the base predictor's value (uncorrected)
    believed REAL NOT NULL,                     -- the corrected prediction the attempt started with
    observed REAL NOT NULL,
    samples INTEGER NOT NULL,
    time REAL NOT NULL,
    PRIMARY KEY (job_id, quantity)
);
"""



def _add_owner(db: sqlite3.Connection) -> None:
    if "owner" not in {r[1] for r in db.execute("PRAGMA table_info(jobs)")}:
        db.execute("ALTER TABLE jobs ADD COLUMN owner TEXT")


def _v3_join_and_secrets(db: sqlite3.Connection) -> None:
    """Schema 3: the ``join`` role (a CHECK constraint: the table is rebuilt) and ``jobs.secret_keys``."""
    if "secret_keys" not in {r[1] for r in db.execute("PRAGMA table_info(jobs)")}:
        db.execute("ALTER TABLE jobs ADD COLUMN secret_keys TEXT")
    db.execute("ALTER TABLE tokens RENAME TO tokens_v2")
    db.execute("CREATE TABLE tokens (name TEXT PRIMARY KEY, role TEXT NOT NULL CHECK (role IN ('admin', 'user', "
               "'agent', 'join')), hash TEXT NOT NULL UNIQUE, created REAL NOT NULL, revoked REAL)")
    db.execute("INSERT INTO tokens SELECT name, role, hash, created, revoked FROM tokens_v2")
    db.execute("DROP TABLE tokens_v2")


def _v4_tenancy(db: sqlite3.Connection) -> None:
    """Schema 4: ``jobs.queue`` and ``jobs.priority`` (NULL: the defaults); the new tables come from _SCHEMA."""
    columns = {r[1] for r in db.execute("PRAGMA table_info(jobs)")}
    for column in ("queue", "priority"):
        if column not in columns:
            db.execute(f"ALTER TABLE jobs ADD COLUMN {column} TEXT")


def _v5_job_description(db: sqlite3.Connection) -> None:
    """Schema 5: ``jobs.input_size``, ``jobs.precision`` and ``jobs.optimizer`` (NULL: not stated; old jobs keep
    being predicted as before, at the catalog's input size with the predictor's defaults)."""
    columns = {r[1] for r in db.execute("PRAGMA table_info(jobs)")}
    for column, kind in (("input_size", "INTEGER"), ("precision", "TEXT"), ("optimizer", "TEXT")):
        if column not in columns:
            db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")


def _observations_table(db: sqlite3.Connection) -> None:
    """Schema 6: the ``observations`` table of online correction (a self-contained step: it only adds the table,
    which _SCHEMA also creates)."""
    db.execute(_SCHEMA[_SCHEMA.index("CREATE TABLE IF NOT EXISTS observations"):].split(";")[0])


def _v7_queue_users(db: sqlite3.Connection) -> None:
    """Schema 7: ``queues.users`` (a JSON list; ``[]``: every user may submit, as before)."""
    if "users" not in {r[1] for r in db.execute("PRAGMA table_info(queues)")}:
        db.execute("ALTER TABLE queues ADD COLUMN users TEXT NOT NULL DEFAULT '[]'")


# from version -> what brings a store to version + 1 (new tables: _SCHEMA)
_MIGRATIONS = {1: _add_owner, 2: _v3_join_and_secrets, 3: _v4_tenancy, 4: _v5_job_description,
               5: _observations_table, 6: _v7_queue_users}


def _create(path: Path) -> None:
    """A new, empty store at ``path``, made in a temporary file and renamed into place (atomic: a crash leaves
    either no ``horus.db`` or a complete one, never an empty file)."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".new")
    os.close(fd)
    try:
        db = sqlite3.connect(name, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        finally:
            db.close()  # the last connection: the WAL is checkpointed into the file and removed
        with open(name, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(name, path)
    finally:
        for leftover in (name, f"{name}-wal", f"{name}-shm"):
            Path(leftover).unlink(missing_ok=True)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class StoreError(RuntimeError):
    """The state file cannot be used (wrong schema version, not a Horus store, corrupt, empty)."""


class StoreUnavailable(StoreError):
    """A write could not be made (disk full, read-only file, I/O error, locked): nothing of it was stored."""


def is_store_failure(exc: sqlite3.Error) -> bool:
    """Is this the store failing (disk full, read-only, I/O error, locked, corrupt) rather than a bug or a
    constraint (``IntegrityError``, ``ProgrammingError``)?"""
    return isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (at most 200 characters)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


@dataclass
class JobRow:
    """One row of ``jobs``, decoded."""

    id: int
    idem_key: str | None
    name: str | None
    model: str
    batch_size: int
    num_gpus: int
    gpu_type: str | None
    gpu_fraction: float | None
    iterations: float | None
    command: list[str]
    env: dict[str, str]
    cwd: str | None
    state: str
    attempt: int
    placement: list[tuple[str, int]]
    submitted: float
    queued_since: float
    started: float | None
    first_started: float | None
    ended: float | None
    attained_gpu_s: float
    iterations_done: float
    attempt_start_iterations: float
    oom_failures: int
    preemptions: int
    lost_runs: int
    exit_code: int | None
    reason: str | None
    owner: str | None = None
    secret_keys: tuple[str, ...] = ()  # names in ``env`` whose values reads never return
    queue: str | None = None  # tenant queue (None: the default)
    priority: str | None = None  # priority class (None: the default)
    input_size: int | None = None  # the job's input size (None: the catalog's)
    precision: str | None = None  # horus.jobs.PRECISIONS (None: the predictor's default)
    optimizer: str | None = None  # horus.jobs.OPTIMIZERS (None: the predictor's default)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> JobRow:
        values = dict(row)
        values["command"] = json.loads(values["command"])
        values["env"] = json.loads(values["env"])
        values["secret_keys"] = tuple(json.loads(values.get("secret_keys") or "[]"))
        values["placement"] = [(str(a), int(i)) for a, i in json.loads(values["placement"] or "[]")]
        return cls(**values)

    @property
    def job_id(self) -> str:
        return str(self.id)

    @property
    def idempotency_key(self) -> str | None:
        """The key as its owner gave it (stored prefixed by the owner, so keys are per owner)."""
        return None if self.idem_key is None else self.idem_key.split(IDEM_SEP, 1)[-1]


@dataclass
class AgentRow:
    name: str
    seq: int
    hostname: str
    gpus: list[dict[str, Any]]
    state: str
    registered: float
    changed: float


@dataclass
class NewJob:
    """What a submission stores (already validated)."""

    model: str
    batch_size: int
    num_gpus: int
    command: Sequence[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    name: str | None = None
    gpu_type: str | None = None
    gpu_fraction: float | None = None
    iterations: float | None = None
    idem_key: str | None = None
    owner: str | None = None
    secret_keys: Sequence[str] = ()  # names in ``env`` whose values reads never return
    queue: str | None = None  # tenant queue (None: the default)
    priority: str | None = None  # priority class (None: the default)
    input_size: int | None = None  # the job's input size (None: the catalog's)
    precision: str | None = None  # canonical horus.jobs.PRECISIONS name (None: the predictor's default)
    optimizer: str | None = None  # horus.jobs.OPTIMIZERS (None: the predictor's default)


class Store:
    """Thread-safe access to one state file. Every public write is one transaction.

    Opening refuses, with one line naming the file, a file that is not a Horus store, is corrupt
    (``PRAGMA quick_check``) or is empty (a new store is written to a temporary file and renamed into
    place, so a crash while creating one leaves no empty ``horus.db``). A write the store cannot make
    (disk full, read-only, I/O error) raises ``StoreUnavailable`` with nothing of it stored, and
    ``write_error`` says why until a write succeeds again (``probe`` tries one)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.write_error: str | None = None  # why the last write failed; None once one succeeds
        self.write_failures = 0  # writes that failed since the store was opened
        try:
            if not self.path.exists():
                _create(self.path)
            elif self.path.stat().st_size == 0:
                raise StoreError(f"{self.path}: empty file (0 bytes), not a Horus store; if it holds nothing "
                                 "(a copy or a disk that failed), delete it and a new store is created on start")
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot open the state file ({exc.strerror})") from None
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the state file ({one_line(exc)})") from None
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            problems = [r[0] for r in self._db.execute("PRAGMA quick_check").fetchall()]
            if problems != ["ok"]:
                first = " ".join(str(problems[0]).split())  # SQLite's report may span lines: one line here
                raise StoreError(self._corrupt(f"quick_check: {first[:150]}"))
            self._db.executescript(_SCHEMA)  # idempotent (IF NOT EXISTS)
            with self.transaction() as db:
                found = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                version = SCHEMA_VERSION if found is None else int(found["value"])
                while version in _MIGRATIONS and version < SCHEMA_VERSION:
                    _MIGRATIONS[version](db)
                    version += 1
                if found is None:
                    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                elif version != SCHEMA_VERSION:
                    raise StoreError(f"{self.path}: schema version {found['value']}, this Horus reads "
                                     f"{SCHEMA_VERSION}")
                else:
                    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        except StoreUnavailable as exc:
            self._db.close()
            raise StoreError(f"{self.path}: {exc}") from None
        except StoreError:
            self._db.close()
            raise
        except sqlite3.DatabaseError as exc:
            self._db.close()
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_CORRUPT or "malformed" in str(exc):
                raise StoreError(self._corrupt(one_line(exc))) from None
            raise StoreError(f"{self.path}: not a usable Horus state file ({one_line(exc)})") from None

    def _corrupt(self, why: str) -> str:
        return (f"{self.path}: the store is corrupt ({why}); restore it from a backup, or move it away to start "
                "with an empty store")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on any exception). The store failing (disk full,
        read-only, I/O error) raises ``StoreUnavailable``: nothing of the transaction is stored."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:  # SQLite may have rolled back itself (disk full, I/O error)
                        self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                if not is_store_failure(exc):
                    raise
                self.write_error = one_line(exc)
                self.write_failures += 1
                raise StoreUnavailable(f"the store cannot write ({self.write_error}): nothing was changed") \
                    from None
            self.write_error = None

    def probe(self) -> bool:
        """Can the store write? (one small transaction; clears ``write_error`` when it can)."""
        try:
            with self.transaction() as db:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('write_probe', ?)", (str(time.time()),))
        except StoreUnavailable:
            return False
        return True

    # ---- reads -----------------------------------------------------------------------------------
    def job(self, job_id: int) -> JobRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return JobRow.from_row(row) if row else None

    def jobs(self, states: Sequence[str] | None = None, limit: int | None = None,
             newest_first: bool = False, owner: str | None = None, before: int | None = None) -> list[JobRow]:
        """Jobs (only ``owner``'s when given), optionally only in ``states``, only with ids below ``before``."""
        sql = "SELECT * FROM jobs"
        where: list[str] = []
        args: list[Any] = []
        if before is not None:
            where.append("id < ?")
            args.append(int(before))
        if states:
            where.append(f"state IN ({','.join('?' * len(states))})")
            args += list(states)
        if owner is not None:
            where.append("owner = ?")
            args.append(owner)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC" if newest_first else " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self._lock:
            return [JobRow.from_row(r) for r in self._db.execute(sql, args).fetchall()]

    def counts(self, owner: str | None = None) -> dict[str, int]:
        sql, args = "SELECT state, COUNT(*) AS n FROM jobs", ()
        if owner is not None:
            sql, args = sql + " WHERE owner = ?", (owner,)
        with self._lock:
            rows = self._db.execute(sql + " GROUP BY state", args).fetchall()
        return {r["state"]: int(r["n"]) for r in rows}

    def events(self, job_id: int) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT time, kind, attempt, detail FROM events WHERE job_id = ? ORDER BY id",
                                    (job_id,)).fetchall()
        return [{"time": r["time"], "kind": r["kind"], "attempt": r["attempt"], **json.loads(r["detail"])}
                for r in rows]

    def agents(self) -> list[AgentRow]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM agents ORDER BY seq").fetchall()
        return [AgentRow(r["name"], r["seq"], r["hostname"], json.loads(r["gpus"]), r["state"], r["registered"],
                         r["changed"]) for r in rows]

    def models(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT name, info FROM models").fetchall()
        return {r["name"]: json.loads(r["info"]) for r in rows}

    # ---- transitions (one transaction each) ---------------------------------------------------------
    def submit(self, job: NewJob, now: float) -> tuple[JobRow, bool]:
        """Store a new queued job; with an idempotency key already used, return that job. (row, created)."""
        with self.transaction() as db:
            if job.idem_key is not None:  # keys are per owner: another user's key neither matches nor leaks
                found = db.execute("SELECT * FROM jobs WHERE idem_key = ?", (self._idem(job),)).fetchone()
                if found is not None:
                    return JobRow.from_row(found), False
            cur = db.execute(
                "INSERT INTO jobs (idem_key, name, model, batch_size, num_gpus, gpu_type, gpu_fraction, iterations, "
                "command, env, cwd, state, submitted, queued_since, owner, secret_keys, queue, priority, input_size, "
                "precision, optimizer) VALUES (?,?,?,?,?,?,?,?,?,?,?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (self._idem(job), job.name, job.model, job.batch_size, job.num_gpus, job.gpu_type, job.gpu_fraction,
                 job.iterations, json.dumps(list(job.command)), json.dumps(job.env), job.cwd, now, now, job.owner,
                 json.dumps(sorted(job.secret_keys)) if job.secret_keys else None, job.queue, job.priority,
                 job.input_size, job.precision, job.optimizer))
            job_id = int(cur.lastrowid)
            self._event(db, job_id, now, "submitted", 0, {})
            row = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return JobRow.from_row(row), True

    def start(self, job_id: int, placement: Sequence[tuple[str, int]], now: float) -> int | None:
        """queued -> running with attempt + 1 on ``placement``; the new attempt, or None if not queued."""
        with self.transaction() as db:
            cur = db.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, placement = ?, started = ?, "
                "first_started = COALESCE(first_started, ?), attempt_start_iterations = iterations_done "
                "WHERE id = ? AND state = 'queued'",
                (json.dumps([list(p) for p in placement]), now, now, job_id))
            if cur.rowcount != 1:
                return None
            attempt = int(db.execute("SELECT attempt FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])
            self._event(db, job_id, now, "started", attempt, {"placement": [list(p) for p in placement]})
        return attempt

    def requeue(self, job_id: int, attempt: int, now: float, *, attained_gpu_s: float, iterations_done: float,
                kind: str, detail: dict[str, Any] | None = None) -> bool:
        """running -> queued. ``kind``: ``preempted`` | ``oom`` | ``lost`` (counted in preemptions,
        oom_failures or lost_runs) | ``fenced`` (stopped by its wrapper when its agent went silent; not counted
        against the job)."""
        column = {"preempted": "preemptions", "oom": "oom_failures", "lost": "lost_runs", "fenced": "lost_runs"}[kind]
        counted = 0 if kind == "fenced" else 1
        with self.transaction() as db:
            cur = db.execute(
                f"UPDATE jobs SET state = 'queued', placement = NULL, queued_since = ?, started = NULL, "
                f"attained_gpu_s = ?, iterations_done = ?, {column} = {column} + ?, reason = ? "
                f"WHERE id = ? AND state = 'running' AND attempt = ?",
                (now, attained_gpu_s, iterations_done, counted, kind, job_id, attempt))
            if cur.rowcount != 1:
                return False
            self._event(db, job_id, now, f"requeued:{kind}", attempt, detail or {})
        return True

    def end(self, job_id: int, attempt: int | None, now: float, state: str, *, attained_gpu_s: float | None = None,
            iterations_done: float | None = None, exit_code: int | None = None, reason: str | None = None,
            oom: bool = False, detail: dict[str, Any] | None = None) -> bool:
        """-> ``finished`` | ``failed`` | ``cancelled`` (final). ``attempt`` None: from any non-final state;
        ``oom``: this end is one more out-of-memory failure; ``detail``: more for the event (e.g. a log tail)."""
        if state not in FINAL_STATES:
            raise ValueError(f"not a final state: {state!r}")
        sql = ("UPDATE jobs SET state = ?, ended = ?, placement = NULL, exit_code = ?, reason = ?, "
               "attained_gpu_s = COALESCE(?, attained_gpu_s), iterations_done = COALESCE(?, iterations_done), "
               "oom_failures = oom_failures + ? WHERE id = ? AND state IN ('queued', 'running')")
        args: list[Any] = [state, now, exit_code, reason, attained_gpu_s, iterations_done, int(oom), job_id]
        if attempt is not None:
            sql += " AND attempt = ?"
            args.append(attempt)
        with self.transaction() as db:
            current = db.execute("SELECT attempt FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if current is None or db.execute(sql, args).rowcount != 1:
                return False
            found = {k: v for k, v in (("exit_code", exit_code), ("reason", reason)) if v is not None}
            self._event(db, job_id, now, state, int(current[0]), {**found, **(detail or {})})
        return True

    def progress(self, updates: Sequence[tuple[int, int, float]]) -> None:
        """Record ``(job_id, attempt, iterations_done)`` telemetry of running attempts (one transaction)."""
        if not updates:
            return
        with self.transaction() as db:
            db.executemany("UPDATE jobs SET iterations_done = ? WHERE id = ? AND attempt = ? AND state = 'running'",
                           [(it, job, att) for job, att, it in updates])

    # ---- agents and models ---------------------------------------------------------------------------
    def register_agent(self, name: str, hostname: str, gpus: list[dict[str, Any]], now: float) -> AgentRow:
        with self.transaction() as db:
            row = db.execute("SELECT seq, registered FROM agents WHERE name = ?", (name,)).fetchone()
            if row is None:
                seq = int(db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM agents").fetchone()[0])
                db.execute("INSERT INTO agents VALUES (?, ?, ?, ?, 'alive', ?, ?)",
                           (name, seq, hostname, json.dumps(gpus), now, now))
                registered = now
            else:
                seq, registered = int(row["seq"]), float(row["registered"])
                db.execute("UPDATE agents SET hostname = ?, gpus = ?, state = 'alive', changed = ? WHERE name = ?",
                           (hostname, json.dumps(gpus), now, name))
        return AgentRow(name, seq, hostname, gpus, "alive", registered, now)

    def agent_lost(self, name: str, now: float) -> None:
        with self.transaction() as db:
            db.execute("UPDATE agents SET state = 'lost', changed = ? WHERE name = ?", (now, name))

    def add_model(self, name: str, info: dict[str, Any], now: float) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO models VALUES (?, ?, ?)", (name, json.dumps(info), now))

    # ---- credentials -----------------------------------------------------------------------------------
    def add_token(self, name: str, role: str, token_hash: str, now: float) -> None:
        """A new named credential (its hash). Raises ``StoreError`` if the name exists."""
        if role not in ROLES:
            raise ValueError(f"role: expected one of {', '.join(ROLES)}, got {role!r}")
        try:
            with self.transaction() as db:  # a revoked name may be issued again
                db.execute("DELETE FROM tokens WHERE name = ? AND revoked IS NOT NULL", (name,))
                db.execute("INSERT INTO tokens VALUES (?, ?, ?, ?, NULL)", (name, role, token_hash, now))
        except sqlite3.IntegrityError:
            raise StoreError(f"a token named {name!r} exists (revoke it first, or choose another name)") from None

    def token_by_hash(self, token_hash: str) -> tuple[str, str] | None:
        """(name, role) of the unrevoked credential with this hash."""
        with self._lock:
            row = self._db.execute("SELECT name, role FROM tokens WHERE hash = ? AND revoked IS NULL",
                                   (token_hash,)).fetchone()
        return None if row is None else (row["name"], row["role"])

    def tokens(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT name, role, created, revoked FROM tokens ORDER BY created").fetchall()
        return [dict(r) for r in rows]

    def revoke_token(self, name: str, now: float) -> bool:
        with self.transaction() as db:
            return db.execute("UPDATE tokens SET revoked = ? WHERE name = ? AND revoked IS NULL",
                              (now, name)).rowcount == 1

    # ---- co-location ledger ----------------------------------------------------------------------------
    def open_set(self, agent: str, local_index: int, gpu_type: str, jobs: Sequence[str], now: float,
                 predicted: float | None) -> int:
        with self.transaction() as db:
            cur = db.execute("INSERT INTO colocations (agent, local_index, gpu_type, jobs, started, predicted, "
                             "outcome) VALUES (?, ?, ?, ?, ?, ?, 'running')",
                             (agent, local_index, gpu_type, json.dumps([int(j) for j in jobs]), now, predicted))
            return int(cur.lastrowid)

    def close_set(self, set_id: int, now: float, outcome: str, observed: float | None, samples: int) -> None:
        with self.transaction() as db:
            db.execute("UPDATE colocations SET ended = ?, outcome = ?, observed = ?, samples = ? "
                       "WHERE id = ? AND ended IS NULL", (now, outcome, observed, samples, set_id))

    def sets(self, limit: int = 1000, open_only: bool = False) -> list[dict[str, Any]]:
        """Co-located sets, newest first."""
        sql = "SELECT * FROM colocations" + (" WHERE ended IS NULL" if open_only else "") + " ORDER BY id DESC LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, (int(limit),)).fetchall()
        return [{**dict(r), "jobs": json.loads(r["jobs"])} for r in rows]

    # ---- online correction: observations (horus.core.online) ----------------------------------------------
    def put_observations(self, rows: Sequence[dict[str, Any]], now: float) -> None:
        """Store (replace) observations ``{job_id, quantity, attempt, job_type, gpu_type, predicted, believed,
        observed, samples}``, in one transaction."""
        if not rows:
            return
        with self.transaction() as db:
            db.executemany("INSERT OR REPLACE INTO observations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           [(int(r["job_id"]), r["quantity"], int(r["attempt"]), r["job_type"], r["gpu_type"],
                             float(r["predicted"]), float(r["believed"]), float(r["observed"]), int(r["samples"]),
                             now) for r in rows])

    def observations(self, job_id: int | None = None) -> list[dict[str, Any]]:
        """Stored observations (one job's, or all), oldest first."""
        sql, args = "SELECT * FROM observations", ()
        if job_id is not None:
            sql, args = sql + " WHERE job_id = ?", (int(job_id),)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY time, job_id, quantity", args).fetchall()
        return [dict(r) for r in rows]

    # ---- tenancy: queues and priority classes (horus.service.tenants builds the Tenancy) -----------------
    def queues(self) -> list[dict[str, Any]]:
        """Stored queues in creation order: ``{name, guaranteed, borrow_limit, weight, users}``."""
        with self._lock:
            rows = self._db.execute("SELECT name, guaranteed, borrow_limit, weight, users FROM queues "
                                    "ORDER BY seq").fetchall()
        return [{"name": r["name"], "guaranteed": json.loads(r["guaranteed"]), "borrow_limit": r["borrow_limit"],
                 "weight": r["weight"], "users": list(json.loads(r["users"]))} for r in rows]

    def priority_classes(self) -> list[dict[str, Any]]:
        """Stored priority classes, highest value first: ``{name, value, preemptible}``."""
        with self._lock:
            rows = self._db.execute("SELECT name, value, preemptible FROM priority_classes "
                                    "ORDER BY value DESC, name").fetchall()
        return [{"name": r["name"], "value": int(r["value"]), "preemptible": bool(r["preemptible"])} for r in rows]

    def tenancy_settings(self) -> dict[str, Any]:
        """What a ``--tenancy`` file set besides queues and classes (default queue and class, charge rule,
        half-life); ``{}`` when no file ever seeded this store."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'tenancy'").fetchone()
        return {} if row is None else dict(json.loads(row["value"]))

    def put_queue(self, name: str, guaranteed: dict[str, float], borrow_limit: float | None, weight: float,
                  now: float, users: Sequence[str] = ()) -> bool:
        """Create or replace queue ``name`` (a replaced queue keeps its place in the creation order; ``users``
        replaces its list too); True if created."""
        with self.transaction() as db:
            return self._put_queue(db, name, guaranteed, borrow_limit, weight, now, users)

    @staticmethod
    def _put_queue(db: sqlite3.Connection, name: str, guaranteed: dict[str, float], borrow_limit: float | None,
                   weight: float, now: float, users: Sequence[str] = ()) -> bool:
        spec = (json.dumps(guaranteed), borrow_limit, weight, json.dumps(list(users)))
        if db.execute("UPDATE queues SET guaranteed = ?, borrow_limit = ?, weight = ?, users = ?, changed = ? "
                      "WHERE name = ?", (*spec, now, name)).rowcount == 1:
            return False
        seq = int(db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM queues").fetchone()[0])
        db.execute("INSERT INTO queues (name, seq, guaranteed, borrow_limit, weight, users, created, changed) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (name, seq, *spec, now, now))
        return True

    def delete_queue(self, name: str, default: str) -> int | None:
        """Delete queue ``name`` unless queued or running jobs are of it (jobs naming no queue are of the
        ``default`` queue). None: no such queue; else how many jobs keep it (0: deleted)."""
        return self._delete_unused("queues", "queue", name, default)

    def put_priority_class(self, name: str, value: int, preemptible: bool, now: float) -> bool:
        """Create or replace priority class ``name``; True if created."""
        with self.transaction() as db:
            return self._put_class(db, name, value, preemptible, now)

    @staticmethod
    def _put_class(db: sqlite3.Connection, name: str, value: int, preemptible: bool, now: float) -> bool:
        if db.execute("UPDATE priority_classes SET value = ?, preemptible = ?, changed = ? WHERE name = ?",
                      (int(value), int(preemptible), now, name)).rowcount == 1:
            return False
        db.execute("INSERT INTO priority_classes VALUES (?, ?, ?, ?, ?)", (name, int(value), int(preemptible), now,
                                                                          now))
        return True

    def delete_priority_class(self, name: str, default: str) -> int | None:
        """Delete priority class ``name`` unless queued or running jobs name it (or name none and ``name`` is the
        ``default`` class). None: no such stored class; else how many jobs keep it (0: deleted)."""
        return self._delete_unused("priority_classes", "priority", name, default)

    def seed_tenancy(self, queues: Sequence[dict[str, Any]], classes: Sequence[dict[str, Any]],
                     settings: dict[str, Any], now: float) -> bool:
        """A ``--tenancy`` file's queues, classes and settings, in one transaction, if no file seeded this store
        before (after that the store wins: changes go through the API). True if seeded."""
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM meta WHERE key = 'tenancy'").fetchone() is not None:
                return False
            for q in queues:
                self._put_queue(db, q["name"], q["guaranteed"], q["borrow_limit"], q["weight"], now,
                                q.get("users", ()))
            for c in classes:
                self._put_class(db, c["name"], c["value"], c["preemptible"], now)
            db.execute("INSERT INTO meta VALUES ('tenancy', ?)", (json.dumps({**settings, "seeded": now}),))
        return True

    def _delete_unused(self, table: str, column: str, name: str, default: str) -> int | None:
        """Delete row ``name`` of ``table`` (queues or priority classes) unless queued or running jobs use it by
        ``column``, in one transaction. None: no such row; else how many jobs keep it (0: deleted)."""
        with self.transaction() as db:
            if db.execute(f"SELECT 1 FROM {table} WHERE name = ?", (name,)).fetchone() is None:
                return None
            busy = self._active(db, column, name, name == default)
            if not busy:
                db.execute(f"DELETE FROM {table} WHERE name = ?", (name,))
            return busy

    @staticmethod
    def _active(db: sqlite3.Connection, column: str, name: str, is_default: bool) -> int:
        """Queued or running jobs whose ``column`` (queue or priority) is ``name`` (or NULL, for the default)."""
        return int(db.execute(f"SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running') AND ({column} = ? "
                              f"OR ({column} IS NULL AND ?))", (name, int(is_default))).fetchone()[0])

    @staticmethod
    def _idem(job: NewJob) -> str | None:
        if job.idem_key is None or job.owner is None:
            return job.idem_key
        return f"{job.owner}{IDEM_SEP}{job.idem_key}"

    @staticmethod
    def _event(db: sqlite3.Connection, job_id: int, now: float, kind: str, attempt: int,
               detail: dict[str, Any]) -> None:
        db.execute("INSERT INTO events (job_id, time, kind, attempt, detail) VALUES (?, ?, ?, ?, ?)",
                   (job_id, now, kind, attempt, json.dumps(detail)))
