"""Fault campaign of the live service (issue 22): real processes on 127.0.0.1, faults injected while jobs run.

A ``horus serve --no-agent`` (temporary state dir, short lease) and ``--agents`` ``horus agent`` processes with
fake GPUs run jobs (``benchmarks/fault_job.py``, which records its own run intervals apart from Horus) that a
client keeps submitting with idempotency keys. A plan drawn from ``--seed`` injects, one after another with
random gaps:

* partitions: SIGSTOP an agent for a time below, near or above the lease, then SIGCONT;
* ``kill -9`` of an agent, restarted (same name and workdir) after a random time;
* ``kill -9`` of the server, restarted on the same state dir and port (clients retry with their keys);
* chunked and slow (trickling) request bodies, with and without a token;
* ONNX uploads (``POST /v1/models``, ``--upload-mib``) while jobs run (skipped, with a note, without ``onnx``).

Then it drains (every acknowledged job final, or ``--drain-s``), replays every submission once (the same key
must answer the same id), reads the final job list and every job's events, stops every process, and measures
(``benchmarks/fault_analysis.py``): concurrent attempts of one job, lost and duplicated jobs, 5xx answers, and
lease misses caused by an upload. JSON to ``--out`` (default ``benchmarks/results/fault_campaign.json``,
``fault_campaign_quick.json`` with ``--quick``), a progress line on stderr every 10 s.

    python benchmarks/fault_campaign.py --quick            # ~1 minute
    python benchmarks/fault_campaign.py [--seed 22] [--partitions 100] [--agents 3] [--lease-s 3]

The plan (fault kinds, order, agents, durations, gaps) is a function of the seed; when each fault lands among
the jobs is not (real processes on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
import fault_analysis as fa  # beside this script
from provenance import git_commit  # beside this script

JOB_SCRIPT = ROOT / "benchmarks" / "fault_job.py"
RESULTS = ROOT / "benchmarks" / "results"
BANDS = {"below": (0.15, 0.75), "near": (0.9, 1.1), "above": (1.25, 2.5)}  # partition length / lease
SLACK_S = 2.0  # after a fault ends, a loss is still the fault's (scheduler tick 1 s + a heartbeat)
START_TIMEOUT_S = 60.0
OVERSIZE_BYTES = 5 * 1024 * 1024  # a chunked body above the API's 4 MiB limit (no Content-Length to check)


# ---- parameters and plan ---------------------------------------------------------------------------------------
@dataclass
class Params:
    """What a campaign does; every field goes into the JSON."""

    seed: int = 22
    partitions: int = 100
    agents: int = 3
    gpus_per_agent: int = 2
    lease_s: float = 3.0
    heartbeat_s: float = 0.5
    duration_s: float = 720.0  # budget of the fault phase (faults not started by then are skipped)
    drain_s: float = 90.0
    job_s: tuple[float, float] = (3.0, 8.0)  # each job runs this long (uniform), wall seconds
    period_s: float = 0.2  # the jobs' record period = overlap tolerance
    agent_kills: int = 10
    server_kills: int = 5
    uploads: int = 10
    bodies: int = 20
    upload_mib: float = 32.0
    grace_s: float = 2.0
    quick: bool = False

    @classmethod
    def scaled(cls, partitions: int, **kwargs: Any) -> Params:
        """Other fault counts in proportion to the partitions."""
        return cls(partitions=partitions, agent_kills=max(2, partitions // 10), server_kills=max(1, partitions // 20),
                   uploads=max(2, partitions // 10), bodies=max(4, partitions // 5), **kwargs)


@dataclass
class Fault:
    """One planned fault."""

    kind: str  # partition | agent_kill | server_kill | upload | body | oversize
    gap_s: float  # wait before it
    seed: int
    agent: int | None = None
    seconds: float = 0.0  # stopped / down for
    band: str | None = None  # partition: below | near | above the lease
    variant: str | None = None  # body: chunked | slow
    with_token: bool = True


def make_plan(rng: random.Random, p: Params) -> list[Fault]:
    """The faults in order, their agents, lengths and gaps: a function of ``rng``'s seed and ``p`` only."""
    kinds = (["partition"] * p.partitions + ["agent_kill"] * p.agent_kills + ["server_kill"] * p.server_kills
             + ["upload"] * p.uploads + ["body"] * p.bodies)
    rng.shuffle(kinds)
    bands = cycled(list(BANDS), p.partitions, rng)
    bodies = cycled([(v, t) for v in ("chunked", "slow") for t in (True, False)], p.bodies, rng)
    plan = [Fault("oversize", 0.5, rng.getrandbits(32))]
    for kind in kinds:
        fault = Fault(kind, rng.uniform(0.2, 1.0), rng.getrandbits(32))
        if kind == "partition":
            fault.agent, fault.band = rng.randrange(p.agents), bands.pop()
            fault.seconds = rng.uniform(*BANDS[fault.band]) * p.lease_s
        elif kind == "agent_kill":
            fault.agent, fault.seconds = rng.randrange(p.agents), rng.uniform(0.2, 2.0) * p.lease_s
        elif kind == "server_kill":
            fault.seconds = rng.uniform(0.2, 1.0) * p.lease_s
        elif kind == "body":
            fault.variant, fault.with_token = bodies.pop()
        plan.append(fault)
    return plan


