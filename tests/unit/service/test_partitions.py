"""A table's partitioning in Delta's and Iceberg's terms (``commit_service.delta.partitions``,
``commit_service.iceberg.partitions``) and where a file's footer puts
it (``commit_service.round.partitions``): the partition values of a pinned file must be what Spark's
generated column gives each of its rows, here computed from the rows themselves in Python (UTC)."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from commit_service.delta import path_guard
from commit_service.delta.partitions import GENERATION, DeltaPartitioning
from commit_service.domain.partitioning import Pin, Transform, parse_spec, spec_problem, time_value
from commit_service.errors import DataFileError
from commit_service.iceberg.partitions import (
    ESCAPE,
    HIVE_NULL,
    MARK,
    IcebergPartitioning,
    partition_text,
    timestamp_micros,
)
from commit_service.round.partitions import pins_of, sql_literal
from commit_service.storage.facts import FileFacts
from commit_service.storage.footer import footer_facts
from commit_service.storage.reader import footer as read_footer

TYPES = {"ts": "timestamp", "d": "date", "s": "string", "n": "long", "region": "string"}


def facts_of(table: pa.Table) -> FileFacts:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    got = footer_facts(read_footer(pa.BufferReader(buf.getvalue())))
    return FileFacts(1, 0, got.num_rows, got.stats_json, times=got.times)


def spark_value(transform: str, ts: datetime) -> str:
    """What Spark's generated column expression (session time zone UTC) gives ``ts``, as Delta writes it."""
    at = ts.astimezone(UTC)
    return {
        "year": f"{at.year}",
        "month": at.strftime("%Y-%m"),
        "day": at.date().isoformat(),
        "hour": at.strftime("%Y-%m-%d-%H"),
    }[transform]


moments = st.datetimes(min_value=datetime(1901, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC))


