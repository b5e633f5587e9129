"""A round's Avro and rewritten Parquet files read by Arrow in the service read exactly as Spark's
own sources read them: the same schema, every field of every record equal, on real Spark.

The files are what Connect's Avro data gives, in Aiven's envelope: optional fields as unions with
null, ``connect.name``/``connect.type`` annotations, decimals as bytes and as fixed, both timestamp
precisions, dates, an enum, a fixed, bytes, floats, a nested record, an array of records and a map,
null values; three codecs, and one container inside a gzip stream (Aiven's default). The same round
is framed twice, once as the service reads it and once through Spark's Avro source alone
(``arrow=False``), and both are compared with the records written. Parquet files in the envelope,
of types Spark and Arrow might read apart (``INT96``, decimals of each physical type, unsigned
integers, nested lists of structs, maps, millisecond timestamps), are compared the same way.
"""

from __future__ import annotations

import datetime
import gzip
import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.domain.content import Unwrap
from commit_service.domain.plan import PendingFile
from commit_service.round.convert import FrameReader
from commit_service.round.sources import FileSchemas
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat

UTC = datetime.timezone.utc


def optional(t: Any) -> list[Any]:
    return ["null", t]


VALUE = {
    "type": "record",
    "name": "Value",
    "namespace": "shop",
    "connect.name": "shop.Value",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "small", "type": optional({"type": "int", "connect.type": "int8"}), "default": None},
        {
            "name": "price",
            "type": optional(
                {
                    "type": "bytes",
                    "logicalType": "decimal",
                    "precision": 9,
                    "scale": 2,
                    "connect.name": "org.apache.kafka.connect.data.Decimal",
                    "connect.parameters": {"scale": "2"},
                }
            ),
            "default": None,
        },  # fmt: skip
        {
            "name": "big",
            "type": optional(
                {"type": "fixed", "name": "Big", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 6}
            ),
            "default": None,
        },  # fmt: skip
        {
            "name": "at",
            "type": optional(
                {
                    "type": "long",
                    "logicalType": "timestamp-millis",
                    "connect.name": "org.apache.kafka.connect.data.Timestamp",
                }
            ),
            "default": None,
        },  # fmt: skip
        {"name": "at_us", "type": optional({"type": "long", "logicalType": "timestamp-micros"}), "default": None},
        {"name": "day", "type": optional({"type": "int", "logicalType": "date"}), "default": None},
        {
            "name": "state",
            "type": optional({"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}),
            "default": None,
        },
        {"name": "tag", "type": optional({"type": "fixed", "name": "Tag", "size": 3}), "default": None},
        {"name": "blob", "type": optional("bytes"), "default": None},
        {"name": "ratio", "type": optional("float"), "default": None},
        {"name": "score", "type": "double"},
        {"name": "ok", "type": optional("boolean"), "default": None},
        {
            "name": "who",
            "type": optional(
                {"type": "record", "name": "Who", "fields": [{"name": "name", "type": optional("string")}]}
            ),
            "default": None,
        },  # fmt: skip
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": optional("int")}],
                },
            },
        },  # fmt: skip
        {"name": "attrs", "type": optional({"type": "map", "values": optional("long")}), "default": None},
    ],
}
ENVELOPE = {
    "type": "record",
    "name": "connector_records",
    "namespace": "io.aiven.avro.output.schema",
    "fields": [
        {"name": "key", "type": optional("string")},
        {"name": "value", "type": optional(VALUE)},
        {"name": "offset", "type": "long"},
        {"name": "timestamp", "type": "long"},
        {
            "name": "headers",
            "type": optional(
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "Header",
                        "fields": [{"name": "key", "type": "string"}, {"name": "value", "type": optional("bytes")}],
                    },
                }
            ),
        },  # fmt: skip
    ],
}


def value(i: int) -> dict[str, Any] | None:
    if i % 7 == 3:
        return None  # a value Connect gave as null
    full = i % 2 == 0
    return {
        "id": i,
        "small": -(i % 128) if full else None,
        "price": Decimal(i * 101).scaleb(-2) if full else None,
        "big": Decimal("12345678901234567890123456789012.345678") - i if full else None,
        "at": datetime.datetime(2026, 3, 1, 12, 0, 0, (i % 1000) * 1000, tzinfo=UTC) if full else None,
        "at_us": datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999 - i, tzinfo=UTC),
        "day": datetime.date(1900, 1, 1) + datetime.timedelta(days=i * 97),
        "state": "PAID" if i % 3 else "NEW",
        "tag": b"t%02d" % (i % 100),
        "blob": bytes(range(i % 5)) if full else None,
        "ratio": 0.5 + i,
        "score": -i / 3,
        "ok": full,
        "who": {"name": f"n{i} é"} if i % 4 else {"name": None},
        "lines": [{"sku": f"s{j}", "qty": j if j else None} for j in range(i % 3)],
        "attrs": {"a": i, "b": None} if full else None,
    }