def cycled(values: list[Any], n: int, rng: random.Random) -> list[Any]:
    """``n`` items taking ``values`` in turn (each as often as the others, within one), shuffled."""
    out = [values[i % len(values)] for i in range(n)]
    rng.shuffle(out)
    return out


# ---- processes ---------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env() -> dict[str, str]:
    """The environment of the service's processes: this checkout's ``src`` first on the path."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": str(ROOT / "src") + (os.pathsep + path if path else "")}


def spawn(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``command`` as the leader of a new session (its own process group), output appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=child_env(), start_new_session=True)


def kill_group(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL a process group we started (a stopped one too) and reap its leader."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


class Service:
    """The ``horus serve --no-agent`` process; restartable on the same state dir and port."""

    def __init__(self, base: Path, p: Params) -> None:
        self.state_dir = base / "state"
        self.log = base / "logs" / "serve.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [sys.executable, "-m", "horus.cli", "serve", "--state-dir", str(self.state_dir), "--port",
                        str(self.port), "--no-agent", "--lease-s", str(p.lease_s), "--heartbeat-s",
                        str(p.heartbeat_s), "--log-level", "info"]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start and wait for ``/healthz``; the time it answered."""
        self.proc = spawn(self.command, self.log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"horus serve exited with {self.proc.returncode}; see {self.log}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return time.time()
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"horus serve did not answer within {START_TIMEOUT_S} s; see {self.log}")

    def kill9(self) -> None:
        kill_group(self.proc)

    @property
    def token_file(self) -> Path:
        return self.state_dir / "token"


class AgentProcess:
    """One ``horus agent`` with fake GPUs; stoppable (SIGSTOP/SIGCONT) and restartable after ``kill -9``."""

    def __init__(self, base: Path, name: str, service: Service, p: Params) -> None:
        self.name = name
        self.workdir = base / "agents" / name
        self.log = base / "logs" / f"agent-{name}.log"
        self.command = [sys.executable, "-m", "horus.cli", "agent", "--server", service.url, "--token-file",
                        str(service.token_file), "--name", name, "--fake-gpus", str(p.gpus_per_agent), "--workdir",
                        str(self.workdir), "--heartbeat-s", str(p.heartbeat_s), "--grace-s", str(p.grace_s)]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = spawn(self.command, self.log)

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill9(self) -> None:
        kill_group(self.proc)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def kill_job_groups(workdirs: list[Path]) -> int:
    """SIGKILL every job attempt's process group still alive (wrapper pid files, start time checked so a reused
    pid is left alone); how many were killed."""
    killed = 0
    for workdir in workdirs:
        for pid_file in workdir.glob("jobs/*/*/pid"):
            try:
                pid_text, ticks = pid_file.read_text().split()
                with open(f"/proc/{int(pid_text)}/stat") as fh:
                    alive_ticks = fh.read().rsplit(")", 1)[1].split()[19]
                if alive_ticks == ticks:
                    os.killpg(int(pid_text), signal.SIGKILL)
                    killed += 1
            except (OSError, ValueError, IndexError):
                continue
    return killed


