"""NVML access and a background sampler thread (GPU utilization, memory used, SM clock, power).

Uses nvidia-ml-py (module ``pynvml``). :func:`open_nvml` turns a missing library or driver into a
one-line :class:`~horus.errors.HorusInputError` so the command exits 2 instead of tracing back.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from horus.errors import HorusInputError

MIN_PERIOD_S = 0.1
MAX_PERIOD_S = 0.2


@dataclass(frozen=True)
class NvmlSample:
    t: float  # time.time() of the sample
    util_pct: float  # GPU utilization, percent (NVML: fraction of time a kernel ran in the last period)
    mem_used_mib: float  # device memory used by all processes, MiB
    sm_clock_mhz: float
    power_w: float


Reader = Callable[[], NvmlSample]


class NvmlDevice:
    """One NVML device handle; call :meth:`read` for a sample, :meth:`close` when done."""

    def __init__(self, index: int = 0) -> None:
        import pynvml

        self._nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)

    def name(self) -> str:
        name = self._nvml.nvmlDeviceGetName(self.handle)
        return name.decode() if isinstance(name, bytes) else str(name)

    def driver_version(self) -> str:
        version = self._nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)

    def memory_total_mib(self) -> float:
        return self._nvml.nvmlDeviceGetMemoryInfo(self.handle).total / 2**20

    def read(self) -> NvmlSample:
        nvml = self._nvml
        util = nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu
        mem = nvml.nvmlDeviceGetMemoryInfo(self.handle).used / 2**20
        clock = nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM)
        power = nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
        return NvmlSample(time.time(), float(util), float(mem), float(clock), float(power))

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down a library that may already be gone
            pass


def open_nvml(index: int = 0) -> NvmlDevice:
    """Initialise NVML and open device ``index``; raise HorusInputError (one line) when impossible."""
    hint = "use --no-nvml (and --device cpu for a CPU test run) to run without it"
    try:
        import pynvml
    except ImportError:
        raise HorusInputError("nvml", f"nvidia-ml-py (module pynvml) is not installed; {hint}") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        raise HorusInputError("nvml", f"NVML library not found (no NVIDIA driver on this machine?); {hint}") from None
    except pynvml.NVMLError as exc:
        raise HorusInputError("nvml", f"NVML initialisation failed ({exc}); {hint}") from None
    try:
        return NvmlDevice(index)
    except pynvml.NVMLError as exc:
        raise HorusInputError("nvml", f"cannot open GPU {index} ({exc}); {hint}") from None


@dataclass
class NvmlSampler:
    """Calls ``read`` every ``period_s`` seconds in a daemon thread until :meth:`stop`.

    Use as a context manager. A failing read is counted in ``errors`` and sampling goes on. Reads are
    scheduled on ``clock`` (drift-free: a slow read shortens the next pause); between reads the thread
    calls ``wait(stop_event, seconds)``, by default ``stop_event.wait(seconds)``. Tests inject both to
    drive the thread without real time.
    """

    read: Reader
    period_s: float = 0.1
    samples: list[NvmlSample] = field(default_factory=list)
    errors: int = 0
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    wait: Callable[[threading.Event, float], object] = field(default=threading.Event.wait, repr=False)

    def __post_init__(self) -> None:
        if not MIN_PERIOD_S <= self.period_s <= MAX_PERIOD_S:
            raise HorusInputError("--nvml-period", f"expected {MIN_PERIOD_S}-{MAX_PERIOD_S} s, got {self.period_s}")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="horus-nvml-sampler", daemon=True)

    def _run(self) -> None:
        next_at = self.clock()
        while not self._stop.is_set():
            try:
                self.samples.append(self.read())
            except Exception:  # noqa: BLE001 - a transient NVML error must not kill the measurement
                self.errors += 1
            next_at += self.period_s
            self.wait(self._stop, max(0.0, next_at - self.clock()))

    def start(self) -> NvmlSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5 * MAX_PERIOD_S + 1.0)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> NvmlSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class NvmlSummary:
    util_mean: float
    util_p50: float
    mem_peak_mib: float
    sm_clock_mean: float
    power_mean: float
    n_samples: int


def summarize(samples: list[NvmlSample], start: float, end: float) -> NvmlSummary:
    """Statistics of the samples taken in ``[start, end]`` (NaN when there are none)."""
    inside = [s for s in samples if start <= s.t <= end]
    if not inside:
        nan = math.nan
        return NvmlSummary(nan, nan, nan, nan, nan, 0)
    utils = sorted(s.util_pct for s in inside)
    n = len(utils)
    median = utils[n // 2] if n % 2 else 0.5 * (utils[n // 2 - 1] + utils[n // 2])
    return NvmlSummary(
        util_mean=sum(utils) / n,
        util_p50=median,
        mem_peak_mib=max(s.mem_used_mib for s in inside),
        sm_clock_mean=sum(s.sm_clock_mhz for s in inside) / n,
        power_mean=sum(s.power_w for s in inside) / n,
        n_samples=n,
    )
