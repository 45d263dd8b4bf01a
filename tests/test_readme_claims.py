"""The README's headline, guarded end to end on small fixed workloads: the default ``horus`` beats
``fifo-exclusive`` and its own co-location-off ablation on mean JCT where the cluster is congested.

Six seeds of a Poisson stream at offered load 2.5 and of a batch (120 jobs, 16 V100s, parametric truth,
analytic predictor; ``golden_workload``). Directions and tolerances were set from the measured spread, with
margin: on these workloads ``horus`` measured -9 % ... -45 % mean JCT against ``fifo-exclusive`` (mean of
per-seed changes about -25 % stream, -37 % batch) and -15 % ... +7.5 % against its ablation (about -7 % stream,
-13 % batch). The claim against the ablation does **not** hold on every stream seed (seed 6: +7.5 %), so it is
asserted on the mean over seeds, as the sweep reports it. Every run also stays above the mean-JCT lower bound.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from golden_workload import Workload, run_recorded

SEEDS = range(1, 7)
POLICIES = {"fifo": ("fifo-exclusive", {}), "horus": ("horus", {}), "ablation": ("horus", {"colocate": False})}


@cache
def summaries(kind: str) -> dict[str, list[dict[str, float]]]:
    load = 2.5 if kind == "stream" else 1.0
    out: dict[str, list[dict[str, float]]] = {label: [] for label in POLICIES}
    for seed in SEEDS:
        workload = Workload(f"{kind}-{seed}", kind, load, 120, 4, 4, seed)
        for label, (name, options) in POLICIES.items():
            out[label].append(run_recorded(workload, name, **options)[0])
    return out


def changes(kind: str, label: str, ref: str, metric: str = "mean_jct_s") -> np.ndarray:
    runs = summaries(kind)
    return np.array([a[metric] / b[metric] - 1 for a, b in zip(runs[label], runs[ref])])


@pytest.mark.parametrize(("kind", "mean_at_most", "each_at_most"), [("stream", -0.15, 0.0), ("batch", -0.25, -0.15)])
def test_horus_beats_fifo_exclusive_on_mean_jct(kind: str, mean_at_most: float, each_at_most: float) -> None:
    change = changes(kind, "horus", "fifo")
    assert change.mean() <= mean_at_most, change
    assert change.max() <= each_at_most, change


@pytest.mark.parametrize(("kind", "mean_at_most"), [("stream", -0.03), ("batch", -0.05)])
def test_horus_beats_its_co_location_off_ablation_on_mean_jct(kind: str, mean_at_most: float) -> None:
    change = changes(kind, "horus", "ablation")
    assert change.mean() <= mean_at_most, change
    if kind == "batch":
        assert change.max() < 0.0, change  # in a batch co-location paid on every seed


@pytest.mark.parametrize("kind", ["stream", "batch"])
def test_every_run_respects_the_lower_bounds_and_the_ablation_never_shares(kind: str) -> None:
    for label, runs in summaries(kind).items():
        for run in runs:
            assert run["mean_jct_s"] >= run["mean_jct_lower_bound_s"] * (1 - 1e-9), label
            assert run["makespan_s"] >= run["makespan_lower_bound_s"] * (1 - 1e-9), label
    assert all(run["colocated_share"] == 0 for run in summaries(kind)["ablation"])
    assert all(run["colocated_share"] > 0 for run in summaries(kind)["horus"])
