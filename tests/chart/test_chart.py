"""The Helm chart (charts/lakegate): lint, render, validate offline against the Kubernetes API, and
check what matters for Lakegate (single writer, probes, config checksum, the sidecar, secrets).

The tools come from ``scripts/install-helm`` (``~/.cache/lakegate/bin``: a pinned Helm and
``tools/k8s-validate``). When they are missing these tests FAIL with the command to run: a chart
that was never rendered must not pass as "skipped".
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from commit_service.config import load_config
from commit_service.observe.metrics import ServiceMetrics
from lakegate_core.status import CommitRecord, TableSummary
from lakegate_core.types import PartitionOffsets
from sidecar.config import load_config as load_sidecar_config
from sidecar.metrics import SidecarMetrics

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "lakegate"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
BIN = Path(os.environ.get("LAKEGATE_CACHE_DIR", Path.home() / ".cache" / "lakegate")).expanduser() / "bin"
HELM = BIN / "helm"
VALIDATE = BIN / "k8s-validate"
RELEASE, NAMESPACE = "lg", "data"
SCENARIOS = [None, *CI_VALUES]  # None: the chart's defaults
SCENARIO_IDS = ["defaults", *(p.name for p in CI_VALUES)]
TOKENS_ENV = {"LAKEGATE_SIDECAR_TOKEN": "s" * 32, "LAKEGATE_ADMIN_TOKEN": "a" * 32, "LAKEGATE_READ_TOKEN": "r" * 32}


def pinned_helm_version() -> str:
    m = re.search(r"^HELM_VERSION=(\S+)", (ROOT / "scripts" / "install-helm").read_text(), re.M)
    assert m, "scripts/install-helm must pin HELM_VERSION"
    return m.group(1)


@pytest.fixture(scope="session", autouse=True)
def tools() -> None:
    missing = [str(p) for p in (HELM, VALIDATE) if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail(f"chart tooling missing: {', '.join(missing)}; run scripts/install-helm first", pytrace=False)


def run(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], input=stdin, capture_output=True, text=True, timeout=120)


@functools.cache
def render_text(values: Path | None = None, sets: tuple[str, ...] = (), chart: Path = CHART) -> str:
    args: list[str | Path] = [HELM, "template", RELEASE, chart, "--namespace", NAMESPACE]
    if values is not None:
        args += ["-f", values]
    for s in sets:
        args += ["--set", s]
    proc = run(*args)
    assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
    return proc.stdout


def render(values: Path | None = None, *sets: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(render_text(values, tuple(sets))) if d]


def find(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in hits]}"
    return hits[0]


def component(objs: list[dict[str, Any]], kind: str, comp: str) -> dict[str, Any]:
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["labels"].get("app.kubernetes.io/component") == comp]
    assert len(hits) == 1, f"expected one {kind} of component {comp}, found {len(hits)}"
    return hits[0]


def container(pod_spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod_spec["containers"] if c["name"] == name)


def env_of(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c.get("env", [])}


def service_config(objs: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = component(objs, "Deployment", "service")
    cm_name = next(
        v["configMap"]["name"] for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "config"
    )
    config: dict[str, Any] = yaml.safe_load(find(objs, "ConfigMap", cm_name)["data"]["service.yaml"])
    return config


# --- tools, lint, offline validation -------------------------------------------------------------


def test_helm_is_the_pinned_version() -> None:
    proc = run(HELM, "version", "--template", "{{.Version}}")
    assert proc.stdout.strip() == pinned_helm_version(), "rerun scripts/install-helm"


def test_ci_values_files_cover_the_issue_scenarios() -> None:
    names = {p.name for p in CI_VALUES}
    assert {"default-values.yaml", "full-values.yaml", "s3-values.yaml"} <= names


@pytest.mark.parametrize("values", SCENARIOS, ids=SCENARIO_IDS)
def test_helm_lint_strict(values: Path | None) -> None:
    args: list[str | Path] = [HELM, "lint", "--strict", CHART]
    if values is not None:
        args += ["-f", values]
    proc = run(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("values", SCENARIOS, ids=SCENARIO_IDS)
def test_every_rendered_object_is_valid_kubernetes(values: Path | None) -> None:
    manifest = render_text(values)
    proc = run(VALIDATE, stdin=manifest)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    count = int(re.search(r"(\d+) object\(s\) checked", proc.stdout).group(1))  # type: ignore[union-attr]
    assert count == len([d for d in yaml.safe_load_all(manifest) if d])


def test_validator_rejects_unknown_fields_wrong_types_and_unknown_kinds() -> None:
    bad = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: typo}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers: [{name: c, image: i, imagePullPolicy: Always, livenessProbe: {httpGet: {path: /, port: http}}, portz: []}]
---
apiVersion: v1
kind: Service
metadata: {name: wrong-type}
spec: {ports: [{name: http, port: "eighty"}]}
---
apiVersion: v1
kind: Servce
metadata: {name: kind-typo}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: sm}
spec: {selector: {matchLabels: {a: b}}, endpoints: [{port: http, intervall: 30s}]}
"""
    proc = run(VALIDATE, stdin=bad)
    assert proc.returncode == 1
    assert (
        'Deployment/typo: strict decoding error: unknown field "spec.template.spec.containers[0].portz"' in proc.stdout
    )
    assert "Service/wrong-type" in proc.stdout and "port" in proc.stdout
    assert "Servce/kind-typo" in proc.stdout
    assert "ServiceMonitor/sm" in proc.stdout and "intervall" in proc.stdout
    assert "4 invalid" in proc.stdout


