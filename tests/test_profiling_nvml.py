"""NVML sampler thread and NVML error messages (no GPU needed: fake readers, patched pynvml)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from horus.errors import HorusInputError
from horus.profiling.nvml import NvmlSample, NvmlSampler, open_nvml, summarize


class FakeTime:
    """A clock that only moves when told, and a ``wait`` for the sampler that advances it instead of sleeping.

    After ``hold_after`` pauses the wait sets ``held`` and blocks on the sampler's stop event (bounded), so the
    thread is parked at a known sample count until the test stops it.
    """

    def __init__(self, hold_after: int) -> None:
        self.now = 1000.0
        self.pauses: list[float] = []
        self.hold_after = hold_after
        self.held = threading.Event()

    def clock(self) -> float:
        return self.now

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        self.pauses.append(seconds)
        self.now += seconds
        if len(self.pauses) >= self.hold_after:
            self.held.set()
            return stop.wait(10.0)
        return stop.is_set()


def _fake_reader(values: list[float], fake: FakeTime, read_s: float = 0.0):
    def read() -> NvmlSample:
        fake.now += read_s  # the read itself takes time on the fake clock
        util = values[len(calls) % len(values)]
        calls.append(util)
        return NvmlSample(fake.now, util, 100.0 + util, 1500.0, 200.0)

    calls: list[float] = []
    return read, calls


def _sampler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "horus-nvml-sampler" and t.is_alive()]


def test_sampler_collects_every_period_and_stops_cleanly() -> None:
    fake = FakeTime(hold_after=5)
    read, calls = _fake_reader([10.0, 30.0], fake, read_s=0.03)
    with NvmlSampler(read, 0.1, clock=fake.clock, wait=fake.wait) as sampler:
        assert fake.held.wait(10.0), f"sampler made only {len(fake.pauses)} of 5 pauses in 10 s"
        assert sampler.running
        assert [s.util_pct for s in sampler.samples] == [10.0, 30.0, 10.0, 30.0, 10.0]
        # drift-free schedule: a 30 ms read leaves a 70 ms pause, never a full period
        assert fake.pauses == pytest.approx([0.07] * 5)
        assert [b.t - a.t for a, b in zip(sampler.samples, sampler.samples[1:])] == pytest.approx([0.1] * 4)
    assert not sampler.running and not _sampler_threads()
    assert len(sampler.samples) == len(calls) == 5  # stopped while parked: no read after stop
    assert sampler.errors == 0


def test_sampler_never_waits_a_negative_time_after_a_slow_read() -> None:
    fake = FakeTime(hold_after=3)
    read, _ = _fake_reader([50.0], fake, read_s=0.25)  # slower than the period
    with NvmlSampler(read, 0.1, clock=fake.clock, wait=fake.wait) as sampler:
        assert fake.held.wait(10.0), "sampler did not pause 3 times in 10 s"
    assert fake.pauses == [0.0, 0.0, 0.0] and len(sampler.samples) == 3


def test_sampler_counts_failing_reads_and_goes_on() -> None:
    fake = FakeTime(hold_after=6)
    state = {"n": 0}

    def flaky() -> NvmlSample:
        state["n"] += 1
        if state["n"] % 2:
            raise RuntimeError("transient")
        return NvmlSample(fake.now, 50.0, 1.0, 1.0, 1.0)

    with NvmlSampler(flaky, 0.1, clock=fake.clock, wait=fake.wait) as sampler:
        assert fake.held.wait(10.0), "sampler stopped pausing after a failing read"
    assert state["n"] == 6 and sampler.errors == 3 and len(sampler.samples) == 3
    assert not _sampler_threads()


def test_sampler_default_clock_and_wait_keep_sampling_until_stop() -> None:
    """Without injection the thread samples on the real clock and pauses on its stop event."""
    read, _ = _fake_reader([1.0], FakeTime(hold_after=1))
    sampler = NvmlSampler(read, 0.2).start()
    deadline = time.monotonic() + 10.0
    while len(sampler.samples) < 2:  # a second sample proves the default wait returned and the loop went on
        assert sampler.running, "the sampler thread died after its first pause"
        assert time.monotonic() < deadline, f"{len(sampler.samples)} samples within 10 s"
        time.sleep(0.01)
    sampler.stop()
    assert not sampler.running and not _sampler_threads() and sampler.errors == 0


@pytest.mark.parametrize("period", [0.05, 0.5])
def test_sampler_rejects_period_outside_100_200_ms(period: float) -> None:
    with pytest.raises(HorusInputError, match="nvml-period"):
        NvmlSampler(lambda: None, period)  # type: ignore[arg-type, return-value]


def test_summarize_keeps_only_window_samples() -> None:
    samples = [NvmlSample(t, u, m, 1000.0, 100.0) for t, u, m in [(0.0, 99.0, 9e9), (1.0, 20.0, 10.0),
                                                                 (2.0, 40.0, 30.0), (3.0, 60.0, 20.0)]]
    stats = summarize(samples, 1.0, 3.0)
    assert stats.n_samples == 3 and stats.util_mean == pytest.approx(40.0) and stats.util_p50 == 40.0
    assert stats.mem_peak_mib == 30.0
    assert summarize(samples, 5.0, 6.0).n_samples == 0


def test_open_nvml_library_missing_is_one_line_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pynvml = pytest.importorskip("pynvml")

    def missing() -> None:
        raise pynvml.NVMLError_LibraryNotFound()

    monkeypatch.setattr(pynvml, "nvmlInit", missing)
    with pytest.raises(HorusInputError) as info:
        open_nvml()
    assert "NVML library not found" in str(info.value) and "--no-nvml" in str(info.value)
    assert "\n" not in str(info.value)


def test_open_nvml_without_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(HorusInputError, match="nvidia-ml-py"):
        open_nvml()
