"""Alibaba openb pods and node list."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus.errors import HorusInputError
from horus.traces import load_openb_cluster, load_trace
from horus.traces.openb import ASSUMED_TYPES

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
HEADER = "name,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time,scheduled_time\n"


def test_pods_fractions_skips_and_gpu_spec() -> None:
    trace = load_trace(FIXTURES / "good_openb_pods.csv", "openb")
    jobs = {j.job_id: j for j in trace.jobs}
    assert sorted(jobs) == ["pod-a", "pod-b", "pod-d"]
    assert trace.skipped == {"cpu_only": 1, "never_scheduled": 1}
    assert jobs["pod-a"].gpu_fraction is None and jobs["pod-a"].duration_s == 4000.0
    assert jobs["pod-b"].gpu_fraction == pytest.approx(0.46)
    assert jobs["pod-b"].duration_s == 990.0  # deletion - scheduled, not - creation
    assert jobs["pod-b"].submit_time == 200.0  # creation, rebased to the first pod
    assert jobs["pod-d"].gpu_type_request == "V100|V100-32GB" and jobs["pod-d"].num_gpus == 8


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("p,1,1500,,0,10,0\n", "line 2, column 'gpu_milli': expected an integer in [0, 1,000], got '1500'"),
        ("p,2,500,,0,10,0\n", "line 2, column 'gpu_milli': expected 1000 when num_gpu > 1, got '500'"),
        ("p,1,1000,,0,10,20\n", "line 2, column 'deletion_time': expected a time >= scheduled_time"),
        ("p,1,1000,H800,0,10,0\n", "line 2, column 'gpu_spec': expected GPU models from"),
        ("p,-1,1000,,0,10,0\n", "line 2, column 'num_gpu': expected an integer in [0, 200,000], got '-1'"),
        ("p,1,1000,,soon,10,0\n",
         "line 2, column 'creation_time': expected a number in [0, 10,000,000,000] s, got 'soon'"),
    ],
    ids=["milli-above-1000", "fraction-multi-gpu", "negative-duration", "unknown-gpu-spec", "negative-gpus",
         "non-numeric-time"],
)
def test_malformed_pods(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(HEADER + body)
    with pytest.raises(HorusInputError, match=str(path)) as err:
        load_trace(path, "openb")
    assert expected in str(err.value)


def test_only_cpu_pods_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(HEADER + "p,0,0,,0,10,0\n")
    with pytest.raises(HorusInputError, match=r"no usable jobs.*cpu_only"):
        load_trace(path, "openb")


def test_node_list_maps_models() -> None:
    cluster = load_openb_cluster(FIXTURES / "good_openb_nodes.csv")
    assert [(n.name, n.gpu_type.name, n.num_gpus) for n in cluster.nodes] == [
        ("n0", "P100", 2), ("n1", "V100-32GB", 8), ("n3", "G2", 8)]
    assert cluster.nodes[2].gpu_type == ASSUMED_TYPES["G2"]
    assert cluster.num_gpus == 18


def test_node_list_unknown_model(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,4,B200\n")
    with pytest.raises(HorusInputError, match=r"line 2, column 'model': expected a GPU model from .*'B200'"):
        load_openb_cluster(path)


def test_shared_openb(shared_data: Path) -> None:
    base = shared_data / "traces" / "alibaba-openb"
    pods, nodes = base / "openb_pod_list_default.csv", base / "openb_node_list_gpu_node.csv"
    if not pods.is_file() or not nodes.is_file():
        pytest.skip(f"openb files not found under {base}")
    trace = load_trace(pods, "openb")
    assert len(trace.jobs) + sum(trace.skipped.values()) == 8152
    assert any(j.gpu_fraction is not None for j in trace.jobs)
    assert all(j.num_gpus == 1 for j in trace.jobs if j.gpu_fraction is not None)
    cluster = load_openb_cluster(nodes)
    assert len(cluster.nodes) == 1213
