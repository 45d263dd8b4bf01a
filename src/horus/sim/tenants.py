"""``horus simulate --tenancy``: which tenancy a comparison runs under, and the per-queue console table.

Sources (docs/tenancy.md): ``off``; ``spec`` (the cluster spec's ``tenancy:`` section); ``trace`` (queues derived
from the trace's queue column by ``horus.tenancy.from_demand``: each queue guaranteed its share of the trace's
GPU-time demand, jobs without a queue in a queue named ``default``); or a YAML file with a ``tenancy:`` section.
Default: ``spec`` when the cluster spec has a section, else ``off``. ``horus sweep --tenancy`` chooses each
cell's tenancy with the same functions (``horus.ray.sweep``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from horus.errors import HorusInputError
from horus.tenancy import Tenancy, from_demand
from horus.validation import path_arg

if TYPE_CHECKING:  # annotations only: ``register`` imports this module, keep it light
    from horus.cluster import Cluster, GPUType
    from horus.jobs import JobSpec
    from horus.truth.base import TruthModel

KEYWORDS = ("off", "spec", "trace")
DEFAULT_QUEUE = "default"  # --tenancy trace: the queue of jobs the trace gives none


def tenancy_arg(text: str) -> str | Path:
    """argparse ``type=`` of ``--tenancy``: a keyword, else a path."""
    return text if text in KEYWORDS else path_arg(text)


def gpu_time_by_queue(jobs: Sequence[JobSpec], truth: TruthModel, reference: GPUType,
                      cluster: Cluster | None = None) -> dict[str | None, float]:
    """GPU-seconds each queue's jobs ask for: GPUs x share of a GPU x run time alone on ``reference``; with a
    ``cluster``, jobs larger than its GPUs of the types they accept (the engine rejects them) are left out."""
    from horus.core.scheduler import eligible_gpus
    from horus.core.tenancy import spec_need

    eligible: dict[str | None, int] = {}
    iter_time: dict[str, float] = {}
    out: dict[str | None, float] = {}
    for spec in jobs:
        if cluster is not None:
            request = spec.gpu_type_request
            if request not in eligible:
                eligible[request] = eligible_gpus(cluster, request)
            if spec.num_gpus > eligible[request]:
                continue
        if spec.job_type not in iter_time:
            iter_time[spec.job_type] = truth.solo(spec.job_type, reference).iter_time_s
        out[spec.queue] = out.get(spec.queue, 0.0) + spec_need(spec) * spec.iterations * iter_time[spec.job_type]
    return out


def tenancy_from_trace(jobs: Sequence[JobSpec], cluster: Cluster, truth: TruthModel, reference: GPUType,
                       charge: str = "equal") -> Tenancy:
    """``from_demand`` over the jobs' queues (None -> ``DEFAULT_QUEUE``, the tenancy's default queue); a queue
    whose every job is too large for the cluster still gets a (zero) guarantee, so its jobs name a known queue."""
    demand: dict[str, float] = {}
    for queue, gpu_s in gpu_time_by_queue(jobs, truth, reference, cluster).items():
        name = queue or DEFAULT_QUEUE
        demand[name] = demand.get(name, 0.0) + gpu_s
    for spec in jobs:
        demand.setdefault(spec.queue or DEFAULT_QUEUE, 0.0)
    tenancy = from_demand(demand, cluster.num_gpus, charge=charge)
    if DEFAULT_QUEUE in tenancy.queues:
        tenancy = replace(tenancy, default_queue=DEFAULT_QUEUE)
    return tenancy


def declared_tenancy(choice: str | Path | None, charge: str | None, spec_tenancy: Tenancy | None,
                     cluster: Cluster, cluster_name: str, *, warn: bool = True) -> tuple[Tenancy | None, str]:
    """(the tenancy ``--tenancy CHOICE`` / ``--tenancy-charge CHARGE`` declare for ``cluster``, its source in words),
    read before the jobs are built; None for ``off`` and for ``trace`` (``tenancy_from_trace`` builds that one from
    the jobs). ``choice`` None: ``spec`` when the cluster spec has a section (``spec_tenancy``), else ``off``.
    HorusInputError when the asked-for source has none or the options contradict each other; ``warn``: say on
    stderr that a charge with nothing to charge does nothing."""
    from horus.clusterspec import load_tenancy

    source = choice if choice is not None else ("spec" if spec_tenancy is not None else "off")
    tenancy: Tenancy | None = None
    if source == "spec":
        if spec_tenancy is None:
            raise HorusInputError("--tenancy", f"spec: the cluster spec ({cluster_name}) has no tenancy section "
                                               "(docs/tenancy.md)")
        tenancy = spec_tenancy
    elif isinstance(source, Path):
        tenancy = load_tenancy(source, cluster)
        if tenancy is None:
            raise HorusInputError(str(source), "no tenancy section (expected a top-level 'tenancy:' mapping, "
                                               "docs/tenancy.md)")
    if charge is not None:
        if choice == "off":
            raise HorusInputError("--tenancy-charge", "applies to a tenancy, and --tenancy is off")
        if source == "off" and warn:  # nothing asked for a tenancy: say the option does nothing, as a warning
            print(f"horus: warning: --tenancy-charge has no effect: the cluster spec ({cluster_name}) has no tenancy "
                  "section (give --tenancy trace or --tenancy FILE)", file=sys.stderr)
        if tenancy is not None:
            tenancy = replace(tenancy, charge=charge)
    return tenancy, str(source)


def check_trace_priorities(jobs: Sequence[_Named], source: str) -> None:
    """``--tenancy trace`` before the jobs are built: every queue the trace names will exist, but the derived
    tenancy has only the default priority class; the first job naming another fails as ``check_queues`` would."""
    names = {job.queue or DEFAULT_QUEUE: 1.0 for job in jobs} or {DEFAULT_QUEUE: 1.0}
    check_queues(jobs, from_demand(names, len(names)), source, "trace")


class _Named(Protocol):
    job_id: str
    queue: str | None
    priority: str | None


def check_queues(jobs: Iterable[_Named], tenancy: Tenancy, source: str, tenancy_source: str) -> None:
    """One line naming the trace, the job (and its line, for a trace's ``RawJob``) and the unknown queue or
    priority class of the first job that names one ``tenancy`` lacks."""
    known_q, known_p = set(tenancy.queues), set(tenancy.priority_classes)
    for job in jobs:
        if job.queue is not None and job.queue not in known_q:
            what, name, known = "queue", job.queue, known_q
        elif job.priority is not None and job.priority not in known_p:
            what, name, known = "priority class", job.priority, known_p
        else:
            continue
        line = getattr(job, "line", None)
        where = (f"line {line}, " if line is not None else "") + f"job {job.job_id!r}"
        raise HorusInputError(source, f"{where}: unknown {what} {name!r} for --tenancy {tenancy_source} (known: "
                                      f"{', '.join(sorted(known))})")


# (queues.csv column, header, scale, format)
QUEUE_TABLE: tuple[tuple[str, str, float, str], ...] = (
    ("jobs", "jobs", 1, "{:.0f}"),
    ("completed", "completed", 1, "{:.0f}"),
    ("mean_jct_h", "mean JCT h", 1, "{:.2f}"),
    ("p95_jct_h", "p95 JCT h", 1, "{:.2f}"),
    ("mean_wait_h", "mean wait h", 1, "{:.2f}"),
    ("used_gpu_h", "GPU-h used", 1, "{:.1f}"),
    ("guaranteed_gpus", "guaranteed GPUs", 1, "{:g}"),
    ("guarantee_attainment", "attainment %", 100, "{:.1f}"),
    ("reclaimed", "reclaimed", 1, "{:.0f}"),
)


def _cell(value: object, scale: float, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(float(value) * scale)  # type: ignore[arg-type]


def format_queue_tables(queues: Mapping[str, Sequence[Mapping[str, object]]]) -> str:
    """One fixed-width table per policy: a row per queue (``QUEUE_TABLE``)."""
    blocks = []
    for policy, rows in queues.items():
        headers = ["queue", *(h for _, h, _, _ in QUEUE_TABLE)]
        body = [[str(r["queue"]), *(_cell(r.get(k), s, f) for k, _, s, f in QUEUE_TABLE)] for r in rows]
        widths = [max(len(r[i]) for r in [headers, *body]) for i in range(len(headers))]
        lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
                 for r in [headers, *body]]
        lines.insert(1, "  ".join("-" * w for w in widths))
        blocks.append(f"queues under {policy}:\n" + "\n".join(lines))
    return "\n\n".join(blocks)
