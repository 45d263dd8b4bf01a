"""Alibaba GPU-sharing trace (``cluster-trace-gpu-v2023``, "openb"): pods and GPU nodes.

Pods (``openb_pod_list_*.csv``): ``name, num_gpu, gpu_milli, gpu_spec, qos, creation_time,
deletion_time, scheduled_time`` are used (cpu/memory/phase are ignored). Rules (docs/traces.md):

- submit time = ``creation_time``; run time = ``deletion_time - scheduled_time`` (the time the pod
  held its GPUs; failed pods count too, they used the GPU until they failed);
- pods with ``num_gpu == 0`` (CPU-only) are skipped as ``cpu_only``; pods never scheduled (empty
  ``scheduled_time``, phase Pending) as ``never_scheduled``; zero run time as ``zero_duration``;
- ``gpu_milli < 1000`` with ``num_gpu == 1`` -> ``gpu_fraction = gpu_milli / 1000``;
- ``gpu_spec`` (e.g. ``V100M16|V100M32``) -> ``gpu_type_request`` in Horus names (``V100|V100-32GB``);
- ``qos`` (``LS`` latency-sensitive, ``BE`` best-effort, ``Burstable``, ``Guaranteed``) -> the job's tenant
  queue (``RawJob.queue``), when the column is present.

Nodes (``openb_node_list_gpu_node.csv``: ``sn, cpu_milli, memory_mib, gpu, model``) become a Cluster.
G1, G2, G3 are undisclosed GPU models; ``ASSUMED_TYPES`` gives them assumed specs (documented).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from horus.cluster import Cluster, GPUType, Node
from horus.clusterspec import DEFAULT_INTER_NODE_GBPS
from horus.gpu_types import PRESETS, REQUEST_SEPARATOR
from horus.traces._columns import optional_float, rebase_order
from horus.traces._table import CsvTable, read_csv_table
from horus.traces.base import TRACE_LOADERS, RawJob, Trace, make_trace
from horus.validation import LIMITS, Domain

POD_COLUMNS = ("name", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time")
NODE_COLUMNS = ("sn", "gpu", "model")

# Undisclosed Alibaba GPU codes: assumed V100-32GB-class cards (32 GiB, V100 speed). Pure assumption.
ASSUMED_TYPES: dict[str, GPUType] = {name: GPUType(name, 32 * 1024, 1.0) for name in ("G1", "G2", "G3")}

# openb GPU model names -> Horus GPU type names.
OPENB_GPU_NAMES: dict[str, str] = {
    "P100": "P100",
    "T4": "T4",
    "V100M16": "V100",
    "V100M32": "V100-32GB",
    "A10": "A10",
    **{name: name for name in ASSUMED_TYPES},
}


def _gpu_request(table: CsvTable, row: int, spec: str) -> str | None:
    if not spec:
        return None
    names = []
    for part in spec.split("|"):
        if part not in OPENB_GPU_NAMES:
            table.fail(row, "gpu_spec", f"expected GPU models from {', '.join(OPENB_GPU_NAMES)} "
                                        f"separated by '|', got {spec!r}")
        names.append(OPENB_GPU_NAMES[part])
    return REQUEST_SEPARATOR.join(names)


@TRACE_LOADERS.register("openb")
def load_openb(path: Path) -> Trace:
    table = read_csv_table(path, "openb", POD_COLUMNS, ("gpu_spec", "qos"))
    gpus = table.bounded("num_gpu", Domain(0, LIMITS["job_gpus"].high, True))
    milli = table.bounded("gpu_milli", Domain(0, 1000, True))
    times = LIMITS["submit_time_s"]
    created = table.bounded("creation_time", times)
    deleted = table.bounded("deletion_time", times)
    scheduled = table.bounded("scheduled_time", times, allow_empty=True)
    with np.errstate(invalid="ignore"):
        table.check("scheduled_time", scheduled < created, table.text("scheduled_time"),
                    "a time >= creation_time (a pod starts after it is created)")
    gpu_pod = gpus >= 1
    milli_text = table.text("gpu_milli")
    table.check("gpu_milli", gpu_pod & ((milli < 1) | (milli > 1000)), milli_text, "1..1000 for a GPU pod")
    table.check("gpu_milli", (gpus > 1) & (milli != 1000), milli_text, "1000 when num_gpu > 1")
    duration = deleted - scheduled
    with np.errstate(invalid="ignore"):
        table.check("deletion_time", duration < 0, table.text("deletion_time"), "a time >= scheduled_time")
        span = LIMITS["duration_s"].high
        table.check("deletion_time", duration > span, table.text("deletion_time"),
                    f"a run time (deletion_time - scheduled_time) of at most {span:,.0f} s")
    skipped = {
        "cpu_only": int((~gpu_pod).sum()),
        "never_scheduled": int((gpu_pod & np.isnan(scheduled)).sum()),
        "zero_duration": int((gpu_pod & (duration == 0)).sum()),
    }
    keep = gpu_pod & (duration > 0)  # NaN compares False: never-scheduled pods drop out
    kept = np.flatnonzero(keep)
    order, rebased, offset = rebase_order(created[kept])
    names, specs = table.text("name"), table.text("gpu_spec") if table.has("gpu_spec") else None
    queues = table.names("qos", "queue (qos)")
    jobs = []
    for k in order.tolist():
        row = int(kept[k])
        fraction = milli[row] / 1000.0 if milli[row] < 1000 else np.nan
        jobs.append(RawJob(
            names[row] or f"openb-line{table.lines[row]}", float(rebased[k]), int(gpus[row]), float(duration[row]),
            gpu_fraction=optional_float(fraction),
            gpu_type_request=_gpu_request(table, row, specs[row]) if specs else None,
            line=int(table.lines[row]), queue=queues[row],
        ))
    trace = make_trace(jobs, table.source, table.sha256, "openb", {k: v for k, v in skipped.items() if v})
    trace.time_offset_s = offset
    return trace


def openb_gpu_type(model: str, assumed: Mapping[str, GPUType] | None = None) -> GPUType:
    """Horus GPUType of an openb GPU model name (KeyError if unknown)."""
    name = OPENB_GPU_NAMES[model]
    return {**ASSUMED_TYPES, **(assumed or {})}.get(name) or PRESETS[name]


def load_openb_cluster(node_csv: str | Path, *, intra_link: str = "pcie",
                       inter_node_gbps: float = DEFAULT_INTER_NODE_GBPS,
                       assumed: Mapping[str, GPUType] | None = None) -> Cluster:
    """Cluster of the openb GPU node list. Nodes without GPUs are skipped.

    The trace does not say how GPUs are linked: all nodes get ``intra_link`` (PCIe by default).
    ``assumed`` overrides ``ASSUMED_TYPES`` for the undisclosed G1/G2/G3 models.
    """
    table = read_csv_table(node_csv, "openb node list", NODE_COLUMNS)
    counts = table.bounded("gpu", Domain(0, LIMITS["gpus_per_node"].high, True))
    models, names = table.text("model"), table.text("sn")
    seen: dict[str, int] = {}
    for row, name in enumerate(names):
        if not name:
            table.fail(row, "sn", "expected a node name")
        if name in seen:
            table.fail(row, "sn", f"expected unique node names, {name!r} already on line {seen[name]}")
        seen[name] = int(table.lines[row])
    if len(names) > LIMITS["nodes"].high or counts.sum() > LIMITS["cluster_gpus"].high:
        table.fail(0, "gpu", f"{len(names):,} nodes with {counts.sum():,.0f} GPUs; expected at most "
                             f"{LIMITS['nodes'].high:,.0f} nodes and {LIMITS['cluster_gpus'].high:,.0f} GPUs")
    nodes: list[Node] = []
    for row in np.flatnonzero(counts > 0).tolist():
        if models[row] not in OPENB_GPU_NAMES:
            table.fail(row, "model", f"expected a GPU model from {', '.join(OPENB_GPU_NAMES)}, got {models[row]!r}")
        nodes.append(Node(names[row], openb_gpu_type(models[row], assumed), int(counts[row]), intra_link))
    if not nodes:
        table.fail(0, "gpu", "expected at least one node with GPUs")
    return Cluster(nodes, inter_node_gbps)