def envelope(i: int) -> dict[str, Any]:
    headers = [{"key": "h", "value": b"v"}] if i % 2 else None
    return {"key": f"k{i}", "value": value(i), "offset": i, "timestamp": 1_772_000_000_000 + i, "headers": headers}


def write(root: Path, start: int, count: int, codec: str, wrapped: bool) -> PendingFile:
    buf = io.BytesIO()
    fastavro.writer(
        buf, fastavro.parse_schema(ENVELOPE), [envelope(i) for i in range(start, start + count)], codec=codec
    )
    path = root / f"orders-0-{start}"
    path.write_bytes(gzip.compress(buf.getvalue()) if wrapped else buf.getvalue())
    f = DataFile(f"file://{path}", "orders", 0, start, start + count - 1, path.stat().st_size, FileFormat.AVRO)
    return PendingFile(f, f"m{start}", "sc-1")


def framed(
    spark: Any, files: list[PendingFile], staging: Path, arrow: bool, storage: StorageReader | None = None
) -> tuple[Any, list[dict[str, Any]], int]:
    schemas = FileSchemas(spark)
    storage = storage or StorageReader()
    reader = FrameReader(
        spark, storage, Unwrap.AUTO, schemas.get, schemas.avro, staging=f"{staging.as_uri()}/", arrow=arrow
    )
    try:
        facts = {
            p.file.path: storage.facts(p.file.path, parquet=True) for p in files if p.file.format is FileFormat.PARQUET
        }
        reader.read_ahead(files, 4)
        target = reader.shape(files[0], facts.get(files[0].file.path))
        df = reader.frame(files, facts, target)
        rows = sorted((r.asDict(recursive=True) for r in df.collect()), key=lambda r: r.get("_kafka_offset", 0))
        return df.schema, rows, reader.avro_files.decoded + reader.parquet_decoded
    finally:
        reader.close()


def expected(i: int) -> dict[str, Any]:
    """The row an unwrapped append table holds for record ``i``, as Spark gives it."""
    v = value(i)
    row = dict.fromkeys((f["name"] for f in VALUE["fields"]), None) if v is None else dict(v)
    if v is not None:
        row["at"] = v["at"] and v["at"].astimezone().replace(tzinfo=None)
        row["at_us"] = v["at_us"].astimezone().replace(tzinfo=None)
        row["tag"] = bytearray(v["tag"])
        row["blob"] = None if v["blob"] is None else bytearray(v["blob"])
        row["who"] = dict(v["who"])
        row["lines"] = [dict(line) for line in v["lines"]]
    e = envelope(i)
    headers = None if e["headers"] is None else [{"key": "h", "value": bytearray(b"v")}]
    kafka_ts = datetime.datetime.fromtimestamp(e["timestamp"] / 1000, UTC).astimezone().replace(tzinfo=None)
    return {**row, "_kafka_key": e["key"], "_kafka_offset": i, "_kafka_timestamp": kafka_ts, "_kafka_headers": headers}


@pytest.mark.parametrize("wrapped", [False, True], ids=["containers", "gzip-wrapped"])
def test_arrow_reads_what_sparks_avro_source_reads(spark: Any, tmp_path: Path, wrapped: bool) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    files = [write(landing, s, 40, codec, wrapped) for s, codec in ((0, "snappy"), (40, "deflate"), (80, "null"))]
    arrow_schema, arrow_rows, decoded = framed(spark, files, tmp_path / "a-staging", arrow=True)
    spark_schema, spark_rows, untouched = framed(spark, files, tmp_path / "s-staging", arrow=False)
    assert decoded == 3 and untouched == 0
    assert arrow_schema == spark_schema
    assert [r["_kafka_offset"] for r in arrow_rows] == list(range(120))
    assert arrow_rows == spark_rows
    floats = ("ratio",)  # float32 in Avro, as Spark reads it back
    for row, i in zip(arrow_rows, range(120), strict=True):
        want = expected(i)
        for name in floats:
            if want[name] is not None:
                assert row[name] == pytest.approx(want[name]), name
                want[name] = row[name]
        assert row == want, i
    # nothing staged on the Arrow path: wrapped containers were decoded from their local copies
    assert not (tmp_path / "a-staging").exists() or not any((tmp_path / "a-staging").iterdir())


