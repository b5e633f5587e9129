"""Helpers of the chart tests: the pinned tools, rendering the chart, finding objects in it."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

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
