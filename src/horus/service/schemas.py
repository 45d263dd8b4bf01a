"""Request and response bodies of the HTTP API (pydantic). Anything else is a 422 naming the field."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from horus.jobs import OPTIMIZERS, PRECISION_ALIASES, PRECISIONS, normalize_precision
from horus.tenancy import MAX_USERS, NAME_MAX, PRIORITY_VALUE, QUOTA_GPUS, WEIGHT
from horus.validation import LIMITS

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
MAX_ARG_CHARS = 32 * 1024
MAX_COMMAND_CHARS = 256 * 1024  # all arguments together (Linux allows 2 MiB of arguments and environment)
MAX_ENV_CHARS = 256 * 1024  # all names and values together
MAX_LOG_TAIL_CHARS = 16 * 1024  # agents send at most 4 KiB of log; the server keeps at most this much
NO_NUL = r"^[^\x00]*$"
# what the env validator refuses, for the OpenAPI schema (pydantic's regex engine has no look-ahead)
ENV_NAME_SCHEMA = {"pattern": r"^(?!HORUS_)(?!CUDA_VISIBLE_DEVICES$)[A-Za-z_][A-Za-z0-9_]{0,127}$"}
MIN_FRACTION = LIMITS["gpu_fraction"].low  # the smallest GPU share a job may request
MIN_ITERATIONS = LIMITS["iterations"].low  # a job's iteration count, when given
TENANT_NAME = rf"^[A-Za-z0-9_.\-]{{1,{NAME_MAX}}}$"  # a queue's or a priority class's name (horus.tenancy.check_name)
GPU_TYPE_KEY = r"^(\*|[A-Za-z0-9_.\-]{1,64})$"  # a quota's key: a GPU type name, or * for GPUs of any type
USER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"  # a user token's name (horus.validation.TOKEN_NAME)


def _integral(value: Any) -> Any:
    """JSON Schema's ``integer`` includes ``109.0``: an integral float is that integer (strings, booleans and
    fractions stay refused by the strict check after this)."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


Int = Annotated[int, BeforeValidator(_integral)]
"""An integer field: a JSON integer, or a number with no fractional part (``2.0``); never a string or a boolean."""
Arg = Annotated[str, Field(max_length=MAX_ARG_CHARS, pattern=NO_NUL)]
# a job's precision (an alias is stored as its canonical name) and optimizer: horus.jobs's names
Precision = Annotated[Literal[(*PRECISIONS, *PRECISION_ALIASES)], AfterValidator(normalize_precision)]  # type: ignore[valid-type]
Optimizer = Literal[OPTIMIZERS]  # type: ignore[valid-type]
InputSize = Annotated[int, Field(ge=int(LIMITS["input_size"].low), le=int(LIMITS["input_size"].high)),
                      BeforeValidator(_integral)]