# --- the service: single writer, probes, config ------------------------------------------------------


@pytest.mark.parametrize("values", SCENARIOS, ids=SCENARIO_IDS)
def test_service_is_a_single_writer(values: Path | None) -> None:
    spec = component(render(values), "Deployment", "service")["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}


def test_replicas_is_not_a_value() -> None:
    for key in ("replicaCount=2", "replicas=2"):
        proc = run(HELM, "template", RELEASE, CHART, "--set", key)
        assert proc.returncode != 0, f"--set {key} must be rejected by values.schema.json"


def test_probes_use_readyz_for_startup_and_readiness_and_healthz_for_liveness() -> None:
    c = container(component(render(), "Deployment", "service")["spec"]["template"]["spec"], "lakegate-service")
    assert c["startupProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    startup = c["startupProbe"]
    assert startup["failureThreshold"] * startup["periodSeconds"] >= 120, "JVM warm-up and table loading need minutes"
    assert "enabled" not in startup


def test_probes_can_be_disabled() -> None:
    c = container(
        component(render(None, "livenessProbe.enabled=false"), "Deployment", "service")["spec"]["template"]["spec"],
        "lakegate-service",
    )
    assert "livenessProbe" not in c and "startupProbe" in c


def test_service_has_named_http_and_spark_ui_ports() -> None:
    objs = render()
    ports = {p["name"]: p for p in component(objs, "Service", "service")["spec"]["ports"]}
    assert set(ports) == {"http", "spark-ui"}
    assert ports["http"]["targetPort"] == "http" and ports["spark-ui"]["targetPort"] == "spark-ui"
    c = container(component(objs, "Deployment", "service")["spec"]["template"]["spec"], "lakegate-service")
    cports = {p["name"]: p["containerPort"] for p in c["ports"]}
    cfg = service_config(objs)
    assert cports == {"http": cfg["server"]["port"], "spark-ui": cfg["spark"]["ui_port"]}


def test_checksum_config_follows_the_rendered_config(tmp_path: Path) -> None:
    def checksum(values: Path | None = None, *sets: str) -> str:
        dep = component(render(values, *sets), "Deployment", "service")
        return str(dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    base = checksum()
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    assert checksum() == base
    assert checksum(None, "config.server.threads=4") != base
    assert checksum(None, "config.spark.driver_memory=3g") != base
    # --set on a list index replaces the whole list in Helm, so change a table through a file.
    tables = yaml.safe_load((CHART / "values.yaml").read_text())["config"]["tables"]
    tables[0]["commit"]["max_files"] = 500
    changed = tmp_path / "values.yaml"
    changed.write_text(yaml.safe_dump({"config": {"tables": tables}}))
    assert checksum(changed) != base
    assert checksum(None, "tokens.admin=a-new-admin-token-0123") == base, "tokens are not in the ConfigMap"


def test_checksum_secret_is_stable_and_follows_the_given_tokens() -> None:
    def checksum(*sets: str) -> str:
        dep = component(render(None, *sets), "Deployment", "service")
        return str(dep["spec"]["template"]["metadata"]["annotations"]["checksum/secret"])

    base = checksum()
    assert checksum("nameOverride=") == base, "generated tokens must not make every render differ"
    assert checksum("tokens.admin=a-new-admin-token-0123") != base


@pytest.mark.parametrize("values", SCENARIOS, ids=SCENARIO_IDS)
def test_rendered_service_config_is_accepted_by_the_service(values: Path | None, tmp_path: Path) -> None:
    objs = render(values)
    raw = service_config(objs)
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(raw))
    config = load_config(path, environ=dict(TOKENS_ENV))  # the real loader: unknown keys, types, rules

    dep = component(objs, "Deployment", "service")
    pod = dep["spec"]["template"]["spec"]
    c = container(pod, "lakegate-service")
    assert c["args"] == ["--config", "/etc/lakegate/service.yaml"] and c["command"] == ["lakegate-service"]
    assert config.server.host == "0.0.0.0"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert str(config.spark.local_dir) == mounts["spark-local"]
    assert mounts["tmp"] == "/tmp" and mounts["config"] == "/etc/lakegate"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["spark-local"] and "emptyDir" in volumes["tmp"]
    if config.auth.enabled:
        env = env_of(c)
        assert {t.role.value for t in config.auth.tokens} == {"sidecar", "admin", "read"}
        assert [t.token for t in config.auth.tokens] == list(TOKENS_ENV.values())
        for var in TOKENS_ENV:
            assert "secretKeyRef" in env[var]["valueFrom"], f"{var} must come from the Secret"
    values_tables = yaml.safe_load(values.read_text()).get("config", {}).get("tables") if values else None
    if values_tables:
        assert [t.name for t in config.tables] == [t["name"] for t in values_tables]


def test_tokens_are_env_references_in_the_config_not_values() -> None:
    raw = service_config(render())
    assert [(t["token"], t["role"]) for t in raw["auth"]["tokens"]] == [
        ("${LAKEGATE_SIDECAR_TOKEN}", "sidecar"),
        ("${LAKEGATE_ADMIN_TOKEN}", "admin"),
        ("${LAKEGATE_READ_TOKEN}", "read"),
    ]
    assert "access_key" not in (raw["storage"].get("s3") or {})


def test_no_token_or_secret_value_appears_in_any_configmap() -> None:
    secrets = {
        "tokens.sidecar": "SIDECAR-TOKEN-recognizable-0001",
        "tokens.admin": "ADMIN-TOKEN-recognizable-0002",
        "tokens.read": "READ-TOKEN-recognizable-0005",
        "s3Credentials.accessKeyId": "AKIARECOGNIZABLE0003",
        "s3Credentials.secretAccessKey": "SECRET-ACCESS-KEY-recognizable-0004",
    }
    for values in SCENARIOS:
        if values is not None and "existingSecret" in (yaml.safe_load(values.read_text()) or {}):
            continue  # the chart renders no Secret then; the other scenarios cover it
        objs = render(
            values,
            "s3Credentials.enabled=true",
            "connectExample.enabled=true",
            *(f"{k}={v}" for k, v in secrets.items()),
        )
        for cm in (o for o in objs if o["kind"] == "ConfigMap"):
            text = yaml.safe_dump(cm)
            for key, value in secrets.items():
                assert value not in text, f"{key} leaked into ConfigMap {cm['metadata']['name']}"
                assert base64.b64encode(value.encode()).decode() not in text
        secret = find(objs, "Secret")
        stored = {base64.b64decode(v).decode() for v in secret["data"].values()}
        assert stored == set(secrets.values())


def test_generated_tokens_are_long_enough_and_distinct() -> None:
    data = find(render(), "Secret")["data"]
    tokens = [base64.b64decode(data[k]).decode() for k in ("sidecar-token", "admin-token", "read-token")]
    assert all(len(t) >= 16 for t in tokens) and len(set(tokens)) == 3


def test_existing_secret_replaces_the_chart_secret() -> None:
    objs = render(CHART / "ci" / "full-values.yaml")
    assert not [o for o in objs if o["kind"] == "Secret"]
    refs = []
    for dep in (o for o in objs if o["kind"] == "Deployment"):
        for c in dep["spec"]["template"]["spec"]["containers"]:
            refs += [
                e["valueFrom"]["secretKeyRef"] for e in c.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})
            ]
    chart_refs = [r for r in refs if r["key"] != "password"]  # full-values' own Kafka password
    assert chart_refs and all(r["name"] == "lakegate-credentials" for r in chart_refs)
    keys = {r["key"] for r in chart_refs}
    assert keys == {"sidecar", "admin", "read", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}


