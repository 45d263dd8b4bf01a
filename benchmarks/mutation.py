"""Mutation testing with cosmic-ray: how many deliberate bugs in the core modules the tests catch.

    python benchmarks/mutation.py                          # every target, every mutant (hours on 2 cores)
    python benchmarks/mutation.py --sample 60 --jobs 2     # 60 seeded mutants per module, 2 workers
    python benchmarks/mutation.py --module store --ref 13a12ce --out /tmp/before.json   # another revision

Targets and the tests run against each are in ``benchmarks/mutation_targets.toml``. cosmic-ray
(``cosmic-ray init``) enumerates the mutants of each module; mutants inside type annotations are left
out (``from __future__ import annotations``: annotations are never evaluated, so such a mutant is
equivalent by construction: its tree without annotations equals the original's), so are mutants that do not
compile (cosmic-ray also rewrites the bare ``*`` of a signature), and so are the equivalent mutants documented with their reason in
``benchmarks/mutation_equivalents/<target>.toml``. Each remaining (or sampled) mutant is applied by cosmic-ray's
``mutate_and_test`` in a private copy of the tree (never the checkout: other work there would see the
mutant) and the module's tests run with ``pytest -x``; a failure or a time-out kills it.

The JSON (default ``benchmarks/results/mutation.json``) holds per module: mutants found, excluded,
run, killed, survived, the score (killed / run) with a 95 % Wilson interval when sampled, wall time,
and every surviving mutant's line, operator and diff; plus the command, revision, seed and versions.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor, as_completed
from itertools import zip_longest
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ROOT / "benchmarks" / "mutation_targets.toml"
EQUIVALENTS = ROOT / "benchmarks" / "mutation_equivalents"
RESULT = ROOT / "benchmarks" / "results" / "mutation.json"
SHARED = ROOT.parent / "shared"


@dataclass
class Target:
    name: str
    path: str
    tests: list[str]
    missing_tests: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Mutant:
    """One cosmic-ray mutation of a target module, with the source line it changes."""

    target: str
    job_id: str
    operator: str
    occurrence: int
    start: tuple[int, int]
    end: tuple[int, int]
    code: str

    def spec(self, module_path: str) -> object:
        from cosmic_ray.work_item import MutationSpec

        return MutationSpec(module_path=module_path, operator_name=self.operator, operator_args={},
                            occurrence=self.occurrence, start_pos=self.start, end_pos=self.end)


def load_targets(path: Path = TARGETS) -> dict[str, Target]:
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    return {name: Target(name, entry["path"], list(entry["tests"])) for name, entry in raw.items()}


def load_equivalents(folder: Path = EQUIVALENTS) -> list[dict[str, str]]:
    """Documented equivalent mutants, one file per target (``<target>.toml``): ``[[equivalent]]`` entries with
    ``operator`` (a suffix of cosmic-ray's operator name), ``code`` (the stripped source line), ``why`` and,
    optionally, ``mutated`` (the stripped mutated line, for one of several mutants of the same operator there)."""
    entries = []
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        with path.open("rb") as fh:
            found = tomllib.load(fh).get("equivalent", [])
        for i, entry in enumerate(found):
            missing = {"operator", "code", "why"} - set(entry)
            if missing:
                raise SystemExit(f"{path}: equivalent #{i + 1} lacks {sorted(missing)}")
            entries.append({**entry, "target": path.stem})
    return entries


def _without_annotations(tree: ast.AST) -> str:
    """``ast.dump`` of ``tree`` with every annotation removed (they are never evaluated: PEP 563)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        elif isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
    return ast.dump(tree)


def static_verdict(source: str, mutant: Mutant) -> tuple[str | None, str]:
    """(``invalid`` for a mutant that does not compile (cosmic-ray also mutates the ``*`` of a signature),
    ``annotation`` for one that changes only annotations (equivalent by construction), else None; the mutated
    source line, stripped)."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    mutated = mutate_code(source, get_operator(mutant.operator)(), mutant.occurrence)
    if mutated is None:
        return "invalid", ""
    lines = mutated.splitlines()
    line = lines[mutant.start[0] - 1].strip() if mutant.start[0] <= len(lines) else ""
    try:
        changed = ast.parse(mutated)
    except SyntaxError:
        return "invalid", line
    if _without_annotations(changed) == _without_annotations(ast.parse(source)):
        return "annotation", line
    return None, line


def enumerate_mutants(tree: Path, target: Target) -> list[Mutant]:
    """Every cosmic-ray mutant of ``target`` in the copy ``tree`` (order: operator, then occurrence)."""
    from cosmic_ray.commands.init import _all_work_items

    module = tree / target.path
    lines = module.read_text().splitlines()
    mutants = []
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        for item in _all_work_items([Path(target.path)], {}):
            m = item.mutations[0]
            start, end = tuple(m.start_pos), tuple(m.end_pos)
            mutants.append(Mutant(target.name, item.job_id, m.operator_name, m.occurrence, start, end,  # type: ignore
                                  lines[start[0] - 1].strip()))
    finally:
        os.chdir(cwd)
    return mutants


def excluded_reason(mutant: Mutant, source: str, equivalents: list[dict[str, str]]) -> str | None:
    """Why ``mutant`` is not run (see ``static_verdict``; ``equivalent: why`` for a documented equivalent, matched
    by operator and source line, and by the mutated line when the entry gives ``mutated``), or None."""
    verdict, mutated = static_verdict(source, mutant)
    if verdict is not None:
        return verdict
    for entry in equivalents:
        if (entry["target"] == mutant.target and mutant.operator.endswith(entry["operator"])
                and entry["code"] == mutant.code and entry.get("mutated", mutated) == mutated):
            return "equivalent: " + entry["why"]
    return None


def materialize(ref: str | None, dest: Path) -> str:
    """Write the tree to measure into ``dest/repo`` (``../shared`` beside it); return the revision measured."""
    repo = dest / "repo"
    repo.mkdir(parents=True)
    if ref is None:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                               capture_output=True).stdout.decode().split("\0")
        for name in filter(None, files):
            src = ROOT / name
            if src.is_file():
                (repo / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, repo / name)
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
        revision = head + ("+working-tree" if dirty.strip() else "")
    else:
        archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(repo)], input=archive, check=True)
        revision = subprocess.run(["git", "rev-parse", ref], cwd=ROOT, check=True, capture_output=True,
                                  text=True).stdout.strip()
    if SHARED.is_dir():
        (dest / "shared").symlink_to(SHARED)
    return revision


def test_command(tests: list[str]) -> str:
    return f"{sys.executable} -m pytest -x -q -p no:cacheprovider --no-header -o addopts= " + " ".join(tests)


# ---- worker side (one private copy of the tree per worker process) ---------------------------------
_COPY: Path | None = None


def _init_worker(copies: object) -> None:
    global _COPY
    _COPY = Path(copies.get())  # type: ignore[attr-defined]
    os.chdir(_COPY)
    os.environ["PYTHONPATH"] = str(_COPY / "src")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"


def _run_mutant(mutant: Mutant, module_path: str, command: str,
                timeout: float) -> tuple[Mutant, str, str, str | None, float]:
    from cosmic_ray.mutating import mutate_and_test

    began = time.perf_counter()
    result = mutate_and_test([mutant.spec(module_path)], command, timeout)
    outcome = str(result.test_outcome.value if result.test_outcome else result.worker_outcome.value)
    return mutant, outcome, result.diff or "", killed_by(result.output or ""), time.perf_counter() - began


def killed_by(output: str) -> str | None:
    """The first failing test's node id in pytest's ``-q`` summary (``FAILED a.py::t - ...``), or "timeout"."""
    if output == "timeout":
        return "timeout"
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split()[1]
    return None


def baseline(tree: Path, target: Target, tries: int = 2) -> float:
    """Run the target's tests on the unmutated copy (they must pass; a flaky failure is retried); the seconds
    the passing run took."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    where = subprocess.run([sys.executable, "-c", "import horus; print(horus.__file__)"], cwd=tree, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not where.startswith(str(tree)):
        raise SystemExit(f"the copy's horus is shadowed by {where}; mutants would not be seen")
    for attempt in range(1, tries + 1):
        began = time.perf_counter()
        done = subprocess.run(test_command(target.tests).split(), cwd=tree, env=env, capture_output=True, text=True)
        if done.returncode == 0:
            return time.perf_counter() - began
        print(f"{target.name}: the tests fail on the unmutated code (try {attempt} of {tries}):\n"
              f"{done.stdout[-2000:]}", file=sys.stderr)
    raise BaselineFailed(done.stdout[-2000:])


class BaselineFailed(RuntimeError):
    """The target's tests fail without any mutant: its mutants cannot be judged."""


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    denom = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, mid - half), min(1.0, mid + half))