# ---- what the clients saw ----------------------------------------------------------------------------------------
@dataclass
class Journal:
    """Everything the campaign's clients and fault threads observed (thread-safe through ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    responses: list[tuple[float, str, str, int | None]] = field(default_factory=list)
    acked: dict[str, int] = field(default_factory=dict)  # idempotency key -> first acknowledged id
    ids_per_key: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> submitted body (for the replay)
    faults: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    states: dict[int, str] = field(default_factory=dict)  # latest job list

    def response(self, method: str, path: str, status: int | None) -> None:
        with self.lock:
            self.responses.append((time.time(), method, path, status))

    def ack(self, key: str, job_id: int, body: dict[str, Any]) -> None:
        with self.lock:
            self.acked.setdefault(key, job_id)
            self.ids_per_key[key].add(job_id)
            self.bodies.setdefault(key, body)

    def fault(self, kind: str, start: float, end: float, **detail: Any) -> None:
        with self.lock:
            self.faults.append({"kind": kind, "start": start, "end": end, **detail})

    def error(self, text: str) -> None:
        with self.lock:
            self.errors.append(text)

    def in_flight(self) -> int:
        with self.lock:
            return sum(1 for i in self.acked.values() if self.states.get(i) not in fa.FINAL_STATES)


class Api:
    """An HTTP client of the service that logs every answer (or transport error) in the journal."""

    def __init__(self, url: str, token: str | None, journal: Journal, timeout_s: float = 10.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=timeout_s)
        self.journal = journal

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError:
            self.journal.response(method, path, None)
            return None
        self.journal.response(method, path, response.status_code)
        return response

    def close(self) -> None:
        self.http.close()


# ---- the campaign ------------------------------------------------------------------------------------------------
class Campaign:
    """Processes, clients and fault threads of one run (see module docstring)."""

    def __init__(self, p: Params, base: Path) -> None:
        self.p = p
        self.base = base
        self.records = base / "records"
        for sub in ("records", "logs", "agents"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        self.service = Service(base, p)
        self.agents = [AgentProcess(base, f"a{i + 1}", self.service, p) for i in range(p.agents)]
        self.journal = Journal()
        self.stop_submitting = threading.Event()
        self.stop_watching = threading.Event()
        self.busy = threading.Condition()
        self.busy_agents: set[int] = set()
        self.server_busy = False
        self.running: Counter[str] = Counter()  # uploads / bodies in flight
        self.done: Counter[str] = Counter()
        self.onnx: bytes | None = None
        self.notes: list[str] = []
        self.job_rng = random.Random(p.seed + 1)
        self.submitted = 0

    # ---- setup ----
    def start(self) -> None:
        self.onnx = medium_onnx(self.p.upload_mib, self.notes)
        self.service.start()
        for agent in self.agents:
            agent.start()
        api = self.api()
        try:
            wait_until(lambda: len(cluster_agents(api)) == len(self.agents), START_TIMEOUT_S, "every agent registered")
        finally:
            api.close()

    def api(self, token: bool = True, timeout_s: float = 10.0) -> Api:
        return Api(self.service.url, self.service.token_file.read_text().strip() if token else None, self.journal,
                   timeout_s)

    # ---- submissions ----
    def job_body(self, key: str, pad: int = 0) -> dict[str, Any]:
        seconds = self.job_rng.uniform(*self.p.job_s)
        body: dict[str, Any] = {"command": [sys.executable, str(JOB_SCRIPT), "--records", str(self.records),
                                            "--seconds", f"{seconds:.2f}", "--period", str(self.p.period_s)],
                                "idempotency_key": key, "name": key}
        if pad:
            body["env"] = {"PAD": "x" * pad}
        return body

    def next_key(self) -> str:
        with self.journal.lock:
            self.submitted += 1
            return f"s{self.p.seed}-{self.submitted:05d}"

    def submit_until_acked(self, api: Api, key: str, body: dict[str, Any], deadline_s: float = 60.0) -> int | None:
        """POST until an id comes back (retrying transport errors and 5xx with the same key); None if refused."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            response = api.call("POST", "/v1/jobs", json=body)
            if response is not None and response.status_code in (200, 201):
                job_id = int(response.json()["id"])
                self.journal.ack(key, job_id, body)
                return job_id
            if response is not None and response.status_code < 500:
                self.journal.error(f"submission {key} refused: HTTP {response.status_code} {response.text[:200]}")
                return None
            time.sleep(0.15)
        self.journal.error(f"submission {key} not acknowledged within {deadline_s} s")
        return None

    def submitter(self) -> None:
        """Keep ``agents x gpus + 2`` jobs in flight until told to stop."""
        api = self.api()
        target = self.p.agents * self.p.gpus_per_agent + 2
        try:
            while not self.stop_submitting.is_set():
                if self.journal.in_flight() >= target:
                    self.stop_submitting.wait(0.2)
                    continue
                key = self.next_key()
                self.submit_until_acked(api, key, self.job_body(key))
        finally:
            api.close()

    def watcher(self) -> None:
        """Poll the job list every second (in-flight count, drain)."""
        api = self.api()
        try:
            while not self.stop_watching.wait(1.0):
                self.refresh_states(api)
        finally:
            api.close()

    def refresh_states(self, api: Api) -> bool:
        response = api.call("GET", "/v1/jobs", params={"limit": 100_000, "brief": "true"})
        if response is None or response.status_code != 200:
            return False
        states = {int(j["id"]): j["state"] for j in response.json()["jobs"]}
        with self.journal.lock:
            self.journal.states = states
        return True

    # ---- faults ----
    def ready(self, fault: Fault) -> bool:
        """May ``fault`` start now? (One fault per agent, at least one agent untouched, one server kill at a
        time, at most two uploads and three bodies at once.) Called with ``busy`` held."""
        if fault.agent is not None:
            return fault.agent not in self.busy_agents and len(self.busy_agents) < len(self.agents) - 1
        if fault.kind == "server_kill":
            return not self.server_busy
        return self.running[fault.kind] < {"upload": 2}.get(fault.kind, 3)

    def claim(self, fault: Fault, deadline: float) -> bool:
        with self.busy:
            while not self.ready(fault):
                if time.monotonic() > deadline:
                    return False
                self.busy.wait(0.1)
            if fault.agent is not None:
                self.busy_agents.add(fault.agent)
            elif fault.kind == "server_kill":
                self.server_busy = True
            else:
                self.running[fault.kind] += 1
            return True

    def release(self, fault: Fault) -> None:
        with self.busy:
            if fault.agent is not None:
                self.busy_agents.discard(fault.agent)
            elif fault.kind == "server_kill":
                self.server_busy = False
            else:
                self.running[fault.kind] -= 1
            self.done[fault.kind] += 1
            self.busy.notify_all()

    def run_fault(self, fault: Fault) -> None:
        handlers: dict[str, Callable[[Fault], None]] = {
            "partition": self.partition, "agent_kill": self.agent_kill, "server_kill": self.server_kill,
            "upload": self.upload, "body": self.body, "oversize": self.oversize}
        try:
            handlers[fault.kind](fault)
        except Exception as exc:  # noqa: BLE001 - a fault thread's failure goes into the JSON, not lost
            self.journal.error(f"{fault.kind}: {type(exc).__name__}: {exc}")
        finally:
            self.release(fault)

    def partition(self, fault: Fault) -> None:
        agent = self.agents[fault.agent or 0]
        start = time.time()
        agent.signal(signal.SIGSTOP)
        time.sleep(fault.seconds)
        agent.signal(signal.SIGCONT)
        self.journal.fault("partition", start, time.time(), agent=agent.name, band=fault.band,
                           planned_s=round(fault.seconds, 3))

    def agent_kill(self, fault: Fault) -> None:
        agent = self.agents[fault.agent or 0]
        start = time.time()
        agent.kill9()
        time.sleep(fault.seconds)
        restarted = time.time()
        agent.start()
        api = self.api()
        try:
            back = wait_until(lambda: agent_seen_after(api, agent.name, restarted), 30.0, f"{agent.name} back",
                              raise_on_timeout=False)
        finally:
            api.close()
        self.journal.fault("agent_kill", start, time.time(), agent=agent.name, down_s=round(restarted - start, 3),
                           rejoined=bool(back))

    def server_kill(self, fault: Fault) -> None:
        start = time.time()
        self.service.kill9()
        time.sleep(fault.seconds)
        restarted = time.time()
        ready = self.service.start()
        self.journal.fault("server_kill", start, ready, down_s=round(restarted - start, 3),
                           start_s=round(ready - restarted, 3))

    def upload(self, fault: Fault) -> None:
        if self.onnx is None:
            return
        api = self.api(timeout_s=120.0)
        start = time.time()
        try:
            response = api.call("POST", "/v1/models", content=self.onnx,
                                headers={"Content-Type": "application/octet-stream"})
        finally:
            api.close()
        self.journal.fault("upload", start, time.time(), status=None if response is None else response.status_code,
                           bytes=len(self.onnx))

    def body(self, fault: Fault) -> None:
        """A submission whose body arrives chunked (no Content-Length) or trickles in (a few bytes at a time)."""
        rng = random.Random(fault.seed)
        key = self.next_key() if fault.with_token else f"s{self.p.seed}-anon-{fault.seed}"
        body = self.job_body(key, pad=16 * 1024 if fault.variant == "chunked" else 0)
        data = json.dumps(body).encode()
        api = self.api(token=fault.with_token, timeout_s=30.0)
        start = time.time()
        try:
            response = api.call("POST", "/v1/jobs", content=trickle(data, rng, slow=fault.variant == "slow"),
                                headers={"Content-Type": "application/json"})
            status = None if response is None else response.status_code
            if fault.with_token and status in (200, 201):
                self.journal.ack(key, int(response.json()["id"]), body)  # type: ignore[union-attr]
            elif fault.with_token:  # the server was down or refused: the ordinary client retries with the key
                self.submit_until_acked(api, key, body)
        finally:
            api.close()
        self.journal.fault("body", start, time.time(), variant=fault.variant, with_token=fault.with_token,
                           status=status, bytes=len(data))

    def oversize(self, fault: Fault) -> None:
        """A chunked body above the 4 MiB limit: 413 if the limit holds without a Content-Length."""
        data = b'{"command": ["true"], "name": "' + b"x" * OVERSIZE_BYTES + b'"}'
        api = self.api(timeout_s=60.0)
        start = time.time()
        try:
            response = api.call("POST", "/v1/jobs", content=trickle(data, random.Random(fault.seed), slow=False),
                                headers={"Content-Type": "application/json"})
        finally:
            api.close()
        self.journal.fault("oversize", start, time.time(), bytes=len(data),
                           status=None if response is None else response.status_code)

    def inject(self, plan: list[Fault], budget_s: float) -> dict[str, Any]:
        """Run the plan (each fault in its own thread once its resources are free) until done or out of budget."""
        deadline = time.monotonic() + budget_s
        threads: list[threading.Thread] = []
        started = 0
        for fault in plan:
            time.sleep(fault.gap_s)
            if time.monotonic() > deadline or not self.claim(fault, deadline):
                break
            thread = threading.Thread(target=self.run_fault, args=(fault,), name=f"fault-{fault.kind}", daemon=True)
            thread.start()
            threads.append(thread)
            started += 1
        for thread in threads:
            thread.join(120.0)
        return {"planned": len(plan), "started": started, "budget_exhausted": started < len(plan),
                "still_running_after_join": sum(t.is_alive() for t in threads)}

    # ---- drain and final view ----
    def heal(self) -> None:
        """Every agent resumed and running, the server up."""
        if self.service.proc is None or self.service.proc.poll() is not None:
            self.service.start()
        for agent in self.agents:
            agent.signal(signal.SIGCONT)
            if not agent.alive():
                agent.start()

    def drain(self, timeout_s: float) -> dict[str, Any]:
        """Wait until every acknowledged job is final (or ``timeout_s``)."""
        began = time.monotonic()
        done = wait_until(lambda: self.journal.in_flight() == 0, timeout_s, "every job final", interval_s=0.5,
                          raise_on_timeout=False)
        return {"complete": bool(done), "waited_s": round(time.monotonic() - began, 1),
                "in_flight_at_end": self.journal.in_flight()}

    def replay(self, api: Api) -> dict[str, int]:
        """POST every acknowledged submission once more: each must answer 200 with its first id."""
        answers: Counter[str] = Counter()
        for key, body in sorted(self.journal.bodies.items()):
            response = api.call("POST", "/v1/jobs", json=body)
            if response is None:
                answers["transport error"] += 1
                continue
            answers[str(response.status_code)] += 1
            if response.status_code in (200, 201):
                with self.journal.lock:
                    self.journal.ids_per_key[key].add(int(response.json()["id"]))
        return dict(answers)

    def final_view(self, api: Api) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
        """The final job list and every listed job's events."""
        response = api.call("GET", "/v1/jobs", params={"limit": 100_000})
        jobs = response.json()["jobs"] if response is not None and response.status_code == 200 else []
        if response is None or response.status_code != 200:
            self.journal.error("the final job list could not be read")
        events: dict[int, list[dict[str, Any]]] = {}
        for job in jobs:
            one = api.call("GET", f"/v1/jobs/{job['id']}")
            if one is not None and one.status_code == 200:
                events[int(job["id"])] = one.json().get("events", [])
        return jobs, events

    def shutdown(self) -> int:
        """Kill the server, the agents and every job process group (in that order); job groups killed."""
        self.service.kill9()
        for agent in self.agents:
            agent.kill9()
        return kill_job_groups([a.workdir for a in self.agents])

    def progress(self, began: float) -> str:
        with self.busy:
            done = dict(self.done)
        with self.journal.lock:
            acked = len(self.journal.acked)
            final = sum(1 for i in self.journal.acked.values() if self.journal.states.get(i) in fa.FINAL_STATES)
            five = sum(1 for *_, s in self.journal.responses if s is not None and s >= 500)
        return (f"[fault-campaign] {time.monotonic() - began:6.0f} s  partitions {done.get('partition', 0)}/"
                f"{self.p.partitions}  agent kills {done.get('agent_kill', 0)}  server kills "
                f"{done.get('server_kill', 0)}  uploads {done.get('upload', 0)}  bodies {done.get('body', 0)}  "
                f"| jobs acked {acked}, final {final} | 5xx {five}")


