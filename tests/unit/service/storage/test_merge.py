"""Small Parquet files merged into one by Arrow (commit_service.storage.merge), on the local file
system: every value of every row kept in order, the schema's field ids kept, groups Arrow would
write otherwise than it read left to Spark, row groups bounded."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.storage import merge
from commit_service.storage.merge import merge_files
from commit_service.storage.reader import StorageReader

UTC = dt.UTC


def _schema(with_ids: bool = False) -> pa.Schema:
    fields = [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("ms", tz="UTC")),
        pa.field("local", pa.timestamp("us")),
        pa.field("day", pa.date32()),
        pa.field("price", pa.decimal128(12, 3)),
        pa.field("ratio", pa.float64()),
        pa.field("flag", pa.bool_()),
        pa.field("blob", pa.binary()),
        pa.field("inner", pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())])),
    ]
    if with_ids:
        fields = [f.with_metadata({b"PARQUET:field_id": str(i + 1).encode()}) for i, f in enumerate(fields)]
    return pa.schema(fields, metadata={b"org.apache.spark.sql.parquet.row.metadata": b"{}"})


def _rows(start: int, n: int) -> list[dict[str, object]]:
    return [
        {
            "id": i,
            "name": None if i % 7 == 0 else f"n{i}",
            "ts": dt.datetime(2026, 12, 1, tzinfo=UTC) + dt.timedelta(milliseconds=i),
            "local": dt.datetime(2026, 12, 1) + dt.timedelta(microseconds=i),
            "day": dt.date(2026, 1, 1) + dt.timedelta(days=i % 300),
            "price": decimal.Decimal(i) / 1000,
            "ratio": float("nan") if i % 11 == 0 else i / 3,
            "flag": i % 2 == 0,
            "blob": bytes([i % 256]),
            "inner": None if i % 5 == 0 else {"a": i, "b": str(i)},
        }
        for i in range(start, start + n)
    ]


def _files(tmp_path: Path, schema: pa.Schema, sizes: list[int]) -> tuple[list[str], list[dict[str, object]]]:
    uris, rows, start = [], [], 0
    for n in sizes:
        part = _rows(start, n)
        path = tmp_path / f"clicks-0-{start}.parquet"
        pq.write_table(pa.Table.from_pylist(part, schema=schema), path)
        uris.append(path.as_uri())
        rows += part
        start += n
    return uris, rows


def _same(a: object, b: object) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


@pytest.mark.parametrize(("with_ids", "codec"), [(False, "snappy"), (True, "zstd"), (False, "uncompressed")])
def test_every_value_of_every_row_is_kept_in_order(tmp_path: Path, with_ids: bool, codec: str) -> None:
    schema = _schema(with_ids)
    uris, rows = _files(tmp_path, schema, [5, 1, 12, 3])
    target = (tmp_path / "merged" / "part-1.parquet").as_uri()
    merged = merge_files(StorageReader(local_roots=[str(tmp_path)]), uris, target, codec)
    assert merged is not None and merged.rows == len(rows) == merged.facts.num_records
    got = pq.read_table(tmp_path / "merged" / "part-1.parquet")
    assert got.schema.remove_metadata().equals(schema.remove_metadata(), check_metadata=True), got.schema
    assert got.schema.metadata[b"org.apache.spark.sql.parquet.row.metadata"] == b"{}"
    for want, have in zip(rows, got.to_pylist(), strict=True):
        assert all(_same(want[k], have[k]) for k in want), (want, have)
    compression = pq.read_metadata(tmp_path / "merged" / "part-1.parquet").row_group(0).column(0).compression
    assert compression == {"snappy": "SNAPPY", "zstd": "ZSTD", "uncompressed": "UNCOMPRESSED"}[codec]
    assert merged.facts.footer is not None and merged.facts.stats_json is not None
    assert '"numRecords":21' in merged.facts.stats_json.replace(" ", "")


def test_files_of_two_schemas_are_left_to_spark(tmp_path: Path) -> None:
    uris, _ = _files(tmp_path, _schema(), [3])
    other = tmp_path / "clicks-0-3.parquet"
    pq.write_table(pa.table({"id": [3, 4]}), other)
    target = tmp_path / "merged.parquet"
    assert (
        merge_files(StorageReader(local_roots=[str(tmp_path)]), [*uris, other.as_uri()], target.as_uri(), "snappy")
        is None
    )
    assert not target.exists(), "nothing is written"


@pytest.mark.parametrize(
    ("column", "why", "int96"),
    [
        (pa.array([[1, 2], None], pa.list_(pa.int32())), "lists and maps", False),
        (pa.array([{"k": [1]}, None], pa.struct([pa.field("k", pa.list_(pa.int8()))])), "lists", False),
        (pa.array([dt.datetime(2026, 1, 1), None], pa.timestamp("ns")), "nanosecond", False),  # INT64 NANOS
        (
            pa.array([{"t": dt.datetime(2026, 1, 1)}, None], pa.struct([pa.field("t", pa.timestamp("ns"))])),
            "nanosecond",
            True,
        ),
        (pa.array([None, None], pa.null()), "no type", False),
    ],
)
def test_types_arrow_would_write_otherwise_are_left_to_spark(
    tmp_path: Path, column: pa.Array, why: str, int96: bool
) -> None:
    table = pa.table({"id": [1, 2], "x": column})
    reason = merge.refusal(table.schema)
    assert reason is not None and why in reason
    paths = []
    for n in range(2):
        paths.append(tmp_path / f"f{n}.parquet")
        pq.write_table(table, paths[-1], use_deprecated_int96_timestamps=int96)  # INT96 inside a struct: ns
    target = tmp_path / "merged.parquet"
    assert (
        merge_files(StorageReader(local_roots=[str(tmp_path)]), [p.as_uri() for p in paths], target.as_uri(), "snappy")
        is None
    )
    assert not target.exists()


def test_a_struct_of_plain_fields_merges() -> None:
    assert merge.refusal(_schema()) is None


def test_row_groups_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    schema = _schema()
    uris, rows = _files(tmp_path, schema, [40, 40, 40, 40])
    one_file = pq.read_table(uris[0].removeprefix("file://")).nbytes
    monkeypatch.setattr(merge, "ROW_GROUP_BYTES", int(2.5 * one_file))  # two files' rows a row group
    target = tmp_path / "merged.parquet"
    merged = merge_files(StorageReader(local_roots=[str(tmp_path)]), uris, target.as_uri(), "snappy")
    assert merged is not None and merged.rows == len(rows)
    meta = pq.ParquetFile(target).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [80, 80]


def test_row_groups_hold_at_most_their_rows_so_a_range_reads_only_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uris, rows = _files(tmp_path, _schema(), [40, 40, 40])
    monkeypatch.setattr(merge, "ROW_GROUP_ROWS", 50)
    target = tmp_path / "merged.parquet"
    merged = merge_files(StorageReader(local_roots=[str(tmp_path)]), uris, target.as_uri(), "snappy")
    assert merged is not None and merged.rows == len(rows)
    meta = pq.ParquetFile(target).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [50, 50, 20]
    ids = [meta.row_group(i).column(0).statistics for i in range(meta.num_row_groups)]
    assert [(s.min, s.max) for s in ids] == [(0, 49), (50, 99), (100, 119)]  # each group's own bounds
    for want, have in zip(rows, pq.read_table(target).to_pylist(), strict=True):
        assert all(_same(want[k], have[k]) for k in want), (want, have)


def test_spark_s_int96_timestamps_are_written_as_the_utc_microseconds_they_hold(tmp_path: Path) -> None:
    at = [dt.datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC), None, dt.datetime(1969, 7, 20, 20, 17, tzinfo=UTC)]
    paths = []
    for n in range(2):
        paths.append(tmp_path / f"f{n}.parquet")
        table = pa.table({"id": [n * 3 + i for i in range(3)], "ts": pa.array(at, pa.timestamp("us", tz="UTC"))})
        pq.write_table(table, paths[-1], use_deprecated_int96_timestamps=True)  # as Spark writes them
    assert pq.read_metadata(paths[0]).schema.column(1).physical_type == "INT96"
    target = tmp_path / "merged.parquet"
    merged = merge_files(
        StorageReader(local_roots=[str(tmp_path)]), [p.as_uri() for p in paths], target.as_uri(), "zstd"
    )
    assert merged is not None
    column = pq.read_metadata(target).schema.column(1)
    logical = json.loads(column.logical_type.to_json())
    assert column.physical_type == "INT64" and (logical["isAdjustedToUTC"], logical["timeUnit"]) == (
        True,
        "microseconds",
    )
    assert pq.read_table(target).column("ts").to_pylist() == at * 2


def test_a_codec_arrow_does_not_write_is_left_to_spark(tmp_path: Path) -> None:
    uris, _ = _files(tmp_path, _schema(), [3, 3])
    target = tmp_path / "merged.parquet"
    assert merge_files(StorageReader(local_roots=[str(tmp_path)]), uris, target.as_uri(), "lzo") is None
    assert not target.exists()
