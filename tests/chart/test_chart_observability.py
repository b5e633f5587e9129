"""The chart's observability: the Grafana dashboard queries only series the code exports; the
ServiceMonitor and Ingress point at the HTTP port."""

from __future__ import annotations

import functools
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from commit_service.observe.metrics import ServiceMetrics
from lakegate_core.status import CommitRecord, TableSummary
from lakegate_core.types import PartitionOffsets
from sidecar.metrics import SidecarMetrics
from tests.chart.helm import CHART, HELM, NAMESPACE, RELEASE, VALIDATE, component, find, render, render_text, run

DASHBOARD = CHART / "dashboards" / "lakegate.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}  # every query goes through the variable
METRIC_NAME = re.compile(r"\blakegate_[A-Za-z0-9_:]*")
SELECTOR = re.compile(r"\b(lakegate_[A-Za-z0-9_:]*)\{([^}]*)\}")
# The series a family of each type exposes (prometheus_client names a counter's family without _total).
SERIES_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
}


def dashboard_configmaps(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "ConfigMap" and "lakegate.json" in (o.get("data") or {})]


@functools.cache
def exported_series() -> dict[str, frozenset[str]]:
    """Series name -> label names, for every series the service's and the sidecar's /metrics expose:
    the real registries built in-process, each labelled metric touched once so that its labels show."""
    summary = TableSummary(
        table="orders",
        path="file:///lake/orders",
        version=3,
        offsets=PartitionOffsets({("orders", 0): 10}),
        pending_files=1,
        pending_bytes=100,
        pending_offsets=PartitionOffsets({("orders", 0): 12}),
        last_error=None,
    )
    service = ServiceMetrics(lambda: [summary])
    service.committed(CommitRecord(table="orders", version=3, commit_id="c1", files=1, records=10, duration_ms=1200))
    service.rejected("no_table")
    sidecar = SidecarMetrics(stale_after=60)
    sidecar.manifests.labels("ok").inc()
    sidecar.errors.labels("unexpected").inc()
    sidecar.lag.labels("orders", "0").set(2)
    series: dict[str, set[str]] = {}
    for registry in (service.registry, sidecar.registry):
        for family in registry.collect():
            assert family.type in SERIES_SUFFIXES, f"{family.name}: metric type {family.type} not handled here"
            for suffix in SERIES_SUFFIXES[family.type]:
                series.setdefault(family.name + suffix, set())
            for sample in family.samples:
                series.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(labels) for name, labels in series.items()}


def test_exported_series_know_the_prometheus_suffixes() -> None:
    series = exported_series()
    assert {"lakegate_commits_total", "lakegate_commit_duration_seconds_bucket", "lakegate_pending_files"} <= set(
        series
    )
    assert "lakegate_commits" not in series, "a counter is scraped as <name>_total"
    assert series["lakegate_commit_duration_seconds_bucket"] == {"table", "le"}
    assert series["lakegate_sidecar_lag_offsets"] == {"topic", "partition"}


def test_grafana_dashboard_is_off_by_default() -> None:
    objs = render()
    assert not dashboard_configmaps(objs)
    assert not [o for o in objs if o["metadata"]["labels"].get("app.kubernetes.io/component") == "dashboard"]


def test_grafana_dashboard_configmap_carries_the_sidecar_label_and_the_json() -> None:
    sets = ("grafana.dashboard.enabled=true",)
    objs = render(None, *sets)
    cm = find(objs, "ConfigMap", f"{RELEASE}-lakegate-dashboard")
    assert dashboard_configmaps(objs) == [cm]
    assert cm["metadata"]["namespace"] == NAMESPACE and "annotations" not in cm["metadata"]
    labels = dict(cm["metadata"]["labels"])
    assert labels.pop("grafana_dashboard") == "1"
    assert labels.pop("app.kubernetes.io/component") == "dashboard"
    standard = dict(component(objs, "Service", "service")["metadata"]["labels"])
    standard.pop("app.kubernetes.io/component")
    assert labels == standard
    assert json.loads(cm["data"]["lakegate.json"]) == json.loads(DASHBOARD.read_text())
    proc = run(VALIDATE, stdin=render_text(None, sets))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lint = run(HELM, "lint", "--strict", CHART, "--set", sets[0])
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_grafana_dashboard_label_annotations_and_namespace_follow_the_values() -> None:
    objs = render(
        None,
        "grafana.dashboard.enabled=true",
        "grafana.dashboard.label=example.com/dashboard",
        "grafana.dashboard.labelValue=7",  # --set makes it a number; a label value must be a string
        "grafana.dashboard.annotations.grafana_folder=Data platform",
        "grafana.dashboard.namespace=monitoring",
        "commonAnnotations.owner=data",
        "fullnameOverride=lake",
    )
    cm = find(objs, "ConfigMap", "lake-dashboard")
    assert cm["metadata"]["namespace"] == "monitoring"
    assert (
        cm["metadata"]["labels"]["example.com/dashboard"] == "7" and "grafana_dashboard" not in cm["metadata"]["labels"]
    )
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Data platform", "owner": "data"}