# ---- helpers -----------------------------------------------------------------------------------------------------
def wait_until(predicate: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.1,
               raise_on_timeout: bool = True) -> Any:
    """Poll ``predicate`` until truthy (returned) or ``timeout_s`` (TimeoutError naming ``what``, or None)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            if raise_on_timeout:
                raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
            return None
        time.sleep(interval_s)


def cluster_agents(api: Api) -> dict[str, float]:
    """Agent name -> seconds since its last heartbeat, from ``GET /v1/cluster`` (empty if unreachable)."""
    response = api.call("GET", "/v1/cluster")
    if response is None or response.status_code != 200:
        return {}
    return {a["name"]: float(a["last_seen_s_ago"]) for a in response.json()["agents"]}


def agent_seen_after(api: Api, name: str, when: float) -> bool:
    """Has agent ``name`` heartbeated since ``when``?"""
    ago = cluster_agents(api).get(name)
    return ago is not None and time.time() - ago > when


def trickle(data: bytes, rng: random.Random, *, slow: bool) -> Iterator[bytes]:
    """``data`` as a generator body (httpx sends it chunked): 1-8 bytes every 20-120 ms when ``slow``, else
    chunks of 64 B-64 KiB at once."""
    pos = 0
    while pos < len(data):
        size = rng.randint(1, 8) if slow else rng.randint(64, 64 * 1024)
        yield data[pos:pos + size]
        pos += size
        if slow:
            time.sleep(rng.uniform(0.02, 0.12))


def medium_onnx(mib: float, notes: list[str]) -> bytes | None:
    """A valid ONNX MLP of about ``mib`` MiB (1024-wide Gemm layers of zeros), or None (with a note) without
    the ``onnx`` package."""
    try:
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        notes.append("uploads skipped: the onnx package is not importable")
        return None
    width, layers = 1024, max(1, round(mib * 2**20 / (1024 * 1024 * 4)))
    inits, nodes, prev = [], [], "X"
    for i in range(layers):
        inits += [numpy_helper.from_array(np.zeros((width, width), np.float32), f"W{i}"),
                  numpy_helper.from_array(np.zeros(width, np.float32), f"B{i}")]
        out = "Y" if i == layers - 1 else f"H{i}"
        nodes += [helper.make_node("Gemm", [prev, f"W{i}", f"B{i}"], [f"G{i}"]),
                  helper.make_node("Relu", [f"G{i}"], [out])]
        prev = out
    graph = helper.make_graph(nodes, "fault_campaign_mlp",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [8, width])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [8, width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("horus-scheduler", "httpx", "fastapi", "uvicorn", "onnx"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


# ---- analysis ----------------------------------------------------------------------------------------------------
def fault_windows(faults: list[dict[str, Any]], lease_s: float) -> tuple[dict[str, list[fa.Window]],
                                                                          list[fa.Window], list[fa.Window]]:
    """(agent -> its stop/kill windows, server restart windows, upload windows), with slack after each end
    (a server restart gives known agents one lease to report again)."""
    disrupted: dict[str, list[fa.Window]] = defaultdict(list)
    server, uploads = [], []
    for f in faults:
        if f["kind"] in ("partition", "agent_kill"):
            disrupted[f["agent"]].append((f["start"], f["end"] + SLACK_S))
        elif f["kind"] == "server_kill":
            server.append((f["start"], f["end"] + lease_s + SLACK_S))
        elif f["kind"] == "upload":
            uploads.append((f["start"], f["end"] + SLACK_S))
    return disrupted, server, uploads


def fault_counts(faults: list[dict[str, Any]], notes: list[str]) -> dict[str, Any]:
    """Per fault kind: how many ran, with their lengths and the answers they got."""
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in faults:
        by_kind[f["kind"]].append(f)
    parts = by_kind["partition"]
    out: dict[str, Any] = {
        "partitions": {"done": len(parts), **{b: sum(f["band"] == b for f in parts) for b in BANDS},
                       "stopped_s": spread([f["end"] - f["start"] for f in parts])},
        "agent_kills": {"done": len(by_kind["agent_kill"]),
                        "down_s": spread([f["down_s"] for f in by_kind["agent_kill"]]),
                        "not_rejoined": sum(not f["rejoined"] for f in by_kind["agent_kill"])},
        "server_kills": {"done": len(by_kind["server_kill"]),
                         "down_s": spread([f["down_s"] for f in by_kind["server_kill"]]),
                         "restart_s": spread([f["start_s"] for f in by_kind["server_kill"]])},
        "bodies": dict(Counter(f"{f['variant']} {'token' if f['with_token'] else 'no token'} -> "
                               f"{f['status'] or 'transport error'}" for f in by_kind["body"])),
        "oversize_chunked_body": [{"bytes": f["bytes"], "status": f["status"]} for f in by_kind["oversize"]],
    }
    if any("uploads skipped" in n for n in notes):
        out["uploads"] = {"skipped": next(n for n in notes if "uploads skipped" in n)}
    else:
        ups = by_kind["upload"]
        out["uploads"] = {"done": len(ups), "bytes": ups[0]["bytes"] if ups else None,
                          "statuses": dict(Counter(str(f["status"] or "transport error") for f in ups)),
                          "duration_s": spread([f["end"] - f["start"] for f in ups])}
    return out


def spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    values = sorted(values)
    return {"min": round(values[0], 3), "median": round(values[len(values) // 2], 3), "max": round(values[-1], 3)}


def analyze(c: Campaign, jobs: list[dict[str, Any]], events: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """The goal counts and their details from the records, the journal, the final view and the server log."""
    j = c.journal
    by_job = fa.intervals(fa.read_records(c.records))
    overlap = fa.overlap_summary(by_job, c.p.period_s)
    lost = fa.lost_jobs(j.acked, {int(x["id"]): x["state"] for x in jobs})
    ids_per_key = {k: set(v) for k, v in j.ids_per_key.items()}
    for x in jobs:
        if x.get("idempotency_key"):
            ids_per_key.setdefault(x["idempotency_key"], set()).add(int(x["id"]))
    finished = {i: sum(e["kind"] == "finished" for e in evs) for i, evs in events.items()}
    dup = fa.duplicates(ids_per_key, finished, fa.completed_runs(by_job))
    five = fa.count_5xx((m, p, s) for _, m, p, s in j.responses)
    disrupted, server, uploads = fault_windows(j.faults, c.p.lease_s)
    log_text = c.service.log.read_text(errors="replace")
    losses = fa.parse_agent_losses(log_text)
    classified = fa.classify_losses(losses, disrupted, server, uploads)
    event_kinds = Counter(e["kind"] for evs in events.values() for e in evs)
    transport = Counter(fa.endpoint(m, p) for _, m, p, s in j.responses if s is None)
    acked_ids = set(j.acked.values())
    return {
        "goals": {"concurrent_attempts": overlap["jobs_with_overlap"], "concurrent_attempt_s": overlap["overlap_s"],
                  "lost": len(lost["missing"]) + len(lost["not_final"]), "duplicated": dup["jobs"],
                  "5xx": sum(five.values()), "upload_lease_misses": len(classified["during_upload"])},
        "overlap": overlap,
        "lost": lost,
        "duplicated": dup,
        "5xx_per_endpoint": five,
        "transport_errors_per_endpoint": dict(sorted(transport.items())),
        "requests": len(j.responses),
        "agent_losses": {"total": len(losses), "explained_by_a_fault": len(classified["explained"]),
                         "unexplained": classified["unexplained"], "during_upload": classified["during_upload"]},
        "jobs": {"acknowledged": len(j.acked), "listed_at_end": len(jobs),
                 "final_states": dict(Counter(x["state"] for x in jobs if int(x["id"]) in acked_ids)),
                 "not_acknowledged_but_listed": sorted(int(x["id"]) for x in jobs if int(x["id"]) not in acked_ids),
                 "finished_without_records": sorted(i for i in acked_ids if finished.get(i) and str(i) not in by_job),
                 "processes_recorded": sum(len(v) for v in by_job.values()),
                 "event_kinds": dict(sorted(event_kinds.items()))},
        "events_out_of_order": fa.events_out_of_order(events),
        "server_log": fa.log_errors(log_text),
        "agent_logs": fa.log_errors("\n".join(a.log.read_text(errors="replace") for a in c.agents if a.log.exists())),
        "errors": j.errors[:50],
    }


# ---- running it --------------------------------------------------------------------------------------------------
def run_campaign(p: Params, keep: bool) -> dict[str, Any]:
    """One campaign: setup, faults, drain, final view, shutdown, analysis; temp dir removed unless ``keep``."""
    began = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="horus-fault-campaign-"))
    c = Campaign(p, base)
    phases: dict[str, float] = {}
    reporter_stop = threading.Event()
    try:
        c.start()
        phases["setup_s"] = time.monotonic() - began
        threads = [threading.Thread(target=c.submitter, daemon=True), threading.Thread(target=c.watcher, daemon=True),
                   threading.Thread(target=report_progress, args=(c, began, reporter_stop), daemon=True)]
        for t in threads:
            t.start()
        mark = time.monotonic()
        injected = c.inject(make_plan(random.Random(p.seed), p), p.duration_s)
        phases["faults_s"] = time.monotonic() - mark
        c.stop_submitting.set()
        threads[0].join(90.0)
        c.heal()
        mark = time.monotonic()
        drained = c.drain(p.drain_s)
        phases["drain_s"] = time.monotonic() - mark
        c.stop_watching.set()
        api = c.api()
        try:
            replay = c.replay(api)
            jobs, events = c.final_view(api)
        finally:
            api.close()
        leftover = c.shutdown()
        mark = time.monotonic()
        result = analyze(c, jobs, events)
        phases["analysis_s"] = time.monotonic() - mark
        return {"benchmark": "fault_campaign", "command": [sys.executable, *sys.argv], "git_commit": git_commit(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "versions": versions(),
                "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "loadavg_1m": os.getloadavg()[0]},
                "seed": p.seed, "parameters": asdict(p), "wall_s": round(time.monotonic() - began, 1),
                "phases_s": {k: round(v, 1) for k, v in phases.items()}, "injection": injected,
                "faults": fault_counts(c.journal.faults, c.notes), "drain": drained, "replay_answers": replay,
                "job_groups_killed_at_end": leftover, **result, "notes": c.notes,
                "campaign_dir": str(base) if keep else None}
    finally:
        reporter_stop.set()
        c.stop_submitting.set()
        c.stop_watching.set()
        for agent in c.agents:
            agent.signal(signal.SIGCONT)
        c.shutdown()
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def report_progress(c: Campaign, began: float, stop: threading.Event) -> None:
    """A progress line on stderr every 10 s."""
    while not stop.wait(10.0):
        print(c.progress(began), file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> tuple[Params, Path, bool]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--partitions", type=int, help="SIGSTOP partitions (default 100; --quick: 10)")
    parser.add_argument("--agents", type=int, default=3, help="horus agent processes (2-4, default 3)")
    parser.add_argument("--gpus-per-agent", type=int, default=2)
    parser.add_argument("--lease-s", type=float, default=3.0)
    parser.add_argument("--heartbeat-s", type=float, default=0.5)
    parser.add_argument("--duration", type=float, help="budget of the fault phase, s (default 720; --quick: 40)")
    parser.add_argument("--drain-s", type=float, help="wait at most this long for jobs to end (default 90)")
    parser.add_argument("--upload-mib", type=float, default=32.0, help="size of the uploaded ONNX file")
    parser.add_argument("--quick", action="store_true", help="about a minute: 10 partitions, fewer other faults")
    parser.add_argument("--keep", action="store_true", help="keep the campaign's temp dir (logs, records, state)")
    parser.add_argument("--out", type=Path, help="JSON (default benchmarks/results/fault_campaign[_quick].json)")
    args = parser.parse_args(argv)
    if not 2 <= args.agents <= 4:
        parser.error("--agents: expected 2..4")
    if args.lease_s <= args.heartbeat_s or args.heartbeat_s <= 0:
        parser.error("expected 0 < --heartbeat-s < --lease-s")
    partitions = args.partitions if args.partitions is not None else (10 if args.quick else 100)
    p = Params.scaled(partitions, seed=args.seed, agents=args.agents, gpus_per_agent=args.gpus_per_agent,
                      lease_s=args.lease_s, heartbeat_s=args.heartbeat_s, upload_mib=args.upload_mib, quick=args.quick,
                      duration_s=args.duration or (40.0 if args.quick else 720.0),
                      drain_s=args.drain_s or (30.0 if args.quick else 90.0))
    out = args.out or RESULTS / ("fault_campaign_quick.json" if args.quick else "fault_campaign.json")
    return p, out, args.keep


def main(argv: list[str] | None = None) -> int:
    p, out, keep = parse_args(argv)
    result = run_campaign(p, keep)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"goals": result["goals"], "wall_s": result["wall_s"], "out": str(out)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
