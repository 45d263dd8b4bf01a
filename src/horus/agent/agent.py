"""The node agent: registers this machine's GPUs, heartbeats, and makes its processes match the server.

Every heartbeat carries a report per attempt (running with progress, or exited with its code) and
returns the *desired state*: the attempts this machine must run. The agent launches what is
desired and missing, stops (SIGTERM, grace period, SIGKILL to the process group) what runs and is
no longer desired, and forgets ended attempts once the server stops listing them. A link carries
the calls: ``HttpLink`` for remote agents (``horus agent``), ``DirectLink`` for the agent that
``horus serve`` runs in-process.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from horus.agent.gpus import Telemetry
from horus.agent.processes import ProcessManager

log = logging.getLogger("horus.agent")


class LinkError(RuntimeError):
    """The server could not be reached or refused the call."""


class NotRegisteredError(LinkError):
    """The server does not know this agent (restarted, or the agent missed its lease): register again."""


class Link(Protocol):
    def register(self, name: str, hostname: str, gpus: list[dict[str, Any]],
                 wake: Callable[[], None] | None, reports: list[dict[str, Any]]) -> None: ...

    def heartbeat(self, name: str, reports: list[dict[str, Any]],
                  gpus: list[dict[str, Any]]) -> dict[str, Any]:
        """``{"desired": [...], "fence_after_s": F, "fence_kill_s": K}`` (fencing fields absent: no fencing)."""
        ...


class DirectLink:
    """Calls an in-process ``LiveScheduler`` directly (no HTTP)."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def register(self, name: str, hostname: str, gpus: list[dict[str, Any]],
                 wake: Callable[[], None] | None, reports: list[dict[str, Any]]) -> None:
        self.scheduler.register_agent(name, hostname, gpus, wake=wake, reports=reports)

    def heartbeat(self, name: str, reports: list[dict[str, Any]],
                  gpus: list[dict[str, Any]]) -> dict[str, Any]:
        from horus.errors import UnknownAgentError

        try:
            return {"desired": self.scheduler.heartbeat(name, reports, gpus), **self.scheduler.fencing()}
        except UnknownAgentError:
            raise NotRegisteredError(name) from None


class HttpLink:
    """Calls the server's agent endpoints over HTTP with the cluster token."""

    def __init__(self, server_url: str, token: str, timeout_s: float = 10.0) -> None:
        import httpx

        self.client = httpx.Client(base_url=server_url.rstrip("/"), timeout=timeout_s,
                                   headers={"Authorization": f"Bearer {token}"})

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        try:
            response = self.client.post(path, json=body)
        except httpx.HTTPError as exc:
            raise LinkError(f"cannot reach the server ({type(exc).__name__})") from None
        if response.status_code == 409:
            raise NotRegisteredError(path)
        if response.status_code >= 400:
            raise LinkError(f"{path}: HTTP {response.status_code}: {response.text[:300]}")
        return response.json()

    def register(self, name: str, hostname: str, gpus: list[dict[str, Any]],
                 wake: Callable[[], None] | None, reports: list[dict[str, Any]]) -> None:
        self._post("/v1/agents", {"name": name, "hostname": hostname, "gpus": gpus, "reports": reports})

    def heartbeat(self, name: str, reports: list[dict[str, Any]],
                  gpus: list[dict[str, Any]]) -> dict[str, Any]:
        return self._post(f"/v1/agents/{name}/heartbeat", {"reports": reports, "gpus": gpus})


def mps_active() -> bool:
    """True when an MPS control daemon's pipe directory exists."""
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    return os.path.exists(os.path.join(pipe, "control"))


