"""``JobWorker``: the Ray actor that runs one worker of one job attempt on the node Horus chose.

The backend creates it with ``num_gpus=0`` (Ray's own GPU ids would ignore Horus's choice), pinned
to its node and holding the job's share of each chosen GPU's custom resource. ``run`` launches the
job's command as a subprocess in its own process group, with the same environment a
local agent gives (``CUDA_VISIBLE_DEVICES`` set by Horus, ``HORUS_*``), output appended to
``<workdir>/jobs/<job>/<attempt>/<agent>/log`` and progress read from ``progress.jsonl`` there.
The process is told to die with the actor (``PR_SET_PDEATHSIG``), so ``ray.kill`` or the loss of
the node never leaves an orphan trainer. Reports have the local agent's fields.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from horus.agent.agent import job_environment
from horus.agent.gpus import Telemetry
from horus.agent.processes import Attempt

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (OSError, AttributeError):
        pass


class JobWorker:
    """Runs one job attempt's worker at a time on this node (see module docstring); the backend may hand
    an idle one the next worker with the same node and resources instead of starting a new actor."""

    def __init__(self) -> None:
        import ray

        self.node_id = ray.get_runtime_context().get_node_id()
        self.proc: subprocess.Popen[bytes] | None = None
        self.item: Attempt | None = None
        self.launch_error: int | None = None
        self.runs = 0
        self.telemetry: Telemetry | None = None
        self._sample: tuple[float, list[dict[str, float]], float | None] = (0.0, [], None)

    def run(self, assignment: dict[str, Any], agent: str, workdir: str,
            nvml_indices: list[int] | None = None) -> dict[str, Any]:
        """Launch the worker of ``assignment`` (a desired-state entry); the previous one must have ended.
        ``nvml_indices``: its GPUs' NVML indices where the node has NVML (for telemetry)."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError(f"job {self.item.job_id if self.item else '?'} still runs in this worker")
        job_id, attempt = str(assignment["job_id"]), int(assignment["attempt"])
        root = Path(workdir).expanduser() / "jobs" / job_id
        folder = root / str(attempt) / agent
        folder.mkdir(parents=True, exist_ok=True)
        checkpoint = root / "checkpoint"
        checkpoint.mkdir(parents=True, exist_ok=True)
        self.item = Attempt(job_id, attempt, folder)
        env = job_environment(assignment, agent, checkpoint)
        progress = folder / "progress.jsonl"
        progress.write_text("")  # the same attempt run again (after a server restart) counts from its start again
        env.update({"HORUS_PROGRESS_FILE": str(progress), "HORUS_RAY_NODE_ID": self.node_id})
        self.proc, self.launch_error = None, None
        self.runs += 1
        self.telemetry = Telemetry([{"index": i} for i in nvml_indices]) if nvml_indices else None
        self._sample = (0.0, [], None)
        with open(folder / "log", "ab") as log:
            log.write(f"[horus] {time.strftime('%Y-%m-%dT%H:%M:%S')} start on Ray node {self.node_id[:8]}: "
                      f"{assignment['command']!r}\n".encode())
            log.flush()
            try:
                self.proc = subprocess.Popen(
                    [str(c) for c in assignment["command"]], env={**os.environ, **env}, cwd=env.get("HORUS_CWD"),
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                    preexec_fn=_die_with_parent)
            except OSError as exc:
                log.write(f"[horus] cannot start the command: {exc}\n".encode())
                self.launch_error = 127
        return self.where()

    def where(self) -> dict[str, Any]:
        """Where this worker runs (for checks and logs)."""
        return {"node_id": self.node_id, "hostname": socket.gethostname(), "actor_pid": os.getpid(),
                "pid": self.proc.pid if self.proc is not None else None, "runs": self.runs}

    def report(self) -> dict[str, Any] | None:
        """The local agent's report: running with progress, or exited with its code and OOM flag."""
        if self.item is None:
            return None
        iterations, rate = self.item.progress()
        code = self.launch_error if self.proc is None else self.proc.poll()
        out: dict[str, Any] = {"job_id": self.item.job_id, "attempt": self.item.attempt, "iterations": iterations,
                               "rate": rate}
        if code is None:
            gpus, mem = self._telemetry()
            return {**out, "status": "running", "gpus": gpus, **({"gpu_mem_mib": mem} if mem is not None else {})}
        return {**out, "status": "exited", "exit_code": int(code), "oom": code != 0 and self.item.ran_out_of_memory(),
                "log_tail": self.item.log_tail()}

    def _telemetry(self) -> tuple[list[dict[str, float]], float | None]:
        """Per-GPU utilization and memory of the job's GPUs, and the job's own memory (NVML; 1 Hz at most)."""
        if self.telemetry is None or self.proc is None or self.item is None:
            return [], None
        now = time.time()
        if now - self._sample[0] >= 1.0:
            key = (self.item.job_id, self.item.attempt)
            per_gpu, per_job = self.telemetry.sample({self.proc.pid: key})
            self._sample = (now, per_gpu, per_job.get(key))
        return self._sample[1], self._sample[2]

    def signal(self, sig: int) -> bool:
        """Send ``sig`` to the job's process group; False when nothing of it is left."""
        if self.proc is None:
            return False
        self.proc.poll()
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            return False
        return True


def probe_gpus() -> list[dict[str, Any]]:
    """This node's GPUs from NVML ([] without NVML or GPU); run as a Ray task pinned to the node."""
    from horus.agent.gpus import discover

    return discover()[0]
