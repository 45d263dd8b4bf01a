"""A seeded sample of the mutation benchmark, re-run in every CI run so a change that weakens the tests shows.

``benchmarks/mutation.py`` measures the full mutation score of the core modules (hours) and records, in
``benchmarks/results/mutation.json``, every mutant the tests killed and the test that killed it. Here
``PER_MODULE`` of those mutants per module, drawn with a fixed seed, are applied again by cosmic-ray in a
private copy of the tree (never this checkout) and the test that killed each is run against it (then, if it
passes, e.g. a property test drew other examples, all the module's tests): it must still fail. A mutant whose source line moved since the benchmark ran is looked up again by operator, code and its rank
among that line's mutants of the operator (``rank_in_line``: global occurrence numbers shift when code is added
above it); one that no longer exists is replaced by the next killed mutant of the same module.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "mutation.json"
PER_MODULE = 2
SEED = 29


def harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("horus_mutation_benchmark", ROOT / "benchmarks" / "mutation.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def recorded() -> dict[str, list[dict[str, Any]]]:
    if not RESULTS.is_file():
        return {}
    modules = json.loads(RESULTS.read_text())["modules"]
    return {name: entry.get("killed_mutants", []) for name, entry in sorted(modules.items())}


CASES = [(name, random.Random(f"{SEED}:{name}").sample(killed, len(killed))) for name, killed in recorded().items()
         if killed]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mutation")
    harness().materialize(None, folder)
    return folder / "repo"


@pytest.mark.skipif(not CASES, reason=f"no mutation results at {RESULTS} (run benchmarks/mutation.py)")
@pytest.mark.parametrize(("module", "candidates"), CASES, ids=[name for name, _ in CASES])
def test_sampled_mutants_are_still_killed(module: str, candidates: list[dict[str, Any]], tree: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from cosmic_ray.mutating import mutate_and_test

    bench = harness()
    target = bench.load_targets()[module]
    available = bench.enumerate_mutants(tree, target)
    monkeypatch.chdir(tree)
    monkeypatch.setenv("PYTHONPATH", str(tree / "src"))
    checked = 0
    for want in candidates:
        same = [m for m in available if m.operator == want["operator"] and m.code == want["code"]]
        rank = want.get("rank_in_line")  # which of the line's mutants of that operator (occurrences shift with edits)
        exact = [same[rank]] if rank is not None and rank < len(same) else [
            m for m in same if m.occurrence == want["occurrence"]]
        if not (exact or same):
            continue  # the source changed under this mutant: take the next one
        mutant = (exact or same)[0]
        test = want.get("killed_by")
        everything = [t for t in target.tests if (tree / t).is_file()]
        first = [test] if test and test != "timeout" and (tree / test.split("::")[0]).is_file() else everything
        result = mutate_and_test([mutant.spec(target.path)], bench.test_command(first), 300.0)
        if not result.is_killed and first != everything:  # e.g. a property test drew other examples: all of them
            result = mutate_and_test([mutant.spec(target.path)], bench.test_command(everything), 600.0)
        assert result.test_outcome is not None and result.is_killed, (
            f"{module}: this mutant of {target.path}:{mutant.start[0]} now survives {everything}:\n{result.diff}")
        checked += 1
        if checked == PER_MODULE:
            break
    assert checked, f"{module}: none of the recorded killed mutants exists any more; rerun benchmarks/mutation.py"
