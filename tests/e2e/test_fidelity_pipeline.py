"""Every field of every record through the whole pipeline: Kafka, the S3 sink on a real Connect
worker, sidecars and the service, read back by delta-rs and compared value by value.

One append table takes three topics of different shapes (``topics_regex``), each from its own
connector and format: JSON lines, Parquet (the stand-in types schemaless values per file, so a
struct that gains fields gives files of different schemas) and Aiven's default headerless CSV
(base64 key and value; the sidecar sends the layout from the connector's config). Later batches
add nested fields and null whole fields. A Debezium table gets creates and updates, then a quiet
window where only deletes (and Debezium's tombstones after them) arrive: those rounds must commit,
the keys go. At quiesce each table equals a model built from the produced records, every field,
and every partition's ``txn`` equals Connect's committed offset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from kafka import TopicPartition

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker
from lakegate_stack.delta_read import live_rows
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ADMIN_TOKEN, ServiceProcess, SidecarProcess
from tests.kafka_helpers import committed_offsets, create_topic
from tests.pipeline_helpers import S3_ENV, assert_landed_as_sent, produce, shape, sink_with_sidecar, wait_committed

BUCKET, PARTITIONS, PER_BATCH = "lake-fidelity", 2, 120
# connector -> (topic, table, sink settings)
CONNECTORS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "shape-jsonl": ("shape-a", "mixed", {"output": "jsonl"}),
    "shape-parquet": ("shape-b", "mixed", {"output": "parquet"}),
    "shape-csv": (
        "shape-c",
        "mixed",
        {"output": "csv", "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"},
    ),
    "cdc-sink": (
        "db.cdc",
        "cdc",
        {
            "output": "jsonl",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
        },
    ),
}


def test_every_field_of_three_shapes_and_a_delete_only_cdc_window_lands(
    tmp_path: Path, kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    s3_server.create_bucket(BUCKET)
    bootstrap = kafka_broker.bootstrap_servers
    for topic, _, _ in CONNECTORS.values():
        create_topic(bootstrap, topic, PARTITIONS)
    tables = [
        {
            "name": "mixed",
            "path": f"s3a://{BUCKET}/mixed",
            "topics_regex": "shape-.*",
            "commit": {"interval_seconds": 2},
        },
        {
            "name": "cdc",
            "path": f"s3a://{BUCKET}/cdc",
            "topics": ["db.cdc"],
            "mode": "upsert",
            "key": ["id"],
            "cdc": "debezium",
            "commit": {"interval_seconds": 2},
        },
    ]
    s3 = {"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY}
    service = ServiceProcess(tmp_path, tables, [f"s3a://{BUCKET}/"], s3=s3).start()
    client = connect_worker.client()
    sidecars: list[SidecarProcess] = []
    sent: dict[str, dict[str, Any]] = {}  # mixed: uid -> value
    live: dict[int, dict[str, Any]] = {}  # cdc: id -> row
    shape_topics = [t for t, table, _ in CONNECTORS.values() if table == "mixed"]
    try:
        for name, (topic, _, sink) in CONNECTORS.items():
            sidecars.append(
                sink_with_sidecar(tmp_path, connect_worker, s3_server, BUCKET, service, bootstrap, name, topic, sink)
            )

        for batch in range(2):
            for topic in shape_topics:
                records = [(i % PARTITIONS, f"k{i}", shape(topic, batch, i)) for i in range(PER_BATCH)]
                sent.update({v["uid"]: v for _, _, v in records})
                produce(bootstrap, topic, records)
            changes = []
            for i in range(PER_BATCH):
                key = i % 40
                after = {"id": key, "email": f"u{key}@b{batch}", "prefs": {"lang": "nb", "n": i}}
                op = "u" if key in live else "c"
                changes.append((key % PARTITIONS, {"id": key}, {"before": live.get(key), "after": after, "op": op}))
                live[key] = after
            produce(bootstrap, "db.cdc", changes)
            wait_committed(service, bootstrap, [*shape_topics, "db.cdc"], ["mixed", "cdc"], PARTITIONS)
        for window in range(2):  # quiet windows: only deletes, and Debezium's tombstone after each
            deletes = []
            for key in sorted(live)[window::4]:
                deletes.append((key % PARTITIONS, {"id": key}, {"before": live.pop(key), "after": None, "op": "d"}))
                deletes.append((key % PARTITIONS, {"id": key}, None))
            produce(bootstrap, "db.cdc", deletes)
            wait_committed(service, bootstrap, ["db.cdc"], ["mixed", "cdc"], PARTITIONS)
        connect = {tp: o for name in CONNECTORS for tp, o in committed_offsets(bootstrap, f"connect-{name}").items()}
        letters = service.call("GET", "/v1/dead-letters", ADMIN_TOKEN).json()
        assert not letters["dead_letters"], letters  # no file refused: every shape joined its table
    finally:
        for proc in sidecars:
            proc.stop()
        for name in CONNECTORS:
            client.delete_connector(name)
        service.stop()

    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
    mixed = DeltaTable(f"s3://{BUCKET}/mixed", storage_options=options)
    rows = live_rows(mixed)
    assert_landed_as_sent(sent, rows)
    cdc = DeltaTable(f"s3://{BUCKET}/cdc", storage_options=options)
    table = {r["id"]: {k: v for k, v in r.items() if not k.startswith("_kafka_")} for r in live_rows(cdc)}
    assert table == live
    for name, (topic, table_name, _) in CONNECTORS.items():
        t = mixed if table_name == "mixed" else cdc
        for p in range(PARTITIONS):
            tp = TopicPartition(topic, p)
            assert t.transaction_version(f"lakegate-{table_name}-{topic}-{p}") == connect[tp], (name, tp)
