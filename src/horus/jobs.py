"""Job specification: what a user submits and what every policy may read."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from horus.errors import HorusInputError


@dataclass(frozen=True)
class JobSpec:
    """A DL training job as submitted.

    ``model`` names a catalog/zoo model (e.g. ``resnet50``); together with ``batch_size`` it is the
    job *type* (``job_type``), the key of the truth model and of the predictors. ``iterations`` is
    the number of training iterations the user asked for (known up front); how long each takes is
    what the truth model knows and the predictors estimate. ``gpu_fraction`` is set only for
    fractional requests (Alibaba openb ``gpu_milli`` / 1000) and then ``num_gpus == 1``. ``queue`` and
    ``priority`` name the job's tenant and priority class where the cluster has a tenancy (ignored otherwise).
    """

    job_id: str
    submit_time: float
    num_gpus: int
    model: str
    batch_size: int
    iterations: float
    gpu_fraction: float | None = None
    gpu_type_request: str | None = None  # required GPU type name, if the trace pins one
    queue: str | None = None  # tenant queue (horus.tenancy); None: the tenancy's default queue
    priority: str | None = None  # priority class name; None: the tenancy's default class

    @cached_property
    def job_type(self) -> str:
        return job_type_key(self.model, self.batch_size)


def job_type_key(model: str, batch_size: int) -> str:
    """Canonical job-type key, e.g. ``resnet50/b64``."""
    return f"{model}/b{batch_size}"


def parse_job_type(job_type: str) -> tuple[str, int]:
    """``'resnet50/b64'`` -> ``('resnet50', 64)``; HorusInputError otherwise."""
    model, sep, batch = job_type.rpartition("/b")
    if not sep or not model or not batch.isdigit():
        raise HorusInputError("job type", f"expected '<model>/b<batch>', got {job_type!r}")
    return model, int(batch)
