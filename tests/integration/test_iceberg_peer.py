"""Apache Iceberg's own Kafka Connect sink runs in the local stack as the benchmark's peer: on a real
Connect worker with the plugin the jar fetcher assembles, a control topic on the real broker, a
table it creates in Iceberg's REST catalog server with data on the S3 server. Read back by
pyiceberg, every field of every record, once; Connect's committed offsets are the topics' ends.

This is the set-up ``scripts/bench --parts iceberg-peer`` measures; if it breaks, the benchmark
would compare Lakegate with a peer that does not run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.iceberg_peer import PEER_PLUGIN_GROUP, create_control_topic, create_namespace, peer_sink_config
from lakegate_stack.iceberg_read import rest_rows
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from tests.kafka_helpers import committed_offsets, create_topic, end_offsets, produce_json

BUCKET, TOPIC, PARTITIONS, RECORDS = "peer", "peer-orders", 2, 300
TABLE = "peer.orders"
CONNECTOR = "iceberg-peer"


@pytest.fixture(scope="module")
def peer_worker(tmp_path_factory: pytest.TempPathFactory, kafka_broker: KafkaBroker) -> Iterator[ConnectWorker]:
    """A Connect worker of its own group running the Iceberg sink plugin."""
    worker = ConnectWorker(
        tmp_path_factory.mktemp("peer-connect"),
        kafka_broker.bootstrap_servers,
        name="peer-connect",
        group_id="peer-connect",
        plugins=(PEER_PLUGIN_GROUP,),
    ).start()
    yield worker
    worker.stop()


def record(i: int) -> dict[str, Any]:
    return {"id": i, "produced_ms": 1_700_000_000_000 + i, "amount": i * 0.25, "note": f"order {i}", "paid": i % 3 == 0}


def test_the_iceberg_sink_lands_every_field_of_every_record_once(
    tmp_path: Path, kafka_broker: KafkaBroker, s3_server: S3Server, peer_worker: ConnectWorker
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    s3_server.create_bucket(BUCKET)
    catalog = IcebergRestCatalog(tmp_path / "rest", f"s3a://{BUCKET}/warehouse", s3_server).start()
    client = peer_worker.client()
    try:
        assert "org.apache.iceberg.connect.IcebergSinkConnector" in client.plugins()
        create_topic(bootstrap, TOPIC, PARTITIONS)
        create_control_topic(bootstrap, "peer-control")
        create_namespace(catalog.uri, TABLE.split(".")[0])
        config = peer_sink_config(
            [TOPIC],
            TABLE,
            catalog.uri,
            s3_server.endpoint,
            control_topic="peer-control",
            commit_interval_ms=2000,
            tasks=PARTITIONS,
        )
        client.put_connector(CONNECTOR, config)
        client.wait_running(CONNECTOR, PARTITIONS)
        produce_json(bootstrap, TOPIC, [(i % PARTITIONS, f"k{i}", record(i)) for i in range(RECORDS)])
        read = {"s3.endpoint": s3_server.endpoint, "s3.access-key-id": s3mod.ACCESS_KEY,
                "s3.secret-access-key": s3mod.SECRET_KEY, "s3.region": s3mod.REGION}  # fmt: skip
        ends = end_offsets(bootstrap, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        rows: list[dict[str, Any]] = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                rows = rest_rows(catalog.uri, TABLE, read)
            except Exception:  # noqa: BLE001 - the table is made by the sink's first commit
                rows = []
            if len(rows) >= RECORDS and committed_offsets(bootstrap, f"connect-{CONNECTOR}") == ends:
                break
            time.sleep(1)
        status = client.status(CONNECTOR)
    finally:
        try:
            client.delete_connector(CONNECTOR)
        finally:
            catalog.stop()
    assert all(t["state"] == "RUNNING" for t in status["tasks"]), status
    by_id = {r["id"]: r for r in rows}
    assert len(rows) == len(by_id) == RECORDS, f"{len(rows)} rows, {len(by_id)} ids, {RECORDS} produced"
    wrong = [(i, record(i), by_id.get(i)) for i in range(RECORDS) if by_id.get(i) != record(i)]
    assert not wrong, wrong[:3]
    assert committed_offsets(bootstrap, f"connect-{CONNECTOR}") == ends
