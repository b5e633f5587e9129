"""In-place Parquet files' Iceberg ``DataFile``s built from the footers the service read ahead
(``io.lakegate.iceberg.RoundDataFiles``), against Iceberg's own ``ParquetUtil.fileMetrics``
reading each file again (``datafiles.data_files``, the path it replaces): every metric (sizes,
value, null and NaN counts, lower and upper bounds), the record count, the path, the size and
the partition tuple must be equal, on real Spark + Iceberg 1.11.
"""

from __future__ import annotations

import io
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.config import S3Settings
from commit_service.iceberg import datafiles
from commit_service.iceberg.partitions import HIVE_NULL
from commit_service.storage.reader import StorageReader
from lakegate_stack import s3 as s3mod
from lakegate_stack.s3 import S3Server
from tests.fixtures import ICEBERG_CATALOG

BUCKET = "lake-footers"

NESTED = pa.struct([pa.field("x", pa.int64()), pa.field("tag", pa.string())])
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("small", pa.int32()),
        pa.field("ratio", pa.float32()),
        pa.field("score", pa.float64()),
        pa.field("ok", pa.bool_()),
        pa.field("name", pa.string()),
        pa.field("raw", pa.binary()),
        pa.field("day", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("amount", pa.decimal128(12, 3)),
        pa.field("nested", NESTED),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
        pa.field("never", pa.string()),
        pa.field("region", pa.string()),
    ]
)
COLUMNS = (
    "id BIGINT, small INT, ratio FLOAT, score DOUBLE, ok BOOLEAN, name STRING, raw BINARY, day DATE, "
    "ts TIMESTAMP, amount DECIMAL(12,3), nested STRUCT<x: BIGINT, tag: STRING>, tags ARRAY<STRING>, "
    "attrs MAP<STRING, BIGINT>, never STRING, region STRING"
)
LONG = (
    "ä" * 15 + "\U0001f600" + "z" * 30
)  # past the 16 characters Iceberg keeps of a bound, a surrogate pair at the cut


def record(i: int) -> dict[str, Any]:
    """A record whose every column varies with ``i``, with nulls, NaN, infinities and long text."""
    return {
        "id": i * 7 - 50,
        "small": None if i % 5 == 0 else -(2**31) + i if i % 2 else 2**31 - i,
        "ratio": float("nan") if i % 4 == 1 else float(i) / 3,
        "score": float("-inf") if i == 3 else None if i % 6 == 0 else i * 1.25e300,
        "ok": None if i % 3 == 0 else i % 2 == 0,
        "name": LONG + str(i) if i % 2 else f"n{i:03d}",
        "raw": bytes([255 - i % 256]) * (i % 40),
        "day": date(1969 + i % 70, 1 + i % 12, 1 + i % 28),
        "ts": datetime(2026, 11, 27, i % 24, i % 60, tzinfo=UTC),
        "amount": Decimal(f"{(-1) ** i * i * 1001}.{i % 1000:03d}"),
        "nested": None if i % 7 == 0 else {"x": i * 2**33, "tag": None if i % 2 else f"t{i}"},
        "tags": [f"a{i}", None] if i % 3 else None,
        "attrs": {"k": i} if i % 2 else {},
        "never": None,
        "region": "eu",
    }


class Store:
    """Where the test's sink files lie: local files under ``root``, or (with ``s3``) the S3 server's
    ``lake-footers`` bucket, and the reader the service reads their facts with."""

    def __init__(self, root: Path, s3: S3Server | None) -> None:
        self.root = root
        self.client = s3.client() if s3 is not None else None
        settings = (
            None if s3 is None else S3Settings(s3.endpoint, access_key=s3mod.ACCESS_KEY, secret_key=s3mod.SECRET_KEY)
        )
        self.reader = StorageReader(settings)
        if self.client is not None and BUCKET not in {b["Name"] for b in self.client.list_buckets()["Buckets"]}:
            self.client.create_bucket(Bucket=BUCKET)

    def write(self, name: str, first: int, count: int, row_group_size: int) -> str:
        rows = [record(i) for i in range(first, first + count)]
        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows, SCHEMA), buffer, row_group_size=row_group_size)
        if self.client is None:
            (self.root / name).write_bytes(buffer.getvalue())
            return (self.root / name).as_uri()
        self.client.put_object(Bucket=BUCKET, Key=f"{self.root.name}/{name}", Body=buffer.getvalue())
        return f"s3a://{BUCKET}/{self.root.name}/{name}"


