"""deploy/grafana/horus.json and deploy/prometheus/prometheus.yml: layout lint, PromQL syntax, and every metric the
dashboard queries is one the real service exposes (a real ``ServiceMetrics`` bound to a real ``LiveScheduler``, and a
real ``horus serve`` scraped with its bearer token)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from service_helpers import Server

from horus.agent.gpus import fake_gpus
from horus.predict.analytic import AnalyticPredictor
from horus.service.metrics import ServiceMetrics
from horus.service.scheduler import LiveScheduler
from horus.service.server import DEFAULT_PORT
from horus.service.store import Store

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "horus.json"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
GRAFANA_INTERVALS = {"__rate_interval", "__interval", "__range"}  # Grafana's built-in range variables
PROMETHEUS_LABELS = {"instance", "job"}  # target labels Prometheus adds to every scraped series
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")
RANGE_FUNCTIONS = {"rate", "irate", "increase"}


# ---- the dashboard ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Top-level panels and those nested in collapsed rows."""
    return [p for top in dashboard["panels"] for p in [top, *top.get("panels", [])]]


def targets(dashboard: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            yield panel, target


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def as_promql(expr: str) -> str:
    """What Grafana sends: range variables become a duration, template variables a regex (used in =~ only)."""
    return VARIABLE.sub(lambda m: "5m" if (m[1] or m[2]) in GRAFANA_INTERVALS else ".*", expr)


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(metric name, label names matched) of every vector selector in ``expr``."""
    found: list[tuple[str, set[str]]] = []

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"selector without a metric name in {expr!r}"
            found.append((node.name, {m.name for m in node.matchers.matchers}))

    promql_parser.walk(promql_parser.parse(as_promql(expr)), visit)
    return found


def range_calls(expr: str) -> list[tuple[str, str]]:
    """(function, metric name) of every rate/irate/increase call in ``expr``."""
    found: list[tuple[str, str]] = []

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.Call) and node.func.name in RANGE_FUNCTIONS:
            (matrix,) = node.args
            found.append((node.func.name, matrix.vector_selector.name))

    promql_parser.walk(promql_parser.parse(as_promql(expr)), visit)
    return found


def test_dashboard_header(dashboard: dict[str, Any]) -> None:
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert dashboard["uid"] == "horus-service" and dashboard["title"] and dashboard["id"] is None
    assert "__inputs" not in dashboard  # the data source is a variable: importable and provisionable as is


def test_panels_have_unique_ids_titles_and_descriptions(dashboard: dict[str, Any]) -> None:
    panels = all_panels(dashboard)
    ids = [p["id"] for p in panels]
    assert all(isinstance(i, int) and i > 0 for i in ids) and len(ids) == len(set(ids))
    for p in panels:
        assert p["title"].strip() and p["description"].strip(), p["id"]
        assert p["type"] in {"row", "timeseries", "stat", "heatmap", "state-timeline", "table"}, p["type"]
    titles = [p["title"] for p in panels]
    assert len(titles) == len(set(titles))


def test_grid_positions_fit_and_do_not_overlap(dashboard: dict[str, Any]) -> None:
    boxes = []
    for p in dashboard["panels"]:  # nested panels of a collapsed row are laid out when it opens
        pos = p["gridPos"]
        assert set(pos) >= {"x", "y", "w", "h"} and all(isinstance(pos[k], int) for k in "xywh"), p["id"]
        assert 1 <= pos["w"] <= 24 and 0 <= pos["x"] and pos["x"] + pos["w"] <= 24, p["id"]
        assert pos["y"] >= 0 and pos["h"] >= 1, p["id"]
        boxes.append((p["id"], pos["x"], pos["y"], pos["x"] + pos["w"], pos["y"] + pos["h"]))
    for i, (a, ax0, ay0, ax1, ay1) in enumerate(boxes):
        for b, bx0, by0, bx1, by1 in boxes[i + 1:]:
            assert ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0, f"panels {a} and {b} overlap"


def test_every_target_has_an_expr_and_a_unique_ref_id(dashboard: dict[str, Any]) -> None:
    for panel in all_panels(dashboard):
        if panel["type"] == "row":
            assert not panel.get("targets")
            continue
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and all(refs) and len(refs) == len(set(refs)), panel["title"]
        assert all(t["expr"].strip() for t in panel["targets"]), panel["title"]


def test_data_source_is_the_variable_and_no_uid_is_hard_coded(dashboard: dict[str, Any]) -> None:
    ds = variables(dashboard)["DS_PROMETHEUS"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    for panel in all_panels(dashboard):
        if panel["type"] != "row":
            assert panel["datasource"] == DATASOURCE, panel["title"]
    for _, target in targets(dashboard):
        assert target["datasource"] == DATASOURCE
    for var in variables(dashboard).values():
        if var["type"] == "query":
            assert var["datasource"] == DATASOURCE, var["name"]

    def uids(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            yield from (str(v) for k, v in node.items() if k == "uid" and not isinstance(v, dict | list))
            yield from (u for v in node.values() for u in uids(v))
        elif isinstance(node, list):
            yield from (u for v in node for u in uids(v))

    # besides the dashboard's own uid: the variable, and Grafana's built-in annotation source
    assert set(uids({k: v for k, v in dashboard.items() if k != "uid"})) <= {"${DS_PROMETHEUS}", "-- Grafana --"}


def test_template_variables(dashboard: dict[str, Any]) -> None:
    defined = variables(dashboard)
    assert {"DS_PROMETHEUS", "instance", "agent"} <= set(defined)
    assert "agent" in defined["agent"]["query"] and defined["agent"]["allValue"] == ".*"
    used: set[str] = set()
    for _, target in targets(dashboard):
        used |= {m[1] or m[2] for m in VARIABLE.finditer(target["expr"])}
    assert used - GRAFANA_INTERVALS <= set(defined) - {"DS_PROMETHEUS"}
    assert "agent" in used and "instance" in used


def test_every_expr_is_valid_promql(dashboard: dict[str, Any]) -> None:
    """promql-parser refuses unbalanced parentheses/braces and unknown functions."""
    for panel, target in targets(dashboard):
        try:
            promql_parser.parse(as_promql(target["expr"]))
        except ValueError as exc:
            pytest.fail(f"{panel['title']} / {target['refId']}: {exc}: {target['expr']}")


def test_the_checker_refuses_broken_promql() -> None:
    for broken in ["rate(horus_x_total[5m]", "sum(horus_x{a=\"b\")", "quantile_histogram(0.5, x)", "x{a=~\"$agent\"}}"]:
        with pytest.raises(ValueError):
            promql_parser.parse(as_promql(broken))


# ---- what the service exposes ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, set[str]]]:
    """{sample name: (family type, label names)} rendered by a ServiceMetrics bound to a real LiveScheduler with an
    agent of 2 fake GPUs that reports NVML-like telemetry, after one observation of each counter and histogram."""
    store = Store(tmp_path_factory.mktemp("metrics") / "horus.db")
    try:
        metrics = ServiceMetrics()
        scheduler = LiveScheduler(store, AnalyticPredictor(), policy="fifo-exclusive", metrics=metrics,
                                  job_secret=b"test-secret")
        metrics.bind(scheduler)
        scheduler.register_agent("node0", "localhost", fake_gpus(2, "V100", "node0"))
        scheduler.heartbeat("node0", [], [{"index": 0, "util": 0.5, "mem_mib": 1024.0},
                                          {"index": 1, "util": 0.0, "mem_mib": 0.0}])
        scheduler.step()
        for counter in (metrics.submitted, metrics.oom_restarts, metrics.agents_lost):
            counter.inc()
        for histogram in (metrics.decision_s, metrics.wait_s, metrics.jct_s):
            histogram.observe(1.0)
        text = metrics.render().decode()
    finally:
        store.close()
    return {s.name: (family.type, set(s.labels)) for family in text_string_to_metric_families(text)
            for s in family.samples}


def test_the_fixture_renders_every_family(exposed: dict[str, tuple[str, set[str]]]) -> None:
    """Guards the guard: the per-GPU gauges (observed ones included) have samples, counters carry _total."""
    for name in ("horus_gpu_observed_util", "horus_gpu_observed_memory_mib", "horus_gpu_predicted_util",
                 "horus_gpu_residents", "horus_jobs_submitted_total", "horus_job_wait_seconds_bucket"):
        assert name in exposed, name
    assert exposed["horus_gpu_residents"][1] == {"gpu", "agent", "local_index", "type"}


def test_every_queried_metric_is_exposed(dashboard: dict[str, Any], exposed: dict[str, tuple[str, set[str]]]) -> None:
    for panel, target in targets(dashboard):
        for name, labels in selectors(target["expr"]):
            assert name in exposed, f"{panel['title']}: {name} is not in /metrics"
            missing = labels - exposed[name][1] - PROMETHEUS_LABELS
            assert not missing, f"{panel['title']}: {name} has no label(s) {missing}"
    for var in variables(dashboard).values():  # label_values(<selector>, <label>) of the query variables
        if var["type"] == "query":
            call = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", var["query"])
            assert call, var["query"]
            ((name, labels),) = selectors(call[1])
            assert name in exposed and labels | {call[2]} <= exposed[name][1] | PROMETHEUS_LABELS, var["name"]


def test_rates_are_taken_of_counters_only(dashboard: dict[str, Any], exposed: dict[str, tuple[str, set[str]]]) -> None:
    for panel, target in targets(dashboard):
        for function, name in range_calls(target["expr"]):
            kind = exposed[name][0]
            assert kind == "counter" or (kind == "histogram" and name.endswith(("_bucket", "_sum", "_count"))), \
                f"{panel['title']}: {function}({name}) of a {kind}"
        if "histogram_quantile" in target["expr"]:
            assert "_bucket" in target["expr"] and re.search(r"by \([^)]*\ble\b", target["expr"]), panel["title"]


def test_every_exposed_family_has_a_panel(dashboard: dict[str, Any], exposed: dict[str, tuple[str, set[str]]]) -> None:
    queried = {name for _, target in targets(dashboard) for name, _ in selectors(target["expr"])}
    families = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n, (kind, _) in exposed.items()
                if n.startswith("horus_") and not n.endswith("_created")}
    shown = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in queried}
    assert families <= shown, f"not on the dashboard: {sorted(families - shown)}"


def test_a_real_server_exposes_the_dashboards_metrics_to_its_token(tmp_path: Path,
                                                                  dashboard: dict[str, Any]) -> None:
    """`horus serve --fake-gpus 2` scraped as prometheus.yml does: bearer token from <state dir>/token."""
    server = Server(tmp_path / "state").start()
    try:
        token = (tmp_path / "state" / "token").read_text().strip()
        assert httpx.get(f"{server.url}/metrics", timeout=10).status_code == 401
        response = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert response.status_code == 200
        families = {f.name for f in text_string_to_metric_families(response.text)}
    finally:
        server.stop()
    queried = {name for _, target in targets(dashboard) for name, _ in selectors(target["expr"])}
    # families as the parser names them (counters without _total, histograms without _bucket/_sum/_count)
    assert {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in queried} <= families


# ---- Prometheus ----------------------------------------------------------------------------------------------
def test_prometheus_scrape_config_uses_bearer_auth() -> None:
    text = PROMETHEUS.read_text()
    config = yaml.safe_load(text)
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "horus"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    assert job["authorization"]["type"] == "Bearer" and job["authorization"]["credentials_file"]
    assert "credentials" not in job["authorization"] and "bearer_token" not in job  # no inline secret
    targets_ = [t for sc in job["static_configs"] for t in sc["targets"]]
    assert targets_ == [f"127.0.0.1:{DEFAULT_PORT}"]
    assert "<state dir>/token" in text and "--open-reads" in text