def test_s3_credentials_need_both_keys() -> None:
    proc = run(HELM, "template", RELEASE, CHART, "--set", "s3Credentials.enabled=true")
    assert proc.returncode != 0 and "s3Credentials.accessKeyId" in proc.stderr


def test_security_context_is_locked_down_with_the_image_uid() -> None:
    uid = int(re.search(r"^ARG LAKEGATE_UID=(\d+)", (ROOT / "Dockerfile").read_text(), re.M).group(1))  # type: ignore[union-attr]
    pod = component(render(), "Deployment", "service")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == uid
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    sc = container(pod, "lakegate-service")["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["runAsUser"] == uid


# --- the sidecar ---------------------------------------------------------------------------------------


def check_sidecar_container(c: dict[str, Any], secret_name: str, token_key: str, *, readiness: bool = False) -> None:
    assert c["command"] == ["lakegate-sidecar"] and c["args"] == ["--config", "/etc/lakegate/sidecar.yaml"]
    env = env_of(c)
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    names = [e["name"] for e in c["env"]]
    assert names.index("POD_IP") < names.index("LAKEGATE_SIDECAR_WORKER_ID"), "$(POD_IP) needs POD_IP defined first"
    assert env["LAKEGATE_SIDECAR_WORKER_ID"]["value"] == "$(POD_IP):8083"
    assert names.index("POD_NAME") < names.index("LAKEGATE_SIDECAR_WORKER_ID")
    assert env["LAKEGATE_SIDECAR_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": secret_name, "key": token_key}}
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"sidecar-http": 9464}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "sidecar-http"}
    if readiness:
        assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "sidecar-http"}
    else:
        assert "readinessProbe" not in c, "an unready sidecar would take the Connect pod out of its Service"
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["resources"]["limits"]["memory"]


