"""The horus trace format's optional input_size, precision and optimizer columns: read, checked cell by cell,
carried into JobSpec by materialize, and written by the trace generator when a job type states them."""

from __future__ import annotations

from pathlib import Path

import pytest
from traces_helpers import ToyTruth

from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.predict.physical import PhysicalPredictor
from horus.traces import load_trace
from horus.traces.base import RawJob
from horus.traces.generate import WorkloadSpec, trace_rows, write_trace
from horus.traces.materialize import materialize
from horus.truth.parametric import ParametricTruth

HEADER = "job_id,submit_time,num_gpus,model,batch_size,iterations,input_size,precision,optimizer\n"
V100 = GPUType("V100", 16 * 1024, 1.0)


def _write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "described.csv"
    path.write_text(header + body)
    return path


def test_columns_are_read_and_materialized_into_the_job_spec(tmp_path: Path) -> None:
    path = _write(tmp_path, "a,0,1,resnet18,128,100,32,amp,sgd\n"
                            "b,1,1,resnet18,128,100,,,\n"
                            "c,2,1,bert_base,16,100,128,bfloat16,adamw\n"
                            "d,3,1,,,100,,,\n")
    trace = load_trace(path, "horus")
    a, b, c, _ = trace.jobs
    assert (a.input_size, a.precision, a.optimizer) == (32, "amp-fp16", "sgd")
    assert (b.input_size, b.precision, b.optimizer) == (None, None, None)
    assert (c.input_size, c.precision, c.optimizer) == (128, "bf16", "adamw")
    specs = {s.job_id: s for s in materialize(trace, ToyTruth(), seed=0)}
    assert specs["a"].job_type == "resnet18/b128/s32/amp-fp16/sgd"
    assert (specs["c"].input_size, specs["c"].precision, specs["c"].optimizer) == (128, "bf16", "adamw")
    assert specs["b"].job_type == "resnet18/b128" and specs["d"].input_size is None
    physical = PhysicalPredictor()  # the description changes the belief about the materialized job
    assert physical.predict(specs["a"], V100).mem_mib < physical.predict(specs["b"], V100).mem_mib


@pytest.mark.parametrize("body, column, expected", [
    ("a,0,1,resnet18,128,100,0,,\n", "input_size", "an integer in [1, 65,536]"),
    ("a,0,1,resnet18,128,100,70000,,\n", "input_size", "an integer in [1, 65,536]"),
    ("a,0,1,resnet18,128,100,3.5,,\n", "input_size", "an integer"),
    ("a,0,1,resnet18,128,100,big,,\n", "input_size", "an integer"),
    ("a,0,1,resnet18,128,100,,int8,\n", "precision", "amp-fp16"),
    ("a,0,1,resnet18,128,100,,,lamb\n", "optimizer", "adamw"),
    ("a,0,1,,,100,32,,\n", "input_size", "give model and batch_size"),
    ("a,0,1,,,100,,fp16,\n", "precision", "give model and batch_size"),
])
def test_bad_cells_name_file_line_and_column(tmp_path: Path, body: str, column: str, expected: str) -> None:
    path = _write(tmp_path, "ok,0,1,resnet18,128,100,32,fp32,adam\n" + body)
    with pytest.raises(HorusInputError) as info:
        load_trace(path, "horus")
    message = str(info.value)
    assert message.startswith(f"{path}: line 3, column {column!r}") and expected in message, message
    assert "\n" not in message


def test_the_parametric_world_replays_a_described_type_a_listing_truth_refuses_it(tmp_path: Path) -> None:
    from horus.truth.base import TruthModel

    trace = load_trace(_write(tmp_path, "a,0,1,resnet18_cifar,128,100,64,,\n"), "horus")
    spec = materialize(trace, ParametricTruth(), seed=0)[0]
    assert spec.job_type == "resnet18_cifar/b128/s64"
    truth = ParametricTruth()  # the synthetic world scales the work with the input's pixels
    assert truth.solo("resnet18_cifar/b128/s64", V100).iter_time_s > truth.solo("resnet18_cifar/b128", V100).iter_time_s
    assert truth.solo("resnet18_cifar/b128/s64", V100).mem_mib > truth.solo("resnet18_cifar/b128", V100).mem_mib

    class Listing(ParametricTruth):  # a truth that knows only the types it lists (as the measured ones do)
        knows = TruthModel.knows

    with pytest.raises(HorusInputError, match=r"line 2, job 'a': job type 'resnet18_cifar/b128/s64' is unknown"):
        materialize(trace, Listing(), seed=0)
    plain = load_trace(_write(tmp_path, "a,0,1,resnet18_cifar,128,100,,,\n"), "horus")
    assert materialize(plain, Listing(), seed=0)[0].job_type == "resnet18_cifar/b128"


def test_the_generator_writes_the_columns_only_when_a_job_type_states_them(tmp_path: Path) -> None:
    jobs = [RawJob(f"j{i}", float(i), 1, 60.0) for i in range(3)]
    rows = trace_rows(jobs, ["resnet18/b128/s32/amp-fp16", "resnet50/b64", "bert_base/b16/s128/adamw"])
    path = tmp_path / "gen.csv"
    write_trace(path, rows, WorkloadSpec(num_jobs=3), {})
    header = next(line for line in path.read_text().splitlines() if not line.startswith("#"))
    assert header == "job_id,submit_time,num_gpus,model,batch_size,duration_s,input_size,precision,optimizer"
    back = load_trace(path, "horus").jobs
    assert [(j.model, j.input_size, j.precision, j.optimizer) for j in back] == [
        ("resnet18", 32, "amp-fp16", None), ("resnet50", None, None, None), ("bert_base", 128, None, "adamw")]
    plain = tmp_path / "plain.csv"
    write_trace(plain, trace_rows(jobs, ["resnet50/b64"] * 3), WorkloadSpec(num_jobs=3), {})
    assert "job_id,submit_time,num_gpus,model,batch_size,duration_s\n" in plain.read_text()


def test_materialize_limit_is_the_slice_and_still_checks_every_row(tmp_path: Path) -> None:
    from horus.traces.base import load_default_trace

    trace = load_default_trace()
    truth = ParametricTruth()
    whole = materialize(trace, truth, reference_gpu=V100, seed=3)
    assert materialize(trace, truth, reference_gpu=V100, seed=3, limit=7) == whole[:7]
    assert materialize(trace, truth, reference_gpu=V100, seed=3, limit=10**9) == whole
    bad = load_trace(_write(tmp_path, "a,0,1,resnet50,32,10,,,\nb,5,1,vgg16,32,10,,,\n"), "horus")
    with pytest.raises(HorusInputError, match="line 3.*vgg16/b32"):  # a row past the limit is still checked
        materialize(bad, ToyTruth(["resnet50/b32"]), reference_gpu=V100, seed=0, limit=1)
