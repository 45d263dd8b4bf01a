"""``horus colocation analyze`` and ``horus profile plan-pairs``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from horus.cli import main
from horus.colocation.plan import plan_sets

FIXTURE = Path(__file__).parent / "fixtures" / "coloc_synthetic"


def test_analyze_fixture_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["colocation", "analyze", str(FIXTURE / "colocation.csv"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n_sets"] == 12 and report["sets_by_size"] == {"2": 11, "3": 1}
    assert report["spearman"] > 0.9  # the fixture's slowdown rises with summed util by construction


def test_analyze_needs_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["colocation", "analyze"]) == 2
    assert "DATA" in capsys.readouterr().err


def test_analyze_gavel_text_and_shape(gavel_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["colocation", "analyze", "--gavel", str(gavel_path)]) == 0
    assert "Spearman" in capsys.readouterr().out
    assert main(["colocation", "analyze", str(FIXTURE / "colocation.csv"), "--gavel", str(gavel_path), "--json"]) == 0
    shape = json.loads(capsys.readouterr().out)["shape"]
    assert 0.0 <= shape["ks_statistic"] <= 1.0 and shape["gavel"]["n"] > shape["ours"]["n"]


def _solo_table(n: int = 12, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"model": [f"m{i}" for i in range(n)], "batch_size": 8, "precision": "fp32", "status": "ok",
                         "gpu_util_mean": rng.uniform(10, 100, n), "torch_max_reserved_mib": rng.uniform(500, 40000, n)})


def test_plan_spans_strata_and_respects_memory() -> None:
    solo = _solo_table()
    doc = plan_sets(solo, capacity_mib=80000, n_pairs=30, n_triples=6, seed=1)
    sets = [s["set"].split(",") for s in doc["colocate"]]
    assert sum(len(s) == 2 for s in sets) == 30 and sum(len(s) == 3 for s in sets) == 6
    assert len({tuple(s) for s in sets}) == len(sets)
    info = solo.set_index("model")
    util = [sum(info.loc[m.split(":")[0], "gpu_util_mean"] for m in s) / 100 for s in sets if len(s) == 2]
    mem = [sum(info.loc[m.split(":")[0], "torch_max_reserved_mib"] for m in s) / 80000 for s in sets]
    assert min(util) < 0.6 and max(util) > 1.4 and max(mem) <= 1.2 and min(mem) < 0.35
    assert plan_sets(solo, 80000, 30, 6, seed=1) == doc


def test_plan_pairs_command(tmp_path: Path) -> None:
    solo = tmp_path / "profiles.csv"
    _solo_table().to_csv(solo, index=False)
    out = tmp_path / "pairs.json"
    assert main(["profile", "plan-pairs", "--solo", str(solo), "--pairs", "5", "--triples", "1",
                 "--capacity-mib", "80000", "--out", str(out)]) == 0
    assert len(json.loads(out.read_text())["colocate"]) == 6
    assert main(["profile", "plan-pairs", "--solo", str(solo), "--out", str(out)]) == 2  # no capacity, no manifest
