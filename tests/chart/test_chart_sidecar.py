"""The chart's sidecar: the example Connect deployment, the snippet and patch that attach a sidecar
to an existing Connect deployment, and the sidecar config the chart renders."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from sidecar.config import load_config as load_sidecar_config
from tests.chart.helm import (
    CHART,
    NAMESPACE,
    RELEASE,
    SCENARIO_IDS,
    SCENARIOS,
    VALIDATE,
    component,
    container,
    env_of,
    find,
    render,
    run,
    service_config,
)


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
