"""``horus sweep``: a grid of simulations (policy x trace x seed x cluster) fanned out over Ray.

Each cell is one ``simulate`` run, built exactly as ``horus simulate`` builds it (same truth,
predictor, sampler and seed handling), executed as one Ray task (``num_cpus=1``) anywhere in the
cluster, or in this process with ``ray=False``. Cells are independent and seeded, so the table does
not depend on where or in which order they ran. Trace, cluster and tenancy files must be readable at the
same path on every Ray node (a shared filesystem, or the embedded defaults).

Tenancy (docs/tenancy.md) is chosen per cell as ``horus simulate --tenancy`` chooses it: the cluster spec's
``tenancy:`` section by default, a queue per value of the trace's queue column (``trace``), a YAML file for every
cluster, or ``off``; a cell run under one adds the tenancy figures (Jain's index, quota violations, ...) and
``tenancy_source`` to its row.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from horus.cluster import Cluster
    from horus.tenancy import Tenancy

DEFAULT = "default"  # the embedded default trace / cluster


@dataclass(frozen=True)
class Cell:
    policy: str
    trace: str  # a path, or "default"
    seed: int
    cluster: str  # a path, or "default"


@dataclass(frozen=True)
class SweepSettings:
    """What every cell shares (the ``horus simulate`` options besides policy, trace, seed, cluster)."""

    fmt: str = "horus"
    truth: str = "parametric"
    gavel: str | None = None
    predictor: str = "analytic"
    predictor_dir: str | None = None
    sampler: str = "by-size-duration"
    max_jobs: int | None = None
    sizes: str = "estimate"  # what policies are told of job lengths (horus.sim.sizes), as horus simulate
    memory_truth: str = "formula"  # horus.sim.world.MEMORY_TRUTHS (the CLI's default: deviated)
    telemetry: str = "noisy"  # horus.sim.telemetry model, seeded by the cell's seed (as horus simulate)
    tenancy: str | None = None  # off, spec, trace or a YAML file's path; None: spec where a cell's cluster spec has a
    # tenancy section, else off (as horus simulate --tenancy)
    tenancy_charge: str | None = None  # equal or util: overrides the tenancy's charge (horus simulate --tenancy-charge)


def grid(policies: Sequence[str], traces: Sequence[str], seeds: Sequence[int], clusters: Sequence[str]) -> list[Cell]:
    return [Cell(p, t, s, c) for t, c, s, p in itertools.product(traces, clusters, seeds, policies)]


def _resolve(name: str, default_file: str) -> Path:
    if name == DEFAULT:
        from horus.sim.world import embedded

        return embedded(default_file)
    return Path(name)


def _cluster(name: str) -> tuple[Cluster, Tenancy | None]:
    """A cell's cluster and its spec's tenancy section (None without one; an openb node CSV has none)."""
    from horus.clusterspec import load_spec
    from horus.traces import load_openb_cluster

    path = _resolve(name, "default_cluster.yaml")
    return (load_openb_cluster(path), None) if path.suffix.lower() == ".csv" else load_spec(path)


def _declared(name: str, cluster: Cluster, spec_tenancy: Tenancy | None, settings: SweepSettings, *,
              warn: bool = False) -> tuple[Tenancy | None, str]:
    """``declared_tenancy`` for the cluster ``name`` under the sweep's ``--tenancy`` / ``--tenancy-charge``."""
    from horus.sim.tenants import KEYWORDS, declared_tenancy

    choice = settings.tenancy if settings.tenancy is None or settings.tenancy in KEYWORDS else Path(settings.tenancy)
    return declared_tenancy(choice, settings.tenancy_charge, spec_tenancy, cluster,
                            "embedded default" if name == DEFAULT else name, warn=warn)


