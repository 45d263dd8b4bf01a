"""Fuzzed request bodies against a real `horus serve`: always a 2xx or 4xx answer, never a 5xx or a hang."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service_helpers import Server, kill_job_processes

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=20,
)
VALID_JOB = {"command": ["true"], "model": "a3c", "batch_size": 32, "num_gpus": 1, "iterations": 10.0}
JOB_FIELDS = st.sampled_from([*VALID_JOB, "env", "gpu_type", "gpu_fraction", "cwd", "name", "idempotency_key"])
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("fuzz")
    server = Server(root / "state", "--lease-s", "3", "--policy", "fifo-exclusive").start()
    with server.client() as client:
        yield client
    server.stop()
    kill_job_processes(root)


def _ok(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])


@SETTINGS
@given(body=JSON)
def test_any_json_to_job_submission(api: httpx.Client, body: object) -> None:
    _ok(api.post("/v1/jobs", json=body))


@SETTINGS
@given(field=JOB_FIELDS, value=JSON)
def test_one_bad_field_in_an_otherwise_valid_job(api: httpx.Client, field: str, value: object) -> None:
    body = {**VALID_JOB, "command": ["sleep", "0"], field: value}
    response = api.post("/v1/jobs", json=body)
    _ok(response)
    if response.status_code == 422:
        assert field in response.text  # the error names the field


@SETTINGS
@given(body=JSON, name=st.text(min_size=1, max_size=20).filter(lambda s: s not in (".", "..")))
def test_any_json_to_agent_endpoints(api: httpx.Client, body: object, name: str) -> None:
    _ok(api.post("/v1/agents", json=body))
    _ok(api.post(f"/v1/agents/{quote(name, safe='')}/heartbeat", json=body))


@SETTINGS
@given(raw=st.binary(max_size=200), path=st.sampled_from(["/v1/jobs", "/v1/models", "/v1/agents", "/v1/jobs/1/cancel",
                                                          "/v1/jobs/1/progress"]))
def test_raw_bytes(api: httpx.Client, raw: bytes, path: str) -> None:
    _ok(api.post(path, content=raw, headers={"Content-Type": "application/json"}))


@SETTINGS
@given(job_id=st.text(min_size=1, max_size=25).filter(lambda s: s not in (".", "..")),
       states=st.lists(st.text(max_size=10), max_size=3), limit=st.integers(-5, 10**12))
def test_reads_with_odd_parameters(api: httpx.Client, job_id: str, states: list[str], limit: int) -> None:
    _ok(api.get(f"/v1/jobs/{quote(job_id, safe='')}"))
    _ok(api.get("/v1/jobs", params={"state": states, "limit": limit}))
