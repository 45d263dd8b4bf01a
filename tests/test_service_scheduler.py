"""LiveScheduler + Store + in-process agent (DirectLink): every policy runs live; fencing; restart rebuild."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from horus.agent.agent import Agent, DirectLink
from horus.agent.gpus import fake_gpus
from horus.core import OracleNeedsTruthError
from horus.errors import HorusInputError
from horus.plugins import load_all
from horus.policies.base import POLICIES
from horus.predict.analytic import AnalyticPredictor
from horus.core import create_policy
from horus.service.scheduler import LiveScheduler
from horus.service.store import NewJob, Store, StoreError
from service_helpers import kill_job_processes, wait_for

load_all("horus.policies")
LIVE_POLICIES = [name for name in POLICIES.names() if not POLICIES.create(name).is_oracle]


class Live:
    """A scheduler, its stepping thread and one in-process agent with fake GPUs."""

    def __init__(self, root: Path, policy: str, gpus: int = 4, nodes: int = 1,
                 policy_options: dict[str, Any] | None = None) -> None:
        self.root = root
        self.store = Store(root / "horus.db")
        self.scheduler = LiveScheduler(self.store, AnalyticPredictor(), policy=policy, policy_options=policy_options,
                                       lease_s=5.0, job_secret=b"test-secret")
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, daemon=True)]
        for n in range(nodes):
            name = f"node{n}"
            agent = Agent(name, fake_gpus(gpus, "V100", name), root / name, DirectLink(self.scheduler),
                          heartbeat_s=0.1, grace_s=1.0)
            self.threads.append(threading.Thread(target=agent.run, args=(self.stop,), daemon=True))
        for t in self.threads:
            t.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.scheduler.wake_scheduler.wait(0.05)
            self.scheduler.wake_scheduler.clear()
            self.scheduler.step()

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(5)
        kill_job_processes(self.root)
        self.store.close()


@pytest.fixture
def make_live(tmp_path: Path) -> Iterator:
    made: list[Live] = []

    def make(policy: str = "horus", **kwargs: Any) -> Live:
        made.append(Live(tmp_path / f"live{len(made)}", policy, **kwargs))
        return made[-1]

    yield make
    for live in made:
        live.close()


@pytest.mark.parametrize("policy", LIVE_POLICIES)
def test_every_registered_policy_runs_real_jobs(make_live, policy: str) -> None:
    live = make_live(policy, gpus=2, nodes=2)
    wait_for(lambda: live.scheduler.cluster.num_gpus == 4, what="both agents")
    jobs = [("a3c", 32, 1), ("resnet50", 64, 1), ("ncf", 32, 2), ("lstm_lm", 8, 1), ("resnet18_cifar", 32, 4)]
    ids = [live.scheduler.submit(NewJob(model=m, batch_size=b, num_gpus=g, command=["sleep", "0.2"],
                                        iterations=100.0))[0].id for m, b, g in jobs]
    wait_for(lambda: all(live.store.job(i).state == "finished" for i in ids), timeout_s=60, what=f"{policy} jobs")
    gang = live.store.events(ids[-1])
    placement = next(e["placement"] for e in gang if e["kind"] == "started")
    assert sorted(map(tuple, placement)) == [("node0", 0), ("node0", 1), ("node1", 0), ("node1", 1)]


def test_oracle_refuses_to_run_live(tmp_path: Path) -> None:
    with pytest.raises(OracleNeedsTruthError, match="truth"):
        create_policy("oracle")
    with pytest.raises(HorusInputError, match="unknown policy"):
        create_policy("no-such-policy")


def test_store_fences_stale_attempts_and_survives_reopen(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    row, created = store.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, command=["true"], idem_key="k"), 1.0)
    assert created and row.state == "queued"
    assert store.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, command=["x"], idem_key="k"), 2.0) == (row, False)
    assert store.start(row.id, [("n", 0)], 3.0) == 1
    assert store.start(row.id, [("n", 0)], 3.0) is None  # not queued any more
    assert store.requeue(row.id, 1, 4.0, attained_gpu_s=1.0, iterations_done=5, kind="preempted")
    assert not store.requeue(row.id, 1, 4.0, attained_gpu_s=1.0, iterations_done=5, kind="preempted")
    assert store.start(row.id, [("n", 1)], 5.0) == 2
    assert not store.end(row.id, 1, 6.0, "finished")  # a late report of attempt 1 changes nothing
    assert store.end(row.id, 2, 6.0, "finished", exit_code=0)
    store.close()
    again = Store(tmp_path / "s.db")
    job = again.job(row.id)
    assert (job.state, job.attempt, job.preemptions, job.attained_gpu_s, job.iterations_done) == \
        ("finished", 2, 1, 1.0, 5.0)
    assert [e["kind"] for e in again.events(row.id)] == ["submitted", "started", "requeued:preempted", "started",
                                                          "finished"]
    assert again.jobs() and again.counts() == {"finished": 1}
    again.close()
    with open(tmp_path / "s.db", "r+b") as fh:  # corrupt the header
        fh.write(b"garbage" * 20)
    with pytest.raises(StoreError):
        Store(tmp_path / "s.db")


def test_restart_rebuilds_queue_and_running_jobs_from_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "h.db")
    scheduler = LiveScheduler(store, AnalyticPredictor(), policy="fifo-exclusive", job_secret=b"s")
    scheduler.register_agent("n0", "host", fake_gpus(2, "V100", "n0"))
    ids = [scheduler.submit(NewJob(model="resnet50", batch_size=64, num_gpus=1, command=["true"]))[0].id
           for _ in range(3)]
    assert scheduler.step() == 2
    running = dict(scheduler.state.running)
    store.close()
    store = Store(tmp_path / "h.db")
    again = LiveScheduler(store, AnalyticPredictor(), policy="fifo-exclusive", job_secret=b"s")
    assert set(again.state.running) == set(running) and list(again.state.queue) == [str(ids[2])]
    assert [again.state.running[k].gpus for k in running] == [r.gpus for r in running.values()]
    assert again.state.load.n_residents.tolist() == [1, 1]
    desired = again.heartbeat("n0", [])
    assert sorted(d["job_id"] for d in desired) == sorted(running)
    store.close()


def test_lost_agent_requeues_with_attained_service(tmp_path: Path) -> None:
    clock = [100.0]
    store = Store(tmp_path / "h.db")
    scheduler = LiveScheduler(store, AnalyticPredictor(), policy="horus", lease_s=10.0, job_secret=b"s",
                              clock=lambda: clock[0])
    scheduler.register_agent("n0", "host", fake_gpus(1, "V100", "n0"))
    job = scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, command=["true"]))[0]
    scheduler.step()
    clock[0] = 105.0
    scheduler.heartbeat("n0", [{"job_id": job.job_id, "attempt": 1, "status": "running", "iterations": 50,
                                "rate": 10.0}])
    assert scheduler.state.running[job.job_id].observed_rate == 10.0
    clock[0] = 120.0
    scheduler.step()
    row = store.job(job.id)
    assert (row.state, row.lost_runs, row.attained_gpu_s, row.iterations_done) == ("queued", 1, 20.0, 50.0)
    assert scheduler.cluster.num_gpus == 0 and job.job_id in scheduler.state.queue
    assert scheduler.state.queue[job.job_id].attained_gpu_s == 20.0
    # the agent comes back: its late report of attempt 1 is fenced, and attempt 2 is desired
    scheduler.register_agent("n0", "host", fake_gpus(1, "V100", "n0"))
    scheduler.step()
    desired = scheduler.heartbeat("n0", [{"job_id": job.job_id, "attempt": 1, "status": "exited", "exit_code": 0}])
    assert [(d["job_id"], d["attempt"], d["start_iteration"]) for d in desired] == [(job.job_id, 2, 50.0)]
    assert store.job(job.id).state == "running"
    store.close()


def test_a_requeue_and_the_restart_in_one_step_are_recorded_in_order(tmp_path: Path) -> None:
    """An agent expires and its job starts on another one in the same step: the job's history says requeued, then
    started, in time order (the audit saw ``requeued:lost`` stamped after the next ``started``: the rebuild read
    the clock after the step had)."""
    now = [100.0]

    def clock() -> float:  # every reading is later than the one before
        now[0] += 0.001
        return now[0]

    store = Store(tmp_path / "h.db")
    scheduler = LiveScheduler(store, AnalyticPredictor(), policy="horus", lease_s=10.0, job_secret=b"s", clock=clock)
    scheduler.register_agent("n0", "host", fake_gpus(1, "V100", "n0"))
    job = scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, command=["true"]))[0]
    scheduler.step()
    scheduler.register_agent("n1", "host", fake_gpus(1, "V100", "n1"))
    now[0] += 12.0
    scheduler.heartbeat("n1", [])
    now[0] += 2.0  # n0 silent for > lease + fence_kill_s + 1 s; n1 is not
    assert scheduler.step() == 1
    events = store.events(job.id)
    assert [e["kind"] for e in events] == ["submitted", "started", "requeued:lost", "started"]
    times = [e["time"] for e in events]
    assert times == sorted(times), times
    store.close()


def test_submissions_bigger_than_the_cluster_are_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "h.db")
    scheduler = LiveScheduler(store, AnalyticPredictor(), job_secret=b"s")
    # no machine yet: accepted and queued (machines may join)
    scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=8, command=["true"]))
    scheduler.register_agent("n0", "host", fake_gpus(2, "V100", "n0"))
    with pytest.raises(HorusInputError, match="needs 3 GPUs; the cluster has 2"):
        scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=3, command=["true"]))
    with pytest.raises(HorusInputError, match="of type A100"):
        scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, command=["true"], gpu_type="A100-40GB"))
    assert store.counts() == {"queued": 1}
    store.close()


def test_report_helper_writes_progress_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import horus
    from horus import reporting

    path = tmp_path / "progress.jsonl"
    monkeypatch.setenv("HORUS_PROGRESS_FILE", str(path))
    monkeypatch.setattr(reporting, "_file", None)
    for i in range(3):
        horus.report(i + 1)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["iteration"] for line in lines] == [1.0, 2.0, 3.0]
    assert lines[0]["time"] <= lines[1]["time"] <= lines[2]["time"] <= time.time()


def test_preempted_training_resumes_from_its_checkpoint(make_live) -> None:
    """A real torch training (`horus train`) is preempted, saves on SIGTERM and resumes as attempt 2."""
    pytest.importorskip("torch")
    live = make_live("fifo-exclusive", gpus=1)
    wait_for(lambda: live.scheduler.cluster.num_gpus == 1, what="the agent")
    row, _ = live.scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, iterations=100000.0, command=[
        sys.executable, "-m", "horus.cli", "train", "_test_mlp", "--batch-size", "8", "--iterations", "100000",
        "--device", "cpu", "--checkpoint-every", "0"]))
    key = row.job_id
    wait_for(lambda: key in live.scheduler.state.running and live.scheduler.state.running[key].iterations_done > 20,
             timeout_s=60, what="training progress")
    with live.scheduler.lock:
        live.scheduler.preempt(key, live.scheduler.clock())
    wait_for(lambda: live.store.job(row.id).attempt == 2 and live.store.job(row.id).state == "running",
             timeout_s=30, what="attempt 2")
    log2 = live.root / "node0" / "jobs" / key / "2" / "log"
    text = wait_for(lambda: log2.exists() and "resumed _test_mlp from iteration" in log2.read_text() and
                    log2.read_text(), timeout_s=60, what="resume from the checkpoint")
    resumed_at = int(text.split("resumed _test_mlp from iteration ")[1].split()[0])
    log1 = (live.root / "node0" / "jobs" / key / "1" / "log").read_text()
    assert "checkpoint saved" in log1 and resumed_at > 20
    job = live.store.job(row.id)
    assert job.preemptions == 1 and job.iterations_done >= 20
    assert live.scheduler.cancel(row.id).state == "cancelled"


# A job that checkpoints on SIGTERM and resumes from its checkpoint; it logs each attempt's start and end, and at
# its start which processes of earlier attempts of the job (wrappers and commands) are still alive.
RESUMABLE = """
import json, os, signal, sys, time
import horus