def run_cell(cell: Cell, settings: SweepSettings) -> dict[str, Any]:
    """Simulate one cell; its summary (docs/metrics.md) with the cell, job and GPU counts and wall time, and with
    a tenancy its figures (``horus.sim.queues.tenancy_summary``), ``tenancy_source`` and ``tenancy_charge``."""
    from horus.core import create_policy
    from horus.sim.world import build_predictor, build_truth
    from horus.sim.engine import SimConfig, simulate
    from horus.sim.tenants import tenancy_from_trace
    from horus.traces import load_trace, materialize
    from horus.traces.sampler import SAMPLERS

    began = time.perf_counter()
    cluster, spec_tenancy = _cluster(cell.cluster)
    tenancy, tenancy_source = _declared(cell.cluster, cluster, spec_tenancy, settings)
    truth = build_truth(settings.truth, Path(settings.gavel) if settings.gavel else None, cluster,
                        memory=settings.memory_truth)
    predictor = build_predictor(settings.predictor, Path(settings.predictor_dir) if settings.predictor_dir else None)
    fmt = settings.fmt if cell.trace != DEFAULT else "horus"
    trace = load_trace(_resolve(cell.trace, "default_trace.csv"), fmt)
    sampler = SAMPLERS.create(settings.sampler, seed=cell.seed)
    reference = max(cluster.gpu_types(), key=lambda t: sum(n.num_gpus for n in cluster.nodes if n.gpu_type == t))
    jobs = materialize(trace, truth, sampler, reference, seed=cell.seed, limit=settings.max_jobs)  # the first N
    if tenancy_source == "trace":  # from this cell's jobs, as horus simulate --tenancy trace
        tenancy = tenancy_from_trace(jobs, cluster, truth, reference, settings.tenancy_charge or "equal")
    result = simulate(jobs, cluster, create_policy(cell.policy, has_truth=True), truth, predictor,
                      SimConfig(sizes=settings.sizes, sizes_seed=cell.seed, telemetry=settings.telemetry,
                                telemetry_options={"seed": cell.seed} if settings.telemetry == "noisy" else {}),
                      tenancy=tenancy)
    described = {"tenancy_source": tenancy_source, "tenancy_charge": tenancy.charge} if tenancy is not None else {}
    return {**asdict(cell), "num_jobs": len(jobs), "num_gpus": cluster.num_gpus, "trace_sha256": trace.sha256,
            **described, **result.summary, "events": result.events_processed, "sim_wall_s": result.wall_s,
            "cell_wall_s": time.perf_counter() - began}


def check_cells(cells: Sequence[Cell], settings: SweepSettings) -> None:
    """HorusInputError (one line) for an unknown policy / sampler / tenancy charge, a trace, cluster or tenancy
    file that is missing, or a world option the truth or predictor would not read (``check_world_options``, as
    ``horus simulate``)."""
    from horus.errors import HorusInputError
    from horus.plugins import load_all
    from horus.policies.base import POLICIES
    from horus.sim.tenants import KEYWORDS
    from horus.tenancy import CHARGE_RULES
    from horus.traces.sampler import SAMPLERS

    from horus.sim.sizes import size_ordered_error
    from horus.sim.world import check_world_options

    check_world_options(settings.truth, settings.gavel, settings.predictor, settings.predictor_dir,
                        memory_truth=None if settings.memory_truth == "formula" else settings.memory_truth)
    load_all("horus.policies")
    for cell in cells:
        if cell.policy not in POLICIES:
            raise HorusInputError("--policy", f"unknown policy {cell.policy!r}; known: {', '.join(POLICIES.names())}")
        if settings.sizes == "none" and POLICIES.create(cell.policy).orders_by_size():
            raise size_ordered_error(cell.policy)
        for option, name in (("--trace", cell.trace), ("--cluster", cell.cluster)):
            if name != DEFAULT and not Path(name).is_file():
                raise HorusInputError(option, f"{name}: no such file")
    if settings.sampler not in SAMPLERS:
        known = ", ".join(SAMPLERS.names())
        raise HorusInputError("--sampler", f"unknown sampler {settings.sampler!r}; known: {known}")
    if settings.tenancy is not None and settings.tenancy not in KEYWORDS and not Path(settings.tenancy).is_file():
        raise HorusInputError("--tenancy", f"{settings.tenancy}: no such file")
    if settings.tenancy_charge is not None and settings.tenancy_charge not in CHARGE_RULES:
        raise HorusInputError("--tenancy-charge", f"expected one of {', '.join(CHARGE_RULES)}, "
                                                  f"got {settings.tenancy_charge!r}")
    load_inputs(cells, settings)


