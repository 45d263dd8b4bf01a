"""``LiveScheduler``: the scheduler core on a wall clock, with the store as the record and agents as hands.

A thin facade over its parts: the agents it knows (``horus.service.agents``), the running attempts that are
the agents' desired state (``horus.service.live_jobs``), the predictor (``horus.service.predictor``), the
store, and the ``SchedulerCore`` that decides.

It owns the in-memory ``SchedulerState`` (rebuilt from the store on start and whenever machines
join or leave), the policy, and the ``SchedulerCore`` whose ``Executor`` it is: a ``Start`` is made
durable (``Store.start``, attempt + 1) and then becomes part of the *desired state* that agents
fetch with their heartbeats; a ``Preempt`` or a cancel removes it from the desired state, and the
agent stops the process. Agents report what their processes do; reports carry the attempt
number, so a late report of an attempt the server has moved past changes nothing.

All public methods take one lock: the API threads, the scheduling thread and in-process agents
may call them concurrently.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from horus.core import SchedulerCore, create_policy
from horus.errors import HorusInputError, UnknownAgentError
from horus.gpu_types import accepted_gpu_types
from horus.jobs import JobSpec
from horus.policies.base import Policy
from horus.predict.base import Predictor
from horus.predict.corrected import CorrectedPredictor, Corrections
from horus.service import tenants as tenants_mod
from horus.service.agents import AgentInfo, cluster_of, expired
from horus.service.ledger import Ledger
from horus.service.live_jobs import LiveJob, LiveJobs
from horus.service.metrics import ServiceMetrics
from horus.service.online import LiveCorrections
from horus.service.predictor import ServicePredictor
from horus.service.schemas import MAX_LOG_TAIL_CHARS
from horus.service.store import FINAL_STATES, AgentRow, JobRow, NewJob, Store
from horus.state import SchedulerState, gpu_share
from horus.tenancy import PriorityClass, Queue

log = logging.getLogger("horus.service")

# A job submitted without an iteration count is believed to be this long (policies that order by
# predicted length, such as SJF, treat it as a long job).
UNKNOWN_ITERATIONS = 1e6
PROGRESS_SAVE_S = 5.0  # reported progress reaches the store at most this often per agent (and at every transition)
MEMORY_MARGIN = 0.1  # an MPS-enforced job may hold its predicted peak memory + 10 %
OOM_MARGIN_GROWTH = 1.5  # ... times this for every out-of-memory exit the job has had


def memory_limit_mib(predicted_mib: float, oom_failures: int, card_mib: int) -> int:
    """MiB per GPU a job is held to where the agent enforces memory (MPS): predicted x (1 + MEMORY_MARGIN), grown
    OOM_MARGIN_GROWTH-fold for each out-of-memory exit of the job (its margin learned from its OOMs), at most the
    card."""
    return min(int(card_mib), math.ceil(predicted_mib * (1.0 + MEMORY_MARGIN) * OOM_MARGIN_GROWTH ** oom_failures))


FENCE_MARGIN_S = 1.0  # beyond lease + fence_kill_s before a silent agent's attempts are run elsewhere


class LiveScheduler:
    """The live service's scheduler (see module docstring)."""

    def __init__(self, store: Store, predictor: Predictor, *, policy: str = "horus",
                 policy_options: Mapping[str, object] | None = None, lease_s: float = 10.0,
                 max_oom_retries: int = 3, max_lost_runs: int = 3, server_url: str = "", job_secret: bytes = b"",
                 metrics: ServiceMetrics | None = None, clock: Callable[[], float] = time.time,
                 fence_fraction: float = 0.8, fence_kill_s: float = 2.0, online_correction: str = "auto") -> None:
        """``online_correction``: ``auto`` learns from the telemetry of real GPUs only (a fake GPU's is a CPU
        stand-in), ``on`` from fake GPUs too, ``off`` never (and ignores stored observations)."""
        if online_correction not in ("auto", "on", "off"):
            raise HorusInputError("--online-correction", f"expected auto, on or off, got {online_correction!r}")
        if not 0.0 < fence_fraction <= 1.0:
            raise HorusInputError("--fence-fraction", f"expected a number in (0, 1], got {fence_fraction}")
        if not 0.0 <= fence_kill_s <= 600.0:
            raise HorusInputError("--fence-kill-s", f"expected 0 to 600 seconds, got {fence_kill_s}")
        self.store = store
        # the configured predictor (with its fallbacks), corrected online from telemetry (horus.service.online)
        self.predictor = CorrectedPredictor(ServicePredictor(predictor), Corrections())
        self.policy_name = policy
        self.policy_options = dict(policy_options or {})
        self.lease_s = lease_s
        self.fence_after_s = fence_fraction * lease_s
        self.fence_kill_s = fence_kill_s
        self.max_oom_retries = max_oom_retries
        self.max_lost_runs = max_lost_runs
        self.server_url = server_url
        self.job_secret = job_secret
        self.metrics = metrics or ServiceMetrics()
        self.online_correction = online_correction
        self.online = LiveCorrections(store, self.predictor, self.metrics, load=online_correction != "off")
        self.clock = clock
        self.lock = threading.RLock()
        self.wake_scheduler = threading.Event()
        self.agents: dict[str, AgentInfo] = {}
        self.live = LiveJobs()  # running attempts: the desired state agents fetch
        self.gpu_map: list[tuple[str, int]] = []  # global GPU index -> (agent, local index)
        self.gpu_index: dict[tuple[str, int], int] = {}
        now = self.clock()
        for row in store.agents():
            if row.state == "alive":  # a restarted server gives known agents one lease to report again
                self.agents[row.name] = AgentInfo(row.name, row.seq, row.hostname, row.gpus, last_seen=now)
        self._register_models()
        self.ledger = Ledger(store)
        self.tenants = tenants_mod.load(store)  # queues and priority classes (no queue: no tenancy)
        self.policy: Policy = create_policy(policy, self.policy_options)  # one object for the service's life
        self.rebuild()

    def _register_models(self) -> None:
        from horus.service.models_onnx import register_catalog_row

        for name, info in self.store.models().items():
            register_catalog_row(name, info)

    # ---- the in-memory view, rebuilt from the store ----------------------------------------------------
    def rebuild(self) -> None:
        """Build cluster, state and core afresh from the alive agents and the stored jobs. The policy object is
        kept (what it learned from telemetry survives a machine joining or leaving); policies never assume the
        same state or cluster object between calls (``horus.policies.base``)."""
        with self.lock:
            previous = self.state.running if hasattr(self, "state") else {}
            telemetry = {k: (r.iterations_done, r.observed_rate) for k, r in previous.items()}
            self.cluster, gpu_map = cluster_of(self.agents)
            self.gpu_map = gpu_map
            self.gpu_index = {key: g for g, key in enumerate(gpu_map)}
            self.agent_gpus: dict[str, dict[int, tuple[str, int]]] = {}  # agent -> its GPUs, for its heartbeats
            for g, key in enumerate(gpu_map):
                self.agent_gpus.setdefault(key[0], {})[g] = key
            self.state = SchedulerState(self.cluster, self.predictor)
            old = self.core.admission if hasattr(self, "core") else None
            # the same policy (it keeps what it learned); the tenancy is set before any job enters the state
            self.core = SchedulerCore(self.state, self.policy, self, tenancy=self.tenants.tenancy)
            tenants_mod.carry_ledger(old, self.core.admission)
            self.live = LiveJobs()
            now = self.clock()
            rows = self.store.jobs(states=("queued", "running"))
            rows.sort(key=lambda r: (r.queued_since, r.id))
            queued: list[JobRow] = []
            self.state.gated = False  # running attempts are adopted as they run; the admission charges them
            try:
                for row in rows:
                    if row.state == "running" and not self._adopt(row):
                        attained = row.attained_gpu_s + len(row.placement) * max(0.0, now - (row.started or now))
                        self.store.requeue(row.id, row.attempt, now, attained_gpu_s=attained,
                                           iterations_done=row.iterations_done, kind="lost",
                                           detail={"reason": "its machine is gone"})
                        row = self.store.job(row.id) or row
                    if row.state == "queued":
                        queued.append(row)
            finally:
                self.state.gated = self.core.admission is not None  # waiting jobs are held for admission again
            for row in sorted(queued, key=lambda r: (r.queued_since, r.id)):  # a lost run re-enters at the back
                self._enqueue(row)
            for key, (done, rate) in telemetry.items():  # fresher than the store's copy
                run = self.state.running.get(key)
                if run is not None:
                    run.iterations_done, run.observed_rate = max(run.iterations_done, done), rate
            self.ledger.rescan()
            self.ledger.sync(self.state, self.gpu_map, now)
            self.online.observer.rebased()
            self.online.sync(self.state, self._attempts(), now)
            self.wake_scheduler.set()

    def _attempts(self) -> dict[str, int]:
        """Running job id -> its attempt."""
        return {key: self.live[key].attempt for key in self.live}

    def _enqueue(self, row: JobRow) -> None:
        spec = self.spec_of(row)
        self.state.submit(spec, row.queued_since)
        queued = self.state.waiting(spec.job_id)
        assert queued is not None
        queued.attained_gpu_s = row.attained_gpu_s
        queued.oom_failures = row.oom_failures
        queued.preemptions = row.preemptions

    def _adopt(self, row: JobRow) -> bool:
        """Put a stored running attempt back into the state, if all its GPUs are on alive agents."""
        gpus = tuple(self.gpu_index.get((a, i), -1) for a, i in row.placement)
        if not gpus or min(gpus) < 0:
            return False
        self._enqueue(row)
        run = self.state.start(row.job_id, gpus, row.started or self.clock())
        run.attained_gpu_s = row.attained_gpu_s
        run.iterations_done = row.iterations_done
        self.live.add(row.job_id, LiveJob(row, row.attempt, row.placement, row.attempt_start_iterations))
        return True

    def spec_of(self, row: JobRow) -> JobSpec:
        queue, priority = row.queue, row.priority
        tenancy = self.tenants.tenancy
        if tenancy is not None and ((queue is not None and queue not in tenancy.queues)
                                    or (priority is not None and priority not in self.tenants.classes)):
            log.warning("job %s names queue %r / class %r, which no longer exist: it runs under the defaults", row.id,
                        queue, priority)  # unreachable through the API (a queue or class in use is not deleted)
            queue, priority = None, None
        return JobSpec(job_id=row.job_id, submit_time=row.submitted, num_gpus=row.num_gpus, model=row.model,
                       batch_size=row.batch_size, iterations=row.iterations or UNKNOWN_ITERATIONS,
                       gpu_fraction=row.gpu_fraction, gpu_type_request=row.gpu_type, queue=queue, priority=priority,
                       input_size=row.input_size, precision=row.precision, optimizer=row.optimizer)

    # ---- requests ----------------------------------------------------------------------------------------
    def submit(self, job: NewJob, user: str | None = None) -> tuple[JobRow, bool]:
        """Validate, store (durable before it returns) and queue a job. (row, created). ``user``: the submitting
        user token's name, checked against its queue's users (None: an admin, who may submit anywhere)."""
        with self.lock:
            self.tenants.check(job.queue, job.priority)  # unknown queue or class -> HorusInputError
            if user is not None:
                self.tenants.check_user(job.queue, user)  # a queue bound to other users -> NotAQueueUser
            check_job_description(job)
            probe = JobSpec("probe", 0.0, job.num_gpus, job.model, job.batch_size, job.iterations or 1.0,
                            job.gpu_fraction, job.gpu_type, input_size=job.input_size, precision=job.precision,
                            optimizer=job.optimizer)
            if self.cluster.num_gpus:
                if not self.core.admits(probe):
                    accepted = accepted_gpu_types(job.gpu_type)
                    kind = f" of type {job.gpu_type}" if accepted else ""
                    raise HorusInputError("num_gpus", f"the job needs {job.num_gpus} GPUs{kind}; the cluster has "
                                                      f"{self.core.eligible_gpus(job.gpu_type)}")
                self.predictor.predict(probe, self.cluster.gpus[0].gpu_type)  # unknown model -> HorusInputError
            row, created = self.store.submit(job, self.clock())
            if created:
                self._enqueue(row)
                self.metrics.submitted.inc()
                self.wake_scheduler.set()
            return row, created

    def cancel(self, job_id: int) -> JobRow | None:
        with self.lock:
            row = self.store.job(job_id)
            if row is None or row.state in FINAL_STATES:
                return row
            key, now = row.job_id, self.clock()
            run = self.state.running.get(key)
            attained = run.attained(now) if run else None
            self.store.end(job_id, None, now, "cancelled", attained_gpu_s=attained, reason="cancelled by user")
            if run is not None:
                self.ledger.departed(key, "cancelled")
                self.state.finish(key)
                self._wake(self.live.pop(key))
                self.ledger.sync(self.state, self.gpu_map, now)
                self.online.sync(self.state, self._attempts(), now)
            elif self.state.waiting(key) is not None:  # queued, or held for its queue's quota
                self.state.withdraw(key)
            return self.store.job(job_id)

    # ---- tenancy: queues and priority classes (horus.service.tenants) ---------------------------------------
    def put_queue(self, queue: Queue) -> bool:
        """Create or replace a queue (durable first), then rebuild the core with the new tenancy; True if created."""
        with self.lock:
            created = self.store.put_queue(queue.name, dict(queue.guaranteed), queue.borrow_limit, queue.weight,
                                           self.clock(), queue.users)
            self._reload_tenants()
            return created

    def delete_queue(self, name: str) -> int | None:
        """Delete a queue no queued or running job is of: None if there is none, else how many jobs keep it (0:
        deleted). The last queue deleted, the service has no tenancy again."""
        with self.lock:
            busy = self.store.delete_queue(name, self.tenants.default_queue or "")
            if busy == 0:
                self._reload_tenants()
            return busy

    def put_priority_class(self, cls: PriorityClass) -> bool:
        with self.lock:
            created = self.store.put_priority_class(cls.name, cls.value, cls.preemptible, self.clock())
            self._reload_tenants()
            return created

    def delete_priority_class(self, name: str) -> int | None:
        """As ``delete_queue``, for a stored priority class (the built-in ``normal`` is not stored)."""
        with self.lock:
            busy = self.store.delete_priority_class(name, self.tenants.default_priority)
            if busy == 0:
                self._reload_tenants()
            return busy

    def _reload_tenants(self) -> None:
        """The tenancy as the store now has it; the core is built again around it (``SchedulerCore`` takes its
        tenancy before any job enters its state: the path machines joining take)."""
        self.tenants = tenants_mod.load(self.store)
        self.rebuild()

    def queue_views(self) -> list[dict[str, Any]]:
        with self.lock:
            return tenants_mod.queue_views(self.tenants, self.core.admission, self.state)

    def class_views(self) -> list[dict[str, Any]]:
        with self.lock:
            return tenants_mod.class_views(self.tenants)

    def tenant_of(self, row: JobRow) -> tuple[str | None, str | None]:
        """The queue and priority class a stored job is of (without a tenancy: what it named, if anything)."""
        return self.tenants.names(row.queue, row.priority)

    # ---- Executor (called by SchedulerCore.schedule under the lock) ----------------------------------------
    def start(self, spec: JobSpec, gpus: tuple[int, ...], now: float) -> None:
        placement = [self.gpu_map[g] for g in gpus]
        attempt = self.store.start(int(spec.job_id), placement, now)
        if attempt is None:
            raise RuntimeError(f"job {spec.job_id} was not queued in the store")
        queued = self.state.queue[spec.job_id]
        self.metrics.wait_s.observe(max(0.0, now - queued.queued_since))
        row = self.store.job(int(spec.job_id))
        assert row is not None
        run = self.state.start(spec.job_id, gpus, now)
        run.iterations_done = row.iterations_done
        live = LiveJob(row, attempt, placement, row.attempt_start_iterations)
        self.live.add(spec.job_id, live)
        self._wake(live)

    def preempt(self, job_id: str, now: float) -> None:
        live = self.live.pop(job_id)
        assert live is not None
        run = self.state.running[job_id]
        self.ledger.departed(job_id, "unpacked")
        detail = None
        if self.core.admission is not None and self.core.tenancy_preempting:
            detail = {"by": "tenancy", "queue": self.core.admission.queue_name(run.spec.queue)}
        self.store.requeue(int(job_id), live.attempt, now, attained_gpu_s=run.attained(now),
                           iterations_done=run.iterations_done, kind="preempted", detail=detail)
        self.state.requeue(job_id, now)
        self._wake(live)

    def _wake(self, live: LiveJob | None) -> None:
        if live is None:
            return
        for name in live.agents():
            agent = self.agents.get(name)
            if agent is not None and agent.wake is not None:
                agent.wake()

    # ---- the scheduling step -----------------------------------------------------------------------------
    def step(self) -> int:
        """Expire lost agents, then one decision step; returns how many jobs were started."""
        with self.lock:
            self._expire_agents(self.clock())
            now = self.clock()  # after the expiry: its requeues are stamped by the rebuild's own clock, and a
            # start decided at an earlier `now` would precede them in the job's history
            if not self.cluster.num_gpus or not self.core.wants_step():
                return 0
            admission = self.core.admission
            before = {q: a.reclaimed for q, a in admission.accounts.items()} if admission is not None else {}
            self.core.schedule(now)
            for q, count in before.items():
                if admission is not None and admission.accounts[q].reclaimed > count:
                    self.metrics.queue_reclaims.labels(queue=q).inc(admission.accounts[q].reclaimed - count)
            self.metrics.decision_s.observe(self.core.last_decision_s)
            self.ledger.sync(self.state, self.gpu_map, now)
            self.online.sync(self.state, self._attempts(), now)  # started attempts are watched from their start
            return self.core.last_started

    def tick_s(self) -> float:
        """How long the scheduling thread may sleep without an event (at most 1 s: agents' leases expire)."""
        with self.lock:
            wake = self.core.next_wakeup(0.0)
        return min(1.0, wake) if wake is not None else 1.0

    def fencing(self) -> dict[str, float]:
        """What agents put in their attempts' leases: an attempt not renewed for ``fence_after_s`` (a fraction of
        the lease) is stopped by its wrapper, and SIGKILLed ``fence_kill_s`` later."""
        return {"fence_after_s": self.fence_after_s, "fence_kill_s": self.fence_kill_s}

    @property
    def requeue_after_s(self) -> float:
        """How long an agent may be silent before it is lost and its attempts run elsewhere: the lease, plus the
        time its wrappers take to fence them, plus a margin (so an attempt never runs twice at once)."""
        return self.lease_s + self.fence_kill_s + FENCE_MARGIN_S

    def _expire_agents(self, now: float) -> None:
        lost = expired(self.agents, now, self.requeue_after_s)
        for name in lost:
            self._forget_agent(name, f"missed its lease ({self.lease_s:g} s; its jobs were fenced)", now)
        if lost:
            self.rebuild()  # running attempts on lost agents are requeued there, attained service kept

    def _forget_agent(self, name: str, reason: str, now: float) -> None:
        log.warning("agent %s lost (%s): its jobs are requeued", name, reason)
        self.store.agent_lost(name, now)
        del self.agents[name]
        self.metrics.agents_lost.inc()

    def lose_agent(self, name: str, reason: str) -> bool:
        """Declare agent ``name`` lost now (a backend that knows a machine died need not wait for its lease);
        its running attempts are requeued with attained service kept. False if it was not alive."""
        with self.lock:
            if name not in self.agents:
                return False
            self._forget_agent(name, reason, self.clock())
            self.rebuild()
            return True

    def running_attempt(self, job_id: str, attempt: int) -> dict[str, Any] | None:
        """A running attempt's ``placement`` ((agent, local GPU index) per worker) and per-GPU ``share``
        (``gpu_share``); None once it is not running. For backends that reserve resources per job."""
        with self.lock:
            live = self.live.get(job_id)
            run = self.state.running.get(job_id)
            if live is None or run is None or live.attempt != attempt:
                return None
            return {"placement": list(live.placement), "share": gpu_share(run.spec)}

    # ---- agents ----------------------------------------------------------------------------------------------
    def register_agent(self, name: str, hostname: str, gpus: list[dict[str, Any]],
                       wake: Callable[[], None] | None = None,
                       reports: list[dict[str, Any]] | None = None) -> AgentRow:
        """Register (or re-register) an agent. ``reports``: how its attempts stand, applied before the scheduler can
        use its GPUs again (an attempt that finished while the agent was away finishes its job, see
        ``_late_success``)."""
        with self.lock:
            now = self.clock()
            known = self.agents.get(name)
            row = self.store.register_agent(name, hostname, gpus, now)
            self.agents[name] = AgentInfo(name, row.seq, hostname, gpus, last_seen=now, wake=wake)
            if known is None or known.gpus != gpus:
                self.rebuild()
            if reports:
                self._apply_reports(name, reports, self.clock())  # after the rebuild's own requeues
            return row

    def heartbeat(self, name: str, reports: list[dict[str, Any]],
                  gpu_telemetry: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Apply an agent's reports; return its desired state (the attempts it must be running)."""
        with self.lock:
            agent = self.agents.get(name)
            if agent is None:
                raise UnknownAgentError(name)
            now = self.clock()
            agent.last_seen = now
            for sample in gpu_telemetry or []:
                agent.telemetry[int(sample["index"])] = {k: float(v) for k, v in sample.items()
                                                         if k != "index" and v is not None}  # null: not measured
            progress = self._apply_reports(name, reports, now)
            self.ledger.sample(self.state, self.agent_gpus.get(name, {}), agent.telemetry, now)
            self.ledger.sync(self.state, self.gpu_map, now)
            if self._learns_from(agent):
                self.online.heartbeat(self.state, self.agent_gpus.get(name, {}), agent.telemetry, reports, now)
            self.online.sync(self.state, self._attempts(), now)
            if now - agent.progress_saved >= PROGRESS_SAVE_S:  # telemetry, not a transition: written now and then
                agent.progress_saved = now
                self.store.progress(progress)
            return self.desired(name)

    def _apply_reports(self, name: str, reports: list[dict[str, Any]], now: float) -> list[tuple[int, int, float]]:
        """Apply agent ``name``'s attempt reports; the progress to store ((job id, attempt, iterations done))."""
        progress: list[tuple[int, int, float]] = []
        for report in reports:
            key = str(report["job_id"])
            live = self.live.get(key)
            if live is None or live.attempt != int(report["attempt"]) or name not in live.agents():
                if report.get("status") == "exited" and report.get("exit_code") == 0 and live is None:
                    self._late_success(key, int(report["attempt"]), name, report, now)
                continue  # fenced: an attempt the server has moved past
            if report.get("iterations") is not None:
                run = self.state.running[key]
                run.iterations_done = live.start_iteration + float(report["iterations"])
                run.observed_rate = float(report.get("rate") or 0.0)
                progress.append((live.row.id, live.attempt, run.iterations_done))
            if report.get("status") == "exited":
                self._on_exit(key, live, name, report, now)
        return progress

    def _late_success(self, key: str, attempt: int, agent: str, report: Mapping[str, Any], now: float) -> None:
        """An attempt that finished while its agent was cut off, reported after the server requeued the job: if the
        job still waits (no later attempt started) and that attempt ran on this agent alone, the job is finished
        instead of run again."""
        row = self.store.job(int(key))
        if row is None or row.state != "queued" or row.attempt != attempt or self.state.waiting(key) is None:
            return
        started = [e for e in self.store.events(row.id) if e["kind"] == "started" and e["attempt"] == attempt]
        placement = started[-1].get("placement") if started else None
        if not placement or any(a != agent for a, _ in placement):
            return
        if self.store.end(row.id, attempt, now, "finished", exit_code=0,
                          detail={"late": "reported after its agent came back", **_log_tail(report)}):
            self.state.withdraw(key)
            self.metrics.jct_s.observe(max(0.0, now - row.submitted))
            log.info("job %s attempt %d finished while agent %s was away: not run again", key, attempt, agent)

    def _learns_from(self, agent: Any) -> bool:
        """Whether online correction samples this agent's telemetry (``online_correction``)."""
        if self.online_correction == "off":
            return False
        return self.online_correction == "on" or not any(d.get("fake") for d in agent.gpus)

    def desired(self, name: str) -> list[dict[str, Any]]:
        """The attempts agent ``name`` must run, with everything needed to launch them."""
        out = []
        for key in self.live.on(name):
            live = self.live[key]
            agents = live.agents()
            if name in live.exited:
                continue
            local = [i for a, i in live.placement if a == name]
            agent = self.agents[name]
            gpus = tuple(self.gpu_index[(name, i)] for i in local)
            pred = self.state.predict(self.state.running[key].spec, self.cluster.gpus[gpus[0]].gpu_type)
            master = self.agents[agents[0]].hostname if agents[0] in self.agents else ""
            out.append({
                "job_id": key, "attempt": live.attempt, "command": live.row.command, "env": live.row.env, "cwd": live.row.cwd,
                "gpu_indices": local, "gpu_uuids": [str(agent.gpu(i).get("uuid", i)) for i in local],
                "node_rank": agents.index(name), "nnodes": len(agents), "master": master,
                "start_iteration": live.start_iteration, "job_token": self.job_token(key, live.attempt),
                "server_url": self.server_url,
                "predicted": {"util": pred.util, "mem_mib": pred.mem_mib},
                "mem_limit_mib": memory_limit_mib(pred.mem_mib, self.state.running[key].oom_failures,
                                                  self.cluster.gpus[gpus[0]].gpu_type.memory_mib),
            })
        return out

    def _on_exit(self, key: str, live: LiveJob, agent: str, report: Mapping[str, Any], now: float) -> None:
        code = report.get("exit_code")
        run = self.state.running[key]
        job_id = live.row.id
        fenced = bool(report.get("fenced")) and code != 0
        self.ledger.departed(key, "kept" if code == 0 else "oom" if report.get("oom") else
                             "lost" if code is None or fenced else "failed")
        tail = _log_tail(report)  # kept with the exit's event: `horus job` shows it
        if fenced:  # its agent lost contact long enough for the wrapper to stop it: not the job's fault
            self.store.requeue(job_id, live.attempt, now, attained_gpu_s=run.attained(now),
                               iterations_done=run.iterations_done, kind="fenced",
                               detail={"exit_code": code, "reason": "fenced: its agent's lease expired", **tail})
            self.state.requeue(key, now)
            self._wake(self.live.pop(key))
        elif code == 0:
            live.exited[agent] = 0
            if len(live.exited) < len(live.agents()):
                return  # other machines of the gang still run
            self.store.end(job_id, live.attempt, now, "finished", attained_gpu_s=run.attained(now),
                           iterations_done=run.iterations_done, exit_code=0, detail=tail)
            self.metrics.jct_s.observe(max(0.0, now - live.row.submitted))
            self._drop(key, live)
        elif report.get("oom"):
            self.metrics.oom_restarts.inc()
            self.ledger.note(list(live.placement), "oom", now, key)
            if run.oom_failures + 1 > self.max_oom_retries:
                self.store.end(job_id, live.attempt, now, "failed", attained_gpu_s=run.attained(now),
                               exit_code=code, reason=f"out of GPU memory {run.oom_failures + 1} times", oom=True,
                               detail=tail)
                self._drop(key, live)
            else:
                self.store.requeue(job_id, live.attempt, now, attained_gpu_s=run.attained(now),
                                   iterations_done=run.iterations_done, kind="oom",
                                   detail={"exit_code": code, **tail})
                self.state.requeue(key, now, oom=True)
                self._wake(self.live.pop(key))
        elif code is None:  # the process vanished without an exit status (or a backend could not start it)
            row = self.store.job(job_id)
            why = str(report.get("error") or "process vanished")
            if row is not None and row.lost_runs + 1 > self.max_lost_runs:
                self.store.end(job_id, live.attempt, now, "failed", attained_gpu_s=run.attained(now),
                               reason=f"its process vanished {row.lost_runs + 1} times" if "error" not in report
                               else f"{row.lost_runs + 1} runs lost; last: {why}", detail=tail)
                self._drop(key, live)
            else:
                self.store.requeue(job_id, live.attempt, now, attained_gpu_s=run.attained(now),
                                   iterations_done=run.iterations_done, kind="lost",
                                   detail={"reason": why, **tail})
                self.state.requeue(key, now)
                self._wake(self.live.pop(key))
        else:
            self.store.end(job_id, live.attempt, now, "failed", attained_gpu_s=run.attained(now),
                           iterations_done=run.iterations_done, exit_code=int(code), reason=exit_reason(int(code)),
                           detail=tail)
            self._drop(key, live)
        self.wake_scheduler.set()

    def _drop(self, key: str, live: LiveJob) -> None:
        self.state.finish(key)
        self.live.pop(key)
        self._wake(live)

    # ---- tokens and views --------------------------------------------------------------------------------
    def job_token(self, job_id: str, attempt: int) -> str:
        """A token that lets one attempt of one job report its own progress."""
        return hmac.new(self.job_secret, f"{job_id}:{attempt}".encode(), hashlib.sha256).hexdigest()

    def job_progress(self, job_id: str, attempt: int, token: str, iteration: float) -> bool:
        """Progress reported by the job itself (``horus.report`` over HTTP)."""
        if not hmac.compare_digest(self.job_token(job_id, attempt), token):
            return False
        with self.lock:
            live = self.live.get(job_id)
            if live is None or live.attempt != attempt:
                return True  # a late report of an old attempt: accepted and ignored
            run = self.state.running[job_id]
            now = self.clock()
            done = live.start_iteration + float(iteration)
            if now > run.start_time and done > live.start_iteration:
                run.observed_rate = (done - live.start_iteration) / (now - run.start_time)
            run.iterations_done = done
            self.store.progress([(live.row.id, attempt, done)])
            return True

    def prediction(self, row: JobRow) -> dict[str, Any] | None:
        """The job's prediction on the GPU type it runs on (else one it accepts): corrected online (what the
        scheduler believes: ``util``, ``mem_mib``, ``iter_time_s``), ``uncorrected`` (the configured predictor's)
        and each quantity's ``correction`` (factor, source, observations behind it)."""
        with self.lock:
            if not self.cluster.num_gpus:
                return None
            gpu_type = self._gpu_type_of(row)
            pred, raw, found = self.predictor.explain(self.spec_of(row), gpu_type)
        from dataclasses import asdict

        return {**asdict(pred), "gpu_type": gpu_type.name, "uncorrected": asdict(raw),
                "correction": {q: c.as_dict() for q, c in found.items()}}

    def _gpu_type_of(self, row: JobRow) -> Any:
        g = self.gpu_index.get(row.placement[0]) if row.state == "running" and row.placement else None
        if g is None:
            accepted = accepted_gpu_types(row.gpu_type)
            g = next((i for i, gpu in enumerate(self.cluster.gpus) if accepted is None
                      or gpu.gpu_type.name in accepted), 0)
        return self.cluster.gpus[g].gpu_type

    def observation(self, row: JobRow) -> dict[str, Any] | None:
        """What telemetry saw of the job's solo behaviour, per quantity (``horus.service.online``)."""
        with self.lock:
            return self.online.job_observation(row.id)

    def cluster_view(self, viewer: str | None = None) -> dict[str, Any]:
        """Per GPU: where it is, its residents (``jobs``: id, name, owner, predictions, observed rate), predicted
        and observed utilization and memory, and a recent unpack or OOM mark. With ``viewer`` (a user's name),
        other users' residents are ``null`` in ``residents`` and shown without id, name or owner in ``jobs``."""
        with self.lock:
            load = self.state.load
            now = self.clock()
            gpus = []
            for g, (agent_name, local) in enumerate(self.gpu_map):
                agent = self.agents[agent_name]
                desc = agent.gpu(local)
                observed = agent.telemetry.get(local, {})
                gpu_type = self.cluster.gpus[g].gpu_type
                jobs = [self._resident(j, gpu_type, viewer) for j in self.state.residents[g]]
                mark = self.ledger.mark((agent_name, local), now)
                if mark is not None and viewer is not None:
                    mark = {k: v for k, v in mark.items() if k != "job"}
                gpus.append({
                    "index": g, "agent": agent_name, "local_index": local, "uuid": str(desc.get("uuid", "")),
                    "type": gpu_type.name, "memory_mib": gpu_type.memory_mib,
                    "residents": [j["id"] for j in jobs], "jobs": jobs,
                    "predicted_util": float(load.pred_util[g]), "predicted_mem_mib": float(load.pred_mem_mib[g]),
                    "observed_util": observed.get("util"), "observed_mem_mib": observed.get("mem_mib"),
                    "mark": mark,
                })
            return {"policy": self.policy_name, "predictor": self.predictor.name,
                    "agents": [{"name": a.name, "hostname": a.hostname, "gpus": len(a.gpus),
                                "last_seen_s_ago": round(max(0.0, self.clock() - a.last_seen), 3)}
                               for a in sorted(self.agents.values(), key=lambda a: a.seq)],
                    "queued": len(self.state.queue) + len(self.state.held), "held": len(self.state.held),
                    "running": len(self.state.running), "gpus": gpus}

    def _resident(self, job_id: str, gpu_type: Any, viewer: str | None) -> dict[str, Any]:
        run = self.state.running[job_id]
        live = self.live.get(job_id)
        owner = live.row.owner if live is not None else None
        pred = self.state.predict(run.spec, gpu_type)
        mine = viewer is None or owner == viewer
        return {"id": job_id if mine else None, "name": (live.row.name if live is not None else None) if mine else None,
                "owner": owner if mine else None, "model": run.spec.model if mine else None,
                "predicted_util": pred.util, "predicted_mem_mib": pred.mem_mib,
                "observed_rate": run.observed_rate if mine else None}

    def history(self, job_id: str) -> list[dict[str, float | None]]:
        """Recent telemetry of a job (rate; utilization and memory of its first GPU), oldest first."""
        with self.lock:
            return self.ledger.job_history(job_id)

    def ledger_view(self, limit: int, viewer: str | None = None) -> list[dict[str, Any]]:
        """Co-located sets, newest first (with ``viewer``: only sets with one of its jobs, others' ids hidden)."""
        with self.lock:
            rows = self.ledger.view(limit if viewer is None else 100_000, self.clock())
        if viewer is None:
            return rows
        mine = {r.id for r in self.store.jobs(owner=viewer)}
        out = []
        for row in rows:
            if any(j in mine for j in row["jobs"]):
                out.append({**row, "jobs": [j if j in mine else None for j in row["jobs"]]})
                if len(out) >= limit:
                    break
        return out

    def wait_reason(self, job_id: str) -> dict[str, object] | None:
        """Why a queued job waits (``horus.reasons``: code, message, retryable); None if it is not queued."""
        with self.lock:
            reason = self.core.reason(job_id)
            return None if reason is None else reason.as_dict()

    def telemetry(self, job_id: str) -> tuple[float, float] | None:
        """(iterations done, observed rate) of a running job, fresher than the store's copy."""
        with self.lock:
            run = self.state.running.get(job_id)
            return None if run is None else (run.iterations_done, run.observed_rate)


def exit_reason(code: int) -> str:
    """Why an attempt failed, from its non-zero exit code (negative: the signal that killed it)."""
    if code >= 0:
        return f"exit code {code}"
    import signal

    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"killed by signal {-code}"
    return f"killed by signal {-code} ({name})"


def _log_tail(report: Mapping[str, Any]) -> dict[str, str]:
    """``{"log_tail": ...}`` from an exit report (bounded here too: in-process agents skip the API's checks)."""
    tail = report.get("log_tail")
    if not isinstance(tail, str) or not tail:
        return {}
    return {"log_tail": tail[-MAX_LOG_TAIL_CHARS:]}


def check_job_description(job: NewJob) -> None:
    """HorusInputError (a 409) for an input size, precision or optimizer without a model (nothing would read
    them), or an input size below the model's smallest (``horus.graph.input_sizes``)."""
    from horus.graph.input_sizes import check_input_size

    if not job.model:
        for name in ("input_size", "precision", "optimizer"):
            if getattr(job, name) is not None:
                raise HorusInputError(name, "describes a model's training, for its prediction; give model too")
    check_input_size(job.model, job.input_size, "input_size")
