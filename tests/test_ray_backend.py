"""The Ray backend on a real multi-node Ray cluster (``ray.cluster_utils.Cluster``, fake GPUs).

One module-scoped cluster: a CPU-only head and nodes ``a`` and ``b`` with 2 GPUs each, declared as
``num_gpus`` plus per-GPU resources ``horus_gpu_<tag>_<i>``. Jobs are real processes that record
the Ray node and ``CUDA_VISIBLE_DEVICES`` they got. Tests run in order; the last removes a node and adds ``c``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'horus-scheduler[ray]')")

from horus.errors import HorusInputError  # noqa: E402
from ray_helpers import RayService, wait_for  # noqa: E402

TAGS = ("a", "b")


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    handles = {tag: c.add_node(num_cpus=1, num_gpus=2, resources={f"horus_gpu_{tag}_{i}": 1.0 for i in range(2)})
               for tag in TAGS}
    ray.init(address=c.address, namespace="horus", log_to_driver=False)
    c.wait_for_nodes(timeout=60)
    yield c, handles
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def service(cluster, tmp_path_factory):
    with RayService(tmp_path_factory.mktemp("ray-serve"), launch_timeout_s=30.0) as svc:
        wait_for(lambda: len(svc.backend.nodes) == 2, 30, "both Ray nodes registered")
        yield svc


def running(svc: RayService, job_id: str, nodes: int = 1) -> bool:
    row = svc.row(job_id)
    return row.state == "running" and len([r for r in svc.records(job_id)
                                           if int(r["HORUS_ATTEMPT"]) == row.attempt]) == nodes


def test_nodes_become_agents_with_declared_gpus(service):
    agents = service.scheduler.cluster_view()["agents"]
    assert sorted(a["name"] for a in agents) == ["a", "b"]
    assert all(a["gpus"] == 2 for a in agents)
    for tag, node in service.backend.nodes.items():
        assert [g["resource"] for g in node.gpus] == [f"horus_gpu_{tag}_0", f"horus_gpu_{tag}_1"]
        assert all(g["type"] == "V100" for g in node.gpus)  # no NVML here: the declared type


def test_jobs_run_where_horus_placed_them_and_share_gpus(service):
    jobs = [service.submit(gpu_fraction=0.5) for _ in range(8)]
    wait_for(lambda: all(running(service, j) for j in jobs), 60, "8 half-GPU jobs running")
    per_gpu: dict[tuple[str, int], int] = {}
    for job in jobs:
        (agent, index), = service.row(job).placement
        record = service.records(job)[0]
        assert record["HORUS_AGENT"] == agent
        assert record["HORUS_RAY_NODE_ID"] == service.backend.nodes[agent].node_id  # Ray honoured the node pin
        assert record["CUDA_VISIBLE_DEVICES"] == str(index)  # Horus's GPU, not Ray's
        per_gpu[(agent, index)] = per_gpu.get((agent, index), 0) + 1
    assert sorted(per_gpu.values()) == [2, 2, 2, 2]  # 8 half jobs on 4 GPUs: every GPU co-located
    available = ray.available_resources()
    for tag in TAGS:  # Ray holds each co-located pair's shares: 2 x 0.5 / gpu_slots of each GPU's resource
        for i in range(2):
            held = 2 * 0.5 / service.backend.gpu_slots
            assert available.get(f"horus_gpu_{tag}_{i}", 0.0) == pytest.approx(1.0 - held)
    for job in jobs:
        service.release(job)
    wait_for(lambda: all(service.row(j).state == "finished" for j in jobs), 30, "the 8 jobs finished")
    assert all(service.row(j).exit_code == 0 and service.row(j).iterations_done > 0 for j in jobs)
    wait_for(lambda: not service.backend.workers, 20, "finished workers released")


def test_an_ended_workers_actor_runs_the_next_identical_worker(service):
    reused, launched = service.backend.reused, service.backend.launched
    pids = set()
    for _ in range(3):
        job = service.submit(hold_s=0)
        wait_for(lambda: service.row(job).state == "finished", 30, "short job finished")
        (agent, index), = next(e for e in service.store.events(int(job)) if e["kind"] == "started")["placement"]
        record = service.records(job)[0]
        assert record["HORUS_AGENT"] == agent and record["CUDA_VISIBLE_DEVICES"] == str(index)
        assert record["HORUS_RAY_NODE_ID"] == service.backend.nodes[agent].node_id
        pids.add(record["pid"])
    assert len(pids) == 3  # a fresh job process each time...
    assert service.backend.reused > reused  # ...in an actor that had run the previous one
    assert service.backend.launched - launched < 3


def test_gang_across_nodes_lands_on_the_chosen_gpus(service):
    job = service.submit(num_gpus=3)
    wait_for(lambda: running(service, job, nodes=2), 60, "3-GPU gang running on 2 nodes")
    placement = service.row(job).placement
    records = service.records(job)
    assert len(records) == 2
    for record in records:
        agent = record["HORUS_AGENT"]
        assert record["HORUS_RAY_NODE_ID"] == service.backend.nodes[agent].node_id
        assert record["CUDA_VISIBLE_DEVICES"] == ",".join(str(i) for a, i in placement if a == agent)
        assert record["HORUS_NNODES"] == "2"
    assert sorted(r["HORUS_NODE_RANK"] for r in records) == ["0", "1"]
    assert (job, 1) in service.backend.gangs  # one placement group for the gang
    service.release(job)
    wait_for(lambda: service.row(job).state == "finished", 30, "gang finished")
    wait_for(lambda: not service.backend.gangs, 20, "the gang's placement group removed")


def test_exit_codes_and_oom_map_like_the_local_agent(service):
    failing = service.submit(env={"EXIT_CODE": "3"}, hold_s=0)
    oom = service.submit(env={"OOM": "1"})
    wait_for(lambda: service.row(failing).state == "failed", 30, "exit 3 -> failed")
    assert service.row(failing).exit_code == 3 and service.row(failing).reason == "exit code 3"
    wait_for(lambda: service.row(oom).oom_failures >= 1, 30, "OOM -> requeued as an OOM failure")
    service.scheduler.cancel(int(oom))


def test_cancel_stops_the_worker_and_its_process(service):
    job = service.submit()
    wait_for(lambda: running(service, job), 30, "job running")
    pid = service.records(job)[0]["pid"]
    service.scheduler.cancel(int(job))
    wait_for(lambda: not any(w.job_id == job for w in service.backend.workers.values()), 20, "worker dropped")

    wait_for(lambda: pid_gone(pid), 10, "job process ended by SIGTERM")
    assert service.row(job).state == "cancelled"


def test_infeasible_requests_get_a_clear_error(service):
    with pytest.raises(HorusInputError, match="needs 5 GPUs; the cluster has 4"):
        service.submit(num_gpus=5)
    with pytest.raises(HorusInputError, match="of type A100"):
        service.submit(gpu_type="A100")
    node = service.backend.nodes["a"]
    launched = service.backend.launched
    table = dict(service.backend.nodes)
    worker = service.backend.launch(node, {"job_id": "999", "attempt": 1, "gpu_indices": [7], "gpu_uuids": ["7"],
                                           "command": ["true"]}, table)
    service.backend.workers.pop(worker.key)
    assert worker.actor is None and service.backend.launched == launched  # nothing submitted to Ray
    assert "GPU 7 is not one of Ray node" in worker.error
    report = worker.to_report()
    assert report["status"] == "exited" and report["exit_code"] is None and "GPU 7" in report["error"]


class Serve:
    """A `horus serve --backend ray` subprocess on the test cluster; restartable after kill -9."""

    def __init__(self, address: str, tmp_path: Path) -> None:
        self.state, self.port, self.log = tmp_path / "state", free_port(), tmp_path / "serve.log"
        self.args = [sys.executable, "-m", "horus.cli", "serve", "--backend", "ray", "--ray-address", address,
                     "--state-dir", str(self.state), "--port", str(self.port), "--heartbeat-s", "0.2",
                     "--grace-s", "2", "--log-level", "warning"]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Any:
        import httpx

        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_USAGE_STATS_ENABLED": "0"}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=env)

        def up() -> bool:
            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-2000:]
            try:
                return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 60, "horus serve --backend ray answering")
        token = (self.state / "token").read_text().strip()
        client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        wait_for(lambda: len(client.get("/v1/cluster").json()["gpus"]) == 4, 30, "the Ray nodes' 4 GPUs registered")
        return client

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"


def test_horus_serve_cli_runs_jobs_on_the_ray_cluster_and_survives_kill_9(cluster, tmp_path):
    from ray_helpers import JOB_SCRIPT

    c, _ = cluster
    serve = Serve(c.address, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "job.py"
    script.write_text(JOB_SCRIPT)
    try:
        client = serve.start()
        too_big = client.post("/v1/jobs", json={"command": ["true"], "num_gpus": 9})
        assert too_big.status_code == 409 and "needs 9 GPUs; the cluster has 4" in too_big.text
        job = client.post("/v1/jobs", json={"command": [sys.executable, str(script), str(out), "60"]}).json()
        key = str(job["id"])

        def record() -> dict | None:
            found = sorted(out.glob(f"{key}-1-*.json"))
            return json.loads(found[0].read_text()) if found else None

        first = wait_for(record, 60, "CLI job running")
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert first["HORUS_RAY_NODE_ID"] in alive and first["CUDA_VISIBLE_DEVICES"] in {"0", "1"}
        for f in out.glob(f"{key}-1-*.json"):
            f.unlink()
        serve.stop(signal.SIGKILL)  # the server's actors die with its Ray driver, and their jobs with them
        wait_for(lambda: pid_gone(first["pid"]), 30, "the job's process ended with its actor")
        client = serve.start()  # the same state: the running attempt is run again where it was placed
        second = wait_for(record, 60, "the job running again after the restart")
        assert second["pid"] != first["pid"] and second["HORUS_AGENT"] == first["HORUS_AGENT"]
        (out / f"release-{key}").touch()
        wait_for(lambda: client.get(f"/v1/jobs/{key}").json()["state"] == "finished", 60, "CLI job finished")
    finally:
        serve.stop()


def test_horus_serve_fails_fast_on_an_unreachable_ray_head(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run([sys.executable, "-m", "horus.cli", "serve", "--backend", "ray", "--ray-address",
                           f"127.0.0.1:{port}", "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, env=env, timeout=60)  # a hang fails here
    assert done.returncode == 2, done.stderr
    # fast by construction: Horus's own probe of the head's port answered, before ray.init's long retries
    assert f"horus: error: --ray-address: cannot reach a Ray head at 127.0.0.1:{port}" in done.stderr
    assert not (tmp_path / "state").exists()  # nothing written


def test_sweep_over_ray_gathers_the_same_table_as_running_here(cluster):
    from horus.ray.sweep import SweepSettings, grid, run_sweep

    cells = grid(["fifo-exclusive", "horus"], ["default"], [0, 1], ["default"])
    settings = SweepSettings(max_jobs=25)
    over_ray = run_sweep(cells, settings, use_ray=True)
    here = run_sweep(cells, settings, use_ray=False)
    keys = ("policy", "seed", "num_jobs", "makespan_s", "mean_jct_s", "colocated_share", "events")
    assert [tuple(r[k] for k in keys) for r in over_ray] == [tuple(r[k] for k in keys) for r in here]


def test_removing_a_node_requeues_its_jobs_keeping_attained_service(service, cluster):
    c, handles = cluster
    jobs = [service.submit(), service.submit()]
    wait_for(lambda: all(running(service, j) for j in jobs), 30, "2 jobs running")
    on_b = [j for j in jobs if service.row(j).placement[0][0] == "b"] or None
    victim = "b" if on_b else "a"
    moved = [j for j in jobs if service.row(j).placement[0][0] == victim]
    # some attained service: each job to move has run 0.5 s on the scheduler's clock (attained counts from there)
    wait_for(lambda: all(service.scheduler.clock() - service.row(j).started >= 0.5 for j in moved), 30,
             "0.5 s of service on the jobs to move")
    c.remove_node(handles[victim])
    wait_for(lambda: victim not in service.backend.nodes, 30, f"node {victim} lost")
    survivor = "a" if victim == "b" else "b"
    for job in moved:
        wait_for(lambda: service.row(job).attempt >= 2 and running(service, job), 60, f"job {job} restarted")
        row = service.row(job)
        assert row.lost_runs == 1 and row.attained_gpu_s >= 0.5
        assert row.placement[0][0] == survivor
        assert service.records(job)[0]["HORUS_RAY_NODE_ID"] == service.backend.nodes[survivor].node_id
    for job in jobs:
        service.release(job)
    wait_for(lambda: all(service.row(j).state == "finished" for j in jobs), 30, "jobs finished on the survivor")
    c.add_node(num_cpus=1, num_gpus=2, resources={f"horus_gpu_c_{i}": 1.0 for i in range(2)})  # a node joins
    wait_for(lambda: "c" in service.backend.nodes, 30, "the new node registered")
    assert len(service.scheduler.cluster_view()["gpus"]) == 4


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