def test_example_connect_deployment_carries_the_sidecar() -> None:
    objs = render(CHART / "ci" / "full-values.yaml")
    connect = component(objs, "Deployment", "connect-example")
    pod = connect["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["connect", "lakegate-sidecar"]
    check_sidecar_container(container(pod, "lakegate-sidecar"), "lakegate-credentials", "sidecar", readiness=True)
    worker = container(pod, "connect")
    assert {p["name"]: p["containerPort"] for p in worker["ports"]} == {"connect-rest": 8083}
    assert "rest.advertised.host.name=${POD_IP}" in worker["command"][-1]
    volumes = {v["name"]: v for v in pod["volumes"]}
    cm_name = volumes["lakegate-sidecar-config"]["configMap"]["name"]
    assert "sidecar.yaml" in find(objs, "ConfigMap", cm_name)["data"]
    annotations = connect["spec"]["template"]["metadata"]["annotations"]
    assert re.fullmatch(r"[0-9a-f]{64}", annotations["checksum/lakegate-sidecar-config"])


def test_example_connect_is_off_by_default() -> None:
    assert not [o for o in render() if o["metadata"]["labels"].get("app.kubernetes.io/component") == "connect-example"]


def test_sidecar_snippet_matches_the_example_and_default_secret() -> None:
    objs = render(None, "connectExample.enabled=true")
    snippet = find(objs, "ConfigMap", f"{RELEASE}-lakegate-sidecar-snippet")["data"]
    containers = yaml.safe_load(snippet["containers.yaml"])
    volumes = yaml.safe_load(snippet["volumes.yaml"])
    assert len(containers) == 1
    check_sidecar_container(containers[0], f"{RELEASE}-lakegate", "sidecar-token")
    assert {m["name"] for m in containers[0]["volumeMounts"]} == {v["name"] for v in volumes}
    pod = component(objs, "Deployment", "connect-example")["spec"]["template"]["spec"]
    assert container(pod, "lakegate-sidecar") == containers[0]
    assert yaml.safe_load(snippet["pod-annotations.yaml"]) == {
        k: v
        for k, v in component(objs, "Deployment", "connect-example")["spec"]["template"]["metadata"][
            "annotations"
        ].items()
        if k == "checksum/lakegate-sidecar-config"
    }


FOREIGN_CONNECT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: my-connect, namespace: data}
spec:
  replicas: 3
  selector: {matchLabels: {app: my-connect}}
  template:
    metadata:
      labels: {app: my-connect}
      annotations: {team: ingest}
    spec:
      containers:
        - name: connect
          image: confluentinc/cp-kafka-connect:7.7.1
          ports: [{name: rest, containerPort: 8083}]
          volumeMounts: [{name: plugins, mountPath: /plugins}]
      volumes:
        - {name: plugins, emptyDir: {}}
