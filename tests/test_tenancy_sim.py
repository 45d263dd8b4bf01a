"""Tenancy in the simulator, the trace formats and ``horus simulate`` (docs/tenancy.md).

Quotas under adversarial load (a queue floods, a latecomer gets its guarantee by reclaim at once), borrowing and
its limit, priority classes, charges of shared GPUs, every registered policy under a tenancy, the trace loaders'
queue columns, the cluster spec's ``tenancy:`` section and the CLI. Real truth, predictor, policies and engine on
tiny clusters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import assert_clear, run

from horus.cluster import Cluster, Node
from horus.clusterspec import load_cluster, load_spec, load_tenancy, parse_spec
from horus.core import create_policy
from horus.core.tenancy import Admission
from horus.errors import HorusInputError
from horus.gpu_types import PRESETS
from horus.jobs import JobSpec
from horus.plugins import load_all
from horus.policies.base import POLICIES
from horus.sim.engine import SimResult, simulate
from horus.sim.world import build_predictor, build_truth
from horus.state import SchedulerState
from horus.tenancy import PriorityClass, Queue, Tenancy
from horus.traces import load_trace

SHARED = Path("/work/shared/data/traces")
PHILLY = SHARED / "philly" / "philly_jobs.csv"
OPENB = SHARED / "alibaba-openb" / "openb_pod_list_default.csv"
SMALL = ("resnet18_cifar", 16)  # a small job type of the parametric world: low utilization, little memory


def tiny(gpus_per_node: int = 4, nodes: int = 1) -> Cluster:
    return Cluster([Node(f"n{i}", PRESETS["V100"], gpus_per_node) for i in range(nodes)])


def world(cluster: Cluster) -> tuple[object, object]:
    return build_truth("parametric", None, cluster), build_predictor("physical", None)


def job(job_id: str, submit: float, queue: str | None, *, gpus: int = 1, iterations: float = 20_000,
        priority: str | None = None, fraction: float | None = None) -> JobSpec:
    return JobSpec(job_id, submit, gpus, SMALL[0], SMALL[1], iterations, fraction, queue=queue, priority=priority)


def run_sim(jobs: Sequence[JobSpec], cluster: Cluster, tenancy: Tenancy | None, policy: str = "fifo-exclusive",
            **options: object) -> SimResult:
    truth, predictor = world(cluster)
    return simulate(jobs, cluster, create_policy(policy, options, has_truth=True), truth, predictor,  # type: ignore[arg-type]
                    tenancy=tenancy)


def running_at(result: SimResult, t: float, prefix: str) -> int:
    """Jobs whose id starts with ``prefix`` holding a GPU at time ``t`` (from the placements)."""
    p = result.placements
    live = p[(p["start"] <= t) & (p["end"] > t) & (p["outcome"] != "oom") & p["job_id"].str.startswith(prefix)]
    return live["job_id"].nunique()


def peak(result: SimResult, prefix: str) -> int:
    p = result.placements
    return max((running_at(result, float(t), prefix) for t in p["start"]), default=0)


def queue_row(result: SimResult, name: str) -> pd.Series:
    return result.queues.set_index("queue").loc[name]


def two_queues(borrow_a: float | None = None) -> Tenancy:
    return Tenancy({"a": Queue("a", {"*": 4.0}, borrow_a), "b": Queue("b", {"*": 4.0})})


# ---- quotas, borrowing, reclaim --------------------------------------------------------------------------
FLOOD_AT, LATE_AT = 0.0, 1800.0


def flood_jobs() -> list[JobSpec]:
    """Queue a floods an 8-GPU cluster with 24 long jobs; queue b's 4 jobs (its guarantee) come later."""
    return ([job(f"a{i:02d}", FLOOD_AT, "a", iterations=150_000) for i in range(24)]  # hours each
            + [job(f"b{i}", LATE_AT + i, "b", iterations=5_000) for i in range(4)])


