"""The Helm chart (charts/lakegate): lint, render, validate offline against the Kubernetes API, and
check what matters for the service (single writer, probes, config checksum, secrets). Tools:
``scripts/install-helm``; helpers: ``tests/chart/helm.py``."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
import yaml

from commit_service.config import load_config
from tests.chart.helm import (
    CHART,
    CI_VALUES,
    HELM,
    RELEASE,
    ROOT,
    SCENARIO_IDS,
    SCENARIOS,
    TOKENS_ENV,
    VALIDATE,
    component,
    container,
    env_of,
    find,
    pinned_helm_version,
    render,
    render_text,
    run,
    service_config,
)


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
    dep = component(objs, "Deployment", "service")
    pod = dep["spec"]["template"]["spec"]
    c = container(pod, "lakegate-service")
    pod_env = {  # what a ${VAR} in the config may read, e.g. from extraEnv (LAKEGATE_* are overrides, not values)
        e["name"]: "set-in-the-pod" for e in c.get("env", []) if not e["name"].startswith("LAKEGATE_")
    }
    config = load_config(path, environ={**pod_env, **TOKENS_ENV})  # the real loader: unknown keys, types, rules
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
