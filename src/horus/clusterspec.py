"""Cluster spec: a small YAML file describing nodes, GPU types and the network (docs/cluster-spec.md).

Every bad field raises ``HorusInputError`` naming the file and the field path, e.g.
``cluster.yaml: nodes[1].gpus: expected a positive integer, got -2``; unknown keys are errors too.

An optional ``tenancy:`` section declares the cluster's tenant queues and priority classes
(``horus.tenancy.parse_tenancy``, docs/tenancy.md); ``load_spec`` returns it with the cluster, ``load_tenancy``
alone. ``load_cluster`` checks it too (a spec with a bad section is a bad spec) and returns the cluster only.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from horus.cluster import LINK_BANDWIDTH_GBPS, Cluster, GPUType, Node
from horus.errors import HorusInputError
from horus.gpu_types import PRESETS, REQUEST_SEPARATOR
from horus.tenancy import ANY_TYPE, Tenancy, parse_tenancy
from horus.validation import LIMITS, MAX_CONFIG_BYTES, Domain, load_yaml_text, read_text

DEFAULT_INTER_NODE_GBPS = 12.5
_TOP_KEYS = {"inter_node_gbps", "gpu_types", "nodes", "tenancy"}
_GPU_TYPE_KEYS = {"memory_mib", "speed"}
_NODE_KEYS = {"name", "count", "gpu_type", "gpus", "intra_link"}


class _Fields:
    """Typed getters over one YAML mapping that raise errors naming ``source`` and the field path."""

    def __init__(self, source: str, path: str, data: object, allowed: set[str]) -> None:
        self.source = source
        self.path = path
        if not isinstance(data, Mapping):
            self.fail(path or "the document", f"expected a mapping, got {_show(data)}")
        unknown = sorted(str(k) for k in data if k not in allowed)
        if unknown:
            self.fail(f"{self._at(unknown[0])}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
        self.data: Mapping[str, Any] = data

    def _at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, field: str, message: str) -> NoReturn:
        raise HorusInputError(self.source, f"{field}: {message}")

    def bounded(self, key: str, domain: Domain, default: float | None = None) -> float:
        """A number in ``domain`` (integers must be written as integers: ``8``, not ``8.0`` or ``true``)."""
        value = self.data.get(key, default)
        if value is None:
            self.fail(self._at(key), f"missing (expected {domain.describe()})")
        if (not domain.contains(value)) or (domain.integer and not isinstance(value, int)):
            self.fail(self._at(key), f"expected {domain.describe()}, got {_show(value)}")
        return value  # type: ignore[no-any-return]

    def name(self, key: str, default: str | None = None) -> str:
        value = self.data.get(key, default)
        if value is None:
            self.fail(self._at(key), "missing (expected a name)")
        if not isinstance(value, str) or not value.strip():
            self.fail(self._at(key), f"expected a non-empty string, got {_show(value)}")
        return value.strip()


def _show(value: object) -> str:
    return "nothing" if value is None else repr(value)


def _parse_gpu_types(fields: _Fields) -> dict[str, GPUType]:
    types = dict(PRESETS)
    custom = fields.data.get("gpu_types")
    if custom is None:
        return types
    if not isinstance(custom, Mapping):
        fields.fail("gpu_types", f"expected a mapping of name -> {{memory_mib, speed}}, got {_show(custom)}")
    for name, spec in custom.items():
        if not isinstance(name, str) or not name.strip():
            fields.fail("gpu_types", f"expected GPU type names as keys, got {_show(name)}")
        if REQUEST_SEPARATOR in name:  # a job's request 'A|B' means "A or B": a type so named could never be asked for
            fields.fail("gpu_types", f"GPU type name {name!r} contains {REQUEST_SEPARATOR!r}, which separates the "
                                     f"types of a job's request")
        entry = _Fields(fields.source, f"gpu_types.{name}", spec, _GPU_TYPE_KEYS)
        types[name] = GPUType(name, int(entry.bounded("memory_mib", LIMITS["gpu_memory_mib"])),
                              float(entry.bounded("speed", LIMITS["gpu_speed"], 1.0)))
    return types


def _parse_nodes(fields: _Fields, types: Mapping[str, GPUType]) -> list[Node]:
    raw_nodes = fields.data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        fields.fail("nodes", f"expected a non-empty list of nodes, got {_show(raw_nodes)}")
    nodes: list[Node] = []
    seen: set[str] = set()
    total_nodes = total_gpus = 0
    for i, raw in enumerate(raw_nodes):
        entry = _Fields(fields.source, f"nodes[{i}]", raw, _NODE_KEYS)
        name = entry.name("name")
        count = int(entry.bounded("count", LIMITS["nodes"], 1))
        type_name = entry.name("gpu_type")
        if type_name not in types:
            entry.fail(f"nodes[{i}].gpu_type", f"unknown GPU type {type_name!r} (known: {', '.join(types)}; "
                                               "define custom ones under gpu_types)")
        gpus = int(entry.bounded("gpus", LIMITS["gpus_per_node"]))
        link = entry.name("intra_link", "nvlink")
        if link not in LINK_BANDWIDTH_GBPS:
            entry.fail(f"nodes[{i}].intra_link", f"expected one of {', '.join(LINK_BANDWIDTH_GBPS)}, got {link!r}")
        total_nodes += count
        total_gpus += count * gpus
        if total_nodes > LIMITS["nodes"].high or total_gpus > LIMITS["cluster_gpus"].high:
            entry.fail(f"nodes[{i}].count", f"the cluster would have {total_nodes:,} nodes / {total_gpus:,} GPUs; "
                                            f"expected at most {LIMITS['nodes'].high:,.0f} nodes and "
                                            f"{LIMITS['cluster_gpus'].high:,.0f} GPUs")
        names = [name] if count == 1 else [f"{name}-{k}" for k in range(count)]
        for node_name in names:
            if node_name in seen:
                entry.fail(f"nodes[{i}].name", f"duplicate node name {node_name!r}")
            seen.add(node_name)
            nodes.append(Node(node_name, types[type_name], gpus, link))
    return nodes


def parse_cluster(data: object, source: str) -> Cluster:
    """Build a Cluster from a parsed YAML document; ``source`` names it in error messages."""
    return parse_spec(data, source)[0]


def parse_spec(data: object, source: str) -> tuple[Cluster, Tenancy | None]:
    """The Cluster of a parsed YAML document and its ``tenancy:`` section (None without one), checked to fit."""
    fields = _Fields(source, "", data, _TOP_KEYS)
    types = _parse_gpu_types(fields)
    nodes = _parse_nodes(fields, types)
    gbps = float(fields.bounded("inter_node_gbps", LIMITS["link_gbps"], DEFAULT_INTER_NODE_GBPS))
    cluster = Cluster(nodes, gbps)
    if "tenancy" not in fields.data:
        return cluster, None
    tenancy = parse_tenancy(fields.data["tenancy"], source)
    check_tenancy_fits(tenancy, cluster, source)
    return cluster, tenancy


def check_tenancy_fits(tenancy: Tenancy, cluster: Cluster, source: str) -> None:
    """HorusInputError unless every guaranteed GPU type is in ``cluster`` and the guarantees, of any type and
    per type, sum to at most the GPUs it has (a guarantee beyond the cluster is a promise no reclaim can keep)."""
    have: dict[str, int] = {ANY_TYPE: cluster.num_gpus}
    for node in cluster.nodes:
        have[node.gpu_type.name] = have.get(node.gpu_type.name, 0) + node.num_gpus
    promised: dict[str, float] = {}
    for i, queue in enumerate(tenancy.queues.values()):
        for key, gpus in queue.guaranteed.items():
            if key not in have:
                raise HorusInputError(source, f"tenancy.queues[{i}].guaranteed.{key}: the cluster has no {key} GPUs "
                                              f"(it has {', '.join(sorted(k for k in have if k != ANY_TYPE))})")
            promised[key] = promised.get(key, 0.0) + gpus
            if key != ANY_TYPE:
                promised[ANY_TYPE] = promised.get(ANY_TYPE, 0.0) + gpus
    for key, total in promised.items():
        if total > have[key] + 1e-9:
            what = "GPUs" if key == ANY_TYPE else f"{key} GPUs"
            raise HorusInputError(source, f"tenancy.queues: guarantees add up to {total:g} {what}, the cluster has "
                                          f"{have[key]}; expected at most that many")


def load_spec(path: str | Path) -> tuple[Cluster, Tenancy | None]:
    """Read and validate a cluster spec YAML file: its cluster and its tenancy (None without a section)."""
    text, _ = read_text(path, "a cluster spec YAML file", MAX_CONFIG_BYTES)
    return parse_spec(_document(text, str(path)), str(path))


def load_cluster(path: str | Path) -> Cluster:
    """Read and validate a cluster spec YAML file."""
    return load_spec(path)[0]


def load_tenancy(path: str | Path, cluster: Cluster | None = None) -> Tenancy | None:
    """The ``tenancy:`` section of a YAML file (None without one): a cluster spec (then checked against its own
    nodes) or a file holding only that section (checked against ``cluster`` when given)."""
    text, _ = read_text(path, "a YAML file with a tenancy section", MAX_CONFIG_BYTES)
    source = str(path)
    data = _document(text, source, "'tenancy'")
    if isinstance(data, Mapping) and "nodes" in data:
        spec_cluster, tenancy = parse_spec(data, source)
    else:
        fields = _Fields(source, "", data, {"tenancy"})
        tenancy = parse_tenancy(fields.data["tenancy"], source) if "tenancy" in fields.data else None
        spec_cluster = None
    if tenancy is not None and cluster is not None and cluster is not spec_cluster:
        check_tenancy_fits(tenancy, cluster, source)
    return tenancy


def _document(text: str, source: str, expected: str = "'nodes'") -> object:
    data = load_yaml_text(text, source)
    if data is None:
        raise HorusInputError(source, f"empty file (expected a mapping with {expected})")
    return data


def _parse_text(text: str, source: str) -> Cluster:
    return parse_cluster(_document(text, source), source)


def default_cluster() -> Cluster:
    """The packaged default cluster: 8 nodes x 8 V100 (NVLink), 12.5 GB/s between nodes."""
    ref = resources.files("horus.data").joinpath("default_cluster.yaml")
    return _parse_text(ref.read_text(encoding="utf-8"), "horus/data/default_cluster.yaml")