def _clean(value: Any) -> float | None:
    """A finite, non-negative float or None (reports must be valid JSON the server accepts)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


class Agent:
    """One machine's agent (see module docstring)."""

    def __init__(self, name: str, gpus: list[dict[str, Any]], workdir: Path, link: Link, *,
                 hostname: str | None = None, heartbeat_s: float = 1.0, grace_s: float = 10.0,
                 mps: str = "auto", run_as: tuple[int, int] | None = None) -> None:
        self.name = name
        self.hostname = hostname or socket.gethostname()
        self.gpus = gpus
        self.link = link
        self.heartbeat_s = heartbeat_s
        self.grace_s = grace_s
        self.use_mps = mps == "on" or (mps == "auto" and not any(g.get("fake") for g in gpus) and mps_active())
        self.processes = ProcessManager(workdir, run_as)
        self.telemetry = Telemetry(gpus)
        self.wakeup = threading.Event()
        self.registered = False
        self._last_sample = 0.0
        self._gpu_sample: list[dict[str, float]] = []
        self._job_mem: dict[tuple[str, int], float] = {}
        self._job_gpus: dict[tuple[str, int], list[int]] = {}  # desired attempts' local GPU indices
        self._outage = False
        self._fence_kill_s = 2.0  # the server's fence_kill_s, once heard

    # ---- main loop -----------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        self.processes.scan()
        while not stop.is_set():
            self.step()
            self.wakeup.wait(self.heartbeat_s)
            self.wakeup.clear()

    def step(self) -> None:
        """Register if needed, report, and reconcile with the desired state once."""
        try:
            if not self.registered:
                self.link.register(self.name, self.hostname, self.gpus, self.wakeup.set, self._reports(time.time()))
                self.registered = True
                log.info("agent %s registered %d GPUs", self.name, len(self.gpus))
            now = time.time()
            self.processes.reap(now)
            sent = time.monotonic()  # a lease runs from before the request: never longer than the server's view
            answer = self.link.heartbeat(self.name, self._reports(now), self._gpu_sample)
            self.reconcile(answer["desired"], time.time(), renewed=sent, fencing=answer)
            if self._outage:
                log.warning("agent %s: server reachable again", self.name)
                self._outage = False
        except NotRegisteredError:
            self.registered = False
            self.fence_all()  # the server has given this machine's attempts up: they must stop now
            self.wakeup.set()
        except LinkError as exc:
            if not self._outage:
                log.warning("agent %s: %s; jobs keep running, retrying", self.name, exc)
                self._outage = True

    def _reports(self, now: float) -> list[dict[str, Any]]:
        if now - self._last_sample >= 1.0:
            self._last_sample = now
            self._gpu_sample, self._job_mem = self.telemetry.sample(self.processes.running_pids(), self._job_gpus)
        reports = []
        for report in self.processes.reports():
            for key in ("iterations", "rate"):
                report[key] = _clean(report.get(key))
            mem = self._job_mem.get((report["job_id"], report["attempt"]))
            if mem is not None:
                report["gpu_mem_mib"] = mem
            reports.append(report)
        return reports

    # ---- desired state -------------------------------------------------------------------------------
    def fence_all(self) -> None:
        """Expire every attempt's lease now: their wrappers stop them (SIGTERM, then SIGKILL)."""
        for item in list(self.processes.attempts.values()):
            if item.exit_status() is None and (item.folder / "lease").exists():
                self.processes.renew(item, 0.0, self._fence_kill_s)

    def reconcile(self, desired: list[dict[str, Any]], now: float, *, renewed: float | None = None,
                  fencing: dict[str, Any] | None = None) -> None:
        """Make the processes match ``desired``. With ``renewed`` (monotonic time the heartbeat was sent) and the
        server's ``fencing`` fields, each desired attempt's lease is extended to ``renewed + fence_after_s``
        before anything is launched."""
        want = {(str(d["job_id"]), int(d["attempt"])): d for d in desired}
        after = (fencing or {}).get("fence_after_s")
        if renewed is not None and after is not None:
            self._fence_kill_s = float((fencing or {}).get("fence_kill_s", self._fence_kill_s))
            for key in want:
                self.processes.renew(self.processes.attempt(*key), renewed + float(after), self._fence_kill_s)
        self._job_gpus = {key: [int(i) for i in d.get("gpu_indices") or []] for key, d in want.items()}
        for key, item in list(self.processes.attempts.items()):
            if key in want:
                continue
            if item.exit_status() is not None or not item.alive():
                self.processes.forget(item)
            else:
                self.processes.stop(item, self.grace_s, now)
        for key, assignment in want.items():
            self.processes.launch(key[0], key[1], list(assignment["command"]), self.environment(assignment))

    def environment(self, a: dict[str, Any]) -> dict[str, str]:
        """What the job's process sees: its own env plus ``HORUS_*`` and ``CUDA_VISIBLE_DEVICES``."""
        checkpoint = self.processes.checkpoint_dir(str(a["job_id"]))
        checkpoint.mkdir(parents=True, exist_ok=True)
        return job_environment(a, self.name, checkpoint, use_mps=self.use_mps)


def job_environment(a: dict[str, Any], agent: str, checkpoint: Path, *, use_mps: bool = False) -> dict[str, str]:
    """The environment of one desired attempt ``a`` on agent ``agent`` (shared by every backend)."""
    env = {str(k): str(v) for k, v in (a.get("env") or {}).items()}
    env.update({
        "CUDA_VISIBLE_DEVICES": ",".join(a["gpu_uuids"]),
        "HORUS_JOB_ID": str(a["job_id"]), "HORUS_ATTEMPT": str(int(a["attempt"])),
        "HORUS_SERVER_URL": str(a.get("server_url", "")),
        "HORUS_JOB_TOKEN": str(a.get("job_token", "")), "HORUS_CHECKPOINT_DIR": str(checkpoint),
        "HORUS_START_ITERATION": str(int(a.get("start_iteration") or 0)),
        "HORUS_GPU_UUIDS": ",".join(a["gpu_uuids"]), "HORUS_NODE_RANK": str(a.get("node_rank", 0)),
        "HORUS_NNODES": str(a.get("nnodes", 1)), "HORUS_MASTER_ADDR": str(a.get("master", "")),
        "HORUS_AGENT": agent,
    })
    if a.get("cwd"):
        env["HORUS_CWD"] = str(a["cwd"])
    if a.get("mem_limit_mib") is not None:  # a job may hold itself to it (torch.cuda.set_per_process_memory_fraction)
        env["HORUS_MEM_LIMIT_MIB"] = str(int(a["mem_limit_mib"]))
    predicted = a.get("predicted") or {}
    if use_mps and predicted:
        share = min(100, max(1, math.ceil(100 * float(predicted.get("util", 1.0)))))
        limit = a.get("mem_limit_mib")  # the server's: predicted + margin, grown after each OOM of the job
        mem = int(limit) if limit is not None else math.ceil(1.1 * float(predicted.get("mem_mib", 0.0)))
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(share)
        if mem > 0:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join(f"{i}={mem}M" for i in range(len(a["gpu_uuids"])))
    return env


def start_thread(agent: Agent, stop: threading.Event) -> threading.Thread:
    thread = threading.Thread(target=agent.run, args=(stop,), name=f"horus-agent-{agent.name}", daemon=True)
    thread.start()
    return thread
