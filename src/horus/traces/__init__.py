"""Workload traces: loaders (horus, philly, openb), profile samplers and materialization into JobSpecs.

``load_openb_cluster`` is imported on first use (PEP 562): the openb loader needs pandas, and importing any
submodule of this package (as the CLI's parsers do) must not pay for it.
"""

from __future__ import annotations

from typing import Any

from horus.traces.base import TRACE_LOADERS, RawJob, Trace, default_trace_path, load_default_trace, load_trace
from horus.traces.materialize import materialize
from horus.traces.sampler import SAMPLERS, ProfileSampler

__all__ = [
    "SAMPLERS", "TRACE_LOADERS", "ProfileSampler", "RawJob", "Trace", "default_trace_path", "load_default_trace",
    "load_openb_cluster", "load_trace", "materialize",
]


def __getattr__(name: str) -> Any:
    if name == "load_openb_cluster":
        from horus.traces.openb import load_openb_cluster

        return load_openb_cluster
    raise AttributeError(f"module 'horus.traces' has no attribute {name!r}")
