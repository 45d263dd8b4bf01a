"""Golden decisions: every registered policy's actions on two fixed small workloads, pinned.

Each policy (and the co-location-off ablations of ``horus`` and ``horus-las``) is simulated on a congested Poisson stream and
a batch (``golden_workload``: generated, seeded, parametric truth, analytic predictor, 16 V100s) and every
action it returns is compared with ``tests/golden/decisions/<label>.json``: the exact start and preemption
sequence (time, job, GPUs) and the run's summary. Unlike ``test_policies_reference`` (frozen code, no
telemetry) this covers the adaptive family, which learns from the running jobs' observed rates, the
faithful ``gandiva`` and ``oracle-truth``.

A deliberate change of decisions regenerates the files (review the diff of the JSON before committing):

    HORUS_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_decisions.py
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from golden_workload import Workload, run_recorded

from horus.policies.base import POLICIES

GOLDEN = Path(__file__).parent / "golden" / "decisions"
UPDATE = os.environ.get("HORUS_UPDATE_GOLDEN") == "1"
WORKLOADS = (Workload("stream-load2.5", "stream", 2.5, 60, 4, 4, 3), Workload("batch", "batch", 1.0, 48, 4, 4, 5))
VARIANTS: dict[str, tuple[str, dict[str, object]]] = {name: (name, {}) for name in POLICIES.names()}
VARIANTS["horus-solo"] = ("horus", {"colocate": False})
VARIANTS["horus-las-solo"] = ("horus-las", {"colocate": False})
EXCLUSIVE = {"fifo-exclusive", "sjf-exclusive", "tiresias", "horus-solo", "horus-las-solo"}
SUMMARY_KEYS = ("makespan_s", "mean_jct_s", "p95_jct_s", "mean_wait_s", "colocated_share", "oom_failures",
                "preemptions", "gpu_busy_allocated_mean")


def golden_run(label: str) -> dict[str, object]:
    name, options = VARIANTS[label]
    out: dict[str, object] = {"policy": name, "options": options, "workloads": {}}
    for workload in WORKLOADS:
        summary, log = run_recorded(workload, name, **options)
        out["workloads"][workload.name] = {  # type: ignore[index]
            "workload": {"kind": workload.kind, "load": workload.load, "jobs": workload.num_jobs,
                         "gpus": workload.nodes * workload.gpus_per_node, "seed": workload.seed},
            "summary": {k: summary.get(k) for k in SUMMARY_KEYS},
            "actions": log,
        }
    return out


def test_every_registered_policy_has_golden_decisions() -> None:
    """A new policy cannot land without its golden file (and a removed one leaves no stale file)."""
    if UPDATE:
        pytest.skip("regenerating")
    on_disk = sorted(p.stem for p in GOLDEN.glob("*.json"))
    assert on_disk == sorted(VARIANTS), "regenerate with HORUS_UPDATE_GOLDEN=1 (see the module docstring)"


@pytest.mark.parametrize("label", sorted(VARIANTS))
def test_decisions_match_the_golden_file(label: str) -> None:
    got = golden_run(label)
    path = GOLDEN / f"{label}.json"
    if UPDATE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n")
        return
    expected = json.loads(path.read_text())
    for name, want in expected["workloads"].items():
        have = got["workloads"][name]  # type: ignore[index]
        assert have["actions"] == want["actions"], first_difference(label, name, have["actions"], want["actions"])
        for key, value in want["summary"].items():
            now = have["summary"][key]
            assert (now is None) == (value is None) and (value is None or math.isclose(now, value, rel_tol=1e-9,
                                                                                        abs_tol=1e-9)), \
                f"{label} on {name}: {key} {now} != golden {value}"
    # the pinned runs exercise real decisions: every job started, and co-locating policies did co-locate
    for name, want in expected["workloads"].items():
        starts = [a for a in want["actions"] if " S " in a]
        assert len({a.split()[2] for a in starts}) == want["workload"]["jobs"], f"{label} on {name}"
    shares = [w["summary"]["colocated_share"] for w in expected["workloads"].values()]
    assert (max(shares) == 0) == (label in EXCLUSIVE), (label, shares)


def first_difference(label: str, workload: str, got: list[str], want: list[str]) -> str:
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return f"{label} on {workload}: action {i} is {a!r}, golden {b!r}"
    return f"{label} on {workload}: {len(got)} actions, golden {len(want)}"