def load_inputs(cells: Sequence[Cell], settings: SweepSettings) -> None:
    """Read every trace and cluster once, choose each cluster's tenancy and check every trace's queues against it,
    and build the truth and predictor, as the cells will: a bad file fails the sweep before its first simulation,
    not in cell N after N-1 ran (HorusInputError, the one line ``horus simulate`` gives)."""
    import sys

    from horus.errors import HorusInputError
    from horus.plugins import load_all
    from horus.sim.tenants import DEFAULT_QUEUE, check_queues, check_trace_priorities
    from horus.sim.world import build_predictor, build_truth, check_trace_sizes
    from horus.traces import load_trace
    from horus.traces.base import TRACE_LOADERS

    load_all("horus.traces")
    if settings.fmt not in TRACE_LOADERS:
        raise HorusInputError("--format", f"unknown trace format {settings.fmt!r}; known: {', '.join(TRACE_LOADERS)}")
    traces = {name: load_trace(_resolve(name, "default_trace.csv"), settings.fmt if name != DEFAULT else "horus")
              for name in dict.fromkeys(cell.trace for cell in cells)}
    for name, trace in traces.items():  # input sizes the jobs' models cannot take
        check_trace_sizes(trace.jobs[: settings.max_jobs], str(_resolve(name, "default_trace.csv")))
    clusters = {name: _cluster(name) for name in dict.fromkeys(cell.cluster for cell in cells)}
    tenancies = {name: _declared(name, cluster, spec_tenancy, settings, warn=True)
                 for name, (cluster, spec_tenancy) in clusters.items()}
    warned: set[str] = set()
    for trace_name, cluster_name in dict.fromkeys((cell.trace, cell.cluster) for cell in cells):
        tenancy, source = tenancies[cluster_name]
        jobs = traces[trace_name].jobs[: settings.max_jobs]  # the jobs the cells run: materialize keeps the order
        where = str(_resolve(trace_name, "default_trace.csv"))
        if tenancy is not None:
            check_queues(jobs, tenancy, where, source)
        elif source == "trace":
            check_trace_priorities(jobs, where)
            if trace_name not in warned and all(job.queue is None for job in jobs):
                warned.add(trace_name)
                print(f"horus: warning: --tenancy trace: {where} names no queues; every job is in queue "
                      f"'{DEFAULT_QUEUE}'", file=sys.stderr)
    for cluster, _ in clusters.values():  # the truth reads the cluster's GPU types (gavel: which of its columns)
        build_truth(settings.truth, Path(settings.gavel) if settings.gavel else None, cluster,
                    memory=settings.memory_truth)
    build_predictor(settings.predictor, Path(settings.predictor_dir) if settings.predictor_dir else None)


def run_sweep(cells: Sequence[Cell], settings: SweepSettings, *, use_ray: bool = True,
              on_result: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Every cell's row, in grid order. With ``use_ray`` one Ray task per cell (Ray must be initialised)."""
    if not use_ray:
        rows = []
        for cell in cells:
            rows.append(run_cell(cell, settings))
            if on_result:
                on_result(rows[-1])
        return rows
    import ray

    task = ray.remote(num_cpus=1, max_retries=1)(run_cell)
    refs = [task.remote(cell, settings) for cell in cells]
    index = {ref: i for i, ref in enumerate(refs)}
    rows: list[dict[str, Any] | None] = [None] * len(refs)
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        row = ray.get(ready[0])
        rows[index[ready[0]]] = row
        if on_result:
            on_result(row)
    return [r for r in rows if r is not None]


TENANCY_LABELS = ("tenancy_source", "tenancy_charge")  # words a row with a tenancy carries (not averaged)


def aggregate(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """Mean and standard deviation over seeds of each ``key``, per (policy, trace, cluster); the tenancy's source
    and charge (``TENANCY_LABELS``) of the rows that have one."""
    import numpy as np

    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["policy"], row["trace"], row["cluster"]), []).append(row)
    out = []
    for (policy, trace, cluster), members in groups.items():
        entry: dict[str, Any] = {"policy": policy, "trace": trace, "cluster": cluster, "seeds": len(members)}
        for label in TENANCY_LABELS:
            words = dict.fromkeys(str(m[label]) for m in members if m.get(label) is not None)
            if words:
                entry[label] = ", ".join(words)
        for key in keys:
            values = np.array([float(m[key]) for m in members if m.get(key) is not None], dtype=float)
            entry[key] = float(values.mean()) if len(values) else None
            entry[f"{key}_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        out.append(entry)
    return out