class _Strict(BaseModel):
    """Every request body: unknown fields refused, no lax coercion (``"32"``, ``true`` or ``2.0`` are not integers,
    ``"0.5"`` is not a number) and finite numbers only (``NaN``, ``Infinity``, ``1e400`` are refused)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), strict=True, allow_inf_nan=False)


class JobSubmit(_Strict):
    """A training job to run."""

    model_config = ConfigDict(json_schema_extra={  # what _fraction_single refuses
        "if": {"properties": {"gpu_fraction": {"type": "number"}}, "required": ["gpu_fraction"]},
        "then": {"properties": {"num_gpus": {"const": 1}}}})

    command: list[Arg] = Field(min_length=1, max_length=4096, description="program and arguments (no shell); the "
                               "program is not empty; all arguments together at most 256 KiB",
                               json_schema_extra={"prefixItems": [{"type": "string", "minLength": 1,
                                                                   "maxLength": MAX_ARG_CHARS, "pattern": NO_NUL}]})
    model: str | None = Field(None, pattern=NAME_PATTERN, description="zoo/catalog model name or an uploaded "
                              "ONNX model's name, for prediction; without it the job gets a whole GPU")
    batch_size: Int = Field(32, ge=1, le=int(LIMITS["batch_size"].high))
    input_size: InputSize | None = Field(None, description="image side / sequence length / feature count, for prediction "
                                               "(default: the catalog's; needs model; an image model below its "
                                               "smallest size is a 409)")
    precision: Precision | None = Field(None, description="fp32, tf32, amp-fp16 (amp, fp16) or bf16 (bfloat16), "
                                                          "for prediction; stored as the canonical name (needs model)")
    optimizer: Optimizer | None = Field(None, description="the training optimizer, for prediction (needs model)")
    num_gpus: Int = Field(1, ge=1, le=4096, description="GPUs (must be 1 with gpu_fraction); more than the cluster "
                                                        "has is a 409")
    gpu_type: str | None = Field(None, pattern=r"^[A-Za-z0-9_.\-|]{1,200}$",
                                 description="required GPU type, e.g. V100 or 'A100-40GB|A100-80GB'")
    gpu_fraction: float | None = Field(None, ge=MIN_FRACTION, le=1.0, description="share of one GPU (num_gpus "
                                                                                  "must be 1)")
    iterations: float | None = Field(None, ge=MIN_ITERATIONS, le=1e15, description="training iterations, if known")
    env: dict[str, Arg] = Field(default_factory=dict, max_length=1024, json_schema_extra={
        "propertyNames": ENV_NAME_SCHEMA}, description="names not HORUS_* nor CUDA_VISIBLE_DEVICES; names and "
                                                         "values together at most 256 KiB")
    secret_env: dict[str, Arg] = Field(default_factory=dict, max_length=64,
                                       json_schema_extra={"propertyNames": ENV_NAME_SCHEMA},
                                       description="environment variables whose values no read returns (API "
                                                   "keys, passwords): only the agent running the job gets them; "
                                                   "a name also in env is a 409")
    cwd: str | None = Field(None, min_length=1, max_length=4096, description="working directory on the machine")
    name: str | None = Field(None, max_length=200)
    idempotency_key: str | None = Field(None, min_length=1, max_length=200,
                                        description="a retry with the same key returns the first job")
    queue: str | None = Field(None, pattern=TENANT_NAME, description="the tenant queue (GET /v1/queues; default: the "
                              "default queue); an unknown queue is a 409")
    priority: str | None = Field(None, pattern=TENANT_NAME, description="the priority class (GET "
                                 "/v1/priority-classes; default: the default class); an unknown class is a 409")

    @field_validator("command")
    @classmethod
    def _args(cls, value: list[str]) -> list[str]:
        if not value[0]:
            raise ValueError("the program (first element) must not be empty")
        if any(len(a) > MAX_ARG_CHARS or "\x00" in a for a in value):
            raise ValueError(f"arguments must be at most {MAX_ARG_CHARS} characters without NUL bytes")
        if sum(map(len, value)) > MAX_COMMAND_CHARS:
            raise ValueError(f"the arguments together must be at most {MAX_COMMAND_CHARS} characters")
        return value

    @field_validator("env", "secret_env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        import re

        for key, val in value.items():
            if not re.match(ENV_NAME_PATTERN, key):
                raise ValueError(f"environment variable name {key[:40]!r} is not a valid name")
            if key.startswith("HORUS_") or key == "CUDA_VISIBLE_DEVICES":
                raise ValueError(f"{key} is set by Horus")
            if len(val) > MAX_ARG_CHARS or "\x00" in val:
                raise ValueError(f"value of {key} must be at most {MAX_ARG_CHARS} characters without NUL bytes")
        if sum(len(k) + len(v) for k, v in value.items()) > MAX_ENV_CHARS:
            raise ValueError(f"names and values together must be at most {MAX_ENV_CHARS} characters")
        return value

    @field_validator("iterations", "gpu_fraction")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @model_validator(mode="after")
    def _fraction_single(self) -> JobSubmit:
        if self.gpu_fraction is not None and self.num_gpus != 1:
            raise ValueError("gpu_fraction needs num_gpus = 1")
        return self

    def clash(self) -> str | None:
        """A name in both env and secret_env (the API answers 409: JSON Schema cannot state it)."""
        both = sorted(set(self.env) & set(self.secret_env))
        return f"{both[0]} is in both env and secret_env" if both else None


class GPUDescription(_Strict):
    index: Int = Field(ge=0, le=1023)
    uuid: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    memory_mib: Int = Field(ge=1, le=16 * 1024 * 1024)
    type: str | None = Field(None, max_length=200, description="Horus GPU type (fake GPUs, or a declared type)")
    fake: bool = False


class AgentRegister(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    hostname: str = Field(min_length=1, max_length=255)
    gpus: list[GPUDescription] = Field(max_length=1024)
    reports: list[AttemptReport] = Field(default_factory=list, max_length=100_000,
                                         description="how the agent's attempts stand (after a restart or an outage)")

    def clash(self) -> str | None:
        """A GPU index described twice (the API answers 409: JSON Schema cannot state that indices are distinct)."""
        seen: set[int] = set()
        for gpu in self.gpus:
            if gpu.index in seen:
                return f"gpus: GPU index {gpu.index} is described twice"
            seen.add(gpu.index)
        return None


class AttemptReport(_Strict):
    job_id: str = Field(pattern=r"^[0-9]{1,18}$")
    attempt: Int = Field(ge=1, le=1_000_000)
    status: Literal["running", "exited"]
    iterations: float | None = Field(None, ge=0.0, le=1e18)
    rate: float | None = Field(None, ge=0.0, le=1e12)
    exit_code: Annotated[int, Field(ge=-255, le=255), BeforeValidator(_integral)] | None = None
    oom: bool = False
    fenced: bool = Field(False, description="the attempt's wrapper stopped it: its agent's lease expired")
    gpu_mem_mib: float | None = Field(None, ge=0.0)
    log_tail: str | None = Field(None, max_length=MAX_LOG_TAIL_CHARS,
                                 description="the end of the attempt's log, with an exit report")


class GPUTelemetry(_Strict):
    index: Int = Field(ge=0, le=1023)
    util: float | None = Field(None, ge=0.0, le=1.0)
    mem_mib: float | None = Field(None, ge=0.0)


class AgentJoin(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="the agent's name")


AgentRegister.model_rebuild()  # its reports are defined below it


class Heartbeat(_Strict):
    reports: list[AttemptReport] = Field(default_factory=list, max_length=100_000)
    gpus: list[GPUTelemetry] = Field(default_factory=list, max_length=1024)


class JobProgress(_Strict):
    attempt: Int = Field(ge=1, le=1_000_000)
    iteration: float = Field(ge=0.0, le=1e18)


Gpus = Annotated[float, Field(ge=QUOTA_GPUS.low, le=QUOTA_GPUS.high)]


class QueueBody(_Strict):
    """A queue (tenant): its guaranteed GPUs, how many more it may borrow while others leave theirs idle, its
    fair-share weight, and the user tokens that may submit into it (docs/service.md, Queues)."""

    guaranteed: Gpus | dict[Annotated[str, Field(pattern=GPU_TYPE_KEY)], Gpus] = Field(
        0.0, description="GPUs of any type, or {GPU type or '*': GPUs}", json_schema_extra={"anyOf": [
            {"type": "number", "minimum": QUOTA_GPUS.low, "maximum": QUOTA_GPUS.high},
            {"type": "object", "minProperties": 1, "maxProperties": 64, "propertyNames": {"pattern": GPU_TYPE_KEY},
             "additionalProperties": {"type": "number", "minimum": QUOTA_GPUS.low, "maximum": QUOTA_GPUS.high}}]})
    borrow_limit: Gpus | None = Field(None, description="GPUs beyond the guarantee (null: no limit but the cluster)")
    weight: float = Field(1.0, ge=WEIGHT.low, le=WEIGHT.high, description="fair-share weight among borrowers")
    users: list[Annotated[str, Field(pattern=USER_NAME)]] = Field(
        default_factory=list, max_length=MAX_USERS, json_schema_extra={"uniqueItems": True},
        description="user-token names that may submit into the queue (empty: every user; admins always may)")

    @field_validator("guaranteed")
    @classmethod
    def _types(cls, value: float | dict[str, float]) -> float | dict[str, float]:
        if isinstance(value, dict) and not 1 <= len(value) <= 64:
            raise ValueError("expected 1 to 64 GPU types")
        return value

    @field_validator("users")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for name in value:
            if name in seen:
                raise ValueError(f"duplicate user {name!r}")
            seen.add(name)
        return value


class PriorityClassBody(_Strict):
    """A job priority class: larger values are admitted first; a job of a higher class may preempt preemptible
    jobs of lower classes in its own queue, and only preemptible jobs are reclaimed."""

    value: Int = Field(0, ge=int(PRIORITY_VALUE.low), le=int(PRIORITY_VALUE.high))
    preemptible: bool = True


SECRET_SHOWN_AS = "(secret)"


def redacted_env(row: Any) -> dict[str, str]:
    """The job's environment as reads show it: values of its secret names replaced (only the agent that runs an
    attempt receives them)."""
    secret = set(getattr(row, "secret_keys", ()) or ())
    return {k: SECRET_SHOWN_AS if k in secret else v for k, v in row.env.items()}


def job_view(row: Any, *, prediction: dict[str, float] | None = None,
             telemetry: tuple[float, float] | None = None,
             events: list[dict[str, Any]] | None = None, waiting: dict[str, object] | None = None,
             hide_env: bool = False, tenant: tuple[str | None, str | None] | None = None,
             observation: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON form of a stored job; ``telemetry`` (iterations done, observed rate) of a running one,
    ``waiting`` (why it waits: code, message, retryable) of a queued one; ``tenant``: its queue and priority class
    as the service resolves them (default: the stored names, None for the defaults); ``prediction``: corrected online,
with the uncorrected one and the factors; ``observation``: what telemetry saw of its solo run. With ``events``, ``log_tail`` and
    ``log_tail_attempt`` are the end of the log of the last attempt that exited (taken out of the events)."""
    view = {
        "id": row.job_id, "name": row.name, "state": row.state, "attempt": row.attempt,
        "model": row.model or None, "batch_size": row.batch_size, "num_gpus": row.num_gpus,
        "gpu_type": row.gpu_type, "gpu_fraction": row.gpu_fraction, "iterations": row.iterations,
        "command": row.command, "env": redacted_env(row), "idempotency_key": row.idempotency_key, "owner": row.owner,
        "placement": [{"agent": a, "gpu": i} for a, i in row.placement],
        "submitted": row.submitted, "queued_since": row.queued_since, "started": row.started,
        "first_started": row.first_started, "ended": row.ended,
        "attained_gpu_s": row.attained_gpu_s, "iterations_done": row.iterations_done,
        "oom_failures": row.oom_failures, "preemptions": row.preemptions, "lost_runs": row.lost_runs,
        "exit_code": row.exit_code, "reason": row.reason,
        "queue": (tenant or (row.queue, row.priority))[0], "priority": (tenant or (row.queue, row.priority))[1],
        "input_size": row.input_size, "precision": row.precision, "optimizer": row.optimizer,
    }
    if hide_env:  # anonymous readers (--open-reads) see the names, never the values
        view["env"] = dict.fromkeys(row.env, "(hidden)")
    if prediction is not None:
        view["predicted"] = prediction
    if observation is not None:
        view["observation"] = observation
    if telemetry is not None:
        view["iterations_done"], view["observed_rate"] = telemetry
    if events is not None:
        view["events"] = [{k: v for k, v in e.items() if k != "log_tail"} for e in events]
        last = next((e for e in reversed(events) if e.get("log_tail")), None)
        view["log_tail"] = last["log_tail"] if last else None
        view["log_tail_attempt"] = last["attempt"] if last else None
    if waiting is not None:
        view["waiting"] = waiting
    return view
