"""The measured training loop: forward, backward, optimizer step on synthetic on-device data.

:func:`profile_job` returns one row of the solo schema (``horus.profiling.schema.PROFILE_COLUMNS``)
plus the window's start and end times. Failures never raise: an out-of-memory error gives status
``oom``, anything else status ``error`` with a one-line message.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from horus.errors import HorusInputError
from horus.profiling.barrier import ABORT, FileBarrier
from horus.profiling.campaign import JobConfig
from horus.profiling.models import TrainableModel, resolve_model
from horus.profiling.nvml import NvmlSampler, open_nvml, summarize
from horus.profiling.schema import PROFILE_COLUMNS

OPTIMIZERS: tuple[str, ...] = ("adam", "sgd")
MIB = 2**20
BARRIER_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class LoopSettings:
    device: str = "cuda"  # cuda or cpu
    use_nvml: bool = True
    nvml_period_s: float = 0.1
    warmup_iters: int = 5
    warmup_s: float = 2.0
    window_s: float = 5.0
    optimizer: str = "adam"
    lr: float = 1e-4
    seed: int = 0
    gpu_index: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LoopSettings:
        return cls(**raw)


@dataclass
class WorkerResult:
    row: dict[str, Any]
    window_start: float = math.nan
    window_end: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return {"row": self.row, "window_start": self.window_start, "window_end": self.window_end}


def empty_row(job: JobConfig, repeat: int, gpu_name: str, family: str = "", input_size: float = math.nan) -> dict:
    """A schema row with identifiers filled in and every measurement NaN."""
    row: dict[str, Any] = {col: math.nan for col in PROFILE_COLUMNS}
    row.update(config_id=job.config_id(repeat), model=job.model, family=family, batch_size=job.batch,
               input_size=input_size if job.input_size is None else job.input_size, precision=job.precision,
               repeat=repeat, gpu_name=gpu_name, status="ok", error="", n_iters=0)
    return row


def _is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:300]


class Trainer:
    """Builds the model, optimizer and one synthetic batch; :meth:`step` runs one training iteration."""

    def __init__(self, spec: TrainableModel, job: JobConfig, settings: LoopSettings, device: Any) -> None:
        import torch

        self.torch = torch
        self.spec = spec
        self.device = device
        self.input_size = job.input_size or spec.default_input_size
        torch.manual_seed(settings.seed)
        self.module = spec.build(self.input_size).to(device)
        self.module.train()
        params = [p for p in self.module.parameters() if p.requires_grad]
        if settings.optimizer == "adam":
            self.optimizer = torch.optim.Adam(params, lr=settings.lr)
        else:
            self.optimizer = torch.optim.SGD(params, lr=settings.lr, momentum=0.9)
        self.data = spec.example_input(job.batch, self.input_size, device)
        self.amp = job.precision == "amp"
        self.is_cuda = device.type == "cuda"
        self.amp_dtype = torch.float16 if self.is_cuda else torch.bfloat16
        self.scaler = torch.amp.GradScaler("cuda") if self.amp and self.is_cuda else None

    def step(self) -> None:
        torch = self.torch
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=self.device.type, dtype=self.amp_dtype, enabled=self.amp):
            output = self.spec.forward(self.module, self.data)
            loss = self.spec.loss_fn(output, self.data)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        if self.is_cuda:
            torch.cuda.synchronize(self.device)


def _warm_up(trainer: Trainer, settings: LoopSettings) -> None:
    started, iters = time.monotonic(), 0
    while iters < settings.warmup_iters or time.monotonic() - started < settings.warmup_s:
        trainer.step()
        iters += 1


def _wait_for_go(trainer: Trainer, barrier: FileBarrier, member: int) -> float | None:
    """Signal ready, keep training until the common start time; None when the launcher aborts."""
    barrier.signal_ready(member)
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while time.monotonic() < deadline:
        go = barrier.go_time()
        if go == ABORT:
            return None
        if isinstance(go, float):
            while time.time() < go:
                trainer.step()
            return go
        trainer.step()
    raise TimeoutError(f"no start signal from the launcher within {BARRIER_TIMEOUT_S:.0f} s")


def _measure(trainer: Trainer, window_s: float) -> tuple[float, float, list[float]]:
    start = time.time()
    end_at, durations, now = start + window_s, [], start
    while now < end_at:
        trainer.step()
        later = time.time()
        durations.append(later - now)
        now = later
    return start, now, durations


def _linger(trainer: Trainer, barrier: FileBarrier, member: int) -> None:
    """After the window: keep loading the GPU until every partner has measured (errors end it quietly)."""
    barrier.signal_done(member)
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    try:
        while not barrier.stopped() and time.monotonic() < deadline:
            trainer.step()
    except Exception:  # noqa: BLE001 - the measurement is already taken
        pass


def _device(settings: LoopSettings) -> Any:
    import torch

    if settings.device == "cuda":
        if not torch.cuda.is_available():
            raise HorusInputError("--device", f"CUDA is not available to torch {torch.__version__}; "
                                  "use --device cpu --no-nvml for a CPU test run")
        return torch.device("cuda", settings.gpu_index)
    torch.set_num_threads(1)  # CPU test runs: co-located workers should not fight over threads
    return torch.device("cpu")


def profile_job(job: JobConfig, settings: LoopSettings, repeat: int = 0,
                barrier: FileBarrier | None = None, member: int = 0) -> WorkerResult:
    """Train ``job`` for a warm-up then a measuring window; never raises for job failures."""
    import torch

    device = _device(settings)
    nvml = open_nvml(settings.gpu_index) if settings.use_nvml else None
    gpu_name = nvml.name() if nvml else (torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu")
    result = WorkerResult(empty_row(job, repeat, gpu_name))
    row = result.row
    sampler = NvmlSampler(nvml.read, settings.nvml_period_s).start() if nvml else None
    try:
        spec = resolve_model(job.model)
        row.update(family=spec.family, input_size=job.input_size or spec.default_input_size)
        trainer = Trainer(spec, job, settings, device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        _warm_up(trainer, settings)
        if barrier is not None and _wait_for_go(trainer, barrier, member) is None:
            row.update(status="error", error="aborted: a partner failed before the window")
            return result
        start, end, durations = _measure(trainer, settings.window_s)
        result.window_start, result.window_end = start, end
        row.update(n_iters=len(durations), window_s=end - start, iter_time_s_mean=statistics.fmean(durations),
                   iter_time_s_std=statistics.pstdev(durations),
                   throughput_samples_s=len(durations) * job.batch / (end - start))
        if device.type == "cuda":
            row.update(torch_max_allocated_mib=torch.cuda.max_memory_allocated(device) / MIB,
                       torch_max_reserved_mib=torch.cuda.max_memory_reserved(device) / MIB)
        if barrier is not None:
            _linger(trainer, barrier, member)
    except HorusInputError as exc:
        row.update(status="error", error=str(exc))
    except ImportError as exc:
        row.update(status="error", error=f"model {job.model!r} needs a package that is not installed "
                                         f"({exc.name or exc}); install it or skip this model")
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row, the campaign goes on
        row.update(status="oom" if _is_oom(exc) else "error", error=_one_line(exc))
    finally:
        if sampler is not None:
            sampler.stop()
        if barrier is not None:
            barrier.signal_done(member)
        if nvml is not None:
            nvml.close()
    if sampler is not None and row["status"] == "ok":
        stats = summarize(sampler.samples, result.window_start, result.window_end)
        row.update(gpu_util_mean=stats.util_mean, gpu_util_p50=stats.util_p50, mem_used_mib_peak=stats.mem_peak_mib,
                   sm_clock_mhz_mean=stats.sm_clock_mean, power_w_mean=stats.power_mean)
    return result
