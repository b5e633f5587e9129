"""What a Parquet footer gives the commit (``commit_service.storage.footer``), checked against the
data written: bounds, null counts and coverage computed here from the values themselves (no JVM)."""

from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from commit_service.storage import footer
from commit_service.storage.reader import footer as read_footer


def meta_of(table: pa.Table, **kw: Any) -> pq.FileMetaData:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    return read_footer(pa.BufferReader(buf.getvalue()))


def expected_stats(table: pa.Table) -> dict[str, Any]:
    """Delta's stats of ``table``, from its values: bounds only where they are exact."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for field in table.schema:
        if pa.types.is_nested(field.type):
            continue
        column = table.column(field.name)
        nulls[field.name] = column.null_count
        values = [v for v in column.to_pylist() if v is not None]
        if not values or pa.types.is_boolean(field.type):
            continue
        if pa.types.is_timestamp(field.type):  # UTC instants only, in milliseconds: the max one up
            if field.type.tz is not None:
                mins[field.name] = millis_text(min(values))
                maxs[field.name] = millis_text(max(values) + dt.timedelta(milliseconds=1))
            continue
        if pa.types.is_floating(field.type):  # pyarrow's bounds leave NaN out: none is exact
            continue
        if pa.types.is_string(field.type) and any(len(v) > footer.MAX_STAT_STRING for v in values):
            continue
        low, high = pc.min_max(column).values()
        mins[field.name], maxs[field.name] = low.as_py(), high.as_py()
        if isinstance(mins[field.name], dt.date):
            mins[field.name], maxs[field.name] = mins[field.name].isoformat(), maxs[field.name].isoformat()
    return {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


def millis_text(at: dt.datetime) -> str:
    """A UTC instant truncated to the millisecond, as Delta's stats write it."""
    utc = at.astimezone(dt.UTC)
    return utc.replace(tzinfo=None, microsecond=utc.microsecond // 1000 * 1000).isoformat(timespec="milliseconds") + "Z"


MIXED = pa.table(
    {
        "id": pa.array(["a-1", "a-2", None, "a-0"]),
        "n": pa.array([5, -3, 9, None], pa.int64()),
        "x": pa.array([0.5, float("nan"), 2.0, 1.0]),
        "y": pa.array([0.5, -1.5, 2.0, None]),
        "long": pa.array(["short", "x" * 40, None, "b"]),
        "flag": pa.array([True, False, None, True]),
        "day": pa.array([dt.date(2026, 1, 2), dt.date(2025, 12, 31), None, dt.date(2026, 3, 1)]),
        "at": pa.array([1, 2, 3, 4], pa.timestamp("ms", tz="UTC")),
        "us": pa.array([1_500, None, 2_999, 1_000_000_000_000_123], pa.timestamp("us", tz="UTC")),
        "local": pa.array([7, 8, None, 9], pa.timestamp("us")),  # no zone: no stats (Delta's are UTC)
        "empty": pa.array([None, None, None, None], pa.string()),
        "s": pa.array([{"a": 1}, {"a": 2}, None, {"a": 3}], pa.struct([("a", pa.int64())])),
        "l": pa.array([[1], [], None, [2, 3]], pa.list_(pa.int64())),
    }
)


@pytest.mark.parametrize("row_group_size", [None, 1, 3])
def test_stats_are_the_values_exact_bounds_and_nulls(row_group_size: int | None) -> None:
    got = footer.footer_facts(meta_of(MIXED, row_group_size=row_group_size))
    assert json.loads(got.stats_json) == expected_stats(MIXED)
    assert got.num_rows == 4
    assert got.null_strings == ("empty",)  # "id" and "long" hold values; "s.a" is not a string
    assert got.coverage is None  # not the sink's envelope
    # a timestamp's exact bounds in microseconds (zone-less ones read as UTC)
    assert got.times == (("at", 1000, 4000), ("us", 1_500, 1_000_000_000_000_123), ("local", 7, 9))
    stats = json.loads(got.stats_json)
    assert (stats["minValues"]["us"], stats["maxValues"]["us"]) == (
        "1970-01-01T00:00:00.001Z",
        "2001-09-09T01:46:40.001Z",
    )


def test_a_nan_beside_finite_values_leaves_its_column_without_bounds() -> None:
    """pyarrow's footer says max 2.0 for [0.5, NaN, 2.0]; Spark finds the NaN for ``x > 3``."""
    meta = meta_of(pa.table({"x": [0.5, float("nan"), 2.0]}))
    assert meta.row_group(0).column(0).statistics.max == 2.0  # the writer's NaN-blind bound
    stats = json.loads(footer.footer_facts(meta).stats_json)
    assert "x" not in stats["maxValues"] and stats["nullCount"] == {"x": 0}


def test_a_column_without_statistics_gets_no_stats_and_is_never_called_empty() -> None:
    table = pa.table({"a": pa.array([None, None], pa.string()), "b": [1, 2]})
    got = footer.footer_facts(meta_of(table, write_statistics=["b"]))
    assert json.loads(got.stats_json) == {
        "numRecords": 2,
        "minValues": {"b": 1},
        "maxValues": {"b": 2},
        "nullCount": {"b": 0},
    }
    assert got.null_strings == ()


def test_the_envelopes_offsets_are_its_coverage_only_when_exact() -> None:
    envelope = pa.table({"value": pa.array(["{}", "{}", "{}"]), "offset": pa.array([7, 9, 8], pa.int64())})
    got = footer.footer_facts(meta_of(envelope))
    assert got.coverage is not None and (got.coverage.span.first, got.coverage.span.last) == (7, 9)
    assert got.coverage.records == 3
    with_null = envelope.set_column(1, "offset", pa.array([7, None, 8], pa.int64()))
    assert footer.footer_facts(meta_of(with_null)).coverage is None


def test_files_of_one_schema_share_a_layout_and_arrow_types_tell_schemas_apart() -> None:
    one = meta_of(pa.table({"a": [1], "t": pa.array([1], pa.timestamp("ms"))}))
    two = meta_of(pa.table({"a": [2], "t": pa.array([5], pa.timestamp("ms"))}))
    zoned = meta_of(pa.table({"a": [2], "t": pa.array([5], pa.timestamp("ms", tz="Europe/Paris"))}))
    assert footer.layout_of(one) is footer.layout_of(two)
    assert footer.layout_of(zoned).schema_key != footer.layout_of(one).schema_key
    assert "Europe/Paris" in footer.layout_of(zoned).schema_key
    assert footer.layout_of(one).columns == (("a", False), ("t", False))


def test_files_alternating_between_schemas_each_get_their_own_layout() -> None:
    """The last layout is remembered (one comparison of schemas): a footer whose Parquet schema is
    the same but whose stored Arrow schema differs (another zone) does not get it."""
    utc = meta_of(pa.table({"t": pa.array([1], pa.timestamp("ms", tz="UTC"))}))
    paris = meta_of(pa.table({"t": pa.array([1], pa.timestamp("ms", tz="Europe/Paris"))}))
    other = meta_of(pa.table({"n": pa.array([1], pa.int32())}))
    assert utc.schema.equals(paris.schema)  # the zone lives only in the stored Arrow schema
    keys = [footer.layout_of(m).schema_key for m in (utc, paris, paris, utc, other, utc, other)]
    assert ["UTC" in k for k in keys[:4]] == [True, False, False, True]
    assert ["Europe/Paris" in k for k in keys[:4]] == [False, True, True, False]
    assert keys[4] == keys[6] != keys[5] == keys[0]
