"""``ray`` backend: Horus places, a Ray cluster runs (``horus serve --backend ray [--ray-address ADDR]``).

One thread acts as the agent of every alive Ray node with GPUs (see ``horus.ray.nodes``): it
registers the node with the ``LiveScheduler``, heartbeats on its behalf while Ray reports it alive,
and makes the node's Ray actors match the node's desired state:

* a desired worker becomes a ``JobWorker`` actor (``horus.ray.worker``) with ``num_gpus=0``,
  pinned to the node (``NodeAffinitySchedulingStrategy(node_id, soft=False)``) and holding
  ``share / gpu_slots`` of each chosen GPU's ``horus_gpu_<tag>_<i>`` resource where the node
  declares them (Horus may co-locate up to ``gpu_slots`` workers on a GPU, each with a share of at
  most 1, so Ray admits every co-location Horus decides and nothing beyond); a job spread over
  several nodes gets one placement group with one bundle per node, each bundle on its node's GPU
  resources. Every pin is checked against the live node table first: Ray keeps an infeasible
  request pending silently, Horus reports it at once (the run is lost with the reason; after
  ``max_lost_runs`` the job fails with it). A worker Ray has not started within
  ``launch_timeout_s`` is lost the same way;
* a worker no longer desired gets SIGTERM (cooperative), then after ``grace_s`` SIGKILL and
  ``ray.kill``. An actor whose job ended by itself (or on SIGTERM) stays idle for ``idle_s`` and runs
  the next worker with exactly the same node and resources (no new Ray worker process: that start
  is most of the placement-to-running time); an idle actor holding a GPU resource someone else now
  asks for is ended first;
* reports have the local agent's fields: progress, exit code, OOM (from the job's log); a worker
  whose actor died reports an exit without status;
* a node Ray declares dead (or that leaves the table) is lost at once: ``LiveScheduler.lose_agent``
  requeues its jobs, attained service kept. A node that joins is registered on the next tick.

Stopping ``horus serve`` ends its Ray actors (they belong to its Ray driver) and so their jobs,
which the restarted server runs again from their checkpoints.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from horus.errors import HorusInputError
from horus.service.backends import BACKENDS

if TYPE_CHECKING:
    from horus.ray.nodes import RayNode
    from horus.service.scheduler import LiveScheduler
    from horus.service.server import ServeConfig

log = logging.getLogger("horus.ray")

NAMESPACE = "horus"


def head_unreachable(address: str | None, timeout_s: float = 5.0) -> str | None:
    """Why a ``host:port`` Ray address cannot be reached (None if it can, or for other address forms):
    ``ray.init`` itself retries an unreachable head for minutes."""
    if not address or address in ("auto", "local") or "://" in address:
        return None
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s).close()
    except ValueError:
        return f"expected HOST:PORT, got {address!r}"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


@dataclass
class Worker:
    """One worker (job attempt on one node) as the backend tracks it."""

    job_id: str
    attempt: int
    agent: str
    submitted: float
    request: dict[str, float]
    node_id: str = ""
    actor: Any = None
    in_gang: bool = False  # its actor sits in the attempt's placement group (never reused)
    starting: Any = None  # ObjectRef of the run() call, until it returns
    pending: Any = None  # ObjectRef of an outstanding report() call
    report: dict[str, Any] | None = None
    running_since: float | None = None  # first report received: the actor runs and launched the job
    error: str | None = None
    stop_deadline: float | None = None

    @property
    def key(self) -> tuple[str, int, str]:
        return self.job_id, self.attempt, self.agent

    @property
    def ended(self) -> bool:
        return self.error is not None or (self.report is not None and self.report.get("status") == "exited")

    def reusable(self) -> bool:
        """Its job ended by itself (or after SIGTERM) and its actor is healthy: the actor may run another."""
        return (self.actor is not None and not self.in_gang and self.error is None and self.report is not None
                and self.report.get("status") == "exited")

    def to_report(self) -> dict[str, Any] | None:
        if self.error is not None:
            last = self.report or {}
            return {"job_id": self.job_id, "attempt": self.attempt, "status": "exited", "exit_code": None,
                    "oom": False, "error": self.error, "iterations": last.get("iterations"), "rate": last.get("rate")}
        return self.report


@dataclass
class IdleActor:
    """An actor whose job ended, kept for the next worker with the same node and resources."""

    actor: Any
    node_id: str
    request: dict[str, float]
    since: float


@BACKENDS.register("ray")
class RayBackend:
    """See module docstring. ``workdir``: where workers keep logs and checkpoints on each node."""

    def __init__(self, *, address: str | None = None, workdir: str | None = None, gpu_slots: int = 4,
                 launch_timeout_s: float = 120.0, probe_nvml: bool = True, probe_timeout_s: float = 20.0,
                 poll_timeout_s: float = 0.2, idle_s: float = 10.0) -> None:
        if gpu_slots < 1:
            raise ValueError("gpu_slots must be >= 1")
        self.address = address
        self.workdir = workdir
        self.gpu_slots = gpu_slots
        self.launch_timeout_s = launch_timeout_s
        self.probe_nvml = probe_nvml
        self.probe_timeout_s = probe_timeout_s
        self.poll_timeout_s = poll_timeout_s
        self.idle_s = idle_s
        self.idle: list[IdleActor] = []
        self.reused = 0  # workers that ran in an idle actor instead of a new one
        self.gpu_type = "V100"
        self.heartbeat_s = 1.0
        self.grace_s = 10.0
        self.nodes: dict[str, RayNode] = {}  # registered agents
        self.workers: dict[tuple[str, int, str], Worker] = {}
        self.gangs: dict[tuple[str, int], Any] = {}  # placement group per multi-node attempt
        self.wakeup = threading.Event()
        self.thread: threading.Thread | None = None
        self.scheduler: LiveScheduler | None = None
        self.started_ray = False
        self.launched = 0  # workers submitted to Ray (for tests and benchmarks)

    # ---- Backend protocol ------------------------------------------------------------------------------
    def prepare(self, config: ServeConfig) -> None:
        try:
            import ray
        except ImportError:
            raise HorusInputError("--backend ray", "Ray is not installed: pip install 'horus-scheduler[ray]'") from None
        from horus.gpu_types import PRESETS
        from horus.ray.nodes import parse_nodes

        if config.gpu_type not in PRESETS:
            raise HorusInputError("--gpu-type", f"unknown GPU type {config.gpu_type!r}; presets: {', '.join(PRESETS)}")
        self.gpu_type = config.gpu_type
        self.heartbeat_s = config.heartbeat_s
        self.grace_s = config.grace_s
        self.workdir = self.workdir or str(config.state_dir / "ray")
        address = config.ray_address or self.address
        if not ray.is_initialized():
            unreachable = head_unreachable(address)
            if unreachable:
                raise HorusInputError("--ray-address", f"cannot reach a Ray head at {address}: {unreachable}")
            try:
                ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, include_dashboard=False,
                         configure_logging=False)
            except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ValueError...
                where = f"at {address}" if address else "(none found, and none could be started)"
                why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise HorusInputError("--ray-address", f"cannot connect to a Ray cluster {where}: {why}") from None
            self.started_ray = True
        if not parse_nodes(ray.nodes()):
            raise HorusInputError("--backend ray", "the Ray cluster has no alive node with GPUs: start nodes with "
                                                   "`ray start --num-gpus N` or per-GPU resources "
                                                   "'{\"horus_gpu_<node>_<i>\": 1}' (see docs/backends/ray.md)")

    def start(self, scheduler: LiveScheduler, config: ServeConfig, stop: threading.Event) -> None:
        self.scheduler = scheduler
        self.thread = threading.Thread(target=self.run, args=(stop,), name="horus-ray", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.wakeup.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
        if self.started_ray:
            import ray

            ray.shutdown()

    # ---- the loop ------------------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a Ray hiccup must be seen, and must not stop the service
                log.exception("Ray backend step failed")
                stop.wait(1.0)
            self.wakeup.wait(self.heartbeat_s)
            self.wakeup.clear()

    def tick(self) -> None:
        """Follow the node table, collect reports, heartbeat each node and reconcile its actors, once."""
        import ray

        from horus.ray.nodes import parse_nodes

        assert self.scheduler is not None
        table = parse_nodes(ray.nodes())
        for agent, node in list(self.nodes.items()):
            now_node = table.get(agent)
            if now_node is None or now_node.node_id != node.node_id:
                self.node_gone(agent, f"Ray node {node.node_id[:8]} is dead or left the cluster")
        for agent, node in table.items():
            if agent not in self.nodes:
                self.register(node)
        self.poll()
        self._expire_idle(time.time())
        from horus.errors import UnknownAgentError

        for agent, node in list(self.nodes.items()):
            reports, telemetry = self.reports_of(agent)
            try:
                desired = self.scheduler.heartbeat(agent, reports, telemetry)
            except UnknownAgentError:  # the scheduler expired it (this loop stalled past the lease)
                self.register(node)
                continue
            self.reconcile(node, desired, table)

    def reports_of(self, agent: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The agent's reports (as the local agent sends them) and per-GPU telemetry gathered from its workers."""
        reports, per_gpu = [], {}
        for w in self.workers.values():
            if w.agent != agent or w.stop_deadline is not None:
                continue
            report = w.to_report()
            if report is None:
                continue
            report = dict(report)
            for sample in report.pop("gpus", None) or []:
                per_gpu[int(sample["index"])] = sample
            reports.append(report)
        return reports, list(per_gpu.values())

    # ---- nodes -----------------------------------------------------------------------------------------------
    def register(self, node: RayNode) -> None:
        from horus.ray.nodes import describe_gpus

        assert self.scheduler is not None
        node.gpus = describe_gpus(node, self.gpu_type, self._probe(node))
        self.scheduler.register_agent(node.agent, node.address, node.gpus, wake=self.wakeup.set)
        self.nodes[node.agent] = node
        log.info("Ray node %s registered as agent %s with %d GPUs", node.node_id[:8], node.agent, len(node.gpus))

    def _probe(self, node: RayNode) -> list[dict[str, Any]] | None:
        if not self.probe_nvml or node.resources.get("GPU", 0.0) <= 0:
            return None
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from horus.ray.worker import probe_gpus

        pin = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
        task = ray.remote(probe_gpus).options(num_cpus=0, num_gpus=0, scheduling_strategy=pin)
        try:
            return ray.get(task.remote(), timeout=self.probe_timeout_s)
        except Exception as exc:  # noqa: BLE001 - GetTimeoutError, worker crash: fall back to the declared type
            log.warning("NVML probe of Ray node %s failed (%s): using --gpu-type %s", node.node_id[:8],
                        type(exc).__name__, self.gpu_type)
            return None

    def node_gone(self, agent: str, reason: str) -> None:
        assert self.scheduler is not None
        node = self.nodes.pop(agent, None)
        for worker in [w for w in self.workers.values() if w.agent == agent]:
            self._drop(worker, kill=True)
        for idle in [i for i in self.idle if node is not None and i.node_id == node.node_id]:
            self.idle.remove(idle)
            self._kill_actor(idle.actor)
        self.scheduler.lose_agent(agent, reason)

    # ---- reports ---------------------------------------------------------------------------------------------
    def poll(self) -> None:
        """Collect one report from every started worker (waiting ``poll_timeout_s`` at most)."""
        import ray
        from ray.exceptions import RayError

        now = time.time()
        for w in self.workers.values():
            if w.actor is not None and w.pending is None and w.error is None:
                w.pending = w.actor.report.remote()
        waiting = {w.pending: w for w in self.workers.values() if w.pending is not None}
        waiting.update({w.starting: w for w in self.workers.values() if w.starting is not None})
        if not waiting:
            return
        ready, _ = ray.wait(list(waiting), num_returns=len(waiting), timeout=self.poll_timeout_s)
        for ref in ready:
            w = waiting[ref]
            try:
                value = ray.get(ref)
            except RayError as exc:
                value = None
                w.error = w.error or (f"the Ray actor of job {w.job_id} attempt {w.attempt} on {w.agent} failed: "
                                      f"{type(exc).__name__}")
            if ref == w.starting:
                w.starting = None
                continue
            w.pending = None
            if value is not None and (str(value["job_id"]), int(value["attempt"])) == (w.job_id, w.attempt):
                w.report = value
                if w.running_since is None:
                    w.running_since = time.time()
        for w in waiting.values():
            if w.pending is not None and w.running_since is None and now - w.submitted > self.launch_timeout_s:
                w.error = (f"Ray did not start job {w.job_id} attempt {w.attempt} on {w.agent} within "
                           f"{self.launch_timeout_s:g} s (resources {w.request or 'node pin only'})")
                log.warning(w.error)
                self._kill(w)

    # ---- desired state -------------------------------------------------------------------------------------
    def reconcile(self, node: RayNode, desired: list[dict[str, Any]], table: dict[str, RayNode]) -> None:
        now = time.time()
        want = {(str(d["job_id"]), int(d["attempt"])): d for d in desired}
        for w in [w for w in self.workers.values() if w.agent == node.agent]:
            if (w.job_id, w.attempt) in want:
                continue
            if w.ended:
                self._drop(w, kill=True)
            elif w.stop_deadline is None:
                w.stop_deadline = now + self.grace_s
                self._signal(w, signal.SIGTERM)
            elif now >= w.stop_deadline:
                self._drop(w, kill=True)
        for (job_id, attempt), assignment in want.items():
            if (job_id, attempt, node.agent) not in self.workers:
                self.launch(node, assignment, table)

    def _held(self, node_id: str, new: Worker) -> dict[str, float]:
        """GPU resources of the node held by its other active workers (not those being stopped: they are
        going, and Ray starts the new worker once they are gone)."""
        held: dict[str, float] = {}
        for w in self.workers.values():
            if w is not new and w.node_id == node_id and w.stop_deadline is None and w.error is None:
                for name, amount in w.request.items():
                    held[name] = held.get(name, 0.0) + amount
        return held

    @staticmethod
    def _gpu(node: RayNode, index: int) -> dict[str, Any]:
        return next((d for d in node.gpus if int(d["index"]) == index), {})

    def _request(self, node: RayNode, indices: list[int], share: float) -> dict[str, float]:
        by_index = {int(d["index"]): d for d in node.gpus}
        out = {}
        for i in indices:
            if i not in by_index:
                from horus.ray.nodes import InfeasiblePinError

                raise InfeasiblePinError(f"GPU {i} is not one of Ray node {node.node_id[:8]} ({node.agent})'s GPUs "
                                         f"{sorted(by_index)}")
            resource = by_index[i].get("resource")
            if resource:
                out[str(resource)] = round(share / self.gpu_slots, 6)
        return out

    def launch(self, node: RayNode, a: dict[str, Any], table: dict[str, RayNode]) -> Worker:
        """Check the pin against ``table`` and submit the worker's actor (or record why it cannot run)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

        from horus.ray.nodes import InfeasiblePinError, check_pin
        from horus.ray.worker import JobWorker

        assert self.scheduler is not None
        job_id, attempt = str(a["job_id"]), int(a["attempt"])
        what = f"job {job_id} attempt {attempt} on {node.agent}"
        worker = Worker(job_id, attempt, node.agent, time.time(), {})
        self.workers[worker.key] = worker
        info = self.scheduler.running_attempt(job_id, attempt) or {"placement": [], "share": 1.0}
        share = float(info["share"])
        try:
            worker.request = self._request(node, [int(i) for i in a["gpu_indices"]], share)
            check_pin(table, node.node_id, worker.request, what, self._held(node.node_id, worker))
            worker.node_id = node.node_id
            options: dict[str, Any] = {"num_cpus": 0, "num_gpus": 0, "resources": worker.request, "max_restarts": 0,
                                       "max_concurrency": 1}
            agents = list(dict.fromkeys(agent for agent, _ in info["placement"]))
            pg = self._gang(job_id, attempt, agents, info, table) if len(agents) > 1 and worker.request else None
            if pg is not None:
                worker.in_gang = True
                options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=agents.index(node.agent))
            else:
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
        except InfeasiblePinError as exc:
            worker.error = str(exc)
            log.error("%s", exc)
            return worker
        worker.actor = None if worker.in_gang else self._take_idle(node.node_id, worker.request)
        if worker.actor is not None:
            self.reused += 1
        else:
            worker.actor = ray.remote(JobWorker).options(**options).remote()
            self.launched += 1
        nvml = [int(i) for i in a["gpu_indices"] if not self._gpu(node, int(i)).get("declared")]
        worker.starting = worker.actor.run.remote(a, node.agent, str(self.workdir), nvml or None)
        return worker

    # ---- idle actors -----------------------------------------------------------------------------------------
    def _take_idle(self, node_id: str, request: dict[str, float]) -> Any:
        """An idle actor with exactly this node and request; else None, after ending the idle actors that hold
        any of the requested resources (their share might keep Ray from starting the new one)."""
        for idle in self.idle:
            if idle.node_id == node_id and idle.request == request:
                self.idle.remove(idle)
                return idle.actor
        for idle in [i for i in self.idle if i.node_id == node_id and set(i.request) & set(request)]:
            self.idle.remove(idle)
            self._kill_actor(idle.actor)
        return None

    def _expire_idle(self, now: float) -> None:
        for idle in [i for i in self.idle if now - i.since > self.idle_s]:
            self.idle.remove(idle)
            self._kill_actor(idle.actor)

    def stop_all(self) -> None:
        """End every worker and idle actor now (their jobs with them)."""
        for worker in list(self.workers.values()):
            self._drop(worker, kill=True)
        for idle in self.idle:
            self._kill_actor(idle.actor)
        self.idle.clear()

    def _gang(self, job_id: str, attempt: int, agents: list[str], info: dict[str, Any],
              table: dict[str, RayNode]) -> Any:
        """The attempt's placement group: one bundle per node, on that node's GPU resources (None where a
        node has none)."""
        from ray.util.placement_group import placement_group

        from horus.ray.nodes import InfeasiblePinError, check_pin

        pg = self.gangs.get((job_id, attempt))
        if pg is not None:
            return pg
        bundles = []
        for agent in agents:
            node = self.nodes.get(agent)
            if node is None:
                raise InfeasiblePinError(f"job {job_id} attempt {attempt}: its node {agent} is not in the Ray cluster")
            request = self._request(node, [i for a, i in info["placement"] if a == agent], float(info["share"]))
            if not request:  # a node without per-GPU resources: no bundle can be pinned there
                log.warning("job %s attempt %s: node %s declares no horus_gpu_* resources; its workers are pinned "
                            "by node only, without a placement group", job_id, attempt, agent)
                return None
            check_pin(table, node.node_id, request, f"job {job_id} attempt {attempt} on {agent}")
            bundles.append(request)
        pg = placement_group(bundles, strategy="SPREAD", name=f"horus-{job_id}-{attempt}")
        self.gangs[(job_id, attempt)] = pg
        return pg

    # ---- stopping ------------------------------------------------------------------------------------------
    @staticmethod
    def _signal(w: Worker, sig: int) -> Any:
        return w.actor.signal.remote(int(sig)) if w.actor is not None else None

    def _kill(self, w: Worker) -> None:
        """SIGKILL the job's process group (waiting a moment for the actor to do it), then ``ray.kill``."""
        import ray

        if w.actor is None:
            return
        ref = self._signal(w, signal.SIGKILL)
        if w.running_since is not None:
            ray.wait([ref], timeout=1.0)
        self._kill_actor(w.actor)
        w.actor = None

    @staticmethod
    def _kill_actor(actor: Any) -> None:
        import ray

        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already dead
            pass

    def _drop(self, w: Worker, *, kill: bool) -> None:
        """Forget a worker; its actor goes idle for reuse when its job ended cleanly, else it is ended."""
        if w.reusable() and self.idle_s > 0:
            self._signal(w, signal.SIGKILL)  # anything the job left in its process group
            self.idle.append(IdleActor(w.actor, w.node_id, dict(w.request), time.time()))
            w.actor = None
        elif kill:
            self._kill(w)
        self.workers.pop(w.key, None)
        gang = (w.job_id, w.attempt)
        if gang in self.gangs and not any((x.job_id, x.attempt) == gang for x in self.workers.values()):
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(self.gangs.pop(gang))
            except Exception:  # noqa: BLE001
                pass
