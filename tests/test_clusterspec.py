"""Cluster spec YAML: good specs, presets, and one test per kind of bad field."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus.clusterspec import default_cluster, load_cluster, parse_cluster
from horus.errors import HorusInputError
from horus.gpu_types import PRESETS, accepted_gpu_types

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def test_good_spec_expands_counts_and_custom_types() -> None:
    cluster = load_cluster(FIXTURES / "good_cluster.yaml")
    assert [n.name for n in cluster.nodes] == ["dgx-0", "dgx-1", "dgx-2", "dgx-3", "pcie-0", "pcie-1", "custom"]
    assert cluster.num_gpus == 4 * 8 + 2 * 4 + 2
    assert cluster.inter_node_gbps == 25.0
    assert cluster.nodes[4].gpu_type == PRESETS["P100"] and cluster.nodes[4].intra_link == "pcie"
    assert cluster.nodes[6].gpu_type.memory_mib == 24576 and cluster.nodes[6].gpu_type.speed == 1.3
    assert cluster.nodes[6].intra_link == "nvlink"  # default


def test_default_cluster() -> None:
    cluster = default_cluster()
    assert cluster.num_gpus == 64 and len(cluster.nodes) == 8
    assert {n.gpu_type.name for n in cluster.nodes} == {"V100"} and cluster.inter_node_gbps == 12.5


def test_bad_gpus_fixture_names_file_and_field() -> None:
    expected = r"bad_cluster_gpus.yaml: nodes\[1\].gpus: expected an integer in \[1, 256\] GPUs, got -2"
    with pytest.raises(HorusInputError, match=expected):
        load_cluster(FIXTURES / "bad_cluster_gpus.yaml")


NODE = {"name": "a", "gpu_type": "V100", "gpus": 8}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"nodes": [{**NODE, "gpus": 0}]}, "nodes[0].gpus: expected an integer in [1, 256] GPUs, got 0"),
        ({"nodes": [{**NODE, "gpus": True}]}, "nodes[0].gpus: expected an integer in [1, 256] GPUs, got True"),
        ({"nodes": [{**NODE, "count": "4"}]}, "nodes[0].count: expected an integer in [1, 100,000] nodes, got '4'"),
        ({"nodes": [{**NODE, "gpu_type": "V1OO"}]}, "nodes[0].gpu_type: unknown GPU type 'V1OO'"),
        ({"nodes": [{**NODE, "intra_link": "infiniband"}]}, "nodes[0].intra_link: expected one of nvlink"),
        ({"nodes": [{**NODE, "gpu": 8}]}, "nodes[0].gpu: unknown key"),
        ({"nodes": [{"name": "a", "gpu_type": "V100"}]}, "nodes[0].gpus: missing"),
        ({"nodes": [NODE, NODE]}, "nodes[1].name: duplicate node name 'a'"),
        ({"nodes": []}, "nodes: expected a non-empty list"),
        ({"node": [NODE]}, "node: unknown key"),
        ({"nodes": [NODE], "inter_node_gbps": -1},
         "inter_node_gbps: expected a number in [0.001, 100,000] GB/s, got -1"),
        ({"nodes": [NODE], "gpu_types": {"X": {"memory_mib": 0}}},
         "gpu_types.X.memory_mib: expected an integer in [1, 4,194,304] MiB"),
        ({"nodes": [NODE], "gpu_types": {"X": {"memory_mib": 8, "sped": 1}}}, "gpu_types.X.sped: unknown key"),
        ({"nodes": [NODE], "gpu_types": ["X"]}, "gpu_types: expected a mapping"),
        (["nodes"], ": expected a mapping, got ['nodes']"),
    ],
    ids=["zero-gpus", "bool-gpus", "string-count", "unknown-type", "bad-link", "typo-key", "missing-gpus",
         "duplicate-name", "empty-nodes", "top-level-typo", "negative-network", "zero-memory", "type-typo-key",
         "types-not-mapping", "not-a-mapping"],
)
def test_bad_fields(doc: object, expected: str) -> None:
    with pytest.raises(HorusInputError) as err:
        parse_cluster(doc, "c.yaml")
    assert str(err.value).startswith("c.yaml: ")
    assert expected in str(err.value)


def test_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("nodes:\n  - {name: a, gpus: [8\n")
    with pytest.raises(HorusInputError, match=r"c.yaml: line \d+, column \d+: not valid YAML"):
        load_cluster(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "e.yaml").write_text("")
    with pytest.raises(HorusInputError, match="e.yaml: empty file"):
        load_cluster(tmp_path / "e.yaml")
    with pytest.raises(HorusInputError, match="m.yaml: file not found"):
        load_cluster(tmp_path / "m.yaml")


def test_gpu_requests() -> None:
    assert accepted_gpu_types(None) is None
    assert accepted_gpu_types("V100|V100-32GB") == frozenset({"V100", "V100-32GB"})
    assert all(t.memory_mib > 0 and t.speed > 0 for t in PRESETS.values())