@pytest.mark.parametrize("transform", ["year", "month", "day", "hour"])
@given(first=moments, width=st.integers(0, 3 * 24 * 3600 * 10**6))
def test_a_file_is_pinned_exactly_when_every_row_gives_one_value(transform: str, first: datetime, width: int) -> None:
    times = [first, first + timedelta(microseconds=width // 2), first + timedelta(microseconds=width)]
    layout = DeltaPartitioning(parse_spec([f"{transform}(ts)"]))
    facts = facts_of(pa.table({"ts": pa.array(times, pa.timestamp("us", "UTC"))}))
    pins = pins_of(layout.fields, facts, TYPES)
    rows = {spark_value(transform, t) for t in times}
    if len(rows) == 1:
        assert pins is not None and layout.values(pins) == {f"ts_{transform}": rows.pop()}
    else:
        assert pins is None


def test_dates_strings_integers_and_nulls_pin_and_a_bucket_or_a_timestamp_identity_never_does() -> None:
    table = pa.table(
        {
            "d": pa.array([date(2026, 2, 3)] * 2),
            "s": pa.array(["abcdef", "abcxyz"]),
            "n": pa.array([1203, 1299], pa.int64()),
            "region": pa.array([None, None], pa.string()),
            "ts": pa.array([datetime(2026, 1, 1, tzinfo=UTC)] * 2, pa.timestamp("ms", "UTC")),
        }
    )
    facts = facts_of(table)
    layout = DeltaPartitioning(parse_spec(["month(d)", "truncate(3, s)", "truncate(100, n)", "region"]))
    pins = pins_of(layout.fields, facts, TYPES)
    assert pins is not None
    assert layout.values(pins) == {"d_month": "2026-02", "s_trunc": "abc", "n_trunc": "1200", "region": None}
    for spec in (["bucket(4, n)"], ["ts"]):  # Spark's hash, a timestamp's text: the file is rewritten
        other = DeltaPartitioning(parse_spec(spec))
        found = pins_of(other.fields, facts, TYPES)
        assert found is None or other.values(found) is None
    assert (
        pins_of(DeltaPartitioning(parse_spec(["truncate(100, n)"])).fields, facts_of(table.slice(0, 0)), TYPES) is None
    )


def test_generated_columns_are_added_after_the_rounds_and_an_other_layout_is_named() -> None:
    layout = DeltaPartitioning(parse_spec(["region", "day(ts)", "truncate(10, n)"]))
    schema = {
        "type": "struct",
        "fields": [
            {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
            {"name": "region", "type": "string", "nullable": True, "metadata": {}},
            {"name": "n", "type": "long", "nullable": True, "metadata": {}},
        ],
    }
    full = layout.with_generated(schema)
    assert [(f["name"], f["type"], f["metadata"].get(GENERATION)) for f in full["fields"][3:]] == [
        ("ts_day", "date", "CAST(`ts` AS DATE)"),
        ("n_trunc", "long", "`n` - pmod(`n`, 10)"),
    ]
    assert layout.strip(full) == schema
    assert layout.columns == ["region", "ts_day", "n_trunc"]
    assert layout.mismatch(["region", "ts_day", "n_trunc"], full) is None
    assert "not (region, ts_day, n_trunc)" in (layout.mismatch(["region"], full) or "")
    retyped = {**full, "fields": [*full["fields"][:3], {**full["fields"][3], "metadata": {GENERATION: "YEAR(ts)"}}]}
    assert "ts_day = 'YEAR(ts)'" in (layout.mismatch(layout.columns, retyped) or "")
    assert spec_problem(layout.fields, {"ts": "string", "region": "string", "n": "long"}) == (
        "partition_by day(ts): the column 'ts' is string, which day does not take"
    )
    assert "which the table's files do not have" in (spec_problem(layout.fields, {"ts": "timestamp"}) or "")


def test_only_text_partition_values_are_guarded_for_nul_and_a_pinned_one_holding_it_is_refused() -> None:
    layout = DeltaPartitioning(parse_spec(["region", "truncate(2, page)", "truncate(10, n)", "bucket(4, page)"]))
    types = {"region": "string", "page": "string", "n": "long"}
    assert [(f.name, sql) for f, sql in layout.text_values(types)] == [
        ("region", "`region`"),
        ("page_trunc", "SUBSTRING(`page`, 1, 2)"),
    ]
    assert layout.text_values({**types, "region": "long"})[0][0].name == "page_trunc"
    path_guard.check_values("s3://b/t-0-0", {"region": "eu", "page_trunc": None, "n_trunc": "10"})
    with pytest.raises(DataFileError, match=r"s3://b/t-0-0: .*partition page_trunc has a NUL character"):
        path_guard.check_values("s3://b/t-0-0", {"region": "eu", "page_trunc": "\x00a"})
    assert path_guard.tripped(RuntimeError(f"Job aborted: [USER_RAISED_EXCEPTION] {path_guard.MARK}page_trunc"))
    assert not path_guard.tripped(RuntimeError("Job aborted: [TASK_WRITE_FAILED]"))


def test_an_iceberg_files_partition_values_are_what_withpartitionvalues_parses() -> None:
    """Iceberg's partition values as text: a day as its date, hours/months/years as integers since
    1970 (what ``Conversions.fromPartitionString`` reads for the transforms' result types)."""
    fields = parse_spec(["day(ts)", "hour(ts2)", "month(d)", "year(d2)", "region", "truncate(3, s)"])
    spec = IcebergPartitioning(fields, tuple(f.name for f in fields))
    at = datetime(2026, 11, 27, 13, 5, tzinfo=UTC)
    pins = [
        Pin(time_value(Transform.DAY, at)),
        Pin(time_value(Transform.HOUR, at)),
        Pin(time_value(Transform.MONTH, at)),
        Pin(time_value(Transform.YEAR, at)),
        Pin(None),
        Pin("abc"),
    ]
    assert spec.values(pins) == ["2026-11-27", str(20784 * 24 + 13), str(56 * 12 + 10), "56", HIVE_NULL, "abc"]
    assert spec.values([Pin(7, hashed_by_format=True), *pins[1:]]) is None
    assert spec.split_columns("lake")[:2] == [
        (
            "__lakegate_part_0",
            "CONCAT('v', REPLACE(REPLACE(CAST(lake.system.days(`ts`) AS STRING), '~', '~~'), CHAR(0), '~0'))",
        ),
        (
            "__lakegate_part_1",
            "CONCAT('v', REPLACE(REPLACE(CAST(lake.system.hours(`ts2`) AS STRING), '~', '~~'), CHAR(0), '~0'))",
        ),
    ]
    assert spec.split_columns("lake")[4] == (
        "__lakegate_part_4",
        "CONCAT('v', REPLACE(REPLACE(CAST(`region` AS STRING), '~', '~~'), CHAR(0), '~0'))",
    )
    assert [partition_text(t) for t in ("v", "v2026-11-27", "vv", HIVE_NULL)] == ["", "2026-11-27", "v", HIVE_NULL]


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("1970-01-01 00:00:00", 0),
        ("2026-12-31 23:59:00", 1_798_761_540_000_000),
        ("2026-12-31 23:59:00.000001", 1_798_761_540_000_001),
        ("1969-12-31 23:59:59.5", -500_000),
        ("2026-12-31T23:59:00+01:00", 1_798_757_940_000_000),
    ],
)
def test_a_timestamp_partition_value_is_read_as_microseconds_since_the_epoch(text: str, micros: int) -> None:
    """What an identity partition of a timestamp holds in Iceberg, from Spark's text of it (UTC)."""
    assert timestamp_micros(text) == micros


def test_only_the_partitions_an_upsert_key_decides_narrow_a_merge() -> None:
    fields = parse_spec(["bucket(8, id)", "day(ts)", "region", "truncate(10, n)"])
    delta = DeltaPartitioning(fields).key_parts(("id", "region", "n"), {"id": "long", "ts": "timestamp", "n": "long"})
    assert [(p.on_table, p.of_key) for p in delta] == [
        ("`id_bucket`", "pmod(hash(`id`), 8)"),  # Delta prunes by its generated column
        ("`region`", "`region`"),
        ("`n_trunc`", "`n` - pmod(`n`, 10)"),
    ]
    iceberg = IcebergPartitioning(fields, ("id_bucket", "ts_day", "region", "n_trunc")).key_parts("cat", ("id",))
    assert [(p.on_table, p.of_key) for p in iceberg] == [("cat.system.bucket(8, `id`)",) * 2]
    assert DeltaPartitioning(fields).key_parts(("uid",), {}) == []  # day(ts) alone: every partition is read


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (7, "7"),
        (-(2**40), "-1099511627776"),
        (True, "TRUE"),
        ("it's a \\ path", "'it\\'s a \\\\ path'"),
        (date(2026, 11, 28), "DATE'2026-11-28'"),
        (datetime(2026, 11, 28, 9, tzinfo=UTC), None),  # held in Python's zone: read whole instead
        (1.5, None),
    ],
)
def test_partition_values_are_written_as_spark_sql_literals_or_not_at_all(value: object, literal: str | None) -> None:
    assert sql_literal(value) == literal


@given(st.text())
def test_a_split_value_s_escapes_come_off_whatever_it_holds(value: str) -> None:
    """What ``marked``'s SQL makes of a value (NUL as ``~0``, ``~`` as ``~~``: a NUL cannot be in a
    directory's name) is the value again after ``partition_text``."""
    written = MARK + value.replace(ESCAPE, ESCAPE * 2).replace("\0", ESCAPE + "0")
    assert "\0" not in written and partition_text(written) == value
