"""The horus trace format: good input, and one test per kind of malformed input."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus.errors import HorusInputError
from horus.traces import load_trace
from horus.traces import horus_csv

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
HEADER = "job_id,submit_time,num_gpus,model,batch_size,duration_s\n"


def test_good_file_is_sorted_rebased_and_typed() -> None:
    trace = load_trace(FIXTURES / "good_horus.csv", "horus")
    assert [j.job_id for j in trace.jobs] == ["a", "c", "b"]
    assert [j.submit_time for j in trace.jobs] == [0.0, 30.0, 60.0]
    assert trace.time_offset_s == 100.0
    a, c, b = trace.jobs
    assert (a.model, a.batch_size, a.iterations, a.duration_s) == ("resnet50", 64, 1000.0, None)
    assert (b.duration_s, b.gpu_type_request, b.num_gpus) == (3600.0, "V100|V100-32GB", 4)
    assert (c.model, c.batch_size, c.gpu_fraction) == (None, None, 0.5)
    assert c.line == 6  # comment and blank lines still count
    assert len(trace.sha256) == 64 and trace.format == "horus"


def _write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(header + body)
    return path


@pytest.mark.parametrize(
    ("header", "body", "expected"),
    [
        ("job_id,submit_time,num_gpus,model,duration_s\n", "a,0,1,resnet18,60\n",
         "line 1: missing column 'batch_size'"),
        (HEADER, "a,0,1,resnet18,32,60\nb,zero,1,resnet18,32,60\n",
         "line 3, column 'submit_time': expected a number in [0, 10,000,000,000] s, got 'zero'"),
        (HEADER, "a,0,1,resnet18,32,sixty\n", "line 2, column 'duration_s': expected a number in [0.001, "),
        (HEADER, "a,0,0,resnet18,32,60\n",
         "line 2, column 'num_gpus': expected an integer in [1, 200,000] GPUs, got '0'"),
        (HEADER, "a,0,1.5,resnet18,32,60\n", "line 2, column 'num_gpus': expected an integer in [1, 200,000] GPUs"),
        (HEADER, "a,0,1,resnet18,,60\n", "line 2, column 'batch_size': expected model and batch_size both set"),
        (HEADER, "a,0,1,resnet18,32,60\na,1,1,resnet18,32,60\n", "line 3, column 'job_id': expected unique job ids"),
        (HEADER, "a,0,1,resnet18,32\n", "line 2: expected 6 fields"),
        ("job_id,submit_time,num_gpus,model,batch_size,iterations,duration_s\n", "a,0,1,resnet18,32,10,60\n",
         "line 2: expected either 'iterations' or 'duration_s', not both"),
        ("job_id,submit_time,num_gpus,model,batch_size,iterations,duration_s\n", "a,0,1,resnet18,32,,\n",
         "line 2: expected 'iterations' or 'duration_s', both are empty"),
        ("job_id,submit_time,num_gpus,model,batch_size\n", "a,0,1,resnet18,32\n",
         "line 1: missing column 'iterations' or 'duration_s'"),
        ("job_id,submit_time,num_gpus,model,batch_size,duration_s,gpus_fraction\n", "a,0,1,resnet18,32,60,0.5\n",
         "line 1: unknown column 'gpus_fraction'"),
        ("job_id,submit_time,num_gpus,model,batch_size,duration_s,gpu_fraction\n", "a,0,2,resnet18,32,60,0.5\n",
         "line 2, column 'gpu_fraction': expected a fractional share only for num_gpus == 1"),
        ("job_id,submit_time,num_gpus,model,batch_size,duration_s,gpu_fraction\n", "a,0,1,resnet18,32,60,1.5\n",
         "line 2, column 'gpu_fraction': expected a number in [0.001, 1] of a GPU"),
        (HEADER, "", "line 1: header only, no jobs"),
        ("", "", "empty file"),
    ],
    ids=["missing-column", "non-numeric-submit", "non-numeric-duration", "zero-gpus", "fractional-gpus",
         "model-without-batch", "duplicate-id", "field-count", "both-work-columns", "no-work-value",
         "no-work-column", "unknown-column", "fraction-multi-gpu", "fraction-above-one", "header-only", "empty"],
)
def test_malformed_input_names_file_and_line(tmp_path: Path, header: str, body: str, expected: str) -> None:
    path = _write(tmp_path, body, header)
    with pytest.raises(HorusInputError) as err:
        load_trace(path, "horus")
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_negative_duration_fixture() -> None:
    with pytest.raises(HorusInputError, match=r"bad_horus_negative_duration.csv: line 3, column 'duration_s': "
                                              r"expected a number in \[0.001, .*, got '-10'"):
        load_trace(FIXTURES / "bad_horus_negative_duration.csv", "horus")


def test_unknown_model_is_rejected(tmp_path: Path) -> None:
    known = horus_csv.known_models()
    assert known is not None and {"resnet18", "resnet50"} <= known  # the shipped catalog is checked against
    assert "resnet5O" not in known
    path = _write(tmp_path, "a,0,1,resnet18,32,60\nb,0,1,resnet5O,32,60\n")
    with pytest.raises(HorusInputError, match=r"line 3, column 'model': expected a model of the catalog .*'resnet5O'"):
        load_trace(path, "horus")


def test_every_catalog_model_is_accepted(tmp_path: Path) -> None:
    known = horus_csv.known_models()
    assert known, "the model catalog (horus/data/model_catalog.csv) ships with the package"
    models = sorted(known)
    body = "".join(f"j{i},{i},1,{model},32,60\n" for i, model in enumerate(models))
    trace = load_trace(_write(tmp_path, body), "horus")
    assert [j.model for j in trace.jobs] == models


def test_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    with pytest.raises(HorusInputError, match=r"nope.csv: file not found"):
        load_trace(missing, "horus")


def test_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(HorusInputError, match=r"unknown trace format 'phily'.*horus.*openb.*philly"):
        load_trace(tmp_path / "x.csv", "phily")
