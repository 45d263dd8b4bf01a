"""The core owns the decision cycle: the live service asks the policy exactly when the simulator does.

* One scripted event sequence (arrivals, telemetry, completions) runs through the simulator and through the
  live scheduler (a real ``Store`` on disk, an injected clock, agents' heartbeats); a recording policy
  writes down every call (time, queued jobs, running jobs) and the actions it returned: both backends
  make the same calls and get the same actions.
* The default ``horus`` acts on running jobs: live, a co-located pair observed to lose throughput is
  unpacked although nothing waits.
* The policy object survives a machine joining (the live state is rebuilt, what it learned is kept).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_fakes import ToyTruth

from horus.agent.gpus import fake_gpus
from horus.cluster import Cluster, Node
from horus.gpu_types import preset
from horus.jobs import JobSpec
from horus.plugins import load_all
from horus.policies.base import POLICIES, Action, Policy, Start
from horus.predict.analytic import AnalyticPredictor
from horus.service.scheduler import LiveScheduler
from horus.service.store import NewJob, Store
from horus.sim.engine import SimConfig, simulate
from horus.state import SchedulerState
from horus.truth.base import SoloTruth

load_all("horus.policies")

Call = tuple[float, tuple[str, ...], tuple[str, ...], tuple[str, ...]]
# (model, batch, GPUs, iterations, submit time): iteration time 1 s alone, so a job's length is its iterations
JOBS = [("a3c", 32, 1, 300.0, 0.0), ("a3c", 32, 1, 150.0, 0.0), ("resnet18_cifar", 32, 2, 90.0, 10.0),
        ("a3c", 32, 1, 60.0, 20.0), ("resnet18_cifar", 32, 1, 40.0, 200.0)]
TRUTH = ToyTruth({"a3c/b32": SoloTruth(0.3, 1000.0, 1.0), "resnet18_cifar/b32": SoloTruth(0.4, 2000.0, 1.0)})


class Recorder(Policy):
    """Forwards to a registered policy and records each call: time, queue, running jobs with telemetry, actions."""

    def __init__(self, inner: str) -> None:
        self.inner = POLICIES.create(inner)
        self.name = f"recorded-{inner}"
        self.tick_s = self.inner.tick_s
        self.acts_on_running = self.inner.acts_on_running
        self.calls: list[Call] = []
        self.telemetry: list[dict[str, tuple[float, float]]] = []  # per call: job -> (iterations done, rate)

    def schedule(self, state: SchedulerState) -> list[Action]:
        self.telemetry.append({j: (r.iterations_done, r.observed_rate) for j, r in state.running.items()})
        actions = self.inner.schedule(state)
        self.calls.append((round(state.now, 6), tuple(sorted(state.queue)), tuple(sorted(state.running)),
                           tuple(describe(a) for a in actions)))
        return actions


def describe(action: Action) -> str:
    return f"start {action.job_id} on {action.gpus}" if isinstance(action, Start) else f"preempt {action.job_id}"


@pytest.fixture
def recorder_policy() -> Iterator[dict[str, Recorder]]:
    """Registers ``recorded-<policy>`` for the live scheduler, which creates its policy by name."""
    made: dict[str, Recorder] = {}
    names = []
    for inner in ("fifo-exclusive", "horus", "tiresias"):
        name = f"recorded-{inner}"
        POLICIES.register(name)(lambda inner=inner, name=name: made.setdefault(name, Recorder(inner)))
        names.append(name)
    yield made
    for name in names:
        POLICIES.unregister(name)


def simulated(policy: Recorder) -> tuple[Recorder, dict[str, float]]:
    cluster = Cluster([Node("n0", preset("V100"), 2)])
    specs = [JobSpec(str(i + 1), t, g, m, b, it) for i, (m, b, g, it, t) in enumerate(JOBS)]
    result = simulate(specs, cluster, policy, TRUTH, AnalyticPredictor(), SimConfig())
    ends = {str(j): float(e) for j, e in zip(result.jobs["job_id"], result.jobs["end"])}
    return policy, ends


@pytest.mark.parametrize("inner", ["fifo-exclusive", "horus", "tiresias"])
def test_simulator_and_live_scheduler_make_the_same_policy_calls(inner: str, tmp_path: Path,
                                                                 recorder_policy: dict[str, Recorder]) -> None:
    sim, ends = simulated(Recorder(inner))
    assert len(sim.calls) >= 5 and any(actions for *_, actions in sim.calls)
    clock = [0.0]
    store = Store(tmp_path / "h.db")
    live = LiveScheduler(store, AnalyticPredictor(), policy=f"recorded-{inner}", lease_s=1e9, job_secret=b"s",
                         clock=lambda: clock[0])
    live.register_agent("n0", "host", fake_gpus(2, "V100", "n0"))
    recorded = recorder_policy[f"recorded-{inner}"]
    submitted: set[int] = set()
    exited: set[str] = set()
    for call, telemetry in zip(sim.calls, sim.telemetry):
        now = call[0]
        clock[0] = now
        for i, (model, batch, gpus, iterations, submit) in enumerate(JOBS):
            if submit <= now and i not in submitted:  # arrivals, in the simulator's order
                row, _ = live.submit(NewJob(model=model, batch_size=batch, num_gpus=gpus, command=["true"],
                                            iterations=iterations))
                assert row.job_id == str(i + 1)
                submitted.add(i)
        for job, end in ends.items():  # completions up to now: each worker's agent reports exit 0
            if end <= now + 1e-9 and job not in exited and job in live.live:
                live.heartbeat("n0", [{"job_id": job, "attempt": live.live[job].attempt, "status": "exited",
                                       "exit_code": 0}])
                exited.add(job)
        reports = []
        for job, (done, rate) in telemetry.items():  # what the simulator's running jobs had reported
            attempt = live.live[job]
            reports.append({"job_id": job, "attempt": attempt.attempt, "status": "running",
                            "iterations": done - attempt.start_iteration, "rate": rate})
        live.heartbeat("n0", reports)
        live.step()
        assert recorded.calls == sim.calls[:len(recorded.calls)], f"{inner}: diverged at t={now}"
    assert recorded.calls == sim.calls
    store.close()


def live_pair(tmp_path: Path, clock: list[float]) -> tuple[LiveScheduler, Store, list[str]]:
    """Live ``horus`` on one GPU with two long a3c jobs it co-located there (the pair predicted to pay)."""
    store = Store(tmp_path / "h.db")
    scheduler = LiveScheduler(store, AnalyticPredictor(), policy="horus", lease_s=1e9, job_secret=b"s",
                              clock=lambda: clock[0])
    scheduler.register_agent("n0", "host", fake_gpus(1, "V100", "n0"))
    first = scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, command=["true"],
                                    iterations=100_000.0))[0]
    scheduler.step()
    clock[0] = 60.0
    scheduler.heartbeat("n0", [{"job_id": first.job_id, "attempt": 1, "status": "running", "iterations": 600,
                                "rate": 10.0}])  # alone: its solo rate is 10 it/s
    second = scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, command=["true"],
                                     iterations=100_000.0))[0]
    scheduler.step()
    assert set(scheduler.state.residents[0]) == {first.job_id, second.job_id}, "horus did not co-locate the pair"
    return scheduler, store, [first.job_id, second.job_id]


def test_live_horus_unpacks_a_losing_pair_with_nothing_queued(tmp_path: Path) -> None:
    clock = [0.0]
    scheduler, store, jobs = live_pair(tmp_path, clock)
    clock[0] = 120.0
    scheduler.heartbeat("n0", [{"job_id": j, "attempt": 1, "status": "running", "iterations": 600 + 180,
                                "rate": 3.0} for j in jobs])  # together 0.3 + 0.3 of their solo rate: a loss
    assert not scheduler.state.queue
    scheduler.step()
    preempted = [j for j in jobs if any(e["kind"] == "requeued:preempted" for e in store.events(int(j)))]
    assert len(preempted) == 1 and preempted[0] in scheduler.state.queue
    clock[0] = 180.0
    scheduler.step()  # the pair was observed to lose: it is not packed again
    assert len(scheduler.state.residents[0]) == 1 and preempted[0] in scheduler.state.queue
    store.close()


def test_what_the_policy_learned_survives_a_machine_joining(tmp_path: Path) -> None:
    clock = [0.0]
    scheduler, store, jobs = live_pair(tmp_path, clock)
    policy = scheduler.policy
    clock[0] = 120.0
    scheduler.heartbeat("n0", [{"job_id": j, "attempt": 1, "status": "running", "iterations": 780, "rate": 3.0}
                               for j in jobs])
    scheduler.step()  # learns that the pair loses, unpacks it
    scheduler.register_agent("n1", "host1", fake_gpus(1, "V100", "n1"))  # a machine joins: the state is rebuilt
    assert scheduler.policy is policy and scheduler.core.policy is policy
    clock[0] = 130.0
    scheduler.step()  # the unpacked job goes to the new idle GPU
    assert all(scheduler.state.residents[g] for g in (0, 1))
    third = scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, command=["true"],
                                    iterations=100_000.0))[0]
    clock[0] = 140.0
    scheduler.step()
    # a fresh policy would believe the prior (the pair pays) and pack the third job; this one remembers
    assert third.job_id in scheduler.state.queue
    assert all(len(scheduler.state.residents[g]) == 1 for g in (0, 1))
    store.close()


def test_every_transition_bumps_the_state_version() -> None:
    state = SchedulerState(Cluster([Node("n0", preset("V100"), 2)]), AnalyticPredictor())
    seen = [state.version]

    def bumped() -> None:
        assert state.version == seen[-1] + 1
        seen.append(state.version)

    state.submit(JobSpec("a", 0.0, 1, "a3c", 32, 10.0), 0.0)
    bumped()
    state.submit(JobSpec("b", 0.0, 1, "a3c", 32, 10.0), 0.0)
    bumped()
    state.start("a", (0,), 1.0)
    bumped()
    state.requeue("a", 2.0)
    bumped()
    queued = state.withdraw("b")
    bumped()
    state.enqueue(queued)
    bumped()
    assert list(state.queue) == ["a", "b"]
    state.start("b", (1,), 3.0)
    bumped()
    state.finish("b")
    bumped()
    state.predict(JobSpec("c", 0.0, 1, "a3c", 32, 10.0), preset("V100"))  # reads do not
    assert state.version == seen[-1]
