"""Why a job waits: one vocabulary (``horus.reasons``) in the core, the simulator's per-job table, the live
service's API and CLI, and the Kubernetes extender's failed-node messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from golden_workload import Workload
from service_helpers import Server, wait_for
from sim_fakes import ConstPredictor, job

from horus.cluster import Cluster, GPUType, Node
from horus.core import SchedulerCore
from horus.plugins import load_all
from horus.policies.base import POLICIES, Action, Policy
from horus.predict.analytic import AnalyticPredictor
from horus.reasons import (
    BEHIND_JOBS,
    CODES,
    COLOCATION_WOULD_NOT_PAY,
    GANG_TOO_LARGE,
    MEMORY_DOES_NOT_FIT,
    NEEDS_EMPTY_GPU,
    NO_GPU_OF_TYPE,
    WAITING_FOR_GPUS,
    explain,
)
from horus.sim.engine import SimConfig, simulate
from horus.state import SchedulerState

load_all("horus.policies")
SMALL, BIG = GPUType("small", 8_000, 1.0), GPUType("big", 32_000, 1.0)


def state_with(nodes: list[Node], mem_mib: float = 1000.0, running: dict[str, tuple[int, ...]] | None = None,
               queued: list[tuple[str, int, str | None]] | None = None) -> SchedulerState:
    state = SchedulerState(Cluster(nodes), ConstPredictor(mem_mib=mem_mib))
    for jid, gpus in (running or {}).items():
        state.submit(job(jid, 0.0, 1000, gpus=len(gpus)), 0.0)
        state.start(jid, gpus, 0.0)
    for jid, k, request in queued or []:
        spec = job(jid, 0.0, 1000, gpus=k)
        if request:
            from dataclasses import replace

            spec = replace(spec, gpu_type_request=request)
        state.submit(spec, 0.0)
    return state


def why(state: SchedulerState, jid: str, colocates: bool = False, max_residents: int | None = None) -> tuple:
    reason = explain(state.queue[jid], state, colocates=colocates, max_residents=max_residents,
                     ahead=lambda: 7)
    assert reason.code in CODES and reason.message and "\n" not in reason.message
    return reason.code, reason.retryable, reason.message


def test_each_generic_reason_on_a_state_made_for_it() -> None:
    two = [Node("s", SMALL, 2)]
    assert why(state_with(two, queued=[("A", 3, None)]), "A")[:2] == (GANG_TOO_LARGE, True)
    assert why(state_with(two, queued=[("A", 1, "big")]), "A")[:2] == (NO_GPU_OF_TYPE, True)
    assert why(state_with([], queued=[("A", 1, None)]), "A")[0] == NO_GPU_OF_TYPE
    code, retryable, message = why(state_with(two, mem_mib=12_000.0, queued=[("A", 1, None)]), "A")
    assert (code, retryable) == (MEMORY_DOES_NOT_FIT, False) and "12000 MiB" in message and "8000 MiB" in message
    mixed = [Node("s", SMALL, 2), Node("b", BIG, 1)]
    assert why(state_with(mixed, mem_mib=12_000.0, queued=[("A", 1, None)]), "A")[0] == BEHIND_JOBS  # big fits
    assert why(state_with(mixed, mem_mib=12_000.0, queued=[("A", 2, None)]), "A")[0] == MEMORY_DOES_NOT_FIT
    busy = state_with(two, running={"R": (0,)}, queued=[("A", 2, None)])
    assert why(busy, "A")[:2] == (WAITING_FOR_GPUS, True)
    assert why(busy, "A", colocates=True)[0] == COLOCATION_WOULD_NOT_PAY
    assert why(busy, "A", colocates=True, max_residents=1)[0] == WAITING_FOR_GPUS  # no GPU with a free slot
    full = state_with(two, mem_mib=5_000.0, running={"R": (0,), "S": (1,)}, queued=[("A", 1, None)])
    assert why(full, "A", colocates=True)[0] == WAITING_FOR_GPUS  # no busy GPU has memory left for it
    oomed = state_with(two, running={"R": (0,)}, queued=[("A", 2, None)])
    oomed.queue["A"].oom_failures = 1
    assert why(oomed, "A", colocates=True)[0] == NEEDS_EMPTY_GPU
    idle = state_with(two, queued=[("A", 2, None)])
    code, _, message = why(idle, "A")
    assert code == BEHIND_JOBS and "7 queued jobs before it" in message


class Holding(Policy):
    """Starts nothing (every queued job waits)."""

    name = "holding"

    def schedule(self, state: SchedulerState) -> list[Action]:
        return []


class Recording:
    def start(self, spec, gpus, now) -> None:  # type: ignore[no-untyped-def]
        raise AssertionError("nothing should start")

    def preempt(self, job_id, now) -> None:  # type: ignore[no-untyped-def]
        raise AssertionError("nothing should be preempted")


def test_the_core_keeps_a_reason_per_queued_job_and_refreshes_it_when_the_state_changes() -> None:
    state = state_with([Node("s", SMALL, 2)], queued=[("A", 1, None), ("B", 3, None)])
    core = SchedulerCore(state, Holding(), Recording())
    core.schedule(1.0)
    assert [(j, r.code) for j, r in core.new_waits] == [("A", BEHIND_JOBS), ("B", GANG_TOO_LARGE)]
    assert core.reason("A").code == BEHIND_JOBS and core.reason("missing") is None
    state.submit(job("C", 0.0, 10), 2.0)
    core.schedule(2.0)
    assert [j for j, _ in core.new_waits] == ["C"]  # only the new entry is explained after a step
    state.submit(job("R", 0.0, 10, gpus=2), 3.0)
    state.start("R", (0, 1), 3.0)  # the state changed: A's reason is recomputed on demand
    assert core.reason("A").code == WAITING_FOR_GPUS
    queued = state.withdraw("A")
    state.enqueue(queued)  # re-entering the queue counts as a new entry
    core.schedule(4.0)
    assert [j for j, _ in core.new_waits] == ["A"]
    state.withdraw("A")  # the newest explained entry leaves: older ones are still not explained again
    state.submit(job("E", 0.0, 10), 5.0)
    core.schedule(5.0)
    assert [j for j, _ in core.new_waits] == ["E"]


@pytest.mark.parametrize("policy", ["fifo-exclusive", "horus", "gandiva", "tiresias"])
def test_every_job_that_waited_in_the_simulator_has_a_reason(policy: str) -> None:
    jobs, cluster, truth = Workload("reasons", "stream", 2.5, 80, 2, 4, 2).build()
    result = simulate(jobs, cluster, POLICIES.create(policy), truth, AnalyticPredictor(), SimConfig())
    table = result.jobs
    waited = table["first_start"] > table["submit"] + 1e-9
    assert waited.sum() > 10
    assert (table.loc[waited, "wait_reason"] != "").all()  # every job that waited says why
    assert set(table["wait_reason"]) - {""} <= set(CODES)
    assert (table.loc[table["wait_reason"] != "", "wait_reason_detail"] != "").all()
    if not POLICIES.create(policy).colocates:
        assert COLOCATION_WOULD_NOT_PAY not in set(table["wait_reason"])


def test_the_live_service_api_and_cli_say_why_a_job_waits(tmp_path: Path) -> None:
    server = Server(tmp_path / "state", "--policy", "fifo-exclusive", fake_gpus=1).start()
    try:
        api = server.client()
        big = api.post("/v1/jobs", json={"command": ["sleep", "30"], "model": "a3c", "num_gpus": 1,
                                         "gpu_type": "V100"}).json()
        too_big = api.post("/v1/jobs", json={"command": ["true"], "model": "resnet50", "num_gpus": 1}).json()
        wait_for(lambda: api.get(f"/v1/jobs/{big['id']}").json()["state"] == "running", what="the first job")
        view = wait_for(lambda: (v := api.get(f"/v1/jobs/{too_big['id']}").json()).get("waiting") and v,
                        what="a reason")
        assert view["state"] == "queued"
        assert view["waiting"]["code"] == WAITING_FOR_GPUS and view["waiting"]["retryable"] is True
        listed = {j["id"]: j for j in api.get("/v1/jobs").json()["jobs"]}
        assert listed[too_big["id"]]["waiting"]["code"] == WAITING_FOR_GPUS
        assert "waiting" not in listed[big["id"]]  # a running job does not wait
        env = {**os.environ, "HORUS_SERVER": server.url, "HORUS_TOKEN": server.token, "COLUMNS": "200"}
        shown = subprocess.run([sys.executable, "-m", "horus.cli", "job", too_big["id"]], capture_output=True,
                               text=True, env=env, timeout=60)
        assert shown.returncode == 0 and WAITING_FOR_GPUS in shown.stdout, shown.stderr
        as_json = json.loads(subprocess.run([sys.executable, "-m", "horus.cli", "job", too_big["id"], "--json"],
                                            capture_output=True, text=True, env=env, timeout=60).stdout)
        assert as_json["waiting"]["code"] == WAITING_FOR_GPUS
        api.post(f"/v1/jobs/{big['id']}/cancel")
        api.post(f"/v1/jobs/{too_big['id']}/cancel")
    finally:
        server.stop()


def test_a_reason_is_kept_until_the_state_changes_and_departed_jobs_do_not_pile_up() -> None:
    state = state_with([Node("s", SMALL, 2)], queued=[("A", 1, None)])
    for i in range(3):  # some history: the state's version is well above 1
        state.submit(job(f"h{i}", 0.0, 10), 0.0)
        state.withdraw(f"h{i}")
    core = SchedulerCore(state, Holding(), Recording())
    assert core.reason("A").code == BEHIND_JOBS  # asked before any step: explained on demand
    core.schedule(1.0)
    assert "queued jobs before it" not in core.new_waits[0][1].message  # after a step: no O(queue) count
    first = core.reason("A")
    assert "(0 queued jobs before it in its order)" in first.message  # asked for: with the count
    assert core.reason("A") is first  # nothing changed: the same answer, not recomputed
    state.submit(job("B", 0.0, 10), 2.0)
    again = core.reason("A")
    assert again is not first and again == first  # the state changed: recomputed (to the same reason here)
    # reasons of jobs that left the queue without starting are dropped once they outnumber 2 x queue + 1024
    for i in range(598):
        state.submit(job(f"q{i}", 0.0, 10), 3.0)
    core.schedule(3.0)
    assert len(state.queue) == 600
    for i in range(1624):
        state.submit(job(f"gone{i}", 0.0, 10), 4.0)
    core.schedule(4.0)
    for i in range(1624):
        state.withdraw(f"gone{i}")  # cancelled while queued
    core.schedule(5.0)
    assert len(core._reasons) == 2 * 600 + 1024  # at the bound: kept
    state.submit(job("D", 0.0, 10), 6.0)
    core.schedule(6.0)
    assert len(core._reasons) == 2 * 600 + 1024 + 1  # below the new bound (601 queued): kept
    state.withdraw("D")
    core.schedule(7.0)
    assert len(core._reasons) == 600  # one more: only queued jobs' reasons remain
