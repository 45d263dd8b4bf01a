"""Co-located runs: two CPU worker processes released together by the file barrier."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus.cli import main
from horus.profiling.colocation_schema import COLOC_COLUMNS
from horus.profiling.runner import _mark_set

pytest.importorskip("torch")

SOLO_CSV = "model,batch_size,precision,status,throughput_samples_s,gpu_util_mean,torch_max_reserved_mib\n" \
           "_test_mlp,2,fp32,ok,100.0,40,10\n_test_mlp,2,fp32,ok,300.0,60,30\n_test_mlp,3,fp32,ok,50.0,,\n"


def test_two_workers_run_concurrently_and_write_rows(tmp_path: Path) -> None:
    import pandas as pd

    solo = tmp_path / "solo.csv"
    solo.write_text(SOLO_CSV)
    out = tmp_path / "coloc"
    code = main(["profile", "colocate", "--set", "_test_mlp:2,_test_mlp:3", "--solo", str(solo), "--device", "cpu",
                 "--no-nvml", "--warmup-iters", "1", "--warmup-s", "0", "--window-s", "0.5", "--out", str(out)])
    assert code == 0
    frame = pd.read_csv(out / "colocation.csv")
    assert list(frame.columns) == list(COLOC_COLUMNS)
    assert frame["status"].tolist() == ["ok", "ok"], frame["error"].tolist()
    assert frame["member"].tolist() == [0, 1] and frame["set_size"].tolist() == [2, 2]
    assert frame["set_id"].nunique() == 1
    assert (frame["n_iters"] > 0).all()
    # solo reference = mean of the ok solo rows of the same configuration
    assert frame["solo_throughput_samples_s"].tolist() == [200.0, 50.0]
    assert frame["solo_util_mean"].iloc[0] == 50.0
    ratio = frame["throughput_samples_s"] / frame["solo_throughput_samples_s"]
    assert frame["normalized_throughput"].tolist() == pytest.approx(ratio.tolist())
    assert not any((out / "_barriers").iterdir())  # barrier files cleaned up


def test_partner_failure_marks_the_whole_set() -> None:
    base = {"error": "", "_window": (1.0, 2.0)}
    rows = [{**base, "model": "a", "status": "ok"}, {**base, "model": "b", "status": "oom", "error": "OOM"},
            {**base, "model": "c", "status": "error", "error": "aborted: a partner failed before the window"}]
    _mark_set(rows, [None, None, None], None, 0.0)
    assert [r["status"] for r in rows] == ["partner_failed", "oom", "partner_failed"]
    assert "b:oom" in rows[0]["error"] and "_window" not in rows[0]