@pytest.mark.parametrize("policy", ["fifo-exclusive", "horus", "tiresias"])
def test_latecomer_gets_its_guarantee_at_once_by_reclaim(policy: str) -> None:
    cluster = tiny(4, 2)
    result = run_sim(flood_jobs(), cluster, two_queues(), policy)
    assert running_at(result, LATE_AT - 1, "a") == 8  # a borrowed the whole cluster while b was idle
    jobs = result.jobs.set_index("job_id")
    late = jobs.loc[[f"b{i}" for i in range(4)]]
    # within b's guarantee: each starts when it arrives (the scheduling step of its arrival), by reclaim
    assert (late["first_start"] - late["submit"]).max() == pytest.approx(0.0, abs=1e-6)
    assert running_at(result, LATE_AT + 10, "a") == 4  # the borrowed GPUs went back to their owner
    a, b = queue_row(result, "a"), queue_row(result, "b")
    assert a["reclaimed"] >= 4 and b["reclaimed"] == 0
    assert result.summary["quota_violation_s"] == 0 and (result.queues["over_limit_s"] == 0).all()
    assert b["guarantee_attainment"] == pytest.approx(1.0, abs=1e-6)
    assert result.summary["jobs_completed"] == 28


def test_borrowing_stays_within_its_limit_and_is_used_when_idle() -> None:
    cluster = tiny(4, 2)
    jobs = [job(f"a{i:02d}", 0.0, "a") for i in range(16)]
    limited = run_sim(jobs, cluster, two_queues(borrow_a=2.0))
    free = run_sim(jobs, cluster, two_queues(borrow_a=None))
    assert peak(limited, "a") == 6  # guarantee 4 + borrow limit 2, though 2 GPUs stay idle
    assert peak(free, "a") == 8
    assert limited.summary["quota_violation_s"] == 0
    assert free.summary["makespan_s"] < limited.summary["makespan_s"]
    a = queue_row(free, "a")
    assert a["used_gpu_h"] > 1.5 * a["guaranteed_received_gpu_h"]  # half of its GPU time was borrowed


def test_without_tenancy_the_flood_starves_the_latecomer() -> None:
    """The control of the reclaim test: the same jobs without a tenancy make b wait behind a's flood."""
    result = run_sim(flood_jobs(), tiny(4, 2), None)
    late = result.jobs.set_index("job_id").loc[[f"b{i}" for i in range(4)]]
    assert (late["first_start"] - late["submit"]).min() > 3600
    assert result.queues.empty


# ---- priority classes -------------------------------------------------------------------------------------
def priority_tenancy() -> Tenancy:
    classes = {"low": PriorityClass("low", 0, True), "pinned": PriorityClass("pinned", 0, False),
               "high": PriorityClass("high", 10, True)}
    return Tenancy({"q": Queue("q", {"*": 4.0}, 0.0), "other": Queue("other", {"*": 0.0})}, classes,
                   default_priority="low")


def test_higher_class_preempts_lower_in_its_queue_never_a_non_preemptible_job() -> None:
    jobs = ([job(f"low{i}", 0.0, "q", priority="low") for i in range(2)]
            + [job(f"pin{i}", 0.0, "q", priority="pinned") for i in range(2)]
            + [job(f"high{i}", 600.0 + i, "q", priority="high", iterations=4_000) for i in range(3)]
            + [job("other-high", 600.0, "other", priority="high", iterations=4_000)])
    result = run_sim(jobs, tiny(4), priority_tenancy())
    frame = result.jobs.set_index("job_id")
    assert (frame.loc[["pin0", "pin1"], "preemptions"] == 0).all()  # never preempted
    assert (frame.loc[["low0", "low1"], "preemptions"] >= 1).all()
    assert (frame.loc[["high0", "high1"], "first_start"] == frame.loc[["high0", "high1"], "submit"]).all()
    # the third high job finds only non-preemptible jobs left: it waits for a GPU to free up
    assert frame.loc["high2", "first_start"] > frame.loc["high2", "submit"] + 60
    q = queue_row(result, "q")
    assert q["priority_preempted"] == 2  # the two low jobs, once each; another queue's class preempts nothing
    assert frame.loc["other-high", "first_start"] > 600.0
    assert result.summary["quota_violation_s"] == 0 and result.summary["jobs_completed"] == len(jobs)


# ---- charges of shared GPUs -------------------------------------------------------------------------------
def one_queue_of_one_gpu(charge: str = "equal") -> Tenancy:
    return Tenancy({"a": Queue("a", {"*": 1.0}, 0.0), "b": Queue("b", {"*": 1.0})}, charge=charge)


