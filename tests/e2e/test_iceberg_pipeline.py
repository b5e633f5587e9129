"""Every field of every record through the whole pipeline into an Iceberg table: Kafka, the S3 sink
on a real Connect worker, sidecars, the service, Apache Iceberg's REST catalog server with its
warehouse on the S3 server; read back by pyiceberg through the same catalog, value by value.

One Iceberg table takes three topics of different shapes (``topics_regex``), each from its own
connector and format: JSON lines, Parquet (a struct gaining fields gives files of different
schemas) and Aiven's default headerless CSV. Later batches add nested fields and null whole
fields. The table is partitioned by the day of each record's Kafka timestamp and a bucket of its
``uid`` (``partition_by``: Iceberg's hidden partitioning). At quiesce the table equals what was
produced, every field, every partition holds exactly the rows whose values fall in it, and the
newest snapshot's ``lakegate.offsets`` equals every partition's committed offset in Connect.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

from pyiceberg.expressions import EqualTo
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import StringType

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ADMIN_TOKEN, ServiceProcess, SidecarProcess
from tests.fixtures import ICEBERG_BUCKET, pyiceberg_rest
from tests.kafka_helpers import committed_offsets, create_topic
from tests.pipeline_helpers import assert_landed_as_sent, produce, shape, sink_with_sidecar, wait_committed

PARTITIONS, PER_BATCH = 2, 120
EPOCH = date(1970, 1, 1)
TABLE = "e2e.mixed"
# connector -> (topic, the shape its records take, sink settings)
CONNECTORS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "ice-jsonl": ("ice-a", "shape-a", {"output": "jsonl"}),
    "ice-parquet": ("ice-b", "shape-b", {"output": "parquet"}),
    "ice-csv": (
        "ice-c",
        "shape-c",
        {"output": "csv", "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"},
    ),
}


def test_every_field_of_three_shapes_lands_in_an_iceberg_table_with_connects_offsets(
    tmp_path: Path,
    kafka_broker: KafkaBroker,
    connect_worker: ConnectWorker,
    s3_server: S3Server,
    s3_rest_catalog: IcebergRestCatalog,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topics = [topic for topic, _, _ in CONNECTORS.values()]
    for topic in topics:
        create_topic(bootstrap, topic, PARTITIONS)
    tables = [
        {
            "name": TABLE,
            "format": "iceberg",
            "path": f"s3a://{ICEBERG_BUCKET}/warehouse/e2e/mixed",
            "topics_regex": "ice-.*",
            "partition_by": ["day(_kafka_timestamp)", "bucket(4, uid)"],
            "commit": {"interval_seconds": 2},
        }
    ]
    s3 = {"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY}
    catalogs = [{"name": "lake", "type": "rest", "uri": s3_rest_catalog.uri}]
    service = ServiceProcess(tmp_path, tables, [f"s3a://{ICEBERG_BUCKET}/"], s3=s3, catalogs=catalogs).start()
    client = connect_worker.client()
    sidecars: list[SidecarProcess] = []
    sent: dict[str, dict[str, Any]] = {}  # uid -> value
    try:
        for name, (topic, _, sink) in CONNECTORS.items():
            sidecars.append(
                sink_with_sidecar(
                    tmp_path, connect_worker, s3_server, ICEBERG_BUCKET, service, bootstrap, name, topic, sink
                )
            )

        for batch in range(2):
            for topic, kind, _ in CONNECTORS.values():
                records = [(i % PARTITIONS, f"k{i}", shape(kind, batch, i)) for i in range(PER_BATCH)]
                sent.update({v["uid"]: v for _, _, v in records})
                produce(bootstrap, topic, records)
            wait_committed(service, bootstrap, topics, [TABLE], PARTITIONS)
        connect = {tp: o for name in CONNECTORS for tp, o in committed_offsets(bootstrap, f"connect-{name}").items()}
        letters = service.call("GET", "/v1/dead-letters", ADMIN_TOKEN).json()
        assert not letters["dead_letters"], letters  # no file refused: every shape joined the table
        summary = service.call("GET", f"/v1/tables/{TABLE}").json()
        assert summary["format"] == "iceberg"
    finally:
        for proc in sidecars:
            proc.stop()
        for name in CONNECTORS:
            client.delete_connector(name)
        service.stop()

    table = pyiceberg_rest(s3_rest_catalog, s3_server).load_table(TABLE)
    rows = table.scan().to_arrow().to_pylist()
    assert_landed_as_sent(sent, rows)
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [
        ("_kafka_timestamp_day", "day"),
        ("uid_bucket", "bucket[4]"),
    ]
    bucket = BucketTransform(4).transform(StringType())
    want = Counter(((r["_kafka_timestamp"].date() - EPOCH).days, bucket(r["uid"])) for r in rows)
    files: Counter[tuple[int, int]] = Counter()
    for f in table.inspect.files().to_pylist():
        day = f["partition"]["_kafka_timestamp_day"]
        files[((day - EPOCH).days if isinstance(day, date) else day, f["partition"]["uid_bucket"])] += f["record_count"]
    assert files == want, "every row in the partition of its day and uid's bucket"
    some = rows[0]["uid"]  # a filter on uid plans only its bucket's files
    planned = table.scan(row_filter=EqualTo("uid", some)).plan_files()
    assert {t.file.partition[1] for t in planned} == {bucket(some)}
    offsets = json.loads(table.current_snapshot().summary["lakegate.offsets"])
    for tp, committed in connect.items():
        assert offsets[tp.topic][str(tp.partition)] == committed, (tp, offsets)
    assert {(t, int(p)) for t, ps in offsets.items() for p in ps} == {(tp.topic, tp.partition) for tp in connect}