log_path, iterations = sys.argv[1], int(sys.argv[2])
checkpoint = os.path.join(os.environ["HORUS_CHECKPOINT_DIR"], "iteration")
attempt = int(os.environ["HORUS_ATTEMPT"])
base = int(open(checkpoint).read()) if os.path.exists(checkpoint) else 0
i = base


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def record(kind, **extra):
    with open(log_path, "a") as fh:
        fh.write(json.dumps({"kind": kind, "attempt": attempt, "pid": os.getpid(), "time": time.time(),
                             "iteration": i, **extra}) + "\\n")


def save():
    with open(checkpoint + ".tmp", "w") as fh:
        fh.write(str(i))
    os.replace(checkpoint + ".tmp", checkpoint)


def on_term(*_):
    save()
    record("stopped")
    os._exit(0)


signal.signal(signal.SIGTERM, on_term)
earlier = [json.loads(line)["pid"] for line in open(log_path)] if os.path.exists(log_path) else []
jobs = os.path.dirname(os.environ["HORUS_CHECKPOINT_DIR"])
for k in range(1, attempt):
    with open(os.path.join(jobs, str(k), "pid")) as fh:
        earlier.append(int(fh.read().split()[0]))
record("started", start_iteration=float(os.environ["HORUS_START_ITERATION"]),
       earlier_alive=[pid for pid in earlier if alive(pid)])
