"""Avro container files through the whole pipeline, as teams on both sinks meet them: Kafka, the
S3 sink on a real Connect worker (records with Connect schemas, JsonConverter
``schemas.enable=true``: decimals, timestamps, dates, times, int8, bytes, a named and an unnamed
nested struct, an array, a map, optional fields), the container's ``avro.codec=snappy``, sidecars,
the service.

- Confluent's ``AvroFormat`` (the value alone) in two of its layouts: ``FieldPartitioner`` on a
  field that alternates record by record (so one Kafka partition's files interleave by offset:
  each file named by its first offset holds every third record) into a Delta table, and
  ``TimeBasedPartitioner`` by a field's time (``RecordField``, minute directories,
  ``filename.offset.zero.pad.width=12``, its own ``topics.dir``) into an Iceberg table (Apache
  Iceberg's REST catalog, warehouse on the S3 server).
- Aiven's ``format.output.type=avro`` with its envelope, each container inside Aiven's default gzip
  stream (staged unwrapped for Spark in the table's ``_lakegate/staging/``, empty again after
  each round): a Debezium topic (schemaful key, ``before``/``after`` rows with
  a decimal and a timestamp, deletes as ``op=d`` without tombstones: Aiven's Avro writer cannot
  write one) into an Iceberg upsert table (``cdc: debezium``).

Two batches, the second committed after the first: its records carry a field the first did not
(``note``: the writer schema of its files has one more field, as a producer's schema evolves).

The sink's files are checked to be what each sink's layout and Connect's Avro conventions give
(keys, the value's record, ``connect.name``, decimal ``bytes`` with precision and scale, the codec,
files that interleave). At quiesce every field of every record reads back as sent from delta-rs and
pyiceberg, decimals and timestamps exactly, the batch-0 records' ``note`` null; the upsert table
holds each live key's last row, every field; each table's offsets equal Connect's committed offsets.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
from deltalake import DeltaTable

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker
from lakegate_stack.fidelity import same
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ServiceProcess, SidecarProcess
from tests.fixtures import ICEBERG_BUCKET, pyiceberg_rest
from tests.kafka_helpers import committed_offsets, create_topic
from tests.pipeline_helpers import S3_ENV, assert_iceberg_offsets, produce, sink_with_sidecar, wait_committed

PARTITIONS, PER_BATCH = 2, 120
DELTA, ICEBERG, CDC = "orders_avro", "e2e.orders_avro", "e2e.customers_avro"
# table -> (topic, connector, landing prefix)
FEEDS = {
    DELTA: ("avro-delta", "avro-delta-sink", "landing/avro-delta/"),
    ICEBERG: ("avro-ice", "avro-ice-sink", "landing/avro-ice/"),
    CDC: ("avro-cdc", "avro-cdc-sink", "landing/avro-cdc/"),
}
KEYS = 40
PARTITIONER = "io.confluent.connect.storage.partitioner."
CONFLUENT = {"format.class": "avro.AvroFormat", "avro.codec": "snappy", "value.converter.schemas.enable": "true"}
SINKS = {
    DELTA: {**CONFLUENT, "partitioner.class": PARTITIONER + "FieldPartitioner", "partition.field.name": "shard"},
    ICEBERG: {
        **CONFLUENT,
        "partitioner.class": PARTITIONER + "TimeBasedPartitioner",
        "path.format": "'day'=YYYY-MM-dd/'minute'=HHmm",
        "partition.duration.ms": "60000",
        "timestamp.extractor": "RecordField",
        "timestamp.field": "at",
        "filename.offset.zero.pad.width": "12",
        "topics.dir": "landing/avro-ice/archive/raw",  # the sidecar follows it from the connector's config
    },
}
SINK = {
    "output": "avro",
    "file.compression.type": "gzip",  # Aiven's default: each container file inside a gzip stream
    "avro.codec": "snappy",
    "value.converter.schemas.enable": "true",
}
START = datetime(2026, 11, 28, 9, tzinfo=UTC)
DECIMAL = {
    "name": "org.apache.kafka.connect.data.Decimal",
    "parameters": {"scale": "2", "connect.decimal.precision": "12"},
}
LINE = {
    "type": "struct",
    "name": "com.acme.Line",
    "optional": False,
    "fields": [
        {"field": "sku", "type": "string", "optional": False},
        {"field": "qty", "type": "int16", "optional": False},
    ],
}


ROW = {
    "type": "struct",
    "name": "dbserver.inventory.customers.Value",
    "optional": True,
    "fields": [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "email", "type": "string", "optional": True},
        {"field": "balance", "type": "bytes", "optional": True, **DECIMAL},
        {"field": "updated", "type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp"},
    ],
}
CDC_KEY = {
    "type": "struct",
    "name": "dbserver.inventory.customers.Key",
    "optional": False,
    "fields": [{"field": "id", "type": "int64", "optional": False}],
}
CDC_VALUE = {
    "type": "struct",
    "name": "dbserver.inventory.customers.Envelope",
    "optional": False,
    "fields": [
        {**ROW, "field": "before"},
        {**ROW, "field": "after"},
        {"field": "op", "type": "string", "optional": False},
        {"field": "ts_ms", "type": "int64", "optional": True},
    ],
}
CDC_SINK = {
    **SINK,
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "true",
}


def cdc_changes(batch: int, live: dict[int, dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Debezium's change events of ``batch`` (key id, event), applied to ``live`` (each key's row):
    batch 0 creates every key, batch 1 updates most twice and deletes one in five."""
    out = []
    for i in range(KEYS if batch == 0 else 2 * KEYS):
        key = i % KEYS
        if batch == 1 and key % 5 == 2 and i >= KEYS:
            if key in live:
                out.append((key, {"before": live.pop(key), "after": None, "op": "d", "ts_ms": i}))
            continue
        after = {
            "id": key,
            "email": None if key % 7 == 0 else f"c{key}@b{batch}.example",
            "balance": Decimal(batch * 100_000 + i * 731 - 9_999).scaleb(-2),
            "updated": START + timedelta(days=batch, seconds=i, milliseconds=key),
        }
        out.append((key, {"before": live.get(key), "after": after, "op": "u" if key in live else "c", "ts_ms": i}))
        live[key] = after
    return out


