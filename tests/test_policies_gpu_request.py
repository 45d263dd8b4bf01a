"""Every registered policy honours multi-type GPU requests ("P100|T4": either type, nothing else)."""

from __future__ import annotations

import pytest
from policies_fakes import TablePredictor, TableTruth, policy, queue, starts

from horus.cluster import Cluster, GPUType, Node
from horus.jobs import JobSpec
from horus.plugins import load_all
from horus.policies.parts.cluster_index import cluster_index
from horus.policies.base import POLICIES
from horus.sim.engine import SimConfig, simulate
from horus.state import SchedulerState

load_all("horus.policies")

TABLE = {"resnet18": (0.3, 2000.0, 0.1)}  # a catalog model: the engine needs its size
TYPES = [GPUType("V100", 16_000, 1.0), GPUType("P100", 16_000, 0.75), GPUType("T4", 16_000, 0.3),
         GPUType("A10", 24_000, 0.75)]
ACCEPTED = {"P100", "T4"}


def mixed_cluster() -> Cluster:
    return Cluster([Node(f"n{i}-{t.name}", t, 2) for i in range(2) for t in TYPES])


def test_request_mask_accepts_every_listed_type_only() -> None:
    idx = cluster_index(mixed_cluster())
    mask = idx.request_mask("P100|T4")
    names = [g.gpu_type.name for g in idx.cluster.gpus]
    assert [n for n, ok in zip(names, mask) if ok] == [n for n in names if n in ACCEPTED]
    assert idx.request_mask("P100|T4") is mask  # cached per request string
    assert idx.request_mask(None) is None
    assert not idx.request_mask("H100").any()  # a type the cluster lacks matches nothing


@pytest.mark.parametrize("name", POLICIES.names())
def test_policy_places_multi_type_request_only_on_accepted_types(name: str) -> None:
    cluster = mixed_cluster()
    state = SchedulerState(cluster, TablePredictor(TABLE))
    for i in range(6):
        queue(state, f"j{i}", "resnet18", gpu_type="P100|T4")
    queue(state, "pair", "resnet18", gpu_type="T4|P100", gpus=2)
    pol = policy(name)
    if pol.is_oracle:
        pol.bind_truth(TableTruth(TABLE))
    placed = starts(pol.schedule(state))
    assert len(placed) >= 4, placed  # the accepted types have 8 GPUs: several jobs must start
    for job_id, gpus in placed.items():
        assert {cluster.gpus[g].gpu_type.name for g in gpus} <= ACCEPTED, (job_id, gpus)


@pytest.mark.parametrize("name", POLICIES.names())
def test_simulated_multi_type_requests_all_finish_on_accepted_types(name: str) -> None:
    cluster = mixed_cluster()
    jobs = [JobSpec(f"j{i}", float(i), 1 + i % 2, "resnet18", 1, 500.0, gpu_type_request="P100|T4") for i in range(12)]
    truth = TableTruth(TABLE)
    result = simulate(jobs, cluster, POLICIES.create(name), truth, TablePredictor(TABLE), SimConfig())
    assert result.summary["jobs_completed"] == len(jobs)  # the engine accepted every start
