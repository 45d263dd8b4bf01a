"""NVML sampler thread and NVML error messages (no GPU needed: fake readers, patched pynvml)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from horus.errors import HorusInputError
from horus.profiling.nvml import NvmlSample, NvmlSampler, open_nvml, summarize


def _fake_reader(values: list[float]):
    def read() -> NvmlSample:
        util = values[len(calls) % len(values)]
        calls.append(util)
        return NvmlSample(time.time(), util, 100.0 + util, 1500.0, 200.0)

    calls: list[float] = []
    return read, calls


def test_sampler_collects_and_stops_cleanly() -> None:
    read, calls = _fake_reader([10.0, 30.0])
    with NvmlSampler(read, 0.1) as sampler:
        time.sleep(0.45)
        assert sampler.running
    assert not sampler.running
    assert not any(t.name == "horus-nvml-sampler" and t.is_alive() for t in threading.enumerate())
    count = len(sampler.samples)
    assert 2 <= count <= 7
    time.sleep(0.25)
    assert len(sampler.samples) == count  # no sampling after stop


def test_sampler_counts_failing_reads_and_goes_on() -> None:
    state = {"n": 0}

    def flaky() -> NvmlSample:
        state["n"] += 1
        if state["n"] % 2:
            raise RuntimeError("transient")
        return NvmlSample(time.time(), 50.0, 1.0, 1.0, 1.0)

    with NvmlSampler(flaky, 0.1) as sampler:
        time.sleep(0.45)
    assert sampler.errors >= 1 and len(sampler.samples) >= 1


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