def table(spark: Any, name: str, partitioned: str) -> Any:
    """The Iceberg table ``name`` (made by Spark SQL, ``partitioned`` by its clause), with a name
    mapping as Lakegate gives one (the sink's files carry no field ids)."""
    spark.sql(f"DROP TABLE IF EXISTS {ICEBERG_CATALOG}.{name}")
    spark.sql(f"CREATE TABLE {ICEBERG_CATALOG}.{name} ({COLUMNS}) USING iceberg {partitioned}")
    jvm = spark._jvm
    catalog = spark._jsparkSession.sessionState().catalogManager().catalog(ICEBERG_CATALOG).icebergCatalog()
    loaded = catalog.loadTable(jvm.org.apache.iceberg.catalog.TableIdentifier.parse(name))
    mapping = jvm.org.apache.iceberg.mapping.MappingUtil.create(loaded.schema())
    loaded.updateProperties().set(
        "schema.name-mapping.default", jvm.org.apache.iceberg.mapping.NameMappingParser.toJson(mapping)
    ).commit()
    return loaded, mapping


def differences(built: Any, expected: Any) -> list[str]:
    """The fields in which two DataFiles differ (compared in the JVM: bounds are ByteBuffers)."""
    out = []
    for field in (
        "location",
        "fileSizeInBytes",
        "recordCount",
        "columnSizes",
        "valueCounts",
        "nullValueCounts",
        "nanValueCounts",
        "lowerBounds",
        "upperBounds",
        "partition",
        "format",
    ):
        got, want = getattr(built, field)(), getattr(expected, field)()
        same = got.equals(want) if hasattr(got, "equals") else got == want
        if not same:
            out.append(f"{field}: {got} != {want}")
    return out


@pytest.mark.parametrize("store", ["local", "s3"])
@pytest.mark.parametrize(
    ("partitioned", "values"),
    [
        ("", None),
        ("PARTITIONED BY (region, days(ts))", ["eu", "2026-11-27"]),
        ("PARTITIONED BY (region, ts)", [HIVE_NULL, "2026-11-27T05:06:07.000008"]),  # a timestamp identity, a null
    ],
    ids=["unpartitioned", "identity-and-day", "timestamp-identity-and-null"],
)
def test_footer_metrics_equal_icebergs_own_read_of_each_file(
    spark: Any, s3_server: S3Server, tmp_path: Path, store: str, partitioned: str, values: list[str] | None
) -> None:
    """On S3 too: the location recorded without a stat is the one the stat named."""
    name = "lakegate_it.footers_" + ("plain" if values is None else f"p{len(partitioned)}")
    loaded, mapping = table(spark, name, partitioned)
    files = Store(tmp_path, s3_server if store == "s3" else None)
    uris = [
        files.write("one-group.parquet", 0, 40, 1_000),
        files.write("many-groups.parquet", 40, 90, 16),  # bounds and counts summed over row groups
        files.write("one-row.parquet", 500, 1, 1_000),
        files.write("empty.parquet", 0, 0, 1_000),
    ]
    footed = []
    for uri in uris:
        facts = files.reader.facts(uri, parquet=True, keep_footer=True)
        assert facts.footer is not None
        footed.append((uri, facts.size_bytes, values, facts.footer))
    built = datafiles.footer_files(spark, loaded, footed, mapping)
    expected = datafiles.data_files(spark, loaded, [(u, s, v) for u, s, v, _ in footed], mapping)
    assert built.rows == expected.rows == 131
    assert len(built.files) == len(expected.files) == len(uris)
    for uri, got, want in zip(uris, built.files, expected.files, strict=True):
        assert differences(got, want) == [], uri
    assert int(built.files[1].lowerBounds().size()) >= 10, "bounds were built for the simple columns"


def test_a_file_without_a_kept_footer_is_read_again(spark: Any, tmp_path: Path) -> None:
    loaded, mapping = table(spark, "lakegate_it.footers_mixed", "")
    files = Store(tmp_path, None)
    reader = files.reader
    kept = files.write("kept.parquet", 0, 10, 1_000)
    unread = files.write("unread.parquet", 10, 5, 1_000)
    files = [
        (
            kept,
            reader.facts(kept, parquet=True).size_bytes,
            None,
            reader.facts(kept, parquet=True, keep_footer=True).footer,
        ),
        (unread, reader.facts(unread, parquet=True).size_bytes, None, None),
    ]
    assert reader.facts(kept, parquet=True).footer is None  # kept only when asked for
    built = datafiles.footer_files(spark, loaded, files, mapping)
    assert built.rows == 15
    assert sorted(str(f.location()) for f in built.files) == sorted(
        str(f.location()) for f in datafiles.data_files(spark, loaded, [f[:3] for f in files], mapping).files
    )
