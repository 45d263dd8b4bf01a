"""Fuzzed requests against a real `horus serve`: never a 5xx or a hang, and every answer keeps its promise.

An accepted job submission (201) is stored with the fields that were sent (``GET /v1/jobs/{id}`` shows them); a
replay (200) returns the job first stored under its idempotency key; a rejection (4xx) says why and stores nothing;
a listing obeys its limit and state filter, and is refused (422) exactly when they are invalid.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from horus.service.store import JOB_STATES
from service_helpers import Server, kill_job_processes

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=20,
)
VALID_JOB = {"command": ["true"], "model": "a3c", "batch_size": 32, "num_gpus": 1, "iterations": 10.0}
JOB_FIELDS = st.sampled_from([*VALID_JOB, "env", "gpu_type", "gpu_fraction", "cwd", "name", "idempotency_key"])
# values some fields accept, so that accepted submissions (and their round trip) are fuzzed too
PLAUSIBLE = (st.integers(1, 2) | st.floats(0.05, 1.0)
             | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,10}", fullmatch=True)
             | st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}", fullmatch=True), st.text(max_size=8),
                               max_size=3)
             | st.lists(st.text(min_size=1, max_size=8).filter(lambda a: "\x00" not in a), min_size=1, max_size=3))
NUMERIC = ("batch_size", "num_gpus", "gpu_fraction", "iterations")
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


def _rejected_with_reason(response: httpx.Response) -> None:
    """A 4xx whose body says what was wrong."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    detail = response.json()["detail"]
    assert detail, response.text[:500]
    if isinstance(detail, list):
        assert all(item["msg"] and "loc" in item for item in detail), detail
    else:
        assert isinstance(detail, str)


def _total_jobs(api: httpx.Client) -> int:
    return sum(api.get("/v1/jobs", params={"limit": 1}).json()["counts"].values())


def _expected(body: dict[str, Any]) -> dict[str, Any]:
    """The stored spec of an accepted submission ``body``: what was sent, or the documented default."""
    model = body.get("model")
    return {"command": body["command"], "model": model, "batch_size": body.get("batch_size", 32) if model else 0,
            "num_gpus": body.get("num_gpus", 1), "gpu_type": body.get("gpu_type"),
            "gpu_fraction": body.get("gpu_fraction"), "iterations": body.get("iterations"),
            "env": body.get("env", {}), "name": body.get("name"), "idempotency_key": body.get("idempotency_key")}


def _same(field: str, stored: Any, sent: Any) -> bool:
    if field in NUMERIC and sent is not None and stored is not None:
        # strict types: an integer field took an int (never "32", 2.0 or true); a float field an int or a float
        if isinstance(sent, bool) or not isinstance(sent, (int, float)):
            return False
        if field in ("batch_size", "num_gpus") and not isinstance(sent, int):
            return False
        return float(stored) == float(sent)
    return bool(stored == sent)


def _check_submission(api: httpx.Client, body: object, response: httpx.Response, total_before: int) -> None:
    _ok(response)
    if response.status_code == 201:
        assert isinstance(body, dict)
        assert _total_jobs(api) == total_before + 1
        reply = response.json()
        stored = api.get(f"/v1/jobs/{reply['id']}").json()
        expected = _expected(body)
        for field, sent in expected.items():
            assert _same(field, reply[field], sent) and _same(field, stored[field], sent), \
                (field, sent, reply[field], stored[field])
        assert stored["events"][0]["kind"] == "submitted"
    elif response.status_code == 200:  # a replay: the first job with this key, nothing new stored
        assert isinstance(body, dict) and body.get("idempotency_key")
        assert _total_jobs(api) == total_before
        stored = api.get(f"/v1/jobs/{response.json()['id']}").json()
        assert stored["idempotency_key"] == body["idempotency_key"] == response.json()["idempotency_key"]
    else:
        _rejected_with_reason(response)
        assert _total_jobs(api) == total_before  # nothing stored


@SETTINGS
@given(body=JSON)
def test_any_json_to_job_submission(api: httpx.Client, body: object) -> None:
    before = _total_jobs(api)
    response = api.post("/v1/jobs", json=body)
    event(f"answered {response.status_code}")  # --hypothesis-show-statistics: how often each branch ran
    _check_submission(api, body, response, before)


@SETTINGS
@given(field=JOB_FIELDS, value=JSON | PLAUSIBLE)
def test_one_bad_field_in_an_otherwise_valid_job(api: httpx.Client, field: str, value: object) -> None:
    body = {**VALID_JOB, "command": ["sleep", "0"], field: value}
    before = _total_jobs(api)
    response = api.post("/v1/jobs", json=body)
    event(f"answered {response.status_code}")
    _check_submission(api, body, response, before)
    if response.status_code == 422:
        # the error names the field; a well-formed GPU type no machine has is refused as too few GPUs "of type X"
        assert field in response.text or (field == "gpu_type" and f"GPUs of type {value};" in response.text), \
            response.text


def test_a_valid_job_round_trips(api: httpx.Client) -> None:
    """The fuzzers' oracle is not vacuous: a fully specified job is accepted and read back field by field."""
    body = {"command": ["sleep", "0"], "model": "a3c", "batch_size": 16, "num_gpus": 1, "gpu_type": "V100",
            "gpu_fraction": 0.5, "iterations": 12.0, "env": {"A": "1"}, "name": "round-trip",
            "idempotency_key": "fuzz-round-trip"}
    before = _total_jobs(api)
    response = api.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    _check_submission(api, body, response, before)
    replay = api.post("/v1/jobs", json={**body, "name": "other"})
    assert replay.status_code == 200
    _check_submission(api, {**body, "name": "other"}, replay, before + 1)
    assert replay.json()["name"] == "round-trip"


