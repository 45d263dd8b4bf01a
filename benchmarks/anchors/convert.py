"""One Philly slice, written in each anchor simulator's own input format.

The slice is read through Horus' own loader (``horus.traces``, format ``philly``) so that every
simulator, Horus included, sees the same jobs: the first N in submit order, with submit time
(seconds from the first submit), GPU count and duration. Philly names no model, so each writer
labels jobs from the anchor's own catalogue, cycling by job index (documented per writer).
Nothing here reads or runs an anchor's code.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

# Model names the Tiresias simulator knows (its simulator/models.py, m_names); only memory and
# tensor sizes depend on them there, not a job's duration.
TIRESIAS_MODELS = ("vgg19", "vgg16", "vgg11", "alexnet", "resnet152", "resnet101", "resnet50", "inception4",
                   "inception3")
TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval")
# Gavel job types whose V100 throughput is given for 1, 2, 4 and 8 GPUs in its simulation_throughputs.json.
GAVEL_SCALE_FACTORS = (1, 2, 4, 8)
# Columns Lucid's trace reader (simulation/utils.py, trace_pollux_process) takes from cluster_full_log_<i>.csv.
LUCID_COLUMNS = ("job_id", "user", "vc", "jobname", "gpu_num", "cpu_num", "state", "submit_time", "duration",
                 "dataset", "model", "batchsize", "amp", "speed", "gpu_util", "gmem_util", "gmem")
LUCID_VC = "philly"


@dataclass(frozen=True)
class SliceJob:
    """One job of the slice, as every simulator gets it."""

    index: int  # 0-based position in submit order
    job_id: str  # Horus' id (philly-<line>)
    submit_s: int  # seconds after the first submit of the whole trace, rounded down
    gpus: int
    duration_s: int  # run time in seconds, rounded to the nearest second (at least 1)


def load_slice(trace: Path, max_jobs: int) -> list[SliceJob]:
    """The first ``max_jobs`` jobs (0 = all) of a Philly CSV, read by ``horus.traces`` (format philly)."""
    from horus.traces.base import load_trace

    jobs = load_trace(trace, "philly").jobs
    if max_jobs:
        jobs = jobs[:max_jobs]
    return [SliceJob(i, job.job_id, int(job.submit_time), int(job.num_gpus), max(1, round(job.duration_s or 0)))
            for i, job in enumerate(jobs)]


def write_tiresias(jobs: list[SliceJob], out_dir: Path, nodes: int, gpus_per_node: int = 8) -> dict[str, Path]:
    """Tiresias' simulator inputs: a job trace CSV and a cluster spec CSV (one switch of ``nodes`` nodes).

    ``interval`` is the gap to the next submit (0 for the last job); ``iterations`` is unused by
    Tiresias' schedulers and set to the duration in seconds.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    trace, spec = out_dir / "philly_job.csv", out_dir / "cluster_spec.csv"
    with trace.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(TIRESIAS_COLUMNS)
        for job, nxt in zip(jobs, [*jobs[1:], None]):
            interval = (nxt.submit_s - job.submit_s) if nxt else 0
            writer.writerow([job.index, job.gpus, job.submit_s, job.duration_s,
                             TIRESIAS_MODELS[job.index % len(TIRESIAS_MODELS)], job.duration_s, interval])
    with spec.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(("num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node"))
        writer.writerow((1, nodes, gpus_per_node, 128, 256))
    return {"trace": trace, "cluster_spec": spec}


def gavel_job_types(throughputs: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """Gavel job types with an isolated V100 throughput for every scale factor in GAVEL_SCALE_FACTORS."""
    v100 = throughputs["v100"]
    names = sorted({key.split("'")[1] for key in v100})
    return [name for name in names if all(str((name, sf)) in v100 for sf in GAVEL_SCALE_FACTORS)]


def gavel_scale_factor(gpus: int) -> int:
    """Gavel's throughputs stop at 8 GPUs: larger jobs run on 8 there (the README says how many)."""
    return min((sf for sf in GAVEL_SCALE_FACTORS if sf >= gpus), default=GAVEL_SCALE_FACTORS[-1])


def write_gavel(jobs: list[SliceJob], out: Path, throughputs_file: Path) -> Path:
    """A Gavel ``.trace`` (tab-separated, one job a line, as its ``utils.parse_trace`` reads).

    Job types cycle through ``gavel_job_types``; ``total_steps`` is the duration times the job
    type's isolated V100 throughput at its scale factor, so that alone on V100s it runs as long
    as in Philly.
    """
    throughputs = json.loads(throughputs_file.read_text())
    types = gavel_job_types(throughputs)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as handle:
        for job in jobs:
            job_type, scale = types[job.index % len(types)], gavel_scale_factor(job.gpus)
            rate = throughputs["v100"][str((job_type, scale))]["null"]
            steps = max(1, round(job.duration_s * rate))
            fields = (job_type, "python3 train.py", "philly", "--num_steps", 0, steps, scale, 1, -1.0, job.submit_s)
            handle.write("\t".join(str(f) for f in fields) + "\n")
    return out


def write_lucid(jobs: list[SliceJob], out_dir: Path, nodes: int, index: int = 0) -> dict[str, Path]:
    """Lucid's simulator inputs: ``cluster_full_log_<index>.csv`` (its Pollux-style trace) and
    ``vc_config.csv`` with one virtual cluster of ``nodes`` nodes holding every job.

    Columns Lucid's FIFO and Tiresias policies do not read (user, model, utilisation, ...) get
    fixed placeholder values.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    trace, vcs = out_dir / f"cluster_full_log_{index}.csv", out_dir / "vc_config.csv"
    with trace.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(LUCID_COLUMNS)
        for job in jobs:
            writer.writerow([job.index, "user", LUCID_VC, job.job_id, job.gpus, 4 * job.gpus, "COMPLETED",
                             job.submit_s, job.duration_s, "none", "none", 0, 0, 0, 0, 0, 0])
    with vcs.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(("", "num"))
        writer.writerow((LUCID_VC, nodes))
    return {"trace": trace, "vc_config": vcs}
