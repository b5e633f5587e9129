"""The whole pipeline, all real: Kafka -> Connect (S3 sink, Parquet) -> S3 server -> sidecars ->
lakegate-service -> Delta on s3a, while a second worker joins, the service restarts and the first
worker leaves. At quiesce every produced id is in the table exactly once and each partition's
``txn`` version equals the ``connect-<connector>`` committed offset; delta-rs agrees.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from kafka import KafkaProducer, TopicPartition

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker, s3_sink_config
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ServiceProcess, SidecarProcess, sidecar_config
from tests.kafka_helpers import committed_offsets, create_topic, end_offsets

logger = logging.getLogger(__name__)

TOPICS = ("e2e-a", "e2e-b")
PARTITIONS = 3
RECORDS = 20_000
BUCKET, PREFIX, TABLE, CONNECTOR = "lake", "events/data/", "events", "e2e-sink"
S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}


def start_sidecar(
    workdir: Path, name: str, worker: ConnectWorker, kafka: KafkaBroker, s3: S3Server, service: ServiceProcess
) -> SidecarProcess:
    return SidecarProcess(
        workdir,
        name,
        sidecar_config(
            worker,
            [CONNECTOR],
            kafka.bootstrap_servers,
            {"kind": "s3", "bucket": BUCKET, "prefix": PREFIX, "endpoint": s3.endpoint, "naming": "aiven"},
            service.url,
        ),
        env=S3_ENV,
    ).start()


def sink_config(s3: S3Server) -> dict[str, str]:
    return s3_sink_config(list(TOPICS), BUCKET, s3.endpoint, s3mod.ACCESS_KEY, s3mod.SECRET_KEY, prefix=PREFIX)


class GatedProducer(threading.Thread):
    """Produces ids 0..RECORDS-1 (paced), stopping at each gate until the test opens it.

    The test, not the clock, decides where each fault falls: it waits until the producer has
    reached (and flushed) a gate, injects the fault, and opens the gate. So a fast or slow machine
    changes how long the run takes, never which records are produced around which fault.
    """

    def __init__(self, bootstrap: str, gates: tuple[int, ...]) -> None:
        super().__init__(name="e2e-producer", daemon=True)
        self.bootstrap = bootstrap
        self.reached = {n: threading.Event() for n in gates}
        self.opened = {n: threading.Event() for n in gates}
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # surfaced by the test through wait_for / finish
            self.error = exc

    def _produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=10)
        try:
            for i in range(RECORDS):
                if i in self.reached:
                    producer.flush(60)
                    self.reached[i].set()
                    while not self.opened[i].wait(1):
                        if self.stop.is_set():
                            return
                topic, partition = TOPICS[i % 2], (i // 2) % PARTITIONS
                value = json.dumps({"id": i, "src": topic, "amount": i * 0.01}).encode()
                producer.send(topic, key=str(i).encode(), value=value, partition=partition)
                if i % 250 == 0:
                    time.sleep(0.25)  # paced, so Connect flushes many files per partition
                if self.stop.is_set():
                    return
            producer.flush(60)
        finally:
            producer.close()

    def wait_for(self, gate: int, timeout: float = 180) -> None:
        """Block until the producer has produced (and flushed) every id below ``gate``."""
        deadline = time.monotonic() + timeout
        while not self.reached[gate].wait(1):
            assert self.error is None, f"the producer failed: {self.error!r}"
            assert time.monotonic() < deadline, f"the producer did not reach id {gate} in {timeout}s"

    def open(self, gate: int) -> None:
        self.opened[gate].set()


def test_exactly_once_through_rebalances_and_a_service_restart(
    tmp_path: Path, kafka_broker: KafkaBroker, s3_server: S3Server, spark: Any
) -> None:
    s3_server.create_bucket(BUCKET)
    for t in TOPICS:
        create_topic(kafka_broker.bootstrap_servers, t, PARTITIONS)
    service = ServiceProcess(
        tmp_path,
        [{"name": TABLE, "path": f"s3a://{BUCKET}/{TABLE}", "topics": list(TOPICS), "commit": {"interval_seconds": 2}}],
        [f"s3a://{BUCKET}/{PREFIX}"],
        s3={"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY},
        kafka=kafka_broker.bootstrap_servers,  # fencing on: leases checked against the Connect group
    ).start()
    group = "e2e-connect"
    w1 = ConnectWorker(tmp_path / "connect", kafka_broker.bootstrap_servers, name="e2e-w1", group_id=group).start()
    w2: ConnectWorker | None = None
    sidecars: list[SidecarProcess] = []
    producer = GatedProducer(kafka_broker.bootstrap_servers, gates=(4_000, 9_000, 11_000, 14_000))
    try:
        w1.client().put_connector(CONNECTOR, sink_config(s3_server))
        w1.client().wait_running(CONNECTOR, tasks=2)
        sidecars.append(start_sidecar(tmp_path, "sidecar-1", w1, kafka_broker, s3_server, service))
        producer.start()

        producer.wait_for(4_000)  # fault 1: a second worker (and its sidecar) joins mid-stream
        w2 = ConnectWorker(tmp_path / "connect", kafka_broker.bootstrap_servers, name="e2e-w2", group_id=group).start()
        sidecars.append(start_sidecar(tmp_path, "sidecar-2", w2, kafka_broker, s3_server, service))
        producer.open(4_000)
        deadline = time.monotonic() + 120  # wait for the rebalance to give w2 a task
        while time.monotonic() < deadline:
            status = w1.client().status(CONNECTOR)
            if any(t["worker_id"] == w2.worker_id and t["state"] == "RUNNING" for t in status["tasks"]):
                break
            time.sleep(1)
        else:
            raise AssertionError(f"no task moved to the second worker: {status}")

        producer.wait_for(9_000)  # fault 2: the service stops; records 9,000..10,999 arrive meanwhile
        service.stop()
        producer.open(9_000)
        producer.wait_for(11_000)
        service.start()
        producer.open(11_000)

        producer.wait_for(14_000)  # fault 3: the first worker and its sidecar leave
        sidecars[0].stop()
        w1.stop()  # its tasks move to w2
        producer.open(14_000)

        producer.join(300)
        assert not producer.is_alive() and producer.error is None, producer.error
        partitions = [TopicPartition(t, p) for t in TOPICS for p in range(PARTITIONS)]
        ends = end_offsets(kafka_broker.bootstrap_servers, partitions)
        assert sum(ends.values()) == RECORDS
        deadline = time.monotonic() + 240
        table_offsets: dict[str, Any] = {}
        while time.monotonic() < deadline:
            table_offsets = service.call("GET", f"/v1/tables/{TABLE}/offsets").json()
            done = all(table_offsets.get(tp.topic, {}).get(str(tp.partition)) == ends[tp] for tp in partitions)
            if done:
                break
            time.sleep(2)
        assert done, f"table offsets {table_offsets} never reached the log ends {ends}"
        connect = committed_offsets(kafka_broker.bootstrap_servers, f"connect-{CONNECTOR}")
        commits = service.call("GET", f"/v1/commits?table={TABLE}&limit=1000").json()["commits"]
    finally:
        producer.stop.set()
        for proc in sidecars:
            proc.stop()
        for w in (w2, w1):
            if w is not None:
                w.stop()
        service.stop()

    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
    table = DeltaTable(f"s3://{BUCKET}/{TABLE}", storage_options=options)
    ids = table.to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    assert len(ids) == RECORDS and sorted(ids) == list(range(RECORDS)), "every id exactly once"
    for tp in partitions:
        assert connect[tp] == ends[tp]
        assert table.transaction_version(f"lakegate-{TABLE}-{tp.topic}-{tp.partition}") == connect[tp]
    assert spark.read.format("delta").load(f"s3a://{BUCKET}/{TABLE}").count() == RECORDS
    with_vtts = [c for c in commits if c["vtts"] is not None]
    assert with_vtts, "no commit round was complete (every leased partition caught up): VTTS never set"
    logger.info("%d commits since the restart, %d with a VTTS", len(commits), len(with_vtts))
    logger.info("table version %d after %d commits", table.version(), len(table.history()))
