"""Per-queue metrics of a run with a tenancy: JCT and wait per queue, GPU time used vs guaranteed, fairness.

Columns of ``SimResult.queues`` (``queues.csv`` of a run), one row per queue (docs/tenancy.md):
jobs / completed, mean and p95 JCT and wait (hours), GPU-hours used, guaranteed GPU-hours demanded and received
(``guarantee_attainment`` = received / demanded: 1 when every GPU-second of demand within the guarantee was
served), ``jobs_per_charged_gpu`` (running job-hours per charged GPU-hour: above 1 / gang size only when
co-location runs several jobs on the GPUs it is charged for), the queue's received / weighted max-min fair GPU time while the cluster was contended, seconds charged
above its limit (``over_limit_s``: a quota violation, must be 0), and preemptions by reclaim and by priority.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from horus.core.tenancy import Admission
from horus.sim.metrics import JobRecord

QUEUE_COLUMNS: tuple[str, ...] = (
    "queue", "jobs", "completed", "mean_jct_h", "p95_jct_h", "mean_wait_h", "p95_wait_h", "guaranteed_gpus",
    "borrow_limit", "weight", "used_gpu_h", "jobs_per_charged_gpu", "guaranteed_demand_gpu_h", "guaranteed_received_gpu_h",
    "guarantee_attainment", "contended_share_ratio", "over_limit_s", "reclaimed", "priority_preempted", "order_preempted",
    "admitted",
)


def _stat(values: np.ndarray, fn: str) -> float:
    values = values[~np.isnan(values)]
    if not len(values):
        return math.nan
    return float(values.mean() if fn == "mean" else np.percentile(values, 95)) / 3600


def queue_frame(jobs: pd.DataFrame, records: list[JobRecord], admission: Admission) -> pd.DataFrame:
    """One row per queue of ``admission``'s tenancy (``QUEUE_COLUMNS``); ``jobs`` is the run's job frame, in the
    order of ``records``."""
    names = np.array([admission.queue_name(r.spec.queue) for r in records], dtype=object)
    jct = jobs["jct"].to_numpy(dtype=float)
    wait = jobs["wait"].to_numpy(dtype=float)
    completed = (jobs["status"] == "completed").to_numpy()
    ledger = admission.summary()
    rows = []
    for name in admission.accounts:
        mine = names == name
        rows.append({
            "queue": name, "jobs": int(mine.sum()), "completed": int((mine & completed).sum()),
            "mean_jct_h": _stat(jct[mine], "mean"), "p95_jct_h": _stat(jct[mine], "p95"),
            "mean_wait_h": _stat(wait[mine], "mean"), "p95_wait_h": _stat(wait[mine], "p95"),
            **ledger[name],
        })
    return pd.DataFrame(rows, columns=list(QUEUE_COLUMNS))


def tenancy_summary(queues: pd.DataFrame, admission: Admission) -> dict[str, float | int]:
    """Run-level tenancy figures for the summary: Jain's index, violations, reclaims (all, and those toward a queue's
    fair share), worst guarantee attainment."""
    attained = queues["guarantee_attainment"].dropna()
    return {
        "queues": len(queues),
        "jain_index": admission.jain_index(),
        "contended_h": admission.contended_s / 3600,
        "quota_violation_s": float(queues["over_limit_s"].sum()),
        "reclaim_preemptions": int(queues["reclaimed"].sum()),
        "fair_reclaim_preemptions": admission.fair_reclaims,
        "priority_preemptions": int(queues["priority_preempted"].sum()),
        "order_preemptions": int(queues["order_preempted"].sum()),
        "min_guarantee_attainment": float(attained.min()) if len(attained) else math.nan,
    }
