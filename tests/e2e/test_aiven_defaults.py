"""The whole pipeline with the sink configured like Aiven's S3 sink out of the box.

Two connectors on one real Connect worker, both writing JSON lines with Aiven's defaults (gzip, the
envelope on, ``file.compression.type`` unset): one names objects by ``aws.s3.prefix`` (zero-padded
offsets, ``.gz`` appended), the other by the default template (``<topic>-<partition>-<start>.gz``).
Neither sidecar is told the format: each reads it from its connector. The table is partitioned by
the hour of each record's Kafka timestamp (``partition_by: [hour(_kafka_timestamp)]``), as event
tables are. At quiesce every record is in the table exactly once as top-level columns with its
Kafka offset, in the partition of its timestamp's hour, ``txn`` equals Connect's committed
offsets, and delta-rs agrees with Spark.
"""

from __future__ import annotations

import re
import time
from datetime import UTC
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from kafka import TopicPartition

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker, s3_sink_config
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ServiceProcess, SidecarProcess, sidecar_config
from tests.kafka_helpers import committed_offsets, create_topic, end_offsets, produce_json

BUCKET, TABLE, PARTITIONS, PER_TOPIC = "lake-aiven", "events", 3, 1_500
# connector -> (topic, aws.s3.prefix or None for template naming)
CONNECTORS = {"aiven-prefixed": ("av-prefixed", "landing/a/"), "aiven-template": ("av-template", None)}
S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}


def test_aiven_defaults_land_exactly_once_as_top_level_columns(
    tmp_path: Path, kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server, spark: Any
) -> None:
    s3_server.create_bucket(BUCKET)
    topics = [t for t, _ in CONNECTORS.values()]
    for t in topics:
        create_topic(kafka_broker.bootstrap_servers, t, PARTITIONS)
    service = ServiceProcess(
        tmp_path,
        [
            {
                "name": TABLE,
                "path": f"s3a://{BUCKET}/{TABLE}",
                "topics": topics,
                "partition_by": ["hour(_kafka_timestamp)"],
                "commit": {"interval_seconds": 2},
            }
        ],
        [f"s3a://{BUCKET}/"],  # the landing keys are outside the table root: JSON lines are rewritten into it
        s3={"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY},
    ).start()
    client = connect_worker.client()
    sidecars: list[SidecarProcess] = []
    try:
        for name, (topic, prefix) in CONNECTORS.items():
            config = s3_sink_config(
                [topic],
                BUCKET,
                s3_server.endpoint,
                s3mod.ACCESS_KEY,
                s3mod.SECRET_KEY,
                prefix=prefix,
                output="jsonl",
                compression=None,
                tasks=1,
                **{"format.output.fields": "key,value,offset,timestamp"},
            )
            client.put_connector(name, config)
            client.wait_running(name, tasks=1)
            config = sidecar_config(  # no format given: the sidecar learns it from the connector
                connect_worker,
                [name],
                kafka_broker.bootstrap_servers,
                {"kind": "s3", "bucket": BUCKET, "prefix": prefix or "", "endpoint": s3_server.endpoint},
                service.url,
            )
            sidecars.append(SidecarProcess(tmp_path, f"sidecar-{name}", config, env=S3_ENV).start())
        for n, topic in enumerate(topics):
            records = [
                (i % PARTITIONS, f"k{i}", {"id": n * 100_000 + i, "src": topic, "amount": i / 4})
                for i in range(PER_TOPIC)
            ]
            assert produce_json(kafka_broker.bootstrap_servers, topic, records) == PER_TOPIC

        partitions = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        ends = end_offsets(kafka_broker.bootstrap_servers, partitions)
        deadline, offsets = time.monotonic() + 300, {}
        while time.monotonic() < deadline:
            offsets = service.call("GET", f"/v1/tables/{TABLE}/offsets").json()
            if all(offsets.get(tp.topic, {}).get(str(tp.partition)) == ends[tp] for tp in partitions):
                break
            time.sleep(2)
        else:
            raise AssertionError(f"table offsets {offsets} never reached the log ends {ends}")
        connect = {
            tp: o
            for name in CONNECTORS
            for tp, o in committed_offsets(kafka_broker.bootstrap_servers, f"connect-{name}").items()
        }
    finally:
        for proc in sidecars:
            proc.stop()
        for name in CONNECTORS:
            client.delete_connector(name)
        service.stop()

    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert any(re.fullmatch(r"landing/a/av-prefixed-\d-\d{20}\.gz", k) for k in keys), keys
    assert any(re.fullmatch(r"av-template-\d-\d+\.gz", k) for k in keys), keys

    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
    table = DeltaTable(f"s3://{BUCKET}/{TABLE}", storage_options=options)
    data = table.to_pyarrow_table()
    assert {"id", "src", "amount", "_kafka_key", "_kafka_offset", "_kafka_timestamp"} <= set(data.column_names)
    assert "value" not in data.column_names
    ids = data.column("id").to_pylist()
    assert sorted(ids) == sorted(n * 100_000 + i for n in range(len(topics)) for i in range(PER_TOPIC)), "exactly once"
    by_id = dict(zip(ids, data.column("_kafka_offset").to_pylist(), strict=True))
    assert by_id[PARTITIONS * 10] == 10, "record i is offset i // PARTITIONS of its partition"
    assert table.metadata().partition_columns == ["_kafka_timestamp_hour"]
    hours = data.column("_kafka_timestamp_hour").to_pylist()  # delta-rs: from each file's partitionValues
    stamps = data.column("_kafka_timestamp").to_pylist()
    assert all(h == t.astimezone(UTC).strftime("%Y-%m-%d-%H") for h, t in zip(hours, stamps, strict=True))
    one_hour = table.to_pyarrow_table(filters=[("_kafka_timestamp_hour", "=", hours[0])])
    assert one_hour.num_rows == hours.count(hours[0])
    for tp in partitions:
        assert connect[tp] == ends[tp]
        assert table.transaction_version(f"lakegate-{TABLE}-{tp.topic}-{tp.partition}") == connect[tp]
    assert spark.read.format("delta").load(f"s3a://{BUCKET}/{TABLE}").count() == len(ids)
