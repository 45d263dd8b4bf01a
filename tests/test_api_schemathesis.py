"""schemathesis (``st run --checks all``, fixed seed, small budget) against the real HTTP surfaces: ``horus serve
--fake-gpus 2`` (admin and user tokens) and ``horus k8s-extender``; and a route added to the app with a deliberate
bug is found without anyone editing the fuzzer (it reads the OpenAPI document). The full campaign is
benchmarks/fuzz_api.py."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if shutil.which("st") is None and not Path(sys.executable).with_name("st").exists():
    pytest.skip("schemathesis is not installed (pip install -e '.[test]')", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("fuzz_api", ROOT / "benchmarks" / "fuzz_api.py")
assert _spec is not None and _spec.loader is not None
fuzz_api = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz_api)


def _clean(run: dict, log: Path) -> None:
    assert run["requests_generated"] > 100, run
    assert run["failures"] == 0 and run["exit_code"] == 0, run["output_tail"]
    assert fuzz_api.server_5xx(log) == 0, log.read_text()[-3000:]


@pytest.mark.parametrize("role", ["admin", "user"])
def test_the_service_api_passes_schemathesis(tmp_path: Path, role: str) -> None:
    with fuzz_api.live_server(tmp_path, role=role) as (url, token):
        run = fuzz_api.schemathesis(url, token, tmp_path, max_examples=4, timeout_s=120)
    _clean(run, tmp_path / f"serve-{role}.log")


def test_the_k8s_extender_passes_schemathesis(tmp_path: Path) -> None:
    with fuzz_api.extender(tmp_path) as (url, token):
        run = fuzz_api.schemathesis(url, token, tmp_path, max_examples=10, timeout_s=120)
    _clean(run, tmp_path / "extender.log")


BUGGY_APP = """
import sys
from typing import Annotated

import uvicorn
from fastapi import Query

from horus.predict.analytic import AnalyticPredictor
from horus.service.api import create_app, errors
from horus.service.scheduler import LiveScheduler
from horus.service.store import Store

store = Store(sys.argv[1] + "/horus.db")
app = create_app(LiveScheduler(store, AnalyticPredictor()), "t" * 32)


@app.get("/v1/ratio", responses=errors(401, 403, 422))
def ratio(parts: Annotated[int, Query(ge=0, le=10)]) -> dict[str, float]:
    return {"ratio": 1.0 / parts}  # the deliberate bug: parts=0 is valid and ends in a 500


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


def test_a_new_endpoint_is_fuzzed_without_editing_the_fuzzer(tmp_path: Path) -> None:
    script = tmp_path / "buggy.py"
    script.write_text(textwrap.dedent(BUGGY_APP))
    port = fuzz_api.free_port()
    log = tmp_path / "buggy.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(script), str(tmp_path), str(port)], stdout=out,
                                stderr=subprocess.STDOUT, env=fuzz_api._env())
    try:
        fuzz_api._wait(f"http://127.0.0.1:{port}", proc, log)
        run = fuzz_api.schemathesis(f"http://127.0.0.1:{port}", "t" * 32, tmp_path, max_examples=5, timeout_s=120)
    finally:
        fuzz_api._stop(proc)
    assert run["exit_code"] != 0
    assert run["failures_by_check"].get("ST101 Server error", 0) >= 1, run
    assert any("/v1/ratio" in r and "parts=0" in r for r in run["reproductions"]), run["reproductions"]
