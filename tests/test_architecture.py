"""Layers import downward only, packages form no cycle, and docs/architecture.md maps every module.

The layer order is ``LAYERS`` (lowest first); docs/architecture.md states the same order. A package may import
its own layer and the layers below. ``commands`` modules (the ``horus`` CLI verbs of each package) belong to the
CLI layer: they wire packages together and may import anything. Every import counts, lazy ones inside
functions included.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "horus"
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
LAYERS: list[tuple[str, ...]] = [
    ("horus", "data", "errors", "extras", "registry", "plugins", "hashing", "validation", "reporting"),  # shared utilities
    ("cluster", "gpu_types", "jobs", "catalog", "topology", "comm", "tenancy"),  # data model
    ("sources", "clusterspec"),  # loaders of published data and cluster specs
    ("truth",),  # the simulated world's ground truth
    ("traces",),  # trace loaders (materialised against a truth's job types)
    ("zoo", "graph"),  # model zoo and graph features
    ("profiling", "colocation"),  # measurement harness, its tables, co-location analysis and measured truth
    ("interference", "predict", "learn"),  # belief: predictors and interference estimators
    ("state", "reasons"),  # what a policy sees; why a job waits
    ("policies",),
    ("core",),  # SchedulerCore
    ("agent",),  # node agent
    ("sim",),  # backend: the simulator
    ("ray",),  # Ray nodes and workers (for the service), sweeps of simulations
    ("service", "k8s"),  # backends: the live service, the Kubernetes extender
    ("cli",),
]
CLI = len(LAYERS) - 1


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def package(module: str) -> str:
    """``horus.sim.engine`` -> ``sim``; ``horus.state`` -> ``state``; ``horus`` -> ``horus``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "horus"


def layer(module: str) -> int:
    if module.rsplit(".", 1)[-1] == "commands":
        return CLI
    pkg = package(module)
    return next(i for i, members in enumerate(LAYERS) if pkg in members)


def imports(module: str, path: Path) -> list[tuple[str, int]]:
    """Every ``horus`` module ``module`` imports, with the line."""
    tree = ast.parse(path.read_text())
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names if alias.name.split(".")[0] == "horus"]
        elif isinstance(node, ast.ImportFrom):
            target = ".".join(base[:len(base) - node.level + 1] + [node.module or ""]).strip(".") if node.level \
                else node.module or ""
            if target.split(".")[0] == "horus":
                out.append((target, node.lineno))
    return out


def test_every_package_has_a_layer() -> None:
    known = {pkg for members in LAYERS for pkg in members}
    assert {package(m) for m in modules()} <= known | {"cli"}


def test_no_import_runs_upward() -> None:
    upward = [f"{m}:{line} imports {t} (layer {layer(m)} -> {layer(t)})"
              for m, path in modules().items() for t, line in imports(m, path) if layer(t) > layer(m)]
    assert upward == []


def test_packages_form_no_cycle() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for m, path in modules().items():
        if layer(m) == CLI:
            continue
        for t, _ in imports(m, path):
            if package(t) != package(m) and layer(t) != CLI:
                graph[package(m)].add(package(t))
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            assert (cycle := visit(node)) is None, " -> ".join(cycle)


def test_the_architecture_doc_lists_every_module() -> None:
    text = DOC.read_text()
    listed = set(re.findall(r"`(horus(?:\.\w+)*)`", text))
    missing = sorted(m for m in modules() if m not in listed)
    assert missing == [], f"docs/architecture.md does not list {missing}"