@pytest.mark.parametrize("policy", ["gandiva", "fifo-exclusive"])
def test_fractional_jobs_run_more_jobs_than_the_quota_in_whole_gpus(policy: str) -> None:
    """Half-GPU jobs are charged half a GPU: a queue with a 1-GPU limit runs two at once, co-located."""
    jobs = [job(f"a{i}", 0.0, "a", fraction=0.5, iterations=5_000) for i in range(6)]
    result = run_sim(jobs, tiny(2), one_queue_of_one_gpu(), policy)
    assert peak(result, "a") == 2
    assert result.summary["colocated_share"] > 0.9
    a = queue_row(result, "a")
    busy_h = (result.jobs["end"].max() - result.jobs["submit"].min()) / 3600
    assert a["used_gpu_h"] == pytest.approx(busy_h, rel=0.05)  # charged 1 GPU while two halves ran, not 2
    assert a["over_limit_s"] == 0


def co_located_state(charge: str) -> tuple[SchedulerState, Admission]:
    """Two whole-GPU jobs of different queues on GPU 0, one alone on GPU 1 (placed as a policy would)."""
    cluster = tiny(2)
    state = SchedulerState(cluster, build_predictor("physical", None))
    admission = Admission(Tenancy({"a": Queue("a", {"*": 1.0}), "b": Queue("b", {"*": 1.0})}, charge=charge))
    small = JobSpec("small", 0.0, 1, SMALL[0], SMALL[1], 1000, queue="a")
    large = JobSpec("large", 0.0, 1, "resnet50", 128, 1000, queue="b")
    alone = JobSpec("alone", 0.0, 1, SMALL[0], SMALL[1], 1000, queue="a")
    for spec in (small, large, alone):
        state.submit(spec, 0.0)
    admission.step(state, 0.0, lambda job_id: None)
    state.start("small", (0,), 0.0)
    state.start("large", (0,), 0.0)
    state.start("alone", (1,), 0.0)
    admission.settle(state)
    return state, admission


def test_a_shared_gpu_is_split_among_its_residents() -> None:
    _, equal = co_located_state("equal")
    assert equal.charge_of("small") == pytest.approx(0.5) and equal.charge_of("large") == pytest.approx(0.5)
    assert equal.charge_of("alone") == pytest.approx(1.0)
    assert equal.accounts["a"].used() == pytest.approx(1.5) and equal.accounts["b"].used() == pytest.approx(0.5)
    state, util = co_located_state("util")
    u_small = state.predict(state.running["small"].spec, state.cluster.gpus[0].gpu_type).util
    u_large = state.predict(state.running["large"].spec, state.cluster.gpus[0].gpu_type).util
    assert u_small < u_large  # the premise: the large job keeps the GPU busier
    assert util.charge_of("small") == pytest.approx(u_small / (u_small + u_large))
    assert util.charge_of("small") + util.charge_of("large") == pytest.approx(1.0)  # a GPU in use charges 1


def test_colocation_lets_a_queue_run_more_whole_gpu_jobs_than_its_quota() -> None:
    """A queue with a 1-GPU limit runs several whole-GPU jobs at once when the policy co-locates them on its GPU:
    each is charged its part of the GPU, so the start check lets the next one join. (The policy does not know the
    limit: where it would rather use another, idle GPU, the start check holds that start back, as below.)"""
    jobs = [job(f"a{i}", 0.0, "a", iterations=5_000) for i in range(6)]
    result = run_sim(jobs, tiny(1), one_queue_of_one_gpu(), "gandiva-greedy")
    assert peak(result, "a") > 1  # several on its one GPU, charged one GPU in all
    a = queue_row(result, "a")
    assert a["jobs_per_charged_gpu"] > 1.5 and a["over_limit_s"] == 0
    spread = run_sim(jobs, tiny(2), one_queue_of_one_gpu(), "gandiva-greedy")
    assert spread.summary["quota_violation_s"] == 0  # it would spread them over both GPUs: held back


# ---- every policy ------------------------------------------------------------------------------------------
load_all("horus.policies")


