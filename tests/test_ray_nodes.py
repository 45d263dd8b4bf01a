"""Ray's node table as Horus agents, and pin checks (pure functions: no Ray needed)."""

from __future__ import annotations

import pytest

from horus.ray.nodes import InfeasiblePinError, check_pin, describe_gpus, parse_node, parse_nodes
from horus.service.agents import gpu_type_of


def entry(node_id: str, resources: dict[str, float], alive: bool = True) -> dict:
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": "10.0.0.7", "Resources": resources}


def test_per_gpu_resources_name_the_agent_and_its_gpus():
    node = parse_node(entry("ab" * 28, {"CPU": 4, "GPU": 4, "horus_gpu_rack1_n3_0": 1, "horus_gpu_rack1_n3_2": 1}))
    assert node.agent == "rack1_n3" and node.gpu_indices == [0, 2]  # the declared GPUs only, by their index
    assert node.resource_of(2) == "horus_gpu_rack1_n3_2"


def test_gpu_count_without_per_gpu_resources_and_cpu_nodes_skipped():
    table = parse_nodes([entry("c" * 56, {"CPU": 8}), entry("d" * 56, {"CPU": 8, "GPU": 2.0}),
                         entry("e" * 56, {"GPU": 8.0}, alive=False)])
    assert list(table) == ["ray-dddddddd"]  # the head without GPUs and the dead node are not agents
    node = table["ray-dddddddd"]
    assert node.gpu_indices == [0, 1] and node.resource_of(0) is None


def test_a_tag_declared_twice_keeps_the_first_node():
    table = parse_nodes([entry("1" * 56, {"horus_gpu_x_0": 1}), entry("2" * 56, {"horus_gpu_x_0": 1})])
    assert table["x"].node_id == "1" * 56 and len(table) == 1


def test_gpus_from_nvml_when_the_node_has_it_else_the_declared_type():
    node = parse_node(entry("f" * 56, {"GPU": 2, "horus_gpu_g_0": 1, "horus_gpu_g_1": 1}))
    nvml = [{"index": 0, "uuid": "GPU-aaa", "name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920},
            {"index": 1, "uuid": "GPU-bbb", "name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920}]
    real = describe_gpus(node, "V100", nvml)
    assert [g["uuid"] for g in real] == ["GPU-aaa", "GPU-bbb"] and real[1]["resource"] == "horus_gpu_g_1"
    assert gpu_type_of(real[0]).name == "A100-80GB"
    declared = describe_gpus(node, "T4")
    assert [g["uuid"] for g in declared] == ["0", "1"]  # CUDA_VISIBLE_DEVICES by index
    assert gpu_type_of(declared[0]).name == "T4"
    with pytest.raises(ValueError, match="unknown GPU type 'B999'"):
        describe_gpus(node, "B999")


def test_check_pin_names_what_ray_could_never_satisfy():
    table = parse_nodes([entry("a" * 56, {"GPU": 2, "horus_gpu_a_0": 1, "horus_gpu_a_1": 1})])
    check_pin(table, "a" * 56, {"horus_gpu_a_1": 0.25}, "job 1")  # fine
    with pytest.raises(InfeasiblePinError, match=r"job 1: Ray node aaaaaaaa \(a\) has no resource 'horus_gpu_a_5' "
                                                 r"\(it has horus_gpu_a_0, horus_gpu_a_1\)"):
        check_pin(table, "a" * 56, {"horus_gpu_a_5": 0.25}, "job 1")
    with pytest.raises(InfeasiblePinError, match="asks 2 of 'horus_gpu_a_0'"):
        check_pin(table, "a" * 56, {"horus_gpu_a_0": 2.0}, "job 1")
    with pytest.raises(InfeasiblePinError, match=r"'horus_gpu_a_1' .* would be over-committed \(0.875 held \+ 0.25"):
        check_pin(table, "a" * 56, {"horus_gpu_a_1": 0.25}, "job 2", in_use={"horus_gpu_a_1": 0.875})
    check_pin(table, "a" * 56, {"horus_gpu_a_1": 0.25}, "job 2", in_use={"horus_gpu_a_1": 0.75})  # exactly full
    with pytest.raises(InfeasiblePinError, match="Ray node bbbbbbbb is not alive"):
        check_pin(table, "b" * 56, {}, "job 1")


def test_backend_reports_like_the_local_agent_with_gpu_telemetry_gathered_per_node():
    from horus.service.backends.ray import RayBackend, Worker

    backend = RayBackend()
    running = Worker("1", 2, "a", 0.0, {}, report={"job_id": "1", "attempt": 2, "status": "running", "iterations": 5.0,
                                                   "rate": 1.0, "gpu_mem_mib": 900.0,
                                                   "gpus": [{"index": 0, "util": 0.5, "mem_mib": 900.0}]})
    failed = Worker("3", 1, "a", 0.0, {}, error="Ray did not start job 3 attempt 1 on a within 120 s")
    stopping = Worker("4", 1, "a", 0.0, {}, report={"job_id": "4", "attempt": 1, "status": "running"}, stop_deadline=9.0)
    elsewhere = Worker("5", 1, "b", 0.0, {}, report={"job_id": "5", "attempt": 1, "status": "running"})
    backend.workers = {w.key: w for w in (running, failed, stopping, elsewhere)}
    reports, telemetry = backend.reports_of("a")
    assert telemetry == [{"index": 0, "util": 0.5, "mem_mib": 900.0}]
    assert [r["job_id"] for r in reports] == ["1", "3"]  # a worker being stopped reports nothing (as locally)
    assert "gpus" not in reports[0] and reports[0]["gpu_mem_mib"] == 900.0
    assert reports[1] == {"job_id": "3", "attempt": 1, "status": "exited", "exit_code": None, "oom": False,
                          "error": failed.error, "iterations": None, "rate": None}
    assert "gpus" in running.report  # the worker's own record is left as it was
