"""Spark executors on Kubernetes (``sparkOnKubernetes``, client mode): the driver in the service
pod, executors as pods. Checks what must fit together for executors to start and reach the driver:
the Spark properties in the service config, the headless Service, the executor pod template and
the RBAC of the service account; every object also passes the offline Kubernetes validator
(``ci/spark-kubernetes-values.yaml`` in tests/chart/test_chart.py)."""

from __future__ import annotations

from typing import Any

import yaml

from tests.chart.helm import (
    CHART,
    VALIDATE,
    component,
    container,
    env_of,
    find,
    render,
    run,
    service_config,
)

VALUES = CHART / "ci" / "spark-kubernetes-values.yaml"


def pod_of(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return component(objs, "Deployment", "service")["spec"]["template"]


def test_off_by_default_spark_runs_in_the_pod() -> None:
    objs = render()
    assert service_config(objs)["spark"]["master"] == "local[*]"
    assert not [o for o in objs if o["kind"] in ("Role", "RoleBinding")]
    assert not [o for o in objs if o["metadata"]["labels"].get("app.kubernetes.io/component") == "spark-driver"]
    pod = pod_of(objs)["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "POD_NAME" not in env_of(container(pod, "lakegate-service"))


def test_executors_reach_the_driver_through_the_headless_service() -> None:
    objs = render(VALUES)
    conf = service_config(objs)["spark"]["conf"]
    pod = pod_of(objs)
    svc = component(objs, "Service", "spark-driver")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    labels = pod["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())  # it selects the service pod
    host, namespace = conf["spark.driver.host"].split(".")[:2]
    assert host == svc["metadata"]["name"] and namespace == svc["metadata"]["namespace"]
    ports = {p["name"]: p["containerPort"] for p in container(pod["spec"], "lakegate-service")["ports"]}
    by_target = {p["targetPort"]: p["port"] for p in svc["spec"]["ports"]}
    assert by_target == {
        "spark-driver": int(conf["spark.driver.port"]),
        "spark-blockmgr": int(conf["spark.blockManager.port"]),
    }
    assert ports["spark-driver"] == int(conf["spark.driver.port"])
    assert ports["spark-blockmgr"] == int(conf["spark.blockManager.port"])
    assert conf["spark.driver.bindAddress"] == "0.0.0.0"


def test_the_config_names_the_api_server_the_image_and_the_pod_that_owns_the_executors() -> None:
    objs = render(VALUES)
    spark = service_config(objs)["spark"]
    conf = spark["conf"]
    assert spark["master"] == "k8s://https://kubernetes.default.svc"
    assert conf["spark.kubernetes.namespace"] == "data"
    assert conf["spark.kubernetes.container.image"] == "apache/spark:4.1.1-scala2.13-java17-ubuntu"
    assert conf["spark.kubernetes.driver.pod.name"] == "${POD_NAME}"
    env = env_of(container(pod_of(objs)["spec"], "lakegate-service"))
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert conf["spark.kubernetes.authenticate.executor.serviceAccountName"] == "lakegate-spark-executor"
    assert (conf["spark.executor.cores"], conf["spark.executor.memory"], conf["spark.executor.memoryOverhead"]) == (
        "2",
        "4g",
        "1g",
    )
    assert conf["spark.dynamicAllocation.enabled"] == "true"
    assert conf["spark.dynamicAllocation.shuffleTracking.enabled"] == "true"
    assert (conf["spark.dynamicAllocation.minExecutors"], conf["spark.dynamicAllocation.maxExecutors"]) == ("1", "6")
    assert "spark.executor.instances" not in conf
    assert conf["spark.sql.shuffle.partitions"] == "24"  # the user's own keys pass


def test_the_users_spark_conf_wins_and_fixed_executors_without_dynamic_allocation() -> None:
    objs = render(
        VALUES,
        "config.spark.conf.spark\\.executor\\.memory=8g",
        "sparkOnKubernetes.dynamicAllocation.enabled=false",
        "sparkOnKubernetes.instances=3",
    )
    conf = service_config(objs)["spark"]["conf"]
    assert conf["spark.executor.memory"] == "8g"
    assert conf["spark.dynamicAllocation.enabled"] == "false" and conf["spark.executor.instances"] == "3"
    assert not [k for k in conf if k.startswith("spark.dynamicAllocation.") and k != "spark.dynamicAllocation.enabled"]


def test_the_executor_pod_template_is_mounted_where_the_config_reads_it_and_is_a_valid_pod() -> None:
    objs = render(VALUES)
    conf = service_config(objs)["spark"]["conf"]
    pod = pod_of(objs)["spec"]
    mounts = {m["name"]: m["mountPath"] for m in container(pod, "lakegate-service")["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    cm = find(objs, "ConfigMap", volumes["spark-executor-template"]["configMap"]["name"])
    directory, name = conf["spark.kubernetes.executor.podTemplateFile"].rsplit("/", 1)
    assert mounts["spark-executor-template"] == directory and name in cm["data"]
    template = yaml.safe_load(cm["data"][name])
    assert template["kind"] == "Pod"
    assert template["spec"]["nodeSelector"] == {"workload": "spark"}
    assert template["spec"]["tolerations"][0]["key"] == "spark"
    assert template["metadata"]["labels"]["app.kubernetes.io/component"] == "spark-executor"
    # what Spark adds to the template for each executor: its name, the image, the container's command
    template["metadata"]["name"] = "lg-lakegate-exec-1"
    template["spec"]["containers"][0]["image"] = conf["spark.kubernetes.container.image"]
    valid = run(VALIDATE, stdin=yaml.safe_dump(template))
    assert valid.returncode == 0, valid.stdout + valid.stderr


def test_the_service_account_may_run_executor_pods() -> None:
    objs = render(VALUES)
    pod = pod_of(objs)["spec"]
    assert pod["automountServiceAccountToken"] is True  # the driver calls the API server
    binding = find(objs, "RoleBinding")
    role = find(objs, "Role", binding["roleRef"]["name"])
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": "data"}]
    pods = next(r for r in role["rules"] if "pods" in r["resources"])
    assert {"create", "get", "list", "watch", "delete"} <= set(pods["verbs"])
    assert "configmaps" in pods["resources"]
    without = render(VALUES, "sparkOnKubernetes.rbac.create=false")
    assert not [o for o in without if o["kind"] in ("Role", "RoleBinding")]