@pytest.mark.parametrize("policy", POLICIES.names())
def test_every_policy_runs_under_a_tenancy(policy: str) -> None:
    jobs = ([job(f"a{i}", 30.0 * i, "a", gpus=1 + (i % 2), iterations=3_000) for i in range(8)]
            + [job(f"b{i}", 400.0 + 30.0 * i, "b", iterations=3_000) for i in range(4)])
    tenancy = Tenancy({"a": Queue("a", {"*": 2.0}), "b": Queue("b", {"*": 2.0}, 1.0)})
    result = run_sim(jobs, tiny(4), tenancy, policy)
    assert result.summary["jobs_completed"] == len(jobs)
    assert result.summary["quota_violation_s"] == 0
    assert list(result.queues["queue"]) == ["a", "b"] and list(result.queues["jobs"]) == [8, 4]
    assert (result.queues["completed"] == result.queues["jobs"]).all()
    assert peak(result, "b") <= 3  # its guarantee plus its borrowing limit


def test_unknown_queue_is_refused_before_the_run() -> None:
    with pytest.raises(HorusInputError, match="job 'x': .*unknown queue 'nope'"):
        run_sim([job("x", 0.0, "nope")], tiny(2), two_queues())


# ---- traces: queue columns ---------------------------------------------------------------------------------
def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_horus_csv_queue_and_priority_columns(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path / "t.csv", "job_id,submit_time,num_gpus,model,batch_size,duration_s,queue,priority\n"
                                                 "j1,0,1,,,600,team-a,high\nj2,5,2,,,600,,\nj3,9,1,,,600,team.b,\n"), "horus")
    assert [(j.queue, j.priority) for j in trace.jobs] == [("team-a", "high"), (None, None), ("team.b", None)]
    truth, _ = world(tiny(2))
    from horus.traces import materialize

    specs = materialize(trace, truth, reference_gpu=PRESETS["V100"])  # type: ignore[arg-type]
    assert [(s.queue, s.priority) for s in specs] == [("team-a", "high"), (None, None), ("team.b", None)]
    with pytest.raises(HorusInputError, match=r"b.csv: line 3, column 'queue': expected a queue name .*got 'a b'"):
        load_trace(write(tmp_path / "b.csv", "job_id,submit_time,num_gpus,model,batch_size,duration_s,queue\n"
                                             "j1,0,1,,,600,ok\nj2,1,1,,,600,a b\n"), "horus")


def test_philly_cluster_column_is_the_queue(tmp_path: Path) -> None:
    header = "timestamp,duration,num_gpus,gpu_time,cluster\n"
    trace = load_trace(write(tmp_path / "p.csv", header + "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
                                                          "2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n"
                                                          "2017-10-09 06:20:00,10.0,1,10.0,\n"), "philly")
    assert [j.queue for j in trace.jobs] == ["6214e9", None, "11cb48"]  # sorted by submit time
    bare = load_trace(write(tmp_path / "n.csv", "timestamp,duration,num_gpus\n2017-10-09 07:01:55,66.0,1\n"), "philly")
    assert bare.jobs[0].queue is None
    with pytest.raises(HorusInputError, match=r"x.csv: line 3, column 'cluster': expected a queue \(virtual cluster\)"):
        load_trace(write(tmp_path / "x.csv", header + "2017-10-09 07:01:55,66.0,1,66.0,ok\n"
                                                      "2017-10-09 07:01:56,66.0,1,66.0,vc/1\n"), "philly")


def test_openb_qos_column_is_the_queue(tmp_path: Path) -> None:
    header = "name,num_gpu,gpu_milli,qos,creation_time,deletion_time,scheduled_time\n"
    trace = load_trace(write(tmp_path / "o.csv", header + "p0,1,1000,LS,0,100,0\np1,1,500,BE,5,50,6\n"
                                                          "p2,0,0,LS,1,9,1\n"), "openb")
    assert [(j.job_id, j.queue) for j in trace.jobs] == [("p0", "LS"), ("p1", "BE")]
    with pytest.raises(HorusInputError, match=r"y.csv: line 2, column 'qos'"):
        load_trace(write(tmp_path / "y.csv", header + "p0,1,1000,L S,0,100,0\n"), "openb")


@pytest.mark.skipif(not PHILLY.is_file(), reason=f"{PHILLY} not present (shared data)")
def test_real_philly_virtual_clusters() -> None:
    trace = load_trace(PHILLY, "philly")
    counts = pd.Series([j.queue for j in trace.jobs]).value_counts()
    assert len(counts) == 15 and counts.sum() == len(trace.jobs)  # every job has its VC
    assert counts.index[0] == "6214e9" and counts.iloc[0] > len(trace.jobs) / 3


