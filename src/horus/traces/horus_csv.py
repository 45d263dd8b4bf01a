"""The project's own trace format (``horus``), documented in docs/traces.md.

Columns: ``job_id, submit_time, num_gpus, model, batch_size`` and ``iterations`` and/or
``duration_s`` (each row fills exactly one); optional ``gpu_fraction``, ``gpu_type``, ``queue`` and
``priority`` (the job's tenant queue and priority class: names, ``horus.tenancy.check_name``), and the job's
own description: ``input_size`` (1 - 65,536), ``precision`` (``horus.jobs.PRECISIONS`` or an alias such as
``amp``; stored canonical) and ``optimizer`` (``horus.jobs.OPTIMIZERS``), each empty for the defaults and
only with a model. Lines starting with ``#`` are comments. ``model``/``batch_size`` may both be left empty for
the profile sampler to fill; a given model must be in the model catalog.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from horus.traces._columns import optional_float, rebase_order
from horus.traces._table import CsvTable, read_csv_table
from horus.traces.base import TRACE_LOADERS, RawJob, Trace, make_trace
from horus.validation import LIMITS

REQUIRED = ("job_id", "submit_time", "num_gpus", "model", "batch_size")
OPTIONAL = ("iterations", "duration_s", "gpu_fraction", "gpu_type", "queue", "priority", "input_size", "precision",
            "optimizer")
DESCRIPTION = ("input_size", "precision", "optimizer")  # a job's own description (horus.jobs.JobSpec)


def known_models() -> set[str] | None:
    """Model names of the packaged catalog, or None while no catalog is shipped (no check then)."""
    from horus.catalog import load_catalog

    try:
        return set(load_catalog())
    except FileNotFoundError:
        return None


def _work(table: CsvTable) -> tuple[np.ndarray, np.ndarray]:
    if not table.has("iterations") and not table.has("duration_s"):
        table.fail_header("missing column 'iterations' or 'duration_s' (each row gives one)")
    n = len(table)
    iters = table.bounded("iterations", LIMITS["iterations"], allow_empty=True) if table.has("iterations") \
        else np.full(n, np.nan)
    dur = table.bounded("duration_s", LIMITS["duration_s"], allow_empty=True) if table.has("duration_s") \
        else np.full(n, np.nan)
    neither = np.isnan(iters) & np.isnan(dur)
    both = ~np.isnan(iters) & ~np.isnan(dur)
    if neither.any():
        table.fail(int(np.argmax(neither)), None, "expected 'iterations' or 'duration_s', both are empty")
    if both.any():
        table.fail(int(np.argmax(both)), None, "expected either 'iterations' or 'duration_s', not both")
    return iters, dur


def _models(table: CsvTable) -> tuple[list[str], np.ndarray]:
    models = table.text("model")
    batch = table.bounded("batch_size", LIMITS["batch_size"], allow_empty=True)
    known = known_models()
    for row, (model, b) in enumerate(zip(models, batch)):
        if bool(model) == np.isnan(b):
            table.fail(row, "batch_size" if model else "model",
                       "expected model and batch_size both set or both empty (empty: the sampler picks)")
        if model and known is not None and model not in known:
            table.fail(row, "model", f"expected a model of the catalog ({', '.join(sorted(known))}), got {model!r}")
    return models, batch


def _fractions(table: CsvTable, gpus: np.ndarray) -> np.ndarray:
    n = len(table)
    if not table.has("gpu_fraction"):
        return np.full(n, np.nan)
    frac = table.bounded("gpu_fraction", LIMITS["gpu_fraction"], allow_empty=True)
    with np.errstate(invalid="ignore"):
        table.check("gpu_fraction", ~np.isnan(frac) & (frac < 1.0) & (gpus != 1), table.text("gpu_fraction"),
                    "a fractional share only for num_gpus == 1")
    frac[frac == 1.0] = np.nan  # a whole GPU is not a fractional request
    return frac


def _description(table: CsvTable, models: list[str]) -> list[tuple[int | None, str | None, str | None]]:
    """Each row's (input size, canonical precision, optimizer); None where a cell is empty or the column absent."""
    from horus.errors import HorusInputError
    from horus.jobs import check_optimizer, normalize_precision

    n = len(table)
    sizes = table.bounded("input_size", LIMITS["input_size"], allow_empty=True) if table.has("input_size") \
        else np.full(n, np.nan)
    columns: dict[str, list[str | None]] = {}
    for column, check in (("precision", normalize_precision), ("optimizer", check_optimizer)):
        if not table.has(column):
            columns[column] = [None] * n
            continue
        cells = table.text(column)
        known: dict[str, str | None] = {}
        for row, cell in enumerate(cells):
            if cell not in known:  # a few distinct values, many rows
                try:
                    known[cell] = check(cell, column)
                except HorusInputError as exc:
                    table.fail(row, column, exc.message)
        columns[column] = [known[cell] for cell in cells]
    out = []
    for row in range(n):
        size = None if np.isnan(sizes[row]) else int(sizes[row])
        described = (size, columns["precision"][row], columns["optimizer"][row])
        if not models[row] and any(v is not None for v in described):
            column = DESCRIPTION[next(i for i, v in enumerate(described) if v is not None)]
            table.fail(row, column, "describes the job's model; give model and batch_size too (empty: the sampler "
                                    "picks a catalog job type)")
        out.append(described)
    return out


@TRACE_LOADERS.register("horus")
def load_horus(path: Path) -> Trace:
    table = read_csv_table(path, "horus", REQUIRED, OPTIONAL, allow_extra=False)
    ids = table.text("job_id")
    seen: dict[str, int] = {}
    for row, job_id in enumerate(ids):
        if not job_id:
            table.fail(row, "job_id", "expected a non-empty job id")
        if job_id in seen:
            table.fail(row, "job_id", f"expected unique job ids, {job_id!r} already on line {seen[job_id]}")
        seen[job_id] = int(table.lines[row])
    submit = table.bounded("submit_time", LIMITS["submit_time_s"])
    gpus = table.bounded("num_gpus", LIMITS["job_gpus"])
    models, batch = _models(table)
    iters, dur = _work(table)
    frac = _fractions(table, gpus)
    gpu_type = table.text("gpu_type") if table.has("gpu_type") else [""] * len(table)
    for row, request in enumerate(gpu_type):
        if request and not all(part.strip() for part in request.split("|")):
            table.fail(row, "gpu_type", f"expected GPU type names separated by '|', got {request!r}")
    queues, priorities = table.names("queue", "queue"), table.names("priority", "priority class")
    described = _description(table, models)
    order, rebased, offset = rebase_order(submit)
    jobs = [
        RawJob(ids[i], float(rebased[i]), int(gpus[i]), optional_float(dur[i]), optional_float(iters[i]),
               models[i] or None, None if np.isnan(batch[i]) else int(batch[i]), optional_float(frac[i]),
               gpu_type[i] or None, int(table.lines[i]), queues[i], priorities[i], *described[i])
        for i in order
    ]
    trace = make_trace(jobs, table.source, table.sha256, "horus")
    trace.time_offset_s = offset
    return trace