"""


def test_sidecar_patch_turns_an_existing_connect_deployment_into_a_valid_one(tmp_path: Path) -> None:
    snippet = find(render(CHART / "ci" / "s3-values.yaml"), "ConfigMap", f"{RELEASE}-lakegate-sidecar-snippet")["data"]
    (tmp_path / "connect.yaml").write_text(FOREIGN_CONNECT)
    (tmp_path / "patch.yaml").write_text(snippet["strategic-merge-patch.yaml"])
    merged = run(VALIDATE, "patch", tmp_path / "connect.yaml", tmp_path / "patch.yaml")
    assert merged.returncode == 0, merged.stderr
    check = run(VALIDATE, stdin=merged.stdout)
    assert check.returncode == 0, check.stdout
    dep = yaml.safe_load(merged.stdout)
    pod = dep["spec"]["template"]["spec"]
    # strategic merge puts the patch's items first (docs/deploy.md: default-container annotation)
    assert sorted(c["name"] for c in pod["containers"]) == ["connect", "lakegate-sidecar"]
    assert {v["name"] for v in pod["volumes"]} == {"plugins", "lakegate-sidecar-config", "lakegate-sidecar-tmp"}
    assert dep["spec"]["template"]["metadata"]["annotations"]["team"] == "ingest"
    assert "checksum/lakegate-sidecar-config" in dep["spec"]["template"]["metadata"]["annotations"]
    sidecar = container(pod, "lakegate-sidecar")
    check_sidecar_container(sidecar, f"{RELEASE}-lakegate", "sidecar-token")
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(env_of(sidecar))
    assert containers_yaml_equal(snippet)


def containers_yaml_equal(snippet: dict[str, str]) -> bool:
    patch = yaml.safe_load(snippet["strategic-merge-patch.yaml"])["spec"]["template"]
    return bool(
        patch["spec"]["containers"] == yaml.safe_load(snippet["containers.yaml"])
        and patch["spec"]["volumes"] == yaml.safe_load(snippet["volumes.yaml"])
        and patch["metadata"]["annotations"] == yaml.safe_load(snippet["pod-annotations.yaml"])
    )


def test_sidecar_worker_id_can_follow_a_hostname_advertising_worker() -> None:
    objs = render(None, "sidecar.workerId=$(POD_NAME).connect.data.svc:8083")
    cm = find(objs, "ConfigMap", f"{RELEASE}-lakegate-sidecar")
    assert yaml.safe_load(cm["data"]["sidecar.yaml"])["worker_id"] == "${POD_NAME}.connect.data.svc:8083"
    snippet = find(objs, "ConfigMap", f"{RELEASE}-lakegate-sidecar-snippet")["data"]
    env = env_of(yaml.safe_load(snippet["containers.yaml"])[0])
    assert env["LAKEGATE_SIDECAR_WORKER_ID"]["value"] == "$(POD_NAME).connect.data.svc:8083"
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


@pytest.mark.parametrize("values", SCENARIOS, ids=SCENARIO_IDS)
def test_sidecar_config_follows_the_contract_and_loads(values: Path | None, tmp_path: Path) -> None:
    objs = render(values)
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and "sidecar.yaml" in o["data"])
    cm_name = cm["metadata"]["name"]
    raw = yaml.safe_load(cm["data"]["sidecar.yaml"])
    assert raw["worker_id"] == "${POD_IP}:8083"
    assert raw["connect"]["url"] == "http://127.0.0.1:8083"
    assert raw["service"]["token"] == "${LAKEGATE_SIDECAR_TOKEN}"
    assert raw["http"] == {"host": "0.0.0.0", "port": 9464}
    svc = component(objs, "Service", "service")
    http_port = next(p["port"] for p in svc["spec"]["ports"] if p["name"] == "http")
    assert raw["service"]["url"] == f"http://{svc['metadata']['name']}.{NAMESPACE}.svc:{http_port}"

    # The real loader, with the environment the sidecar container gets (kubelet expands $(POD_IP)).
    path = tmp_path / "sidecar.yaml"
    path.write_text(yaml.safe_dump(raw))
    snippet = yaml.safe_load(find(objs, "ConfigMap", cm_name + "-snippet")["data"]["containers.yaml"])[0]
    environ = {
        "POD_IP": "10.1.2.3",
        "POD_NAME": "connect-0",
        "KAFKA_PASSWORD": "k" * 20,
        "LAKEGATE_SIDECAR_TOKEN": "s" * 32,
    }
    for e in snippet["env"]:
        if "value" in e:
            environ[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: environ[m.group(1)], e["value"])
    config = load_sidecar_config(path, environ=environ)
    assert config.effective_worker_id() == "10.1.2.3:8083"
    assert config.service.token == "s" * 32 and config.service.url == raw["service"]["url"]
    assert bool(config.connect.connectors) != bool(config.connect.connectors_regex)
    assert config.http.port == 9464


def test_service_config_passes_the_status_page_settings() -> None:
    raw = service_config(
        render(
            None, "config.auth.session_hours=2", "config.auth.secure_cookie=true", "config.spark.ui_url=https://ui.x"
        )
    )
    assert raw["auth"]["session_hours"] == 2 and raw["auth"]["secure_cookie"] is True
    assert raw["spark"]["ui_url"] == "https://ui.x"


def test_service_config_passes_an_optional_kafka_section() -> None:
    raw = service_config(render(None, "config.kafka.bootstrap_servers=kafka:9092"))
    assert raw["kafka"] == {"bootstrap_servers": "kafka:9092"}
    assert "kafka" not in service_config(render())


def test_service_config_passes_the_lease_ttl() -> None:
    raw = service_config(render(None, "config.leases.ttl_seconds=90"))
    assert raw["leases"] == {"ttl_seconds": 90}
    assert "leases" not in service_config(render())


# --- the Grafana dashboard ------------------------------------------------------------------------------

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