def classify(mutants: list[Mutant], source: str, equivalents: list[dict[str, str]], sample: int | None,
             seed: int) -> tuple[dict[str, str | None], list[Mutant]]:
    """Exclusion reasons and the mutants to run: all eligible ones, or the first ``sample`` eligible ones of a
    ``seed``-shuffled order (only those are classified: the static check parses each mutant)."""
    order = list(mutants)
    if sample is not None:
        random.Random(seed).shuffle(order)
    reasons: dict[str, str | None] = {}
    chosen = []
    for mutant in order:
        if sample is not None and len(chosen) >= sample:
            break
        reasons[mutant.job_id] = excluded_reason(mutant, source, equivalents)
        if reasons[mutant.job_id] is None:
            chosen.append(mutant)
    return reasons, sorted(chosen, key=lambda m: (m.start, m.operator, m.occurrence))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", help="a target of mutation_targets.toml (repeatable; "
                                                          "default: all)")
    parser.add_argument("--sample", type=int, default=None, help="mutants per module, drawn with --seed "
                                                                 "(default: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)))
    parser.add_argument("--ref", default=None, help="git revision to measure (default: the working tree)")
    parser.add_argument("--out", type=Path, default=RESULT)
    parser.add_argument("--merge", action="store_true",
                        help="keep the other modules of an existing --out and replace only those measured now")
    parser.add_argument("--rescore", action="store_true",
                        help="run nothing: drop from --out's survivors the ones now documented as equivalent")
    parser.add_argument("--timeout-factor", type=float, default=4.0,
                        help="a mutant's tests time out (killed) after this x the baseline + 30 s")
    args = parser.parse_args(argv)
    if args.rescore:
        return rescore(args.out)
    from tqdm import tqdm

    targets = load_targets()
    names = args.module or list(targets)
    unknown = [n for n in names if n not in targets]
    if unknown:
        parser.error(f"unknown module(s) {unknown}; known: {sorted(targets)}")
    equivalents = load_equivalents()
    work = Path(tempfile.mkdtemp(prefix="horus-mutation-"))
    began = time.time()
    try:
        revision = materialize(args.ref, work / "w0")
        template = work / "w0" / "repo"
        for i in range(1, args.jobs):
            shutil.copytree(template, work / f"w{i}" / "repo")
            if SHARED.is_dir():
                (work / f"w{i}" / "shared").symlink_to(SHARED)
        report: dict[str, dict[str, object]] = {}
        plan: list[list[tuple[Mutant, str, str, float]]] = []  # per module
        rank_in_line: dict[tuple[str, str, int], int] = {}  # (module, operator, occurrence) -> rank on its line
        for name in names:
            target = targets[name]
            target.missing_tests = [t for t in target.tests if not (template / t).is_file()]
            target.tests = [t for t in target.tests if (template / t).is_file()]
            source = (template / target.path).read_text()
            found = enumerate_mutants(template, target)
            line_groups: dict[tuple[str, str], int] = {}
            for m in found:  # tests/test_mutation_sample.py finds a mutant again by (operator, code, rank)
                rank_in_line[(name, m.operator, m.occurrence)] = line_groups.get((m.operator, m.code), 0)
                line_groups[(m.operator, m.code)] = rank_in_line[(name, m.operator, m.occurrence)] + 1
            reasons, chosen = classify(found, source, equivalents, args.sample, args.seed)
            try:
                base_s = baseline(template, target)
            except BaselineFailed as exc:
                report[name] = {"path": target.path, "tests": target.tests, "baseline_failed": str(exc)}
                continue
            timeout = args.timeout_factor * base_s + 30.0
            report[name] = {
                "path": target.path, "tests": target.tests, "missing_tests": target.missing_tests,
                "mutants": len(found), "excluded_annotation": sum(r == "annotation" for r in reasons.values()),
                "excluded_invalid": sum(r == "invalid" for r in reasons.values()),
                "excluded_equivalent": sum(bool(r and r.startswith("equivalent")) for r in reasons.values()),
                "classified": len(reasons), "eligible": sum(r is None for r in reasons.values()), "run": len(chosen), "baseline_s": round(base_s, 2),
                "timeout_s": round(timeout, 1), "outcomes": {}, "survivors": [], "killed_mutants": [], "wall_s": 0.0,
            }
            plan.append([(m, target.path, test_command(target.tests), timeout) for m in chosen])
        import multiprocessing as mp

        copies = mp.Manager().Queue()
        for i in range(args.jobs):
            copies.put(str(work / f"w{i}" / "repo"))
        with ProcessPoolExecutor(args.jobs, initializer=_init_worker, initargs=(copies,)) as pool:
            interleaved = [item for group in zip_longest(*plan) for item in group if item is not None]
            futures = [pool.submit(_run_mutant, *item) for item in interleaved]  # modules advance together
            saved = time.time()
            for fut in tqdm(as_completed(futures), total=len(futures), desc="mutants", unit="mutant"):
                mutant, outcome, diff, test, wall = fut.result()
                entry = report[mutant.target]
                outcomes = entry["outcomes"]
                outcomes[outcome] = outcomes.get(outcome, 0) + 1  # type: ignore[index, union-attr, attr-defined]
                entry["wall_s"] = round(float(entry["wall_s"]) + wall, 1)  # type: ignore[arg-type]
                found = {"line": mutant.start[0], "operator": mutant.operator, "occurrence": mutant.occurrence,
                         "code": mutant.code,
                         "rank_in_line": rank_in_line[(mutant.target, mutant.operator, mutant.occurrence)]}
                if outcome == "survived":
                    entry["survivors"].append({**found, "diff": diff})  # type: ignore[union-attr]
                elif outcome == "killed":
                    entry["killed_mutants"].append({**found, "killed_by": test})  # type: ignore[union-attr]
                if time.time() - saved > 60:  # a partial result survives an interrupted run
                    score(report, args.sample)
                    write(args, revision, began, report, partial=True)
                    saved = time.time()
        score(report, args.sample)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write(args, revision, began, report, partial=False)
    print(f"{'module':<12} {'mutants':>7} {'run':>5} {'killed':>6} {'surv':>5} {'score':>6}  95% CI")
    for name, entry in report.items():
        if "baseline_failed" in entry:
            print(f"{name:<12} the tests fail without mutants: not measured")
            continue
        ci = entry["score_ci95"]
        value = entry["score"]
        print(f"{name:<12} {entry['mutants']:>7} {entry['run']:>5} {entry['killed']:>6} {entry['survived']:>5} "
              f"{'-' if value is None else f'{value:.0%}':>6}  {'' if not ci else f'{ci[0]:.0%}-{ci[1]:.0%}'}")
    print(f"wrote {args.out}")
    return 0


def rescore(path: Path) -> int:
    """Apply the equivalents documented since ``path`` was measured to its survivors (equivalence is static:
    such a mutant can only survive), and recompute the scores."""
    result = json.loads(path.read_text())
    equivalents = load_equivalents()
    for name, entry in result["modules"].items():
        if "baseline_failed" in entry:
            continue
        kept = []
        for survivor in entry["survivors"]:
            added = [line[1:].strip() for line in survivor["diff"].splitlines()
                     if line.startswith("+") and not line.startswith("+++")]
            mutated = added[0] if added else ""
            if any(e["target"] == name and survivor["operator"].endswith(e["operator"]) and e["code"] ==
                   survivor["code"] and e.get("mutated", mutated) == mutated for e in equivalents):
                entry["excluded_equivalent_after_run"] = entry.get("excluded_equivalent_after_run", 0) + 1
                entry["outcomes"]["survived"] -= 1
                entry["run"] -= 1
            else:
                kept.append(survivor)
        entry["survivors"] = kept
    score(result["modules"], result["sample"])
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"rescored {path}")
    return 0


