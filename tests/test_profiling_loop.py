"""The training loop on CPU: schema-valid rows, OOM and missing-dependency paths (in-process)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")

from horus.profiling.campaign import JobConfig  # noqa: E402
from horus.profiling.loop import LoopSettings, profile_job  # noqa: E402
from horus.profiling.schema import PROFILE_COLUMNS  # noqa: E402

FAST = LoopSettings(device="cpu", use_nvml=False, warmup_iters=2, warmup_s=0.0, window_s=0.3)


def test_cpu_loop_gives_schema_valid_ok_row() -> None:
    result = profile_job(JobConfig("_test_mlp", 4), FAST)
    row = result.row
    assert set(row) == set(PROFILE_COLUMNS)
    assert row["status"] == "ok" and row["error"] == ""
    assert row["config_id"] == "_test_mlp-b4-fp32-r0" and row["family"] == "mlp" and row["input_size"] == 32
    assert row["n_iters"] >= 1 and row["window_s"] >= FAST.window_s
    assert row["throughput_samples_s"] == pytest.approx(row["n_iters"] * 4 / row["window_s"])
    assert row["iter_time_s_mean"] * row["n_iters"] == pytest.approx(row["window_s"], rel=0.05)
    for col in ("gpu_util_mean", "mem_used_mib_peak", "power_w_mean", "torch_max_reserved_mib"):
        assert math.isnan(row[col]), col  # no NVML, no CUDA: NaN, never a made-up number
    assert result.window_end - result.window_start == pytest.approx(row["window_s"])


def test_amp_on_cpu_runs() -> None:
    row = profile_job(JobConfig("_test_mlp", 2, "amp"), FAST, repeat=1).row
    assert row["status"] == "ok" and row["precision"] == "amp" and row["config_id"].endswith("-amp-r1")


def test_oom_in_forward_gives_oom_row() -> None:
    row = profile_job(JobConfig("_test_oom", 4), FAST).row
    assert row["status"] == "oom"
    assert "out of memory" in row["error"].lower()
    assert row["n_iters"] == 0 and math.isnan(row["throughput_samples_s"])


def test_missing_package_gives_error_row_naming_it() -> None:
    row = profile_job(JobConfig("_test_missing_dep", 4), FAST).row
    assert row["status"] == "error"
    assert "horus_module_that_does_not_exist" in row["error"] and "not installed" in row["error"]


def test_unknown_model_gives_error_row() -> None:
    row = profile_job(JobConfig("no_such_model_xyz", 4), FAST).row
    assert row["status"] == "error" and "no_such_model_xyz" in row["error"]


def test_zoo_resnet18_at_tiny_input() -> None:
    zoo = pytest.importorskip("horus.zoo")
    if "resnet18" not in zoo.ZOO:
        pytest.skip("zoo has no resnet18")
    row = profile_job(JobConfig("resnet18", 2, input_size=32), FAST).row
    assert row["status"] == "ok", row["error"]
    assert row["family"] == zoo.ZOO["resnet18"].family and row["input_size"] == 32
