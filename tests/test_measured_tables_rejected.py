"""``--truth measured`` refuses tables that would make a wrong world, naming the file, line and column.

Each case damages one thing in the synthetic fixture (``tests/fixtures/coloc_synthetic``): a co-located "set"
of one job, a set whose rows disagree with its ``set_size``, a member index given twice, a measured member
without a finite normalized throughput, a file without the ``precision`` column, a set member never measured
alone, a solo row without a finite utilization (was a LinAlgError deep in the curve fit).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from horus.colocation.truth_measured import MeasuredTruth
from horus.errors import HorusInputError

FIXTURE = Path(__file__).parent / "fixtures" / "coloc_synthetic"
PAIR = "syn_a-b8-fp32+syn_b-b8-fp32"


def _one_member(c: pd.DataFrame) -> pd.DataFrame:
    keep = ~((c["set_id"] == PAIR) & (c["member"] == 1))
    c.loc[c["set_id"] == PAIR, "set_size"] = 1
    return c[keep]


def _size_disagrees(c: pd.DataFrame) -> pd.DataFrame:
    c.loc[c["set_id"] == PAIR, "set_size"] = 3
    return c


def _member_twice(c: pd.DataFrame) -> pd.DataFrame:
    c.loc[c["set_id"] == PAIR, "member"] = 0
    return c


def _nan_throughput(c: pd.DataFrame) -> pd.DataFrame:
    c.loc[c["set_id"] == PAIR, "normalized_throughput"] = float("nan")
    return c


def _no_precision(c: pd.DataFrame) -> pd.DataFrame:
    return c.drop(columns=["precision"])


def _unmeasured_model(c: pd.DataFrame) -> pd.DataFrame:
    c.loc[(c["set_id"] == PAIR) & (c["member"] == 1), "model"] = "syn_zz"
    return c


COLOC_CASES: dict[str, tuple[Callable[[pd.DataFrame], pd.DataFrame], str]] = {
    "one-member-set": (_one_member, r"column 'set_size': a co-located set has at least 2 jobs"),
    "size-disagrees": (_size_disagrees, r"column 'set_size': set .* has 2 member rows .* set_size says 3"),
    "member-twice": (_member_twice, r"column 'member': member 0 appears twice"),
    "nan-throughput": (_nan_throughput, r"column 'normalized_throughput': a measured \(status ok\) member needs"),
    "no-precision": (_no_precision, r"precision"),
    "unmeasured-model": (_unmeasured_model, r"syn_zz/b8 has no ok fp32 solo measurement"),
}


@pytest.mark.parametrize("case", list(COLOC_CASES))
def test_damaged_colocation_table_is_refused(tmp_path: Path, case: str) -> None:
    damage, expected = COLOC_CASES[case]
    coloc = damage(pd.read_csv(FIXTURE / "colocation.csv"))
    path = tmp_path / "colocation.csv"
    coloc.to_csv(path, index=False)
    with pytest.raises(HorusInputError, match=expected) as err:
        MeasuredTruth(FIXTURE / "solo.csv", path)
    assert str(path) in str(err.value)


def test_solo_row_without_finite_utilization_is_refused(tmp_path: Path) -> None:
    solo = pd.read_csv(FIXTURE / "solo.csv")
    solo.loc[solo["model"] == "syn_b", "gpu_util_mean"] = float("nan")
    path = tmp_path / "solo.csv"
    solo.to_csv(path, index=False)
    with pytest.raises(HorusInputError, match=r"syn_b batch 8 \(fp32\): no finite gpu_util_mean"):
        MeasuredTruth(path, FIXTURE / "colocation.csv")


def test_the_fixture_itself_is_accepted() -> None:
    """The cases above damage a table that loads: the refusals are theirs, not the fixture's."""
    truth = MeasuredTruth(FIXTURE / "solo.csv", FIXTURE / "colocation.csv")
    assert truth.describe()