@pytest.mark.skipif(not OPENB.is_file(), reason=f"{OPENB} not present (shared data)")
def test_real_openb_qos_classes() -> None:
    queues = {j.queue for j in load_trace(OPENB, "openb").jobs}
    assert {"LS", "BE"} <= queues and None not in queues


def test_generated_tenants_have_zipf_demand_and_leave_the_other_columns(tmp_path: Path) -> None:
    from horus.traces.generate import WorkloadSpec, generate_workload

    rows, summary = generate_workload(WorkloadSpec(num_jobs=4000, seed=5, tenants=4))
    plain, _ = generate_workload(WorkloadSpec(num_jobs=4000, seed=5))
    assert [{k: v for k, v in r.items() if k != "queue"} for r in rows] == plain
    share = pd.Series([r["queue"] for r in rows]).value_counts(normalize=True).sort_index()
    assert list(share.index) == ["tenant-1", "tenant-2", "tenant-3", "tenant-4"]
    expected = [1 / k / sum(1 / j for j in range(1, 5)) for k in range(1, 5)]  # 0.48, 0.24, 0.16, 0.12
    assert share.to_numpy() == pytest.approx(expected, abs=0.03)
    assert set(summary["gpu_hours_per_queue"]) == set(share.index)  # type: ignore[arg-type]
    rc, _, err = run(["trace", "generate", "--jobs", "50", "--tenants", "3", "--out", str(tmp_path / "g.csv")])
    assert rc == 0, err
    assert {j.queue for j in load_trace(tmp_path / "g.csv").jobs} <= {"tenant-1", "tenant-2", "tenant-3"}
    rc, _, err = run(["trace", "generate", "--tenants", "1001", "--out", str(tmp_path / "h.csv")])
    assert_clear(rc, err, "--tenants")


# ---- cluster spec tenancy section -----------------------------------------------------------------------------
SPEC = """nodes:
  - {name: n, count: 2, gpu_type: V100, gpus: 4}
  - {name: p, gpu_type: P100, gpus: 2}
"""
TENANCY = """tenancy:
  charge: util
  half_life_h: 24
  priority_classes:
    - {name: normal, value: 0}
    - {name: prod, value: 100, preemptible: false}
  queues:
    - {name: research, guaranteed: 6, weight: 2}
    - {name: prod, guaranteed: {V100: 2}, borrow_limit: 0}
"""


