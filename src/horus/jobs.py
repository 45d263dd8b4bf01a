"""Job specification: what a user submits and what every policy may read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from horus.errors import HorusInputError

PRECISIONS = ("fp32", "tf32", "amp-fp16", "bf16")
"""How a job computes: plain FP32 (TF32 tensor cores off), TF32 (PyTorch's default for cuDNN convolutions on
Ampere and later), automatic mixed precision in FP16 (with loss scaling), or BF16 autocast."""
PRECISION_ALIASES = {"amp": "amp-fp16", "fp16": "amp-fp16", "amp_fp16": "amp-fp16", "float32": "fp32",
                     "bfloat16": "bf16", "amp-bf16": "bf16"}
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "adadelta")


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
    input_size: int | None = None  # image side / sequence length / feature count; None: the catalog's
    precision: str | None = None  # one of PRECISIONS; None: the predictor's default (fp32 with TF32 convolutions)
    optimizer: str | None = None  # one of OPTIMIZERS; None: the predictor's default (adam)

    @cached_property
    def job_type(self) -> str:
        return job_type_key(self.model, self.batch_size, self.input_size, self.precision, self.optimizer)


def normalize_precision(value: str | None, source: str = "precision") -> str | None:
    """The canonical precision name (``amp`` -> ``amp-fp16``); None stays None; HorusInputError otherwise."""
    if value is None or value == "":
        return None
    name = PRECISION_ALIASES.get(value.strip().lower(), value.strip().lower())
    if name not in PRECISIONS:
        raise HorusInputError(source, f"expected one of {', '.join(PRECISIONS)} (or amp, bfloat16), got {value!r}")
    return name


def check_optimizer(value: str | None, source: str = "optimizer") -> str | None:
    """The optimizer name, lower-cased; None stays None; HorusInputError when it is not one of OPTIMIZERS."""
    if value is None or value == "":
        return None
    name = value.strip().lower()
    if name not in OPTIMIZERS:
        raise HorusInputError(source, f"expected one of {', '.join(OPTIMIZERS)}, got {value!r}")
    return name


def job_type_key(model: str, batch_size: int, input_size: int | None = None, precision: str | None = None,
                 optimizer: str | None = None) -> str:
    """Canonical job-type key: ``resnet50/b64``, plus ``/s<input size>``, ``/<precision>`` and ``/<optimizer>``
    for each the job states (``resnet18/b128/s32/amp-fp16/sgd``)."""
    key = f"{model}/b{batch_size}"
    if input_size is not None:
        key += f"/s{input_size}"
    if precision is not None:
        key += f"/{precision}"
    if optimizer is not None:
        key += f"/{optimizer}"
    return key


_KEY = re.compile(r"^(?P<model>[^/]+)/b(?P<batch>[0-9]+)(?:/s(?P<size>[1-9][0-9]*))?"
                  rf"(?:/(?P<precision>{'|'.join(PRECISIONS)}))?(?:/(?P<optimizer>{'|'.join(OPTIMIZERS)}))?$")


@dataclass(frozen=True)
class JobKey:
    """The parts of a job-type key."""

    model: str
    batch_size: int
    input_size: int | None = None
    precision: str | None = None
    optimizer: str | None = None


def parse_job_key(job_type: str) -> JobKey:
    """``'resnet18/b128/s32/amp-fp16'`` -> its parts; HorusInputError for anything else."""
    match = _KEY.match(job_type)
    if match is None:
        raise HorusInputError("job type", "expected '<model>/b<batch>[/s<input size>][/<precision>][/<optimizer>]', "
                                          f"got {job_type!r}")
    size = match["size"]
    return JobKey(match["model"], int(match["batch"]), int(size) if size else None, match["precision"],
                  match["optimizer"])


def type_spec(job_type: str, job_id: str = "type") -> JobSpec:
    """A one-GPU JobSpec of ``job_type`` with every part its key states (to predict a type rather than a job)."""
    key = parse_job_key(job_type)
    return JobSpec(job_id, 0.0, 1, key.model, key.batch_size, 1.0, input_size=key.input_size,
                   precision=key.precision, optimizer=key.optimizer)


def parse_job_type(job_type: str) -> tuple[str, int]:
    """``'resnet50/b64'`` (or a key with input size / precision / optimizer) -> ``('resnet50', 64)``."""
    key = parse_job_key(job_type)
    return key.model, key.batch_size