def _agent_names(api: httpx.Client) -> set[str]:
    return {a["name"] for a in api.get("/v1/cluster").json()["agents"]}


@SETTINGS
@given(body=JSON, name=st.text(min_size=1, max_size=20).filter(lambda s: s not in (".", "..")))
def test_any_json_to_agent_endpoints(api: httpx.Client, body: object, name: str) -> None:
    before = _agent_names(api)
    response = api.post("/v1/agents", json=body)
    _ok(response)
    if response.status_code == 200:
        assert isinstance(body, dict) and response.json()["name"] == body["name"]
        agents = {a["name"]: a for a in api.get("/v1/cluster").json()["agents"]}
        assert agents[body["name"]]["hostname"] == body["hostname"]
        assert agents[body["name"]]["gpus"] == len(body["gpus"])
    else:
        _rejected_with_reason(response)
        assert _agent_names(api) <= before  # nobody registered (a silent fuzzed agent may have been dropped)
    beat = api.post(f"/v1/agents/{quote(name, safe='')}/heartbeat", json=body)
    _ok(beat)
    if beat.status_code == 200:
        assert isinstance(beat.json()["desired"], list)
    else:
        _rejected_with_reason(beat)


@SETTINGS
@given(raw=st.binary(max_size=200), path=st.sampled_from(["/v1/jobs", "/v1/models", "/v1/agents", "/v1/jobs/1/cancel",
                                                          "/v1/jobs/1/progress"]))
def test_raw_bytes(api: httpx.Client, raw: bytes, path: str) -> None:
    before = _total_jobs(api)
    response = api.post(path, content=raw, headers={"Content-Type": "application/json"})
    _ok(response)
    if response.status_code >= 400:
        _rejected_with_reason(response)
        assert _total_jobs(api) == before


@SETTINGS
@given(job_id=st.text(min_size=1, max_size=25).filter(lambda s: s not in (".", ".."))
       | st.integers(1, 30).map(str) | st.sampled_from(["1.0", " 01", "+1", "1_0", "0", "-1", "2e0"]),
       states=st.lists(st.sampled_from(JOB_STATES) | st.text(max_size=10), max_size=3),
       limit=st.integers(-5, 10**12) | st.integers(1, 5))
def test_reads_with_odd_parameters(api: httpx.Client, job_id: str, states: list[str], limit: int) -> None:
    one = api.get(f"/v1/jobs/{quote(job_id, safe='')}")
    _ok(one)
    if one.status_code == 200:
        assert Decimal(job_id) == int(one.json()["id"])  # the id it was asked for, however spelled ("1.0", " 01")
    elif one.status_code in (307, 308):  # "/" (sent as %2F) ends the path with a slash: redirected without it
        assert one.headers["location"]
    else:
        _rejected_with_reason(one)
    listed = api.get("/v1/jobs", params={"state": states, "limit": limit})
    _ok(listed)
    valid = 1 <= limit <= 100_000 and all(s in JOB_STATES for s in states)
    event(f"listing {'valid' if valid else 'invalid'}, job {one.status_code}")
    assert (listed.status_code == 200) == valid, (listed.status_code, states, limit, listed.text[:300])
    if not valid:
        _rejected_with_reason(listed)
        return
    data = listed.json()
    jobs = data["jobs"]
    assert len(jobs) <= limit
    ids = [int(j["id"]) for j in jobs]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == len(ids)  # newest first, each once
    if states:
        assert {j["state"] for j in jobs} <= set(states)
    else:
        assert len(jobs) == min(limit, sum(data["counts"].values()))  # nothing submits meanwhile: exact


@pytest.mark.parametrize(("field", "raw"), [
    ("iterations", "NaN"), ("iterations", "Infinity"), ("iterations", "1e400"), ("gpu_fraction", "-Infinity"),
    ("batch_size", '"32"'), ("batch_size", "32.5"), ("batch_size", "true"), ("num_gpus", '"2"'),
    ("gpu_fraction", '"0.5"'), ("iterations", '"10"'),
])
def test_no_coercion_and_no_non_finite_number(api: httpx.Client, field: str, raw: str) -> None:
    """Each is refused (422) naming the field, with a JSON body that never echoes a non-finite value."""
    body = f'{{"command": ["sleep", "0"], "model": "a3c", "{field}": {raw}}}'
    before = _total_jobs(api)
    response = api.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]  # plain JSON: Python's parser would accept NaN, so check the text too
    assert "NaN" not in response.text and "Infinity" not in response.text
    assert any(field in item["loc"] for item in detail), detail
    assert _total_jobs(api) == before


@pytest.mark.parametrize("raw", ["NaN", "1e400", '"0.5"', "true"])
def test_heartbeat_telemetry_must_be_finite_numbers(api: httpx.Client, raw: str) -> None:
    """The body is checked before the agent is looked up: no agent needs to exist for the 422."""
    body = f'{{"gpus": [{{"index": 0, "util": {raw}}}]}}'
    response = api.post("/v1/agents/fuzz-agent/heartbeat", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert "NaN" not in response.text and "Infinity" not in response.text
