"""Lakegate's own processes for the demo and the tests: ``lakegate-service`` and ``lakegate-sidecar``.

Each writes its YAML config into a work directory and runs the installed console script as a
:class:`ManagedProcess` (log file, readiness on its HTTP endpoint, clean stop).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import requests
import yaml

from lakegate_stack.connect import ConnectWorker
from lakegate_stack.errors import ServiceStartError
from lakegate_stack.process import ManagedProcess, free_port

SIDECAR_TOKEN = "sidecar-token-for-tests-0001"
ADMIN_TOKEN = "admin-token-for-tests-000001"
READ_TOKEN = "read-token-for-tests-0000001"  # the status page's viewer


class ServiceProcess:
    """One ``lakegate-service`` process on a free port, with its own Spark UI port."""

    def __init__(
        self,
        workdir: Path,
        tables: list[dict[str, Any]],
        roots: list[str],
        name: str = "service",
        s3: dict[str, Any] | None = None,
        kafka: str | None = None,
        spark_conf: dict[str, str] | None = None,
        server: dict[str, Any] | None = None,
        spark: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        catalogs: list[dict[str, Any]] | None = None,
    ) -> None:
        """``s3``: the ``storage.s3`` section (endpoint, keys) when tables or files are on S3;
        ``kafka``: bootstrap servers, which turns fencing on (leases checked against Kafka);
        ``spark_conf``: extra Spark properties (``spark.conf``); ``server``, ``spark``: keys of
        those sections over the defaults here (e.g. ``spark: {jars_dir: <empty dir>}`` makes a
        service whose start-up fails at once, without a JVM, while its HTTP side runs); ``env``:
        extra environment (e.g. ``LAKEGATE_TEST_FAULT_DIR`` for the chaos suite's crash points);
        ``catalogs``: the ``catalogs`` section (Iceberg catalogs of ``format: iceberg`` tables)."""
        self.workdir = workdir
        self.port = free_port()
        self.ui_port = free_port()
        config: dict[str, Any] = {
            "server": {"host": "127.0.0.1", "port": self.port, "threads": 4, **(server or {})},
            "auth": {
                "enabled": True,
                "tokens": [
                    {"token": SIDECAR_TOKEN, "role": "sidecar"},
                    {"token": ADMIN_TOKEN, "role": "admin"},
                    {"token": READ_TOKEN, "role": "read"},
                ],
            },
            "storage": {"allowed_roots": roots, **({"s3": s3} if s3 else {})},
            "spark": {
                "master": "local[2]",
                "ui_port": self.ui_port,
                "driver_memory": "1g",
                "local_dir": str(workdir / f"{name}-spark"),
                "conf": dict(spark_conf or {}),
                **(spark or {}),
            },
            "tables": tables,
            **({"kafka": {"bootstrap_servers": kafka}} if kafka else {}),
            **({"catalogs": catalogs} if catalogs else {}),
        }
        self.config_path = workdir / f"{name}.yaml"
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(config))
        script = Path(sys.executable).parent / "lakegate-service"
        self.process = ManagedProcess(
            name, [str(script), "--config", str(self.config_path)], workdir / f"{name}.log", env=env
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180) -> ServiceProcess:
        return self.spawn().wait_ready(timeout)

    def spawn(self) -> ServiceProcess:
        """Start the process; call from the main thread (the child dies with the spawning thread)."""
        self.process.start()
        return self

    def wait_ready(self, timeout: float = 180) -> ServiceProcess:
        self.process.wait_ready(
            lambda: requests.get(f"{self.url}/readyz", timeout=2).status_code == 200, timeout, "ready"
        )
        return self

    def wait_healthy(self, timeout: float = 60) -> ServiceProcess:
        """Wait for ``/healthz`` (the HTTP side), not for Spark and the tables."""
        self.process.wait_ready(
            lambda: requests.get(f"{self.url}/healthz", timeout=2).status_code == 200, timeout, "healthy"
        )
        return self

    def spark_ui(self, timeout: float = 180) -> str:
        """The Spark UI's address, from ``/readyz``: null there until the SparkSession is up, which
        is after the service turned ready (intake does not wait for Spark)."""
        deadline = time.monotonic() + timeout
        while True:
            ui = requests.get(f"{self.url}/readyz", timeout=10).json().get("spark_ui")
            if ui:
                return str(ui)
            if time.monotonic() > deadline:
                raise ServiceStartError(f"the service reported no Spark UI within {timeout:.0f}s")
            time.sleep(0.5)

    def spark_job_descriptions(self, attempts: int = 10) -> list[str]:
        """Job descriptions from the Spark UI's REST API (retried: the UI answers lazily)."""
        ui = self.spark_ui()
        for attempt in range(attempts):
            try:
                app_id = requests.get(f"{ui}/api/v1/applications", timeout=10).json()[0]["id"]
                jobs = requests.get(f"{ui}/api/v1/applications/{app_id}/jobs", timeout=10).json()
                return [j.get("description", "") for j in jobs]
            except (requests.RequestException, ValueError, IndexError):
                if attempt == attempts - 1:
                    raise
                time.sleep(1)
        return []

    def stop(self) -> None:
        self.process.stop(timeout=60)

    def kill(self) -> None:
        """SIGKILL the service (and its JVM): what a crash or an OOM kill does."""
        self.process.kill()

    def call(
        self, method: str, path: str, token: str = SIDECAR_TOKEN, headers: dict[str, str] | None = None, **kw: Any
    ) -> requests.Response:
        headers = {"Authorization": f"Bearer {token}", **(headers or {})}
        return requests.request(method, f"{self.url}{path}", headers=headers, timeout=300, **kw)

    def commit_now(self, table: str) -> dict[str, Any]:
        r = self.call("POST", f"/v1/tables/{table}/commit", ADMIN_TOKEN)
        assert r.status_code == 200, r.text
        return dict(r.json())


def sidecar_config(
    worker: ConnectWorker,
    connectors: list[str],
    kafka: str,
    storage: dict[str, Any],
    service_url: str,
    resend_after_seconds: float = 5,
) -> dict[str, Any]:
    """A sidecar config for the local stack: follows ``connectors`` on ``worker``, lists ``storage``
    (the config's ``storage`` section), sends to ``service_url`` with the sidecar token, polls every
    second."""
    return {
        "worker_id": worker.worker_id,
        "connect": {"url": worker.url, "connectors": connectors},
        "kafka": {"bootstrap_servers": kafka},
        "storage": storage,
        "service": {"url": service_url, "token": "${LAKEGATE_SIDECAR_TOKEN}"},
        "poll_interval_seconds": 1,
        "resend_after_seconds": resend_after_seconds,
    }


class SidecarProcess:
    """One ``lakegate-sidecar`` process beside a Connect worker, with its own health port."""

    def __init__(self, workdir: Path, name: str, config: dict[str, Any], env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        config = {**config, "id": name, "http": {"host": "127.0.0.1", "port": self.port}}
        workdir.mkdir(parents=True, exist_ok=True)
        path = workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        script = Path(sys.executable).parent / "lakegate-sidecar"
        self.process = ManagedProcess(
            name,
            [str(script), "--config", str(path)],
            workdir / f"{name}.log",
            env={"LAKEGATE_SIDECAR_TOKEN": SIDECAR_TOKEN, **(env or {})},
        )

    def start(self, timeout: float = 60) -> SidecarProcess:
        self.process.start()
        self.process.wait_ready(
            lambda: requests.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code == 200, timeout
        )
        return self

    def stop(self) -> None:
        self.process.stop(timeout=30)

    def kill(self) -> None:
        """SIGKILL the sidecar: nothing it buffered is flushed, no file it was sending is finished."""
        self.process.kill()
