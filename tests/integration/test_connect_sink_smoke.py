"""Smoke: Kafka -> Connect (S3 sink plugin, Parquet) -> S3 server, every record exactly once.

Produces 3,000 JSON records over 3 partitions, runs the sink through the Connect REST API, waits
for the ``connect-<connector>`` group to commit the log end, then reads every object back.
"""

from __future__ import annotations

import io
import re
import time
from collections import defaultdict
from collections.abc import Callable

import pyarrow.parquet as pq
from kafka import TopicPartition

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import SINK_CLASS, ConnectWorker, s3_sink_config
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from tests.kafka_helpers import create_topic, produce_json, wait_committed

PER_PARTITION = 1000


def sink_config(topic: str, bucket: str, s3: S3Server, **extra: str) -> dict[str, str]:
    return s3_sink_config(
        [topic],
        bucket,
        s3.endpoint,
        s3mod.ACCESS_KEY,
        s3mod.SECRET_KEY,
        **{"format.output.fields": "key,value,offset,timestamp", "consumer.override.max.poll.records": "250", **extra},
    )


def test_sink_writes_every_record_once_named_by_start_offset(
    kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    topic, bucket, name = "smoke-orders", "landing-smoke", "smoke-sink"
    s3_server.create_bucket(bucket)
    create_topic(kafka_broker.bootstrap_servers, topic, 3)
    records = [(i % 3, f"k{i}", {"id": i, "amount": i * 1.5, "note": f"n{i}"}) for i in range(3 * PER_PARTITION)]
    assert produce_json(kafka_broker.bootstrap_servers, topic, records) == 3 * PER_PARTITION

    client = connect_worker.client()
    assert SINK_CLASS in client.plugins()
    client.put_connector(name, sink_config(topic, bucket, s3_server))
    client.wait_running(name, tasks=2)
    wait_committed(
        kafka_broker.bootstrap_servers,
        f"connect-{name}",
        {TopicPartition(topic, p): PER_PARTITION for p in range(3)},
        timeout=120,
    )
    client.delete_connector(name)

    s3 = s3_server.client()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    offsets: dict[int, list[int]] = defaultdict(list)
    ids: list[int] = []
    pattern = re.compile(rf"^{re.escape(topic)}-(\d+)-(\d+)$")
    for key in keys:
        match = pattern.match(key)
        assert match, f"object {key!r} is not named <topic>-<partition>-<startOffset>"
        partition, start = int(match[1]), int(match[2])
        table = pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read()))
        assert {"key", "value", "offset", "timestamp"} <= set(table.column_names)
        file_offsets = table.column("offset").to_pylist()
        assert file_offsets == list(range(start, start + len(file_offsets))), key
        offsets[partition].extend(file_offsets)
        values = table.column("value").to_pylist()
        ids.extend(v["id"] for v in values)
        assert all(v["id"] % 3 == partition for v in values), f"{key} holds records of another partition"

    assert sorted(offsets) == [0, 1, 2]
    for partition, seen in offsets.items():
        assert sorted(seen) == list(range(PER_PARTITION)), f"partition {partition} offsets are not 0..999 once"
    assert sorted(ids) == list(range(3 * PER_PARTITION))


def test_two_workers_in_one_group_share_the_tasks(
    kafka_broker: KafkaBroker,
    connect_worker: ConnectWorker,
    s3_server: S3Server,
    extra_connect_worker: Callable[[str], ConnectWorker],
) -> None:
    topic, bucket, name = "smoke-spread", "landing-spread", "spread-sink"
    s3_server.create_bucket(bucket)
    create_topic(kafka_broker.bootstrap_servers, topic, 4)
    second = extra_connect_worker("connect-2")
    client = connect_worker.client()
    client.put_connector(name, sink_config(topic, bucket, s3_server))
    client.wait_running(name, tasks=2)
    expected = {connect_worker.worker_id, second.worker_id}
    deadline = time.monotonic() + 60  # incremental rebalancing may settle in a second round
    while time.monotonic() < deadline:
        status = client.status(name)
        if {t["worker_id"] for t in status["tasks"] if t["state"] == "RUNNING"} == expected:
            break
        time.sleep(1)
    assert {t["worker_id"] for t in status["tasks"]} == expected, status
    client.delete_connector(name)
