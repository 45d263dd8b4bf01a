"""The `measured` truth model on the hand-written SYNTHETIC fixture (tests/fixtures/coloc_synthetic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus.cluster import GPUType
from horus.colocation.truth_measured import MeasuredTruth
from horus.errors import HorusInputError
from horus.truth.base import TRUTH_MODELS

FIXTURE = Path(__file__).parent / "fixtures" / "coloc_synthetic"
GPU = GPUType("h100", 81559, speed=2.0)


@pytest.fixture(scope="module")
def truth() -> MeasuredTruth:
    return TRUTH_MODELS.create("measured", solo_path=FIXTURE / "solo.csv", coloc_path=FIXTURE / "colocation.csv",
                               measured_speed=2.0)  # type: ignore[return-value]


def test_solo_from_measurements_scaled_by_speed(truth: MeasuredTruth) -> None:
    s = truth.solo("syn_c/b16", GPU)
    assert (s.util, s.mem_mib, s.iter_time_s) == (0.70, 4000, pytest.approx(0.12))
    assert truth.solo("syn_c/b16", GPUType("v100", 16160, 1.0)).iter_time_s == pytest.approx(0.24)
    assert "syn_g/b8" not in truth.job_types()  # OOM solo row is not a measurement
    with pytest.raises(HorusInputError, match="syn_g/b8"):
        truth.solo("syn_g/b8", GPU)


def test_measured_sets_returned_in_caller_order(truth: MeasuredTruth) -> None:
    assert truth.colocated_throughput(["syn_d/b32", "syn_b/b8"], GPU) == [0.66, 0.70]
    assert truth.colocated_throughput(["syn_b/b8", "syn_e/b4"], GPU) == pytest.approx([0.92, 0.92])  # 2 repeats
    assert truth.colocated_throughput(["syn_a/b8"], GPU) == [1.0]


def test_unmeasured_sets_use_fitted_curve(truth: MeasuredTruth) -> None:
    light = truth.colocated_throughput(["syn_a/b8", "syn_a/b8"], GPU)  # summed util 0.6, never measured
    heavy = truth.colocated_throughput(["syn_f/b64", "syn_f/b64"], GPU)  # 2.0
    assert light[0] == light[1] and 0.0 < heavy[0] < light[0] <= 1.0
    oom_set = truth.colocated_throughput(["syn_a/b8", "syn_d/b32"], GPU)  # measured only as OOM -> fitted
    assert oom_set[0] == oom_set[1]


def test_describe_reports_fit_and_heldout_error(truth: MeasuredTruth) -> None:
    info = truth.describe()
    assert info["name"] == "measured" and info["n_measured_sets"] == 12 and info["n_job_types"] == 6
    assert info["fit"]["knee"] > 0 and 0.0 <= info["heldout_mae_normalized_throughput"] < 0.5
    assert len(info["solo_sha256"]) == 64


def test_solo_only_truth_refuses_unmeasured_sets() -> None:
    truth = MeasuredTruth(FIXTURE / "solo.csv")
    with pytest.raises(HorusInputError, match="not measured"):
        truth.colocated_throughput(["syn_a/b8", "syn_b/b8"], GPU)


def test_a_mixed_precision_set_is_not_a_one_job_set(tmp_path: Path) -> None:
    """Filtering by precision keeps or drops whole sets (audit: a fp32+AMP pair became a one-job 'set')."""
    lines = (FIXTURE / "colocation.csv").read_text().splitlines()
    mixed = [lines[0], *(line.replace(",8,fp32,", ",8,amp,", 1) if i == 2 else line
                         for i, line in enumerate(lines[1:], start=1))]  # syn_b in the first pair runs AMP
    path = tmp_path / "colocation.csv"
    path.write_text("\n".join(mixed) + "\n")
    truth = MeasuredTruth(FIXTURE / "solo.csv", path, measured_speed=2.0)
    assert ("syn_a/b8",) not in truth._sets and ("syn_b/b8",) not in truth._sets
    assert ("syn_a/b8", "syn_b/b8") not in truth._sets  # the mixed pair is not a fp32 measurement
    assert truth.describe()["n_measured_sets"] == 11
