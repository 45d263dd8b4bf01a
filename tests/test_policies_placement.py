"""Placement choices of the exclusive, gandiva and horus policies on hand-built states."""

from __future__ import annotations

import pytest
from policies_fakes import make_state, policy, queue, run_job, starts
from policies_fakes import spec as fake_spec

from horus.policies.base import Start
from horus.state import SchedulerState

# model -> (predicted util, predicted memory MiB, iteration time s); cards have 16,000 MiB.
TABLE = {
    "big": (0.9, 4000.0, 1.0), "mid": (0.6, 3000.0, 1.0), "light": (0.2, 6000.0, 1.0),
    "small": (0.2, 1000.0, 1.0), "new": (0.4, 2000.0, 1.0), "u3": (0.3, 2000.0, 1.0),
    "u5": (0.5, 2000.0, 1.0), "u8": (0.8, 2000.0, 1.0), "huge": (0.5, 13000.0, 1.0),
}


def apply(state: SchedulerState, actions: list[object]) -> None:
    for action in actions:
        assert isinstance(action, Start)
        state.start(action.job_id, action.gpus, state.now)


# ---- exclusive ----------------------------------------------------------------------------------
def test_exclusive_never_shares_a_whole_gpu_job() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=4)
    for i in range(3):
        run_job(state, f"r{i}", "small", (i,))
    queue(state, "a", "small")
    queue(state, "b", "small")
    placed = starts(policy("fifo-exclusive").schedule(state))
    assert placed == {"a": (3,)}


def test_exclusive_best_fit_node_and_single_node_for_multi_gpu() -> None:
    state = make_state(TABLE, nodes=2, gpus_per_node=4)
    run_job(state, "r0", "small", (0,))
    run_job(state, "r1", "small", (1,))
    queue(state, "two", "small", gpus=2)
    queue(state, "three", "small", gpus=3)
    placed = starts(policy("fifo-exclusive").schedule(state))
    # node 0 has the fewest idle GPUs that still fit 2; the 3-GPU job fits only on node 1.
    assert sorted(placed["two"]) == [2, 3]
    assert len(set(placed["three"]) & {4, 5, 6, 7}) == 3


def test_exclusive_fractional_jobs_share_only_with_fractional_jobs() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    run_job(state, "whole", "small", (0,))
    run_job(state, "half", "small", (1,), fraction=0.5)
    queue(state, "q1", "small", fraction=0.5)
    queue(state, "q2", "small", fraction=0.25)
    queue(state, "q3", "small")
    placed = starts(policy("fifo-exclusive").schedule(state))
    assert placed == {"q1": (1,)}  # fills GPU 1 to share 1.0; nothing joins the whole-GPU job


# ---- gandiva-greedy (the strawman; the faithful gandiva: test_gandiva_faithful.py) ----
def test_gandiva_packs_least_loaded_memory_fit_even_above_full_utilization() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    run_job(state, "r0", "big", (0,))  # 1 resident, util 0.9
    run_job(state, "r1", "light", (1,))  # 2 residents, util 0.4 in total
    run_job(state, "r2", "light", (1,))
    queue(state, "a", "mid")  # util 0.6: GPU 0 would reach 1.5
    assert starts(policy("gandiva-greedy").schedule(state)) == {"a": (0,)}


def test_gandiva_respects_predicted_memory() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    run_job(state, "r0", "big", (0,))
    run_job(state, "r1", "big", (1,))
    queue(state, "a", "huge")  # 4,000 + 13,000 MiB > 16,000 MiB on either GPU
    assert policy("gandiva-greedy").schedule(state) == []


# ---- horus placement ----------------------------------------------------------------------------
def full_state_with_utils() -> SchedulerState:
    state = make_state(TABLE, nodes=1, gpus_per_node=4)
    for gpu, model in enumerate(["u8", "mid", "u3", "u5"]):
        run_job(state, f"r{gpu}", model, (gpu,))
    return state


def test_horus_avoids_overload_and_picks_best_scored_not_first_fit() -> None:
    state = full_state_with_utils()
    queue(state, "a", "new")  # util 0.4: GPU 0 -> 1.2 (over), GPU 1 -> 1.0 (fits, first fit), GPU 2 -> 0.7 (best)
    assert starts(policy("horus-paper").schedule(state)) == {"a": (2,)}