def row_on_the_wire(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {**row, "balance": decimal_text(row["balance"]), "updated": int(row["updated"].timestamp() * 1000)}


def decimal_text(value: Decimal | None) -> str | None:
    """JsonConverter's form of a scale-2 decimal: base64 of its unscaled two's-complement bytes."""
    if value is None:
        return None
    return base64.b64encode(int(value.scaleb(2)).to_bytes(8, "big", signed=True)).decode()


def value_schema(batch: int) -> dict[str, Any]:
    """The Connect schema of batch ``batch``'s values (batch 1 adds ``note``)."""
    fields = [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "shard", "type": "int32", "optional": False},
        {"field": "amount", "type": "bytes", "optional": True, **DECIMAL},
        {"field": "at", "type": "int64", "optional": False, "name": "org.apache.kafka.connect.data.Timestamp"},
        {"field": "day", "type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date"},
        {"field": "cutoff", "type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Time"},
        {"field": "rank", "type": "int8", "optional": False},
        {"field": "ratio", "type": "float", "optional": True},
        {"field": "paid", "type": "boolean", "optional": False},
        {"field": "blob", "type": "bytes", "optional": True},
        {"field": "line", **{**LINE, "optional": True}},
        {
            "field": "ship",
            "type": "struct",
            "optional": True,
            "fields": [{"field": "city", "type": "string", "optional": True}],
        },
        {"field": "tags", "type": "array", "items": {"type": "string", "optional": False}, "optional": True},
        {
            "field": "attrs",
            "type": "map",
            "keys": {"type": "string", "optional": False},
            "values": {"type": "int64", "optional": True},
            "optional": True,
        },
    ]
    if batch == 1:
        fields.append({"field": "note", "type": "string", "optional": True})
    return {"type": "struct", "name": "com.acme.Order", "optional": False, "fields": fields}


def record(batch: int, i: int) -> dict[str, Any]:
    """The value as a reader must return it (a time of day as Spark's Avro source reads it: int
    milliseconds)."""
    uid = batch * PER_BATCH + i
    value: dict[str, Any] = {
        "id": uid,
        "shard": uid % 3,  # Confluent's FieldPartitioner: one partition's records alternate directories
        "amount": None if uid % 9 == 4 else Decimal(uid * 137 - 5000).scaleb(-2),
        "at": START + timedelta(milliseconds=uid * 1001),
        "day": None if uid % 5 == 0 else date(2026, 1, 1) + timedelta(days=uid),
        "cutoff": (uid * 60_013) % 86_400_000,
        "rank": (uid % 256) - 128,
        "ratio": None if uid % 4 == 0 else uid / 8,  # exact in a float
        "paid": uid % 2 == 0,
        "blob": None if uid % 3 == 0 else bytes([uid % 256, 0, 255]),
        "line": None if uid % 7 == 0 else {"sku": f"sku-é{uid % 11}", "qty": uid % 300},
        "ship": {"city": None if uid % 6 == 0 else f"City {uid % 4}"},
        "tags": [] if uid % 10 == 0 else [f"t{uid % 3}", "x"],
        "attrs": {"w": uid, "h": None},
    }
    if batch == 1:
        value["note"] = None if i % 2 else f"note {uid}"
    return value


