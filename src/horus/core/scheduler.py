"""``SchedulerCore``: when to ask the policy, one decision step, and why jobs wait; the same for every backend.

Backends ask ``wants_step()`` (a job waits, or the policy acts on running jobs) and ``next_wakeup(now)`` (the
policy's tick) and call ``schedule(now)``; ``create_policy`` is the one check of a policy name every backend
makes. A step is ``policy.schedule(state)`` followed by checking each action against the state (a job
started must be queued, on exactly its gang size of distinct GPUs of an accepted type; a job
preempted must be running) and handing it to the backend's ``Executor``. The executor performs
the state transition (``state.start`` / ``state.requeue``) once the backend has carried the action
out (the simulator at once; the live service after the transition is durable in its store). After each
step, new queue entries get their reason to wait (``horus.reasons``); ``reason(job_id)`` gives a fresh one.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Mapping
from typing import Protocol

from horus.cluster import Cluster
from horus.core.tenancy import Admission
from horus.errors import HorusInputError
from horus.gpu_types import accepted_gpu_types
from horus.jobs import JobSpec
from horus.plugins import load_all
from horus.policies.base import POLICIES, Action, Policy, Preempt, Start
from horus.policies.parts.ordered import KeyedOrder
from horus.reasons import QUEUE_OVER_QUOTA, WaitReason, explain
from horus.state import QueuedJob, SchedulerState
from horus.tenancy import Tenancy

MAX_ROUNDS = 3  # policy calls per step after the first, with a tenancy (reclaims, admissions after starts)


class InvalidActionError(RuntimeError):
    """A policy returned an action the backend cannot carry out (a policy bug)."""


class OracleNeedsTruthError(HorusInputError):
    """An oracle policy was asked to run where no truth exists (every live backend)."""

    def __init__(self, name: str) -> None:
        super().__init__("--policy", f"policy {name!r} is an oracle: it reads the simulated world's truth, which only "
                                     f"the simulator has; choose another policy to run real jobs")


def create_policy(name: str, options: Mapping[str, object] | None = None, *, has_truth: bool = False) -> Policy:
    """The registered policy ``name`` for a backend: the one check every backend makes before it schedules.

    HorusInputError (naming ``--policy``) for an unknown name; OracleNeedsTruthError for an oracle where the
    backend has no truth (the live service, the Kubernetes extender)."""
    load_all("horus.policies")
    if name not in POLICIES:
        raise HorusInputError("--policy", f"unknown policy {name!r}; known: {', '.join(POLICIES.names())}")
    policy = POLICIES.create(name, **dict(options or {}))
    if policy.is_oracle and not has_truth:
        raise OracleNeedsTruthError(name)
    return policy


def eligible_gpus(cluster: Cluster, request: str | None) -> int:
    """How many GPUs of ``cluster`` a job with this GPU-type request may use (a larger gang can never run there)."""
    accepted = accepted_gpu_types(request)
    return sum(1 for g in cluster.gpus if accepted is None or g.gpu_type.name in accepted)


class Executor(Protocol):
    """What a backend implements to carry out checked decisions."""

    def start(self, spec: JobSpec, gpus: tuple[int, ...], now: float) -> None:
        """Start the queued job ``spec`` on ``gpus`` (global indices), or fail it (e.g. out of memory)."""

    def preempt(self, job_id: str, now: float) -> None:
        """Stop the running job ``job_id`` and put it back in the queue, keeping its progress."""


class SchedulerCore:
    """A policy bound to a state and an executor.

    ``truth`` is passed only by backends that have one (the simulator); an oracle policy refuses to
    run without it. ``last_decision_s`` and ``last_started`` describe the latest step (for metrics).
    With a ``tenancy``, jobs wait in ``state.held`` until ``admission`` (horus.core.tenancy) lets them into the
    policy's queue; the policy sees admitted jobs only, so every registered policy works under a tenancy.
    """

    def __init__(self, state: SchedulerState, policy: Policy, executor: Executor, *,
                 truth: object | None = None, tenancy: Tenancy | None = None) -> None:
        if policy.is_oracle:
            if truth is None:
                raise OracleNeedsTruthError(policy.name)
            policy.bind_truth(truth)
        self.admission = Admission(tenancy) if tenancy is not None else None
        if self.admission is not None:
            self.admission.slots_per_gpu = (policy.max_residents or 2) if policy.colocates else 1
            self.admission.shares_gpu = policy.may_share
            rule = getattr(policy, "order_rule", None)
            if isinstance(rule, KeyedOrder):  # held jobs are admitted in the policy's own order within a queue
                self.admission.order_key = lambda job: rule.key(job, state)
                if policy.preempts_by_order:  # and may take the place of their own queue's jobs it ranks behind
                    self.admission.preempt_level = lambda job: rule.key(job, state)[0]
            if state.queue or state.running:
                raise ValueError("a tenancy is set before any job enters the state")
            state.gated = True
        self.state = state
        self.policy = policy
        self.executor = executor
        self._eligible: dict[str | None, int] = {}
        self.last_decision_s = 0.0
        self.last_started = 0
        # job -> (queue entry, reason, state version, whether the reason counts the jobs ahead)
        self._reasons: dict[str, tuple[QueuedJob, WaitReason, int, bool]] = {}
        self._explained = 0  # queue entries up to this one have a reason
        self.new_waits: list[tuple[str, WaitReason]] = []  # jobs the latest step left waiting for the first time
        self.tenancy_preempting = False  # True while the tenancy (reclaim, priority, limits) preempts a job

    # ---- admission -----------------------------------------------------------------------------
    def eligible_gpus(self, request: str | None) -> int:
        """How many GPUs of the cluster a job with this GPU-type request may use (cached per request)."""
        count = self._eligible.get(request)
        if count is None:
            count = self._eligible[request] = eligible_gpus(self.state.cluster, request)
        return count

    def admits(self, spec: JobSpec) -> bool:
        """False for a job that could never run on this cluster (more GPUs than it has of the requested type)."""
        return 1 <= spec.num_gpus <= self.eligible_gpus(spec.gpu_type_request)

    # ---- when to ask the policy (every backend asks through these two calls) --------------------
    def wants_step(self) -> bool:
        """Whether ``schedule`` would ask the policy now: a job waits, or the policy acts on running jobs
        (unpacking a co-location that loses, migrating to a GPU that went idle) and must be asked anyway."""
        if self.admission is not None and self.admission.needs_step(self.state):
            return True
        return bool(self.state.queue) or self.policy.acts_on_running

    def next_wakeup(self, now: float) -> float | None:
        """When the backend must call ``schedule`` again even if no event comes (the policy's tick), or None."""
        tick = self.policy.tick_s
        return now + tick if tick and self.wants_step() else None

    # ---- one decision step ---------------------------------------------------------------------
    def schedule(self, now: float) -> list[Action]:
        """Ask the policy what to do now, check every action and hand it to the executor, in order."""
        state = self.state
        state.now = now
        if not self.wants_step():  # nothing to start: the policy is not asked
            self.last_started = 0
            return []
        reclaimed: list[Action] = []
        if self.admission is not None:
            def preempt(job_id: str) -> None:
                self.tenancy_preempting = True  # executors may record why (the live service's events)
                try:
                    self.executor.preempt(job_id, now)
                finally:
                    self.tenancy_preempting = False
                reclaimed.append(Preempt(job_id))
            self.admission.step(state, now, preempt)
            if not (state.queue or self.policy.acts_on_running):
                self.last_started = 0
                self._explain_new_entries()
                return reclaimed
        actions = self._policy_step(state, now)
        if self.admission is not None:
            self.admission.settle(state)  # charges of the jobs just started, for the ledger until the next step
            for _ in range(MAX_ROUNDS):
                # a job its guarantee covers that the policy could not place gets GPUs back, else the head job of
                # a queue far behind its fair share over time; jobs that may now join GPUs just started
                # (co-located at no extra charge) are shown: the policy is asked again
                changed = self.admission.reclaim_for_guarantees(state, now, preempt)
                changed = changed or self.admission.reclaim_for_fair_share(state, now, preempt)
                if not (changed | self.admission.admit_after_starts(state, now, preempt, self.last_started)):
                    break
                actions += self._policy_step(state, now)
                self.admission.settle(state)
        self._explain_new_entries()
        return reclaimed + actions if reclaimed else actions

    def _policy_step(self, state: SchedulerState, now: float) -> list[Action]:
        """One policy call, its actions checked and carried out in order."""
        step = state.begin_step()
        began = time.perf_counter()
        actions = self.policy.schedule(state)
        self.last_decision_s = time.perf_counter() - began
        started = 0
        as_planned = True
        for action in actions:
            if isinstance(action, Start):
                spec, gpus = self.check_start(action)
                if self.admission is not None and not self.admission.may_start(state, spec, gpus):
                    state.hold(spec.job_id)  # its queue's limit would be exceeded: back to held, not started
                    as_planned = False
                    continue
                self.executor.start(spec, gpus, now)
                self._reasons.pop(spec.job_id, None)
                started += 1
                as_planned = as_planned and spec.job_id in state.running
            elif isinstance(action, Preempt):
                if action.job_id not in state.running:
                    raise InvalidActionError(f"policy {self.policy.name!r} preempted job {action.job_id!r}, "
                                             f"which is not running")
                self.executor.preempt(action.job_id, now)
                if self.admission is not None and action.job_id in state.held:  # the policy's own preemption
                    self.admission.readmit(state, action.job_id)                # keeps it admitted (a migration)
                as_planned = as_planned and state.waiting(action.job_id) is not None
            else:
                raise InvalidActionError(f"policy {self.policy.name!r} returned {action!r}, not a Start or Preempt")
        self.last_started = started
        if as_planned:  # e.g. no start failed out of memory: policies may trust what they planned (PlanMemo)
            state.settle(step)
        return list(actions)

    # ---- why jobs wait ----------------------------------------------------------------------------
    def reason(self, job_id: str) -> WaitReason | None:
        """Why the queued job ``job_id`` waits (recomputed when the state changed since), or None if not queued."""
        job = self.state.queue.get(job_id)
        if job is None:
            held = self.state.held.get(job_id)
            return None if held is None else self._held_reason(held)
        found = self._reasons.get(job_id)
        if found is None or found[0] is not job or found[2] != self.state.version or not found[3]:
            found = self._reasons[job_id] = (job, self._explain(job, count_ahead=True), self.state.version, True)
        return found[1]

    def _held_reason(self, job: QueuedJob) -> WaitReason:
        admission = self.admission
        assert admission is not None
        acc = admission.accounts[admission.queue_name(job.spec.queue)]
        q = acc.queue
        limit = "no borrowing limit" if q.borrow_limit is None else f"limit {acc.guarantee + q.borrow_limit:g}"
        return WaitReason(QUEUE_OVER_QUOTA,
                          f"queue {q.name!r} runs or has admitted {acc.committed():.2f} GPUs (guaranteed "
                          f"{acc.guarantee:g}, {limit}); the cluster's {admission.capacity.get('*', 0):g} GPUs are "
                          f"committed {admission.total('*'):.2f}", True)

    def _explain(self, job: QueuedJob, count_ahead: bool = False) -> WaitReason:
        """``count_ahead``: say how many jobs come first (O(queue); asked for one job, not after every step)."""
        state, policy = self.state, self.policy
        ahead = (lambda: policy.queue_position(job.spec.job_id, state)) if count_ahead else None
        return policy.wait_reason(job, state) or explain(
            job, state, colocates=policy.may_share(job), max_residents=policy.max_residents, ahead=ahead)

    def _explain_new_entries(self) -> None:
        """Give every queue entry made since the last step its reason (cost: the new entries only)."""
        state = self.state
        fresh = state.entries_since(self._explained)
        if self.admission is not None:  # and the held entries, all in entry order
            fresh = sorted(fresh + state.entries_since(self._explained, held=True), key=lambda j: j.entered)
        self._explained = state.entries
        self.new_waits = []
        for job in fresh:
            reason = self._held_reason(job) if job.spec.job_id in state.held else self._explain(job)
            found = self._reasons[job.spec.job_id] = (job, reason, state.version, False)
            self.new_waits.append((job.spec.job_id, found[1]))
        if len(self._reasons) > 2 * (len(state.queue) + len(state.held)) + 1024:  # entries of jobs that left the queue
            self._reasons = {j: r for j, r in self._reasons.items() if state.waiting(j) is r[0]}

    def check_start(self, action: Start) -> tuple[JobSpec, tuple[int, ...]]:
        """The queued job's spec and its GPUs, or InvalidActionError saying what the policy got wrong."""
        name = self.policy.name
        queued = self.state.queue.get(action.job_id)
        if queued is None:
            raise InvalidActionError(f"policy {name!r} started job {action.job_id!r}, which is not queued")
        spec = queued.spec
        try:  # ints and numpy integers; a float or a string is a policy bug, not an index to round
            gpus = tuple(operator.index(g) for g in action.gpus)
        except TypeError:
            raise InvalidActionError(f"policy {name!r} started job {spec.job_id!r} on GPUs {action.gpus!r}: "
                                     f"indices must be integers") from None
        if len(gpus) != spec.num_gpus:
            raise InvalidActionError(f"policy {name!r} started job {spec.job_id!r} on {len(gpus)} GPUs; "
                                     f"it needs exactly {spec.num_gpus} (gang start)")
        cluster_gpus = self.state.cluster.gpus
        n = len(cluster_gpus)
        if (min(gpus) < 0 or max(gpus) >= n) or (len(gpus) > 1 and len(set(gpus)) != len(gpus)):
            raise InvalidActionError(f"policy {name!r} started job {spec.job_id!r} on GPUs {gpus}: indices must "
                                     f"be distinct and in [0, {n})")
        accepted = accepted_gpu_types(spec.gpu_type_request)
        if accepted is not None and any(cluster_gpus[g].gpu_type.name not in accepted for g in gpus):
            raise InvalidActionError(f"policy {name!r} started job {spec.job_id!r} off its requested GPU type "
                                     f"{spec.gpu_type_request!r}")
        return spec, gpus