def test_horus_refuses_when_every_gpu_would_exceed_the_cap_but_a_higher_cap_allows_it() -> None:
    state = full_state_with_utils()
    queue(state, "a", "u8")  # 0.8 + at least 0.3 > 1.0 everywhere
    assert policy("horus-paper").schedule(state) == []
    assert starts(policy("horus-paper", util_cap=1.2).schedule(state)) == {"a": (2,)}


def test_horus_spreads_onto_idle_gpus_and_starts_many_jobs_in_one_call() -> None:
    state = make_state(TABLE, nodes=2, gpus_per_node=4)
    for i in range(5):
        queue(state, f"j{i}", "new")
    placed = starts(policy("horus-paper").schedule(state))
    assert len(placed) == 5
    gpus = [g for v in placed.values() for g in v]
    assert len(set(gpus)) == 5  # idle GPUs are preferred over sharing
    assert len({g // 4 for g in gpus}) == 2 and sum(g < 4 for g in gpus) == 4  # fills one node first


def test_horus_colocates_when_full_within_memory_and_cap() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    queue(state, "a", "mid")
    queue(state, "b", "mid")
    queue(state, "c", "small")
    queue(state, "d", "small")
    queue(state, "e", "mid")
    pol = policy("horus-paper")
    actions = pol.schedule(state)
    placed = starts(actions)
    assert set(placed) == {"a", "b", "c", "d"}  # e would push a GPU to 0.6 + 0.2 + 0.6 > 1.0
    apply(state, actions)
    assert state.load.pred_util.max() <= 1.0 + 1e-9


def test_horus_multi_gpu_job_uses_one_node_when_possible() -> None:
    state = make_state(TABLE, nodes=2, gpus_per_node=4)
    run_job(state, "r", "small", (4,))
    queue(state, "four", "small", gpus=4)
    queue(state, "three", "small", gpus=3)
    placed = starts(policy("horus-paper").schedule(state))
    assert sorted(placed["four"]) == [0, 1, 2, 3]
    assert {g // 4 for g in placed["three"]} == {1}


def test_horus_places_an_oom_failed_job_only_on_an_empty_gpu() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    run_job(state, "r", "small", (0,))
    run_job(state, "s", "small", (1,))
    queue(state, "a", "small")
    assert starts(policy("horus-paper").schedule(state)) == {"a": (0,)}
    state.queue["a"].oom_failures = 1
    assert policy("horus-paper").schedule(state) == []


def test_horus_lookahead_bypasses_blocked_head_until_aging_bound() -> None:
    state = make_state(TABLE, nodes=1, gpus_per_node=2)
    run_job(state, "r0", "u5", (0,))
    run_job(state, "r1", "u5", (1,))
    pol = policy("horus-paper", max_bypass=1)
    queue(state, "head", "mid")  # 0.5 + 0.6 > 1.0: blocked
    queue(state, "s1", "small")
    actions = pol.schedule(state)
    assert starts(actions) == {"s1": (0,)}
    apply(state, actions)
    state.now = 1.0
    queue(state, "s2", "small")
    actions = pol.schedule(state)
    assert starts(actions) == {"s2": (1,)}  # second bypass: count 2 > max_bypass from now on
    apply(state, actions)
    queue(state, "s3", "small")
    assert pol.schedule(state) == []  # s3 would fit, but the head must go first
    state.finish("r0")
    state.finish("s1")
    placed = starts(pol.schedule(state))
    assert placed["head"] == (0,)


def test_horus_respects_requested_gpu_type() -> None:
    from horus.cluster import Cluster, GPUType, Node

    from policies_fakes import TablePredictor

    k80, v100 = GPUType("k80", 12_000, 0.4), GPUType("v100", 16_000, 1.0)
    state = SchedulerState(Cluster([Node("a", k80, 2), Node("b", v100, 2)]), TablePredictor(TABLE))
    queue(state, "a", "small", gpu_type="v100", gpus=2)
    queue(state, "b", "small", gpu_type="k80")
    placed = starts(policy("horus-paper").schedule(state))
    assert sorted(placed["a"]) == [2, 3] and placed["b"][0] in (0, 1)


@pytest.mark.parametrize("name", ["fifo-exclusive", "sjf-exclusive", "gandiva", "horus", "tiresias"])
def test_every_policy_returns_nothing_for_an_empty_queue(name: str) -> None:
    assert policy(name).schedule(make_state(TABLE)) == []


def test_horus_idle_fast_path_matches_the_general_cost() -> None:
    import numpy as np

    from horus.policies.parts.gpu_selection import select_gpus
    from horus.policies.placements.horus import HorusPlacement
    from horus.state import QueuedJob

    from policies_fakes import spec

    rng = np.random.default_rng(3)
    models = ["small", "new", "u3", "u5", "light"]
    for trial in range(20):
        state = make_state(TABLE, nodes=4, gpus_per_node=4)
        for i, g in enumerate(rng.choice(16, size=int(rng.integers(1, 15)), replace=False)):
            run_job(state, f"r{i}", str(rng.choice(models)), (int(g),))
        placement = HorusPlacement()
        load = state.tentative()
        placement.begin(load, state)
        job = QueuedJob(spec(f"q{trial}", str(rng.choice(models))), 0.0)
        fast = placement.evaluate(job, load, state)
        general = select_gpus(placement.cost_per_gpu(job, load, state), 1, placement.idx)
        assert fast is not None and general is not None
        assert fast[0] == general[0] and fast[1] == pytest.approx(general[1])


@pytest.mark.parametrize("full_scan_nodes", [0, None])
def test_horus_node_bounds_match_the_general_cost(full_scan_nodes: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The node-bound shortcut (nodes costed in bound order; ``full_scan_nodes`` 0) and, on these small clusters, the
    every-node scan that replaces it (None: the default ``FULL_SCAN_NODES``) choose exactly what costing every GPU and
    ``select_gpus`` choose, with the same cost, on shared loads with tied nodes, under a utilization cap
    above 1 (overload term) and after planned starts; ``evaluate`` of a multi-GPU job agrees too."""
    import numpy as np

    from horus.policies.placements import horus as horus_placement

    if full_scan_nodes is not None:
        monkeypatch.setattr(horus_placement, "FULL_SCAN_NODES", full_scan_nodes)
    else:
        assert horus_placement.FULL_SCAN_NODES >= 40  # every cluster below takes the scan

    from horus.policies.parts.gpu_selection import select_gpus
    from horus.policies.parts.ordered import Placement
    from horus.policies.placements.horus import HorusPlacement
    from horus.state import QueuedJob, gpu_share

    rng = np.random.default_rng(5)
    models = ["small", "new", "u3", "u5", "light", "big", "mid", "huge"]
    compared = 0
    for trial in range(60):
        width = int(rng.choice([4, 8]))
        state = make_state(TABLE, nodes=int(rng.integers(2, 40)), gpus_per_node=width)
        n = state.cluster.num_gpus
        for i in range(int(rng.integers(0, 2 * n))):  # some GPUs shared, some nodes left alike (ties)
            g = int(rng.integers(n))
            if state.load.n_residents[g] < 3:
                run_job(state, f"r{i}", str(rng.choice(models)), (g,))
        placement = HorusPlacement(util_cap=float(rng.choice([1.0, 1.5])))
        load = state.tentative()
        placement.begin(load, state)
        for j in range(12):
            job = QueuedJob(fake_spec(f"q{trial}-{j}", str(rng.choice(models)), gpus=int(rng.integers(1, width + 1))), 0.0)
            found = placement.bounded_choice(job, load, state)
            if found is not None:
                cost = placement.cost_per_gpu(job, load, state)
                assert (found or None) == (None if cost is None else select_gpus(cost, job.spec.num_gpus, placement.idx))
                compared += bool(found)
            if job.spec.num_gpus > 1:
                placed = placement.evaluate(job, load, state)
                assert placed == Placement.evaluate(placement, job, load, state)
            else:
                placed = placement.place(job, load, state), 0.0
            if placed is not None and placed[0] is not None:
                gpus = placed[0]
                load.add(gpus, state.predict(job.spec, state.cluster.gpus[gpus[0]].gpu_type), gpu_share(job.spec))
                placement.update(load, state)
    assert compared > 200


def test_horus_iasp_node_bounds_match_costing_every_gpu() -> None:
    """horus-iasp's choice through the node-bound shortcut (interference added on the nodes it costs) is
    exactly its choice from costing every GPU, planned starts included."""
    import numpy as np

    from horus.state import QueuedJob, gpu_share

    rng = np.random.default_rng(7)
    models = ["small", "new", "u3", "u5", "light", "big", "mid"]
    compared = 0
    for trial in range(25):
        width = int(rng.choice([4, 8]))
        state = make_state(TABLE, nodes=int(rng.integers(2, 30)), gpus_per_node=width)
        n = state.cluster.num_gpus
        for i in range(int(rng.integers(0, 2 * n))):
            g = int(rng.integers(n))
            if state.load.n_residents[g] < 2:
                run_job(state, f"r{i}", str(rng.choice(models)), (g,))
        fast, slow = policy("horus-iasp"), policy("horus-iasp")
        slow._losses_never_negative = lambda: False  # type: ignore[attr-defined, method-assign]
        loads = [fast.planning_load(state).copy(), slow.planning_load(state).copy()]
        fast.placement.begin(loads[0], state)
        slow.placement.begin(loads[1], state)
        assert fast._losses_never_negative()  # type: ignore[attr-defined]
        for j in range(10):
            job = QueuedJob(fake_spec(f"q{trial}-{j}", str(rng.choice(models)), gpus=int(rng.integers(1, width + 1))), 0.0)
            choice = fast.choose(job, loads[0], state)
            assert choice == slow.choose(job, loads[1], state)
            if choice is None:
                continue
            compared += 1
            for p, load in zip((fast, slow), loads):
                load.add(choice[0], state.predict(job.spec, state.cluster.gpus[choice[0][0]].gpu_type), gpu_share(job.spec))
                p.note_start(job, choice[0], state)
                p.placement.update(load, state)
    assert compared > 100


@pytest.mark.parametrize("full_above", [64, 2])
def test_fit_counts_match_possible_rows_as_the_load_changes(full_above: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``FitCounts`` (horus-paper's window counts kept across calls, redone only for GPUs whose load changed: one,
    several, or more than ``FULL_ABOVE`` taken afresh) admits exactly what ``HorusPlacement.possible_rows`` admits on a
    fresh summary, and its ``room`` is ``any_room``: on loads changed in place and on new load objects, with gangs,
    out-of-memory jobs, a utilization cap above 1 and the window changed now and then (jobs kept from the last look keep
    their counts)."""
    import numpy as np

    from horus.policies.parts import fit_counts
    from horus.policies.placements.horus import HorusPlacement
    from horus.state import QueuedJob

    monkeypatch.setattr(fit_counts, "FULL_ABOVE", full_above)
    rng = np.random.default_rng(11)
    models = list(TABLE)
    refused = admitted = 0
    for trial in range(6):
        state = make_state(TABLE, nodes=6, gpus_per_node=4)
        n = state.cluster.num_gpus
        placement = HorusPlacement(util_cap=float(rng.choice([1.0, 1.5])), max_residents=int(rng.choice([2, 4])))
        counts = placement.fit_counts()
        assert counts is not None
        load = state.tentative()
        for i in range(n):
            load.n_residents[i] = int(rng.integers(1, 5))
            load.pred_util[i], load.pred_mem_mib[i] = rng.uniform(0.1, 1.4), rng.uniform(500, 16_000)
        jobs: list[QueuedJob] = []
        for step in range(60):
            if step % 5 == 0:  # the window changes: some jobs leave, some join (at the end), now and then all
                kept = [job for job in jobs if rng.random() < (0.0 if step % 15 == 0 else 0.7)]
                jobs = kept + [QueuedJob(fake_spec(f"q{trial}-{step}-{j}", str(rng.choice(models)),
                                                   gpus=int(rng.choice([1, 1, 2, 3, 8]))), 0.0,
                                         oom_failures=int(rng.random() < 0.2)) for j in range(int(rng.integers(0, 6)))]
                jobs = jobs or [QueuedJob(fake_spec(f"q{trial}-{step}", "big", gpus=2), 0.0)]
            if rng.random() < 0.2:
                load = load.copy()  # a new load object (the oracle plans on one per call)
            for g in rng.choice(n, size=int(rng.choice([0, 1, 1, 1, 3, n])), replace=False):
                busy = rng.random() < 0.9
                load.n_residents[g] = int(rng.integers(1, 5)) if busy else 0
                load.pred_util[g] = rng.uniform(0.05, 1.2) if busy else 0.0
                load.pred_mem_mib[g] = rng.uniform(500, 16_000) if busy else 0.0
            placement.begin(load, state)
            rows = placement.requests(jobs, state)
            got = counts.admitted(jobs, rows, load, state.mem_capacity_mib)
            assert got.tolist() == placement.possible_rows(rows, load, state).tolist()
            assert counts.room(load, state.mem_capacity_mib) == placement.any_room()
            refused += int(not got.any())
            admitted += int(got.all())
    assert refused > 20 and admitted > 20


def test_possible_rows_summary_refusal_matches_the_gpu_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """``possible_rows`` of a few rows, answered by the summary alone where it refuses them all (Python floats), is
    what the per-GPU arrays answer (``FEW_ROWS`` 0): on random loads, after planned starts (the summary kept by
    ``update_added``), with idle GPUs or none, gangs, out-of-memory rows, zero memory and utilization at the cap."""
    import numpy as np

    from horus.policies.placements import horus as horus_placement
    from horus.policies.placements.horus import HorusPlacement
    from horus.predict.base import Prediction

    rng = np.random.default_rng(17)
    settled = compared = 0
    for trial in range(40):
        state = make_state(TABLE, nodes=int(rng.integers(1, 6)), gpus_per_node=4)
        n = state.cluster.num_gpus
        placement = HorusPlacement(util_cap=float(rng.choice([1.0, 1.5])), max_residents=int(rng.choice([2, 4])))
        load = state.tentative()
        for i in range(n):
            if rng.random() < 0.9:  # utilization that sums to the cap exactly; some GPUs with no free memory left
                load.n_residents[i] = int(rng.integers(1, 4))
                load.pred_util[i] = rng.choice([0.1, 0.4, 0.5, 0.8, 1.2])
                full = rng.random() < 0.3
                load.pred_mem_mib[i] = (1.0 - placement.mem_margin) * state.mem_capacity_mib[i] if full else \
                    rng.uniform(500, 16_000)
        placement.begin(load, state)
        for step in range(8):
            rows = np.zeros((int(rng.integers(1, 10)), 5))
            rows[:, 0] = rng.choice([1, 1, 2, 4], size=len(rows))
            rows[:, 1] = rng.choice([0.0, 1_000.0, 8_000.0, 15_000.0, 17_000.0], size=len(rows))
            rows[:, 2] = rng.choice([0.0, 0.2, 0.5, 0.6, 1.0], size=len(rows))
            rows[:, 4] = rng.random(len(rows)) < 0.15
            g = int(rng.integers(n))  # a row asking for exactly one GPU's free memory
            rows[0, 1] = max((1.0 - placement.mem_margin) * state.mem_capacity_mib[g] - load.pred_mem_mib[g], 0.0)
            got = placement.possible_rows(rows, load, state).tolist()
            settled += placement._summary_refuses(rows) if len(rows) <= horus_placement.FEW_ROWS else 0
            monkeypatch.setattr(horus_placement, "FEW_ROWS", 0)
            assert got == placement.possible_rows(rows, load, state).tolist()
            monkeypatch.undo()
            compared += 1
            g = int(rng.integers(n))  # a planned start on one GPU: the summary is kept, not rescanned
            load.add((g,), Prediction(float(rng.choice([0.1, 0.3])), float(rng.uniform(500, 6_000)), 1.0), 1.0)
            placement.update_added(load, state, (g,))
    assert compared == 320 and settled > 30
