"""Kafka Connect distributed workers on loopback, and a thin REST client for the tests and demo.

Started by the pytest fixtures and the demo. Several workers may share one ``group_id`` (and so
one set of config/offset/status topics): later tests move partitions between them. The storage
sink plugin directory (``<jars>/s3-sink``) is on every worker's ``plugin.path``; a worker made with
``plugins=("s3-sink", "iceberg-sink")`` also runs Apache Iceberg's own sink
(:mod:`lakegate_stack.iceberg_peer`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import requests

from lakegate_stack import artifacts
from lakegate_stack.errors import StackError
from lakegate_stack.process import (
    ManagedProcess,
    free_port,
    java_command,
    write_log4j2_config,
    write_properties,
)

logger = logging.getLogger(__name__)

SINK_PLUGIN_GROUP = "s3-sink"
SINK_CLASS = "io.lakegate.connect.s3.S3SinkConnector"


def s3_sink_config(
    topics: list[str],
    bucket: str,
    endpoint: str,
    access_key: str,
    secret_key: str,
    *,
    prefix: str | None = None,
    output: str | None = "parquet",
    compression: str | None = "snappy",
    tasks: int = 2,
    **overrides: str,
) -> dict[str, str]:
    """A storage sink connector config with Aiven's keys: schemaless JSON in, files out.

    ``None`` leaves a key unset, i.e. at Aiven's default: ``output="jsonl", compression=None`` is
    gzip JSON lines with the envelope on (``output=None`` is Aiven's default, headerless CSV, which
    needs a bytes value: ``value.converter=...ByteArrayConverter`` in ``overrides``). A ``prefix``
    (non-empty: Aiven refuses ``""``) selects Aiven's prefix naming, ``<prefix><topic>-<partition>-
    <start offset zero-padded to 20 digits>`` + the compression's extension; without one objects
    are named by ``file.name.template`` (default ``{{topic}}-{{partition}}-{{start_offset}}`` + the
    compression's extension).
    """
    optional = {"aws.s3.prefix": prefix, "format.output.type": output, "file.compression.type": compression}
    return {
        "connector.class": SINK_CLASS,
        "topics": ",".join(topics),
        "tasks.max": str(tasks),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "aws.access.key.id": access_key,
        "aws.secret.access.key": secret_key,
        "aws.s3.bucket.name": bucket,
        "aws.s3.endpoint": endpoint,
        "aws.s3.region": "us-east-1",
        **{k: v for k, v in optional.items() if v is not None},
        "consumer.override.max.poll.records": "500",
        **overrides,
    }


def confluent_sink_config(
    topics: list[str],
    bucket: str,
    endpoint: str,
    access_key: str,
    secret_key: str,
    *,
    format_class: str = "avro.AvroFormat",
    tasks: int = 1,
    **overrides: str,
) -> dict[str, str]:
    """A sink connector config with Confluent's keys (``format.class`` under
    ``io.confluent.connect.s3.format.``, ``s3.bucket.name``, ``store.url``, ``topics.dir``,
    ``partitioner.class``, ... in ``overrides``): the stand-in then writes the value alone, in
    Confluent's layout. The credentials are the stand-in's keys (Confluent's sink reads the AWS
    default chain)."""
    config = s3_sink_config(
        topics, bucket, endpoint, access_key, secret_key, output=None, compression=None, tasks=tasks
    )
    for aiven in ("aws.s3.bucket.name", "aws.s3.endpoint", "aws.s3.region"):
        del config[aiven]
    confluent = {"format.class": f"io.confluent.connect.s3.format.{format_class}", "s3.bucket.name": bucket}
    return {**config, **confluent, "store.url": endpoint, **overrides}


class ConnectWorker:
    """One ``ConnectDistributed`` JVM; owns ``workdir`` (worker properties and ``<name>.log``)."""

    def __init__(
        self,
        workdir: Path,
        bootstrap_servers: str,
        *,
        name: str = "connect-1",
        group_id: str = "lakegate-connect",
        jars_dir: Path | None = None,
        host: str = "127.0.0.1",
        heap: str = "1g",
        offset_flush_interval_ms: int = 2000,
        plugins: tuple[str, ...] = (SINK_PLUGIN_GROUP,),
    ) -> None:
        self.workdir = workdir
        self.name = name
        self.bootstrap_servers = bootstrap_servers
        self.group_id = group_id
        self.host = host
        self.port = free_port(host)
        self.heap = heap
        self.offset_flush_interval_ms = offset_flush_interval_ms
        artifacts.jars_of("connect", jars_dir)
        for plugin in plugins:
            artifacts.jars_of(plugin, jars_dir)  # fail early with "run scripts/fetch-jars <group>"
        self.classpath = [artifacts.group_dir("connect", jars_dir)]
        self.plugins = {plugin: artifacts.group_dir(plugin, jars_dir) for plugin in plugins}
        self.plugin_path = workdir / f"{name}-plugins"
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def worker_id(self) -> str:
        """How the Connect REST API names this worker in task status (``host:port``)."""
        return f"{self.host}:{self.port}"

    def _worker_properties(self) -> dict[str, object]:
        topic = f"_{self.group_id}"
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group_id,
            "listeners": f"http://{self.host}:{self.port}",
            "rest.advertised.host.name": self.host,
            "rest.advertised.port": self.port,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "config.storage.topic": f"{topic}-configs",
            "offset.storage.topic": f"{topic}-offsets",
            "status.storage.topic": f"{topic}-status",
            "config.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "offset.storage.partitions": 5,
            "status.storage.partitions": 1,
            "offset.flush.interval.ms": self.offset_flush_interval_ms,
            "scheduled.rebalance.max.delay.ms": 2000,
            "plugin.path": self.plugin_path,
            # every plugin here (the stand-in sink, Iceberg's sink, Kafka's own) has ServiceLoader
            # manifests: no reflective scan of every jar (4.5 s of a worker's 7 s start, 10.6 s
            # with Iceberg's sink; Kafka's start-up log said so under hybrid_warn)
            "plugin.discovery": "service_load",
            "consumer.metadata.max.age.ms": 5000,
        }

    def start(self, timeout: float = 120.0) -> ConnectWorker:
        self._link_plugins()
        config = write_properties(self.workdir / f"{self.name}.properties", self._worker_properties())
        props = {"log4j2.configurationFile": str(write_log4j2_config(self.workdir))}
        cmd = java_command(
            self.classpath,
            "org.apache.kafka.connect.cli.ConnectDistributed",
            [str(config)],
            heap=self.heap,
            system_props=props,
        )
        self.process = ManagedProcess(self.name, cmd, self.workdir / f"{self.name}.log").start()
        self.process.wait_ready(self._ready, timeout, "serving its REST API")
        logger.info("%s ready at %s", self.name, self.url)
        return self

    def _link_plugins(self) -> None:
        """``plugin.path`` holds one sub-directory per plugin: a link to each plugin's cached group."""
        self.plugin_path.mkdir(parents=True, exist_ok=True)
        for plugin, group in self.plugins.items():
            link = self.plugin_path / plugin
            if not link.is_symlink():
                link.symlink_to(group, target_is_directory=True)

    def _ready(self) -> bool:
        return requests.get(f"{self.url}/connectors", timeout=2).status_code == 200

    def stop(self) -> None:
        if self.process:
            self.process.stop(timeout=30)

    def client(self) -> ConnectRestClient:
        return ConnectRestClient(self.url)