def on_the_wire(batch: int, value: dict[str, Any]) -> dict[str, Any]:
    """JsonConverter's form of ``value``: decimals as base64 of the unscaled bytes, timestamps as
    epoch millis, dates as epoch days, bytes as base64."""
    payload = {**value, "amount": decimal_text(value["amount"])}
    payload["at"] = int(value["at"].timestamp() * 1000)
    payload["day"] = None if value["day"] is None else (value["day"] - date(1970, 1, 1)).days
    payload["blob"] = None if value["blob"] is None else base64.b64encode(value["blob"]).decode()
    return {"schema": value_schema(batch), "payload": payload}


def test_avro_files_of_an_evolving_schema_land_whole_in_delta_and_iceberg(
    tmp_path: Path,
    kafka_broker: KafkaBroker,
    connect_worker: ConnectWorker,
    s3_server: S3Server,
    s3_rest_catalog: IcebergRestCatalog,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topics = [topic for topic, _, _ in FEEDS.values()]
    for topic in topics:
        create_topic(bootstrap, topic, PARTITIONS)
    common = {"commit": {"interval_seconds": 2}}
    tables = [
        {"name": DELTA, "path": f"s3a://{ICEBERG_BUCKET}/{DELTA}", "topics": [FEEDS[DELTA][0]], **common},
        {
            "name": ICEBERG,
            "format": "iceberg",
            "path": f"s3a://{ICEBERG_BUCKET}/warehouse/e2e/orders_avro",
            "topics": [FEEDS[ICEBERG][0]],
            **common,
        },
        {
            "name": CDC,
            "format": "iceberg",
            "path": f"s3a://{ICEBERG_BUCKET}/warehouse/e2e/customers_avro",
            "topics": [FEEDS[CDC][0]],
            "mode": "upsert",
            "key": ["id"],
            "cdc": "debezium",
            **common,
        },
    ]
    service = ServiceProcess(
        tmp_path,
        tables,
        [f"s3a://{ICEBERG_BUCKET}/"],
        s3={"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY},
        catalogs=[{"name": "lake", "type": "rest", "uri": s3_rest_catalog.uri}],
    ).start()
    sidecars: list[SidecarProcess] = []
    sent: dict[int, dict[str, Any]] = {}
    live: dict[int, dict[str, Any]] = {}

    def produce_batch(batch: int) -> None:
        values = [record(batch, i) for i in range(PER_BATCH)]
        sent.update({v["id"]: v for v in values})
        for table in (DELTA, ICEBERG):
            records = [(i % PARTITIONS, v["id"], on_the_wire(batch, v)) for i, v in enumerate(values)]
            produce(bootstrap, FEEDS[table][0], records)
        events = [
            (
                key % PARTITIONS,
                {"schema": CDC_KEY, "payload": {"id": key}},
                {
                    "schema": CDC_VALUE,
                    "payload": {**e, "before": row_on_the_wire(e["before"]), "after": row_on_the_wire(e["after"])},
                },
            )
            for key, e in cdc_changes(batch, live)
        ]
        produce(bootstrap, FEEDS[CDC][0], events)

    try:
        for table, (topic, connector, prefix) in FEEDS.items():
            sink = SINKS.get(table, CDC_SINK)
            sidecars.append(
                sink_with_sidecar(
                    tmp_path,
                    connect_worker,
                    s3_server,
                    ICEBERG_BUCKET,
                    service,
                    bootstrap,
                    connector,
                    topic,
                    sink,
                    prefix,
                )
            )
        for batch in (0, 1):
            produce_batch(batch)
            wait_committed(service, bootstrap, topics, list(FEEDS), PARTITIONS)
        connect = {name: committed_offsets(bootstrap, f"connect-{FEEDS[name][1]}") for name in FEEDS}
    finally:
        for proc in sidecars:
            proc.stop()
        for _, connector, _ in FEEDS.values():
            connect_worker.client().delete_connector(connector)
        service.stop()

    check_sink_files(s3_server)
    expected = {i: {"note": None, **v} for i, v in sent.items()}
    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
    delta = DeltaTable(f"s3://{ICEBERG_BUCKET}/{DELTA}", storage_options=options)
    assert_as_sent(expected, delta.to_pyarrow_table().to_pylist())
    for tp, offset in connect[DELTA].items():
        assert delta.transaction_version(f"lakegate-{DELTA}-{tp.topic}-{tp.partition}") == offset, tp

    iceberg = pyiceberg_rest(s3_rest_catalog, s3_server).load_table(ICEBERG)
    assert_as_sent(expected, iceberg.scan().to_arrow().to_pylist())
    assert_iceberg_offsets(iceberg, connect[ICEBERG])

    customers = pyiceberg_rest(s3_rest_catalog, s3_server).load_table(CDC)
    rows = customers.scan().to_arrow().to_pylist()
    got = {r["id"]: {k: r[k] for k in ("id", "email", "balance", "updated")} for r in rows}
    assert len(got) == len(rows), "a key is in the table twice"
    assert 0 < len(live) < KEYS and got.keys() == live.keys(), "the live keys, deletes applied"
    wrong = [(live[k], got[k]) for k in live if not same(live[k], got[k])]
    assert not wrong, wrong[:3]
    assert_iceberg_offsets(customers, connect[CDC])
    client = s3_server.client()
    cdc_files = client.list_objects_v2(Bucket=ICEBERG_BUCKET, Prefix=FEEDS[CDC][2])["Contents"]
    assert all(client.get_object(Bucket=ICEBERG_BUCKET, Key=o["Key"])["Body"].read(2) == b"\x1f\x8b" for o in cdc_files)
    staged = client.list_objects_v2(Bucket=ICEBERG_BUCKET, Prefix="warehouse/e2e/customers_avro/_lakegate/staging/")
    assert staged["KeyCount"] == 0, "each round deletes what it staged"


def check_sink_files(s3_server: S3Server) -> None:
    """The stand-in wrote Confluent's layouts, each file an Avro container of the value alone as
    Connect's Avro data gives it; a partition's files of the field partitioner interleave."""
    client = s3_server.client()
    names = {
        DELTA: re.compile(r"topics/avro-delta/shard=([0-2])/avro-delta\+([01])\+(\d{10})\.avro"),
        ICEBERG: re.compile(r"archive/raw/avro-ice/day=2026-11-28/minute=09(\d\d)/avro-ice\+([01])\+(\d{12})\.avro"),
    }
    for table, name in names.items():
        prefix = FEEDS[table][2]
        keys = [o["Key"] for o in client.list_objects_v2(Bucket=ICEBERG_BUCKET, Prefix=prefix)["Contents"]]
        schemas, files = set(), {}
        for key in keys:
            m = name.fullmatch(key[len(prefix) :])
            assert m, key
            reader = fastavro.reader(io.BytesIO(client.get_object(Bucket=ICEBERG_BUCKET, Key=key)["Body"].read()))
            assert reader.codec == "snappy", key
            schema = json.loads(reader.metadata["avro.schema"])
            assert schema["name"] == "Order" and schema["namespace"] == "com.acme", "the value's own record"
            assert schema["connect.name"] == "com.acme.Order"
            by_name = {f["name"]: f["type"] for f in schema["fields"]}
            assert by_name["amount"][0] == "null"
            assert {k: by_name["amount"][1][k] for k in ("type", "logicalType", "precision", "scale")} == {
                "type": "bytes",
                "logicalType": "decimal",
                "precision": 12,
                "scale": 2,
            }
            assert by_name["rank"] == {"type": "int", "connect.type": "int8"}
            assert by_name["ship"][1]["name"] == "ConnectDefault"
            schemas.add(tuple(by_name))
            rows = list(reader)
            directory = int(m.group(1))
            if table == DELTA:
                assert {r["shard"] for r in rows} == {directory}, key
            else:
                assert {r["at"].minute for r in rows} == {directory}, key
            files[(int(m.group(2)), int(m.group(3)))] = len(rows)
        assert len(schemas) == 2, "batch 1's files carry the evolved schema"
        starts = sorted(files)
        interleaved = [
            (tp, start)
            for (tp, start), nxt in itertools.pairwise(starts)
            if nxt[0] == tp and start + files[(tp, start)] > nxt[1]
        ]
        assert bool(interleaved) == (table == DELTA), "only the field partitioner's files interleave"


def assert_as_sent(sent: dict[int, dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """Every record once, every field as sent (a map as a reader returns it: key-value pairs)."""
    got = {r["id"]: {**r, "attrs": None if r["attrs"] is None else dict(r["attrs"])} for r in rows}
    assert len(got) == len(rows) == len(sent), "every record exactly once"
    wrong = [
        (v, got[i])
        for i, v in sent.items()
        if not same(v, {k: x for k, x in got[i].items() if not k.startswith("_kafka_")})
    ]
    assert not wrong, wrong[:3]
