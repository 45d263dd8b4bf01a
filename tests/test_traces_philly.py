"""Philly loader: fixtures, malformed rows, and the shared 82k-job trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus.errors import HorusInputError
from horus.traces import load_trace

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def test_good_file() -> None:
    trace = load_trace(FIXTURES / "good_philly.csv", "philly")
    assert [j.job_id for j in trace.jobs] == ["philly-3", "philly-4", "philly-2"]
    assert [j.submit_time for j in trace.jobs] == [0.0, 33.0, 48 * 60 + 52.0]
    assert trace.jobs[0].num_gpus == 8 and trace.jobs[0].duration_s == 2951.0
    assert all(j.model is None and j.iterations is None for j in trace.jobs)


def test_bad_timestamp_fixture() -> None:
    with pytest.raises(HorusInputError, match=r"bad_philly_timestamp.csv: line 3, column 'timestamp': "
                                              r"expected a time like .*'yesterday'"):
        load_trace(FIXTURES / "bad_philly_timestamp.csv", "philly")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("2017-10-09 07:01:55,-5,1,5,x\n",
         "line 2, column 'duration': expected a number in [0.001, 315,576,000] s, got '-5'"),
        ("2017-10-09 07:01:55,5,0,5,x\n",
         "line 2, column 'num_gpus': expected an integer in [1, 200,000] GPUs, got '0'"),
        ("2017-10-09 07:01:55,5,two,5,x\n",
         "line 2, column 'num_gpus': expected an integer in [1, 200,000] GPUs, got 'two'"),
    ],
    ids=["negative-duration", "zero-gpus", "non-numeric-gpus"],
)
def test_malformed_rows(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "p.csv"
    path.write_text(HEADER + body)
    with pytest.raises(HorusInputError, match=str(path)) as err:
        load_trace(path, "philly")
    assert expected in str(err.value)


def test_missing_column(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("timestamp,num_gpus\n2017-10-09 07:01:55,1\n")
    with pytest.raises(HorusInputError, match=r"line 1: missing column 'duration'"):
        load_trace(path, "philly")


def test_shared_philly_trace(shared_data: Path) -> None:
    path = shared_data / "traces" / "philly" / "philly_jobs.csv"
    if not path.is_file():
        pytest.skip(f"Philly trace not found at {path}")
    trace = load_trace(path, "philly")
    data_rows = sum(1 for line in path.read_text().splitlines()[1:] if line.strip())
    assert len(trace.jobs) == data_rows == 82_247  # the file's 82,248 non-empty lines include the header
    times = [j.submit_time for j in trace.jobs]
    assert times[0] == 0.0 and times == sorted(times)
    assert min(j.num_gpus for j in trace.jobs) >= 1


@pytest.mark.parametrize("stamp", ["now", "today", "2017-10-09 07:01:60", "２０１７-10-09 07:01:55",
                                   "2017-10-09T07:01:55", "2017-10-09 07:01"])
def test_timestamps_pandas_alone_would_take_are_refused(tmp_path: Path, stamp: str) -> None:
    """"now" or "today" would make the trace depend on the wall clock; a leap second or full-width digits would
    be read as another time. Only the exact ASCII layout is a Philly time."""
    path = tmp_path / "p.csv"
    path.write_text(HEADER + f"2017-10-09 07:01:55,5,1,5,x\n{stamp},5,1,5,x\n", encoding="utf-8")
    with pytest.raises(HorusInputError, match=r"line 3, column 'timestamp': expected a time like"):
        load_trace(path, "philly")