def test_grafana_dashboard_queries_only_metrics_the_code_exports() -> None:
    dash = json.loads(DASHBOARD.read_text())
    series = exported_series()
    assert (dash["uid"], dash["title"], dash["schemaVersion"]) == ("lakegate", "Lakegate", 39)

    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    table = variables["table"]
    assert table["type"] == "query" and table["multi"] is True and table["includeAll"] is True
    assert table["datasource"] == DATASOURCE
    query = table["query"]["query"] if isinstance(table["query"], dict) else table["query"]
    m = re.fullmatch(r"label_values\((lakegate_\w+),\s*table\)", query)
    assert m and "table" in series.get(m.group(1), ()), f"table variable: {query} names no metric with a table label"

    panels = dash["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {ids}"
    taken: set[tuple[int, int]] = set()
    for p in panels:
        where = f"panel {p['id']} ({p['title']})"
        assert p.get("description") and p["datasource"] == DATASOURCE, where
        g = p["gridPos"]
        assert g["w"] > 0 and g["h"] > 0 and g["x"] >= 0 and g["x"] + g["w"] <= 24, where
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & taken, f"{where} overlaps another panel"
        taken |= cells
        assert p["targets"], f"{where} has no query"
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), f"{where}: refIds repeat"
        for t in p["targets"]:
            expr = t["expr"]
            assert t["refId"] and t.get("datasource", DATASOURCE) == DATASOURCE, where
            names = METRIC_NAME.findall(expr)
            assert names, f"{where}: no lakegate_ metric in {expr}"
            unknown = sorted(set(names) - set(series))
            assert not unknown, f"{where} queries series no registry exports: {unknown} (exported: {sorted(series)})"
            for name, matchers in SELECTOR.findall(expr):
                wanted = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers))
                assert wanted <= series[name], f"{where}: {name} has no label {sorted(wanted - series[name])}"
            if re.search(r"_(total|bucket)\b", expr):
                assert re.search(r"\b(rate|irate|increase)\(", expr), f"{where}: counters need rate() or increase()"
            if "histogram_quantile" in expr:
                assert all(n.endswith("_bucket") for n in names), f"{where}: histogram_quantile needs _bucket series"


# --- optional objects, schema, notes, helm test --------------------------------------------------------


def test_service_monitor_and_ingress_point_at_the_http_port() -> None:
    objs = render(CHART / "ci" / "full-values.yaml")
    svc = component(objs, "Service", "service")
    sm = find(objs, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["spec"]["endpoints"][0]["port"] == "http" and sm["spec"]["endpoints"][0]["path"] == "/metrics"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    ingress = find(objs, "Ingress")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": svc["metadata"]["name"], "port": {"name": "http"}}
    assert not [o for o in render() if o["kind"] in ("ServiceMonitor", "Ingress")]


@pytest.mark.parametrize(
    "bad",
    [
        "bogusKey=1",
        "config.server.prot=8081",
        "config.tables[0].partition_by={day}",
        "config.tables[0].commit.on_timeout=later",
        "config.storage.allowed_roots={s3a://no-trailing-slash}",
        "config.storage.s3.access_key=AKIA",
        "tokens.admin=short",
        "sidecar.config.storage.naming=hive",
        "metrics.serviceMonitor.enabeld=true",
        "grafana.dashboard.enabeld=true",
        "grafana.dashboard.label=not a label key",
        "config.spark.ui_url=javascript:alert(1)",
        "config.auth.session_hours=0",
    ],
)
def test_values_schema_rejects_typos_and_bad_values(bad: str) -> None:
    proc = run(HELM, "template", RELEASE, CHART, "--set", bad)
    assert proc.returncode != 0, f"--set {bad} was accepted"
    assert "values don't meet the specifications of the schema" in proc.stderr, proc.stderr


def test_helm_test_pod_curls_healthz_of_the_service() -> None:
    objs = render()
    pod = find(objs, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    svc = component(objs, "Service", "service")
    args = pod["spec"]["containers"][0]["args"]
    assert pod["spec"]["containers"][0]["command"] == ["curl"] and "--fail" in args
    assert args[-1] == f"http://{svc['metadata']['name']}:8080/healthz"


def test_notes_explain_the_api_and_the_spark_ui(tmp_path: Path) -> None:
    # helm template leaves NOTES.txt out; render it through `tpl` in a copy of the chart.
    chart = tmp_path / "lakegate"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "NOTES.txt").rename(chart / "notes-preview.txt")
    (chart / "templates" / "notes-preview.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data: {notes: {{ tpl (.Files.Get "notes-preview.txt") . | quote }}}\n'
    )
    notes = find([d for d in yaml.safe_load_all(render_text(None, (), chart)) if d], "ConfigMap", "notes")["data"][
        "notes"
    ]
    assert f"kubectl -n {NAMESPACE} port-forward svc/{RELEASE}-lakegate 8080:http" in notes
    assert f"kubectl -n {NAMESPACE} port-forward svc/{RELEASE}-lakegate 4040:spark-ui" in notes
    assert "sidecar-snippet" in notes and "/v1/tables" in notes
    assert "status page" in notes and "{.data.read-token}" in notes


def test_every_value_is_documented() -> None:
    text = (CHART / "values.yaml").read_text()
    documented = set(re.findall(r"^\s*## @param (\S+)", text, re.M))

    def leaves(node: Any, prefix: str = "") -> list[str]:
        if isinstance(node, dict) and node:
            if prefix in documented:  # an object documented as a whole (e.g. resources)
                return [prefix]
            return [p for k, v in node.items() for p in leaves(v, f"{prefix}.{k}" if prefix else k)]
        return [prefix]

    undocumented = [p for p in leaves(yaml.safe_load(text)) if p not in documented]
    assert not undocumented, f"values without ## @param: {undocumented}"
    assert not [p for p in documented if p.split(".")[0] not in yaml.safe_load(text)], "## @param for a missing value"