def test_cluster_spec_tenancy_section(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", SPEC + TENANCY)
    cluster, tenancy = load_spec(path)
    assert cluster.num_gpus == 10 and load_cluster(path).num_gpus == 10  # load_cluster as before
    assert tenancy is not None and tenancy == load_tenancy(path)
    assert list(tenancy.queues) == ["research", "prod"] and tenancy.charge == "util"
    assert tenancy.queues["prod"].guaranteed == {"V100": 2.0} and tenancy.queues["prod"].borrow_limit == 0.0
    assert tenancy.priority_classes["prod"].preemptible is False and tenancy.half_life_s == 24 * 3600
    assert load_spec(write(tmp_path / "plain.yaml", SPEC))[1] is None
    only = write(tmp_path / "t.yaml", TENANCY)
    assert load_tenancy(only, cluster) == tenancy


@pytest.mark.parametrize(("section", "expected"), [
    ("tenancy:\n  queues: []\n", "c.yaml: tenancy.queues: expected a non-empty list"),
    ("tenancy:\n  queues:\n    - {name: a, guaranteed: 11}\n", "c.yaml: tenancy.queues: guarantees add up to 11 GPUs"),
    ("tenancy:\n  queues:\n    - {name: a, guaranteed: {P100: 3}}\n", "guarantees add up to 3 P100 GPUs, the cluster has 2"),
    ("tenancy:\n  queues:\n    - {name: a, guaranteed: {A100-40GB: 1}}\n",
     "c.yaml: tenancy.queues[0].guaranteed.A100-40GB: the cluster has no A100-40GB GPUs"),
    ("tenancy:\n  queues:\n    - {name: a, wieght: 2}\n", "c.yaml: tenancy.queues[0].wieght: unknown key"),
    ("tenancy:\n  queues:\n    - {name: 'a b'}\n", "c.yaml: tenancy.queues[0].name: expected a name"),
    ("tenancy:\n  queues:\n    - {name: a}\n  charge: fair\n", "c.yaml: tenancy.charge: expected one of equal, util"),
    ("tenancy:\n", "c.yaml: tenancy: expected a mapping"),
])
def test_bad_tenancy_sections_name_file_and_field(tmp_path: Path, section: str, expected: str) -> None:
    with pytest.raises(HorusInputError) as err:
        load_cluster(write(tmp_path / "c.yaml", SPEC + section))
    assert expected in str(err.value)


def test_a_tenancy_file_is_checked_against_the_cluster_it_runs_on(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "tenancy:\n  queues:\n    - {name: a, guaranteed: 6}\n")
    assert load_tenancy(path, tiny(4, 2)) is not None
    with pytest.raises(HorusInputError, match="t.yaml: tenancy.queues: guarantees add up to 6 GPUs, the cluster has 4"):
        load_tenancy(path, tiny(4))
    with pytest.raises(HorusInputError, match="u.yaml: nodez: unknown key"):
        load_tenancy(write(tmp_path / "u.yaml", "nodez: []\n"))
    cluster, tenancy = parse_spec({"nodes": [{"name": "n", "gpu_type": "V100", "gpus": 2}]}, "d")
    assert tenancy is None and cluster.num_gpus == 2


# ---- horus simulate --tenancy ----------------------------------------------------------------------------------
def tenant_trace(path: Path, queues: Sequence[str | None] = ("a", "a", "a", "b", None, "b")) -> Path:
    lines = ["job_id,submit_time,num_gpus,model,batch_size,duration_s,queue"]
    lines += [f"j{i},{60 * i},{1 + i % 2},resnet18_cifar,16,{900 + 300 * i},{q or ''}" for i, q in enumerate(queues)]
    return write(path, "\n".join(lines) + "\n")


SIM = ["simulate", "--no-progress", "--policy", "fifo-exclusive"]


def test_simulate_tenancy_trace_writes_queues_and_the_table(tmp_path: Path) -> None:
    trace, out = tenant_trace(tmp_path / "t.csv"), tmp_path / "out"
    rc, stdout, err = run([*SIM, "--policy", "horus", "--trace", str(trace), "--tenancy", "trace", "--out", str(out)])
    assert rc == 0, err
    for policy in ("fifo-exclusive", "horus"):
        queues = pd.read_csv(out / policy / "queues.csv")
        assert list(queues["queue"]) == ["a", "b", "default"] and list(queues["jobs"]) == [3, 2, 1]
        assert (queues["completed"] == queues["jobs"]).all() and (queues["over_limit_s"] == 0).all()
        assert queues["guaranteed_gpus"].sum() == 64  # the trace's demand shared out the whole cluster
        assert f"queues under {policy}:" in stdout
    assert "guaranteed GPUs" in stdout and "attainment %" in stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policies"]["horus"]["quota_violation_s"] == 0 and summary["policies"]["horus"]["queues"] == 3
    assert [r["queue"] for r in summary["queues"]["horus"]] == ["a", "b", "default"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tenancy"]["source"] == "trace" and manifest["tenancy"]["default_queue"] == "default"
    assert "horus/queues.csv" in manifest["outputs"]  # hashed like every output
    assert "Queues (tenancy)" in (out / "report.html").read_text()


def test_simulate_takes_the_spec_tenancy_by_default_and_off_turns_it_off(tmp_path: Path) -> None:
    spec = write(tmp_path / "c.yaml", "nodes:\n  - {name: n, count: 2, gpu_type: V100, gpus: 4}\n"
                                      "tenancy:\n  queues:\n    - {name: a, guaranteed: 4}\n    - {name: b, guaranteed: 4}\n")
    trace = tenant_trace(tmp_path / "t.csv", ("a", "b", "a", "b"))
    rc, _, err = run([*SIM, "--trace", str(trace), "--cluster", str(spec), "--tenancy-charge", "util",
                      "--out", str(tmp_path / "on"), "--json"])
    assert rc == 0, err
    tenancy = json.loads((tmp_path / "on" / "manifest.json").read_text())["tenancy"]
    assert tenancy["source"] == "spec" and tenancy["charge"] == "util"
    rc, _, err = run([*SIM, "--trace", str(trace), "--cluster", str(spec), "--tenancy", "off",
                      "--out", str(tmp_path / "off"), "--json"])
    assert rc == 0, err
    assert "tenancy" not in json.loads((tmp_path / "off" / "manifest.json").read_text())
    assert not (tmp_path / "off" / "fifo-exclusive" / "queues.csv").exists()


@pytest.mark.parametrize(("yaml_text", "needles"), [
    ("tenancy:\n  queues:\n    - {name: a, guaranteed: -1}\n", ["bad.yaml: tenancy.queues[0].guaranteed: expected"]),
    ("tenancy: [\n", ["bad.yaml: line", "not valid YAML"]),
    ("nodes: []\n", ["bad.yaml: nodes: expected a non-empty list"]),
    ("other: 1\n", ["bad.yaml: other: unknown key"]),
    ("tenancy:\n  queues:\n    - {name: a}\n    - {name: b}\n", ["t.csv: line 6, job 'j4': unknown queue 'c'"]),
])
def test_bad_tenancy_input_is_one_line_and_exit_2(tmp_path: Path, yaml_text: str, needles: list[str]) -> None:
    bad = write(tmp_path / "bad.yaml", yaml_text)
    trace = tenant_trace(tmp_path / "t.csv", ("a", "b", "a", None, "c"))
    out = tmp_path / "out"
    rc, _, err = run([*SIM, "--trace", str(trace), "--tenancy", str(bad), "--out", str(out)])
    assert_clear(rc, err, *needles)
    assert not any(out.rglob("*.csv"))  # refused before any run


def test_tenancy_option_errors(tmp_path: Path) -> None:
    trace = tenant_trace(tmp_path / "t.csv")
    for argv, needles in ((["--tenancy", "spec"], ["--tenancy: spec: the cluster spec", "no tenancy section"]),
                          (["--tenancy", "off", "--tenancy-charge", "util"],
                           ["--tenancy-charge: applies to a tenancy, and --tenancy is off"]),
                          (["--tenancy", str(tmp_path / "none.yaml")], ["--tenancy", "file not found"]),
                          (["--tenancy", ""], ["--tenancy", "empty string"]),
                          (["--tenancy-charge", "fair"], ["--tenancy-charge", "invalid choice"])):
        rc, _, err = run([*SIM, "--trace", str(trace), *argv, "--out", str(tmp_path / "o")])
        assert_clear(rc, err, *needles)
    rc, _, err = run([*SIM, "--trace", str(trace), "--tenancy-charge", "util", "--out", str(tmp_path / "w")])
    assert rc == 0 and "horus: warning: --tenancy-charge has no effect" in err  # no tenancy asked for: a warning
    empty = write(tmp_path / "e.yaml", "# nothing\n")
    rc, _, err = run([*SIM, "--trace", str(trace), "--tenancy", str(empty), "--out", str(tmp_path / "o")])
    assert_clear(rc, err, "e.yaml: empty file")


def test_trace_tenancy_shares_the_cluster_by_demand_leaving_out_jobs_too_large() -> None:
    from horus.sim.tenants import tenancy_from_trace

    cluster = tiny(4, 2)
    truth, _ = world(cluster)
    jobs = ([job(f"a{i}", 0.0, "a", iterations=30_000) for i in range(3)] + [job("b0", 0.0, "b", iterations=30_000)]
            + [job("n0", 0.0, None, iterations=30_000), job("huge", 0.0, "big", gpus=16, iterations=10**7)])
    tenancy = tenancy_from_trace(jobs, cluster, truth, PRESETS["V100"])  # type: ignore[arg-type]
    guaranteed = {name: q.guaranteed["*"] for name, q in tenancy.queues.items()}
    # 3:1:1 of 8 GPUs = 4.8, 1.6, 1.6: floors 4, 1, 1, the two GPUs left to the largest remainders (ties by name)
    assert guaranteed == {"a": 5.0, "b": 2.0, "big": 0.0, "default": 1.0}
    assert tenancy.default_queue == "default" and tenancy.queues["a"].borrow_limit is None