class ConnectRestClient:
    """The few Connect REST calls the tests and the demo make (create, status, delete)."""

    def __init__(self, url: str, session: requests.Session | None = None) -> None:
        self.url = url.rstrip("/")
        self.http = session or requests.Session()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        resp = self.http.request(method, f"{self.url}{path}", timeout=30, **kwargs)
        if resp.status_code >= 400:
            raise StackError(f"Connect {method} {path}: HTTP {resp.status_code}: {resp.text}")
        return resp.json() if resp.content else None

    def plugins(self) -> list[str]:
        return [p["class"] for p in self._call("GET", "/connector-plugins")]

    def put_connector(self, name: str, config: dict[str, str], retries: int = 30) -> dict[str, Any]:
        """Create or update ``name``; retries while the worker group rebalances (HTTP 409)."""
        for attempt in range(retries):
            try:
                return dict(self._call("PUT", f"/connectors/{name}/config", json=config))
            except StackError as exc:
                if "409" not in str(exc) or attempt == retries - 1:
                    raise
                time.sleep(1)
        raise AssertionError("unreachable")

    def status(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/connectors/{name}/status"))

    def delete_connector(self, name: str) -> None:
        self._call("DELETE", f"/connectors/{name}")

    def wait_running(self, name: str, tasks: int, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until the connector and ``tasks`` tasks are RUNNING; raise with the trace if FAILED."""
        deadline = time.monotonic() + timeout
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                status = self.status(name)
            except StackError:
                time.sleep(0.5)
                continue
            states = [t["state"] for t in status.get("tasks", [])]
            failed = [t for t in status.get("tasks", []) if t["state"] == "FAILED"]
            if failed or status.get("connector", {}).get("state") == "FAILED":
                raise StackError(f"connector {name} failed: {status}")
            if status.get("connector", {}).get("state") == "RUNNING" and states.count("RUNNING") >= tasks:
                return status
            time.sleep(0.5)
        raise StackError(f"connector {name} not running with {tasks} tasks in {timeout:.0f}s: {status}")