def score(report: dict[str, dict[str, object]], sample: int | None) -> None:
    """Killed, survived, score and (sampled) its 95 % Wilson interval of every measured module, in place."""
    for entry in report.values():
        if "baseline_failed" in entry:
            continue
        outcomes = entry["outcomes"]
        killed = int(outcomes.get("killed", 0))  # type: ignore[union-attr]
        survived = int(outcomes.get("survived", 0))  # type: ignore[union-attr]
        scored = killed + survived
        entry["killed"], entry["survived"] = killed, survived
        entry["score"] = round(killed / scored, 4) if scored else None
        entry["score_ci95"] = [round(x, 4) for x in wilson(killed, scored)] if sample else None
        for key in ("survivors", "killed_mutants"):
            entry[key].sort(key=lambda s: (s["line"], s["operator"], s["occurrence"]))  # type: ignore[union-attr]


def write(args: argparse.Namespace, revision: str, began: float, report: dict[str, dict[str, object]],
          partial: bool) -> None:
    result = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "partial": partial,
        "revision": revision, "sample": args.sample, "seed": args.seed, "jobs": args.jobs,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "wall_s": round(time.time() - began, 1),
        "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
        "cosmic_ray": _version("cosmic-ray"), "modules": report,
    }
    if args.merge and args.out.is_file():  # the modules measured now replace theirs; each keeps its own run
        previous = json.loads(args.out.read_text())
        for entry in previous["modules"].values():
            entry.setdefault("measured", {k: previous.get(k) for k in ("command", "revision", "created", "seed")})
        now = {k: result[k] for k in ("command", "revision", "created", "seed")}
        result["modules"] = {**previous["modules"], **{n: {**e, "measured": now} for n, e in report.items()}}
        result["command"] = "several runs: see each module's 'measured'"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(args.out)


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
