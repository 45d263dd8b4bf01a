"""Microsoft Philly trace as distributed by AdaptDL/Pollux (``philly_jobs.csv``).

Columns used: ``timestamp`` (``YYYY-MM-DD HH:MM:SS`` submit time), ``duration`` (seconds of run
time), ``num_gpus`` and, when present, ``cluster``: the job's virtual cluster (VC, a hashed team id such as
``6214e9``), which becomes its tenant queue (``RawJob.queue``; it must be a queue name,
``horus.tenancy.check_name``, or empty). ``gpu_time`` is ignored. Job ids are ``philly-<line>``.
The trace carries no model, so every job gets one from the profile sampler.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from horus.traces._columns import rebase_order
from horus.traces._table import read_csv_table
from horus.traces.base import TRACE_LOADERS, RawJob, Trace, make_trace
from horus.validation import LIMITS

REQUIRED = ("timestamp", "duration", "num_gpus")
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"
TIMESTAMP_PATTERN = r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-5][0-9]:[0-5][0-9]"
FIRST_YEAR, LAST_YEAR = 1970, 2100  # timestamps outside these years are typos, not GPU jobs


@TRACE_LOADERS.register("philly")
def load_philly(path: Path) -> Trace:
    table = read_csv_table(path, "philly", REQUIRED)
    stamps = table.text("timestamp")
    series = pd.Series(stamps, dtype=object)
    # ASCII digits in the exact layout first: pandas alone also takes "now", "today", full-width digits and a
    # leap second (14:45:60 rolls over), which would make the trace depend on the wall clock or shift jobs
    layout = series.str.fullmatch(TIMESTAMP_PATTERN).fillna(False).to_numpy(dtype=bool)
    parsed = pd.to_datetime(series.where(layout), format=TIMESTAMP_FORMAT, errors="coerce")
    table.check("timestamp", parsed.isna().to_numpy(), stamps, "a time like 2017-10-09 07:01:55")
    years = parsed.dt.year.to_numpy()
    table.check("timestamp", (years < FIRST_YEAR) | (years > LAST_YEAR), stamps,
                f"a time between {FIRST_YEAR} and {LAST_YEAR}")
    submit = parsed.to_numpy().astype("datetime64[s]").astype(np.int64).astype(float)
    duration = table.bounded("duration", LIMITS["duration_s"])
    gpus = table.bounded("num_gpus", LIMITS["job_gpus"])
    order, rebased, offset = rebase_order(submit)
    lines, times = table.lines.tolist(), rebased.tolist()
    counts, durations = gpus.astype(np.int64).tolist(), duration.tolist()
    queues = table.names("cluster", "queue (virtual cluster)")
    # positional (job_id, submit_time, num_gpus, duration_s, iterations, model, batch_size, gpu_fraction,
    # gpu_type_request, line, queue): keywords cost a third more over ~100k rows
    jobs = [RawJob(f"philly-{lines[i]}", times[i], counts[i], durations[i], None, None, None, None, None, lines[i],
                   queues[i]) for i in order.tolist()]
    trace = make_trace(jobs, table.source, table.sha256, "philly")
    trace.time_offset_s = offset  # Unix seconds of the first submit
    return trace


