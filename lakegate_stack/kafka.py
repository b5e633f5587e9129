"""A single-node KRaft Kafka broker on loopback, from the cached Maven Central jars.

Started by the pytest fixtures and the demo (:mod:`lakegate_stack.stack`). It formats its own
log directory with ``kafka.tools.StorageTool format --standalone`` and runs ``kafka.Kafka``.
Clients reach it at :attr:`KafkaBroker.bootstrap_servers`.
"""

from __future__ import annotations

import base64
import logging
import subprocess
import uuid
from pathlib import Path

from lakegate_stack import artifacts
from lakegate_stack.errors import ServiceStartError
from lakegate_stack.process import (
    ManagedProcess,
    free_port,
    java_command,
    port_open,
    write_log4j2_config,
    write_properties,
)

logger = logging.getLogger(__name__)


def random_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (as kafka-storage).

    One in 64 of those starts with ``-``, which ``kafka-storage format -t <id>`` reads as an
    option ("expected one argument"); like Kafka's own ``Uuid.randomUuid``, draw again then."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBroker:
    """One combined broker+controller node; owns ``workdir`` (config, data, ``kafka.log``)."""

    def __init__(
        self, workdir: Path, *, jars_dir: Path | None = None, host: str = "127.0.0.1", heap: str = "768m"
    ) -> None:
        self.workdir = workdir
        self.host = host
        self.port = free_port(host)
        self.controller_port = free_port(host)
        self.heap = heap
        self.classpath = [artifacts.group_dir("kafka", jars_dir)]
        artifacts.jars_of("kafka", jars_dir)  # fail early with "run scripts/fetch-jars kafka"
        self.process: ManagedProcess | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def _server_properties(self) -> dict[str, object]:
        return {
            "process.roles": "broker,controller",
            "node.id": 1,
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.quorum.bootstrap.servers": f"{self.host}:{self.controller_port}",
            "log.dirs": self.workdir / "data",
            "num.partitions": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 5,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "false",
            "log.flush.interval.messages": 10000,
        }

    def start(self, timeout: float = 90.0) -> KafkaBroker:
        config = write_properties(self.workdir / "server.properties", self._server_properties())
        props = {"log4j2.configurationFile": str(write_log4j2_config(self.workdir))}
        fmt = java_command(
            self.classpath,
            "kafka.tools.StorageTool",
            ["format", "-t", random_cluster_id(), "-c", str(config), "--standalone"],
            heap="256m",
            system_props=props,
        )
        result = subprocess.run(fmt, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise ServiceStartError(f"kafka storage format failed:\n{result.stdout}\n{result.stderr}")
        cmd = java_command(self.classpath, "kafka.Kafka", [str(config)], heap=self.heap, system_props=props)
        self.process = ManagedProcess("kafka", cmd, self.workdir / "kafka.log").start()
        self.process.wait_ready(self._ready, timeout, "accepting clients")
        logger.info("kafka ready at %s", self.bootstrap_servers)
        return self

    def _ready(self) -> bool:
        from kafka import KafkaAdminClient

        if not port_open(self.host, self.port):
            return False
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=3000)
        try:
            return bool(admin.describe_cluster().get("brokers"))
        finally:
            admin.close()

    def stop(self) -> None:
        if self.process:
            self.process.stop()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` (replication 1) and wait until every partition has a leader."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})
        admin.wait_for_topics([topic], timeout_ms=30000)
    finally:
        admin.close()