while i < iterations:
    time.sleep(0.02)
    i += 1
    horus.report(i - base)
save()
record("finished")
"""


def test_tiresias_preempts_a_running_job_for_a_new_short_one(make_live, tmp_path: Path) -> None:
    """The policy, not the test, preempts: a long job past Tiresias' first threshold yields its only GPU to a new
    job, is requeued as preempted, and resumes as attempt 2 from its checkpoint once no process of attempt 1 is
    alive."""
    threshold_gpu_s, iterations = 0.5, 100
    live = make_live("tiresias", gpus=1, policy_options={"thresholds": (threshold_gpu_s,), "tick_s": 0.1})
    wait_for(lambda: live.scheduler.cluster.num_gpus == 1, what="the agent")
    script, log = tmp_path / "resumable.py", tmp_path / "attempts.jsonl"
    script.write_text(RESUMABLE)
    long_job, _ = live.scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, iterations=float(iterations),
                                               command=[sys.executable, str(script), str(log), str(iterations)]))

    def past_threshold() -> bool:
        with live.scheduler.lock:
            run = live.scheduler.state.running.get(long_job.job_id)
            return run is not None and run.iterations_done >= 5 and run.attained(time.time()) > threshold_gpu_s

    wait_for(past_threshold, timeout_s=30, interval_s=0.02, what="the long job to pass the first threshold")
    assert live.store.job(long_job.id).attempt == 1
    short, _ = live.scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, iterations=1.0,
                                            command=["sleep", "0.3"]))
    wait_for(lambda: live.store.job(long_job.id).state in ("finished", "failed"), timeout_s=30, what="the long job")
    job = live.store.job(long_job.id)
    assert (job.state, job.exit_code, job.attempt, job.preemptions) == ("finished", 0, 2, 1)
    events = live.store.events(long_job.id)
    assert [e["kind"] for e in events] == ["submitted", "started", "requeued:preempted", "started", "finished"]
    assert [e["attempt"] for e in events[1:4]] == [1, 1, 2]
    short_events = {e["kind"]: e for e in live.store.events(short.id)}
    assert live.store.job(short.id).state == "finished"
    assert events[2]["time"] <= short_events["started"]["time"] <= short_events["finished"]["time"] <= \
        events[3]["time"]  # the short job ran in between, on the GPU the long one gave up
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["kind"], r["attempt"]) for r in records] == [("started", 1), ("stopped", 1), ("started", 2),
                                                             ("finished", 2)]
    first, stopped, resumed, finished = records
    checkpoint = stopped["iteration"]
    assert first["iteration"] == 0 and 0 < checkpoint < iterations
    assert resumed["iteration"] == checkpoint  # attempt 2 resumed from attempt 1's checkpoint
    assert 0 < resumed["start_iteration"] <= checkpoint  # the server's count (last report) is not ahead of it
    assert finished["iteration"] == iterations
    # never twice at once: no process of attempt 1 was alive when attempt 2 started, and attempt 1's wrapper
    # (which outlives its command) had ended before
    assert resumed["earlier_alive"] == []
    ended_1 = json.loads((live.root / "node0" / "jobs" / long_job.job_id / "1" / "exit.json").read_text())["ended"]
    assert stopped["time"] <= ended_1 <= resumed["time"]
    # reports count from the attempt's start and the server adds the start iteration it handed out
    assert job.iterations_done == resumed["start_iteration"] + (iterations - checkpoint)


def test_progress_survives_a_rebuild_without_double_counting(tmp_path: Path) -> None:
    """Reports count from the attempt's start; a rebuild (machine joins, restart) must keep that base."""
    store = Store(tmp_path / "h.db")
    scheduler = LiveScheduler(store, AnalyticPredictor(), policy="fifo-exclusive", job_secret=b"s")
    scheduler.register_agent("n0", "host", fake_gpus(1, "V100", "n0"))
    job = scheduler.submit(NewJob(model="a3c", batch_size=32, num_gpus=1, command=["true"]))[0]
    scheduler.step()
    report = {"job_id": job.job_id, "attempt": 1, "status": "running", "iterations": 40, "rate": 4.0}
    scheduler.heartbeat("n0", [report])
    scheduler.register_agent("n1", "host1", fake_gpus(1, "V100", "n1"))  # a machine joins: rebuild
    assert scheduler.state.running[job.job_id].iterations_done == 40
    assert scheduler.state.running[job.job_id].observed_rate == 4.0
    scheduler.heartbeat("n0", [{**report, "iterations": 50}])
    assert scheduler.state.running[job.job_id].iterations_done == 50
    store.close()
    store = Store(tmp_path / "h.db")  # restart: the stored progress may be older, never counted twice
    again = LiveScheduler(store, AnalyticPredictor(), policy="fifo-exclusive", job_secret=b"s")
    again.heartbeat("n0", [{**report, "iterations": 60}])
    assert again.state.running[job.job_id].iterations_done == 60
    store.close()


def test_service_predictor_falls_back_for_models_without_operator_data() -> None:
    from horus.catalog import ModelInfo, OP_KINDS, register_model
    from horus.gpu_types import PRESETS
    from horus.jobs import JobSpec
    from horus.predict.physical import PhysicalPredictor
    from horus.service.predictor import ServicePredictor

    register_model(ModelInfo("uploaded-test-net", "onnx", 1000, 2e6, 6e6, 4e3, 64, 2, {k: 1 for k in OP_KINDS}, "test"))
    predictor = ServicePredictor(PhysicalPredictor())
    v100 = PRESETS["V100"]
    uploaded = JobSpec("1", 0.0, 1, "uploaded-test-net", 8, 10.0)
    assert predictor.predict(uploaded, v100) == AnalyticPredictor().predict(uploaded, v100)
    known = JobSpec("2", 0.0, 1, "resnet50", 64, 10.0)
    assert predictor.predict(known, v100) == PhysicalPredictor().predict(known, v100)
    with pytest.raises(HorusInputError, match="unknown model"):
        predictor.predict(JobSpec("3", 0.0, 1, "no-such-model", 8, 10.0), v100)
    assert predictor.predict(JobSpec("4", 0.0, 1, "", 0, 10.0), v100).util == 1.0
