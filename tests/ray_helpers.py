"""A live Horus service on a Ray backend, in-process, for tests and the Ray benchmark.

``RayService`` runs the ``LiveScheduler`` with its scheduling loop and a ``RayBackend`` connected
to an already initialised Ray (a ``ray.cluster_utils.Cluster``), exactly as ``horus serve`` wires
them, without HTTP. ``JOB_SCRIPT`` is a job that records where it runs (Ray node id and
``CUDA_VISIBLE_DEVICES``) in ``<out>/<job>-<attempt>-<agent>.json`` and holds until ``<out>/release``
or ``<out>/release-<job>`` exists (or ``hold_s``); with ``OOM=1`` it prints a CUDA out-of-memory error and exits 1.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

JOB_SCRIPT = r'''
import json, os, sys, time
out = sys.argv[1]
hold_s = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
me = {k: os.environ.get(k) for k in ("HORUS_JOB_ID", "HORUS_ATTEMPT", "HORUS_AGENT", "HORUS_RAY_NODE_ID",
                                     "CUDA_VISIBLE_DEVICES", "HORUS_NODE_RANK", "HORUS_NNODES", "HORUS_MASTER_ADDR")}
me["started"] = time.time()
me["pid"] = os.getpid()
name = f"{me['HORUS_JOB_ID']}-{me['HORUS_ATTEMPT']}-{me['HORUS_AGENT']}.json"
with open(os.path.join(out, name + ".tmp"), "w") as fh:
    json.dump(me, fh)
os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))
if os.environ.get("OOM"):
    print("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
    sys.exit(1)
release = [os.path.join(out, "release"), os.path.join(out, f"release-{me['HORUS_JOB_ID']}")]
progress = open(os.environ["HORUS_PROGRESS_FILE"], "a", buffering=1)
deadline = time.time() + hold_s
i = 0
while time.time() < deadline and not any(map(os.path.exists, release)):
    i += 1
    progress.write(json.dumps({"iteration": i, "time": time.time()}) + "\n")
    time.sleep(0.05)
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
'''


class RayService:
    """LiveScheduler + scheduling loop + RayBackend in this process (see module docstring)."""

    def __init__(self, state_dir: Path, *, policy: str = "fifo-exclusive", heartbeat_s: float = 0.2,
                 grace_s: float = 2.0, launch_timeout_s: float = 120.0, probe_nvml: bool = True) -> None:
        from horus.plugins import load_all
        from horus.predict.base import PREDICTORS
        from horus.service.backends.ray import RayBackend
        from horus.service.scheduler import LiveScheduler
        from horus.service.server import ServeConfig
        from horus.service.store import Store

        self.state_dir = state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        self.config = ServeConfig(state_dir=state_dir, policy=policy, heartbeat_s=heartbeat_s, grace_s=grace_s,
                                  lease_s=30.0, backend="ray", gpu_type="V100")
        self.store = Store(state_dir / "horus.db")
        load_all("horus.predict")
        self.scheduler = LiveScheduler(self.store, PREDICTORS.create("analytic"), policy=policy, lease_s=30.0)
        self.backend = RayBackend(launch_timeout_s=launch_timeout_s, probe_nvml=probe_nvml)
        self.backend.prepare(self.config)
        self.stop = threading.Event()
        self.out = state_dir / "out"
        self.out.mkdir(exist_ok=True)
        self.script = state_dir / "job.py"
        self.script.write_text(JOB_SCRIPT)

    def __enter__(self) -> RayService:
        from horus.service.server import _scheduling_loop

        threading.Thread(target=_scheduling_loop, args=(self.scheduler, self.stop), daemon=True).start()
        self.backend.start(self.scheduler, self.config, self.stop)
        return self

    def __exit__(self, *exc: object) -> None:
        (self.out / "release").touch()
        self.stop.set()
        self.backend.wakeup.set()
        if self.backend.thread is not None:
            self.backend.thread.join(timeout=20)
        self.backend.stop_all()
        self.store.close()

    def submit(self, *, num_gpus: int = 1, gpu_fraction: float | None = None, hold_s: float = 60.0,
               env: dict[str, str] | None = None, gpu_type: str | None = None) -> str:
        from horus.service.store import NewJob

        job = NewJob(model="", batch_size=1, num_gpus=num_gpus, gpu_fraction=gpu_fraction, gpu_type=gpu_type,
                     command=[sys.executable, str(self.script), str(self.out), str(hold_s)], env=env or {})
        row, _ = self.scheduler.submit(job)
        return row.job_id

    def release(self, job_id: str) -> None:
        (self.out / f"release-{job_id}").touch()

    def row(self, job_id: str) -> Any:
        return self.store.job(int(job_id))

    def records(self, job_id: str) -> list[dict[str, Any]]:
        """What the job's processes recorded about themselves (one per node it ran on, latest attempt first)."""
        found = [json.loads(p.read_text()) for p in self.out.glob(f"{job_id}-*.json")]
        return sorted(found, key=lambda r: (-int(r["HORUS_ATTEMPT"]), r["HORUS_AGENT"]))


def wait_for(predicate: Any, timeout_s: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
