"""Workload traces: loaders (horus, philly, openb), profile samplers and materialization into JobSpecs."""

from horus.traces.base import TRACE_LOADERS, RawJob, Trace, default_trace_path, load_default_trace, load_trace
from horus.traces.materialize import materialize
from horus.traces.openb import load_openb_cluster
from horus.traces.sampler import SAMPLERS, ProfileSampler

__all__ = [
    "SAMPLERS", "TRACE_LOADERS", "ProfileSampler", "RawJob", "Trace", "default_trace_path", "load_default_trace",
    "load_openb_cluster", "load_trace", "materialize",
]
