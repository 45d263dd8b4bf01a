"""``/healthz`` tells the truth about the re-listing: a stub API server that starts answering 500 turns it 503
with the error and the age of the last good listing; recovery turns it 200 again; a listing that stops
arriving at all (no error, just old) turns it 503 after ``stale_after_s``. ``/livez`` stays 200 throughout."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest
from k8s_helpers import StubAPIServer, gpu_node, gpu_pod, serve

from horus.k8s.api import KubeAPI, KubeAPIError
from horus.k8s.decide import Decider
from horus.k8s.extender import Extender
from horus.k8s.predictor import PodPredictor
from horus.k8s.server import Resync, create_app
from horus.k8s.store import ClusterStore
from horus.predict.analytic import AnalyticPredictor


def _extender(stub: StubAPIServer) -> Extender:
    return Extender(ClusterStore(PodPredictor(AnalyticPredictor())), Decider("horus-paper"), KubeAPI.at(stub.url))


def _until(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_healthz_turns_503_while_every_resync_fails_and_recovers() -> None:
    with StubAPIServer([gpu_node("n1", 2)], [gpu_pod("p")]) as stub:
        extender = _extender(stub)
        resync = Resync(extender, 0.05)
        resync.sync_once()
        with serve(create_app(extender, stale_after_s=60)) as url:
            r = httpx.get(url + "/healthz")
            assert r.status_code == 200
            health = r.json()
            assert health["synced"] is True and health["last_error"] is None and health["consecutive_failures"] == 0
            assert 0 <= health["last_success_age_s"] < 5 and health["stale_after_s"] == 60
            resync.start()
            try:
                stub.fail_status = 500
                _until(lambda: httpx.get(url + "/healthz").json()["consecutive_failures"] >= 3)
                r = httpx.get(url + "/healthz")
                health = r.json()
                assert r.status_code == 503 and health["synced"] is False and health["listed"] is True
                assert health["last_error"].startswith("list nodes: HTTP 500")
                assert health["last_success_age_s"] > 0.1
                assert httpx.get(url + "/livez").status_code == 200  # the process is fine: no restart needed
                # the last good state is still served
                result = httpx.post(url + "/filter", json={"Pod": gpu_pod("p"), "NodeNames": ["n1"]}).json()
                assert result["NodeNames"] == ["n1"]
                stub.fail_status = 0
                _until(lambda: httpx.get(url + "/healthz").status_code == 200)
                health = httpx.get(url + "/healthz").json()
                assert health["last_error"] is None and health["consecutive_failures"] == 0
            finally:
                resync.stopped.set()
                resync.join(timeout=10)


def test_healthz_turns_503_when_the_last_success_is_too_old() -> None:
    with StubAPIServer([gpu_node("n1", 2)], []) as stub:
        extender = _extender(stub)
        Resync(extender, 60).sync_once()  # no thread: nothing lists again
        with serve(create_app(extender, stale_after_s=0.3)) as url:
            assert httpx.get(url + "/healthz").status_code == 200
            time.sleep(0.4)
            r = httpx.get(url + "/healthz")
            assert r.status_code == 503
            health = r.json()
            assert health["synced"] is False and health["last_error"] is None and health["last_success_age_s"] > 0.3


def test_healthz_is_503_before_the_first_listing() -> None:
    with StubAPIServer([gpu_node("n1", 2)], []) as stub:
        stub.fail_status = 500
        extender = _extender(stub)
        with pytest.raises(KubeAPIError, match="HTTP 500"):
            Resync(extender, 60).sync_once()
        with serve(create_app(extender)) as url:
            r = httpx.get(url + "/healthz")
            assert r.status_code == 503
            assert r.json() == {"synced": False, "listed": False, "last_error": r.json()["last_error"],
                                "consecutive_failures": 1, "last_success_age_s": None, "stale_after_s": None}
            assert r.json()["last_error"].startswith("list nodes: HTTP 500")