def test_a_writer_schema_arrow_may_read_otherwise_is_read_by_spark(spark: Any, tmp_path: Path) -> None:
    """A uuid (DataFusion decodes its text into 16 bytes) leaves the files to Spark's Avro source,
    which reads the text as written."""
    schema = {
        "type": "record",
        "name": "V",
        "fields": [{"name": "u", "type": {"type": "string", "logicalType": "uuid"}}],
    }
    ids = ["A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "00000000-0000-0000-0000-000000000000"]
    path = tmp_path / "ids-0-0"
    with path.open("wb") as out:
        fastavro.writer(out, fastavro.parse_schema(schema), [{"u": u} for u in ids])
    f = PendingFile(DataFile(path.as_uri(), "ids", 0, 0, 1, path.stat().st_size, FileFormat.AVRO), "m", "sc-1")
    _, rows, decoded = framed(spark, [f], tmp_path / "staging", arrow=True)
    assert decoded == 0
    assert [r["u"] for r in rows] == ids


PARQUET_VALUE = pa.struct(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("price", pa.decimal128(9, 2)),
        pa.field("big", pa.decimal128(30, 4)),
        pa.field("u8", pa.uint8()),
        pa.field("u32", pa.uint32()),
        pa.field("at_ms", pa.timestamp("ms", "UTC")),
        pa.field("local", pa.timestamp("us")),
        pa.field("day", pa.date32()),
        pa.field("lines", pa.list_(pa.struct([pa.field("sku", pa.string()), pa.field("qty", pa.int32())]))),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
        pa.field("blob", pa.binary()),
        pa.field("ratio", pa.float32()),
    ]
)
PARQUET = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("value", PARQUET_VALUE),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("ms", "UTC")),
    ]
)


def parquet_row(i: int) -> dict[str, Any]:
    full = i % 3 != 0
    return {
        "key": f"k{i}" if i % 5 else None,
        "value": None
        if i % 11 == 4
        else {
            "id": i,
            "price": Decimal(i * 7).scaleb(-2) if full else None,
            "big": Decimal("12345678901234567890123456.7891") - i,
            "u8": 255 - i % 256 if full else None,
            "u32": 2**32 - 1 - i,
            "at_ms": datetime.datetime(1969, 7, 20, 20, 17, 40, (i % 1000) * 1000, tzinfo=UTC),
            "local": datetime.datetime(2026, 1, 1, 0, 0, 0, i),
            "day": datetime.date(1582, 10, 15) + datetime.timedelta(days=i),
            "lines": [{"sku": f"s{j}", "qty": j if j else None} for j in range(i % 3)] if full else None,
            "attrs": [("a", i), ("b", -i)] if full else None,
            "blob": bytes(range(i % 4)),
            "ratio": 0.25 * i,
        },  # fmt: skip
        "offset": i,
        "timestamp": datetime.datetime(2026, 3, 1, tzinfo=UTC) + datetime.timedelta(milliseconds=i * 1001),
    }


@pytest.mark.parametrize("int96", [False, True], ids=["int64-timestamps", "int96-timestamps"])
def test_arrow_reads_enveloped_parquet_as_spark_does(spark: Any, tmp_path: Path, int96: bool) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    files = []
    for start in (0, 30, 60):
        path = landing / f"orders-0-{start}"
        rows = [parquet_row(i) for i in range(start, start + 30)]
        pq.write_table(pa.Table.from_pylist(rows, schema=PARQUET), path, use_deprecated_int96_timestamps=int96)
        f = DataFile(path.as_uri(), "orders", 0, start, start + 29, path.stat().st_size, FileFormat.PARQUET)
        files.append(PendingFile(f, f"m{start}", "sc-1"))
    storage = StorageReader(local_roots=[str(tmp_path)])
    arrow_schema, arrow_rows, decoded = framed(spark, files, tmp_path / "staging", True, storage)
    spark_schema, spark_rows, untouched = framed(spark, files, tmp_path / "staging", False, storage)
    assert decoded == 3 and untouched == 0
    assert arrow_schema == spark_schema
    assert [r["_kafka_offset"] for r in arrow_rows] == list(range(90))
    assert arrow_rows == spark_rows
    row = arrow_rows[31]
    assert row["u32"] == 2**32 - 32 and row["big"] == Decimal("12345678901234567890123456.7891") - 31
    assert row["lines"] == [{"sku": "s0", "qty": None}]
