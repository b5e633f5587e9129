"""``partition_by`` parsed as Iceberg's transforms, and a file's partition pinned by its bounds.

The time and truncate values are checked against pyiceberg's own transforms (an implementation
other than Lakegate's) over random instants before and after 1970, at hour and day edges."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyiceberg.transforms import DayTransform, HourTransform, MonthTransform, TruncateTransform, YearTransform
from pyiceberg.types import DateType, LongType, StringType, TimestamptzType

from commit_service.domain.partitioning import (
    PartitionField,
    PartitionSpecError,
    Pin,
    Transform,
    parse_field,
    parse_spec,
    pinned,
    time_value,
    truncated,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PYICEBERG = {
    Transform.YEAR: YearTransform(),
    Transform.MONTH: MonthTransform(),
    Transform.DAY: DayTransform(),
    Transform.HOUR: HourTransform(),
}
INSTANTS = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC))


@pytest.mark.parametrize(
    ("text", "field", "name"),
    [
        ("region", PartitionField(Transform.IDENTITY, "region"), "region"),
        ("day(ts)", PartitionField(Transform.DAY, "ts"), "ts_day"),
        (" hour( _kafka_timestamp ) ", PartitionField(Transform.HOUR, "_kafka_timestamp"), "_kafka_timestamp_hour"),
        ("year(d)", PartitionField(Transform.YEAR, "d"), "d_year"),
        ("month(d)", PartitionField(Transform.MONTH, "d"), "d_month"),
        ("bucket(16, id)", PartitionField(Transform.BUCKET, "id", 16), "id_bucket"),
        ("truncate(4,name)", PartitionField(Transform.TRUNCATE, "name", 4), "name_trunc"),
    ],
)
def test_each_transform_is_read_named_and_written_back(text: str, field: PartitionField, name: str) -> None:
    assert parse_field(text) == field
    assert field.name == name
    assert parse_field(str(field)) == field


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("days(ts)", "no transform 'days'"),
        ("bucket(id)", "takes a positive width"),
        ("bucket(0, id)", "takes a positive width"),
        ("day(3, ts)", "takes the column alone"),
        ("identity(x)", "written as the column alone"),
        ("a.b", "not a partition transform"),
        ("day(ts", "not a partition transform"),
        ("", "not a partition transform"),
    ],
)
def test_a_bad_entry_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(PartitionSpecError, match=says.replace("(", r"\(")):
        parse_field(text)


def test_a_spec_names_each_partition_once_and_one_time_transform_per_column() -> None:
    assert [f.name for f in parse_spec(["day(ts)", "bucket(8, id)", "region"])] == ["ts_day", "id_bucket", "region"]
    with pytest.raises(PartitionSpecError, match="named twice"):
        parse_spec(["region", "region"])
    with pytest.raises(PartitionSpecError, match=r"more than one of year/month/day/hour of \['ts'\]"):
        parse_spec(["day(ts)", "hour(ts)"])


@given(INSTANTS)
def test_time_transforms_of_a_timestamp_equal_icebergs(at: datetime) -> None:
    micros = (at - EPOCH) // timedelta(microseconds=1)
    for transform, theirs in PYICEBERG.items():
        assert time_value(transform, at) == theirs.transform(TimestamptzType())(micros), (transform, at)


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2200, 1, 1)))
def test_time_transforms_of_a_date_equal_icebergs(day: date) -> None:
    days = (day - date(1970, 1, 1)).days
    for transform in (Transform.YEAR, Transform.MONTH, Transform.DAY):
        assert time_value(transform, day) == PYICEBERG[transform].transform(DateType())(days), (transform, day)
    with pytest.raises(PartitionSpecError, match="needs a timestamp"):
        time_value(Transform.HOUR, day)


def test_a_timestamp_with_an_offset_is_partitioned_in_utc() -> None:
    late = datetime(2026, 11, 27, 23, 30, tzinfo=UTC)
    east = late.astimezone(datetime.fromisoformat("2026-11-28T01:30:00+02:00").tzinfo)
    assert east.date() == date(2026, 11, 28)
    assert (
        time_value(Transform.DAY, east)
        == time_value(Transform.DAY, late)
        == (date(2026, 11, 27) - date(1970, 1, 1)).days
    )


@given(st.integers(min_value=-(2**40), max_value=2**40), st.integers(min_value=1, max_value=1000))
def test_truncate_of_an_integer_equals_icebergs(value: int, width: int) -> None:
    assert truncated(width, value) == TruncateTransform(width).transform(LongType())(value)


@given(st.text(max_size=20), st.integers(min_value=1, max_value=10))
def test_truncate_of_a_string_equals_icebergs(value: str, width: int) -> None:
    assert truncated(width, value) == TruncateTransform(width).transform(StringType())(value)


def test_a_file_is_pinned_only_when_its_bounds_fall_in_one_partition() -> None:
    day = PartitionField(Transform.DAY, "ts")
    midnight = datetime(2026, 11, 28, tzinfo=UTC)
    before, after = midnight - timedelta(microseconds=1), midnight + timedelta(hours=23)
    assert pinned(day, midnight, after, nulls=0, rows=10) == Pin(time_value(Transform.DAY, midnight))
    assert pinned(day, before, after, nulls=0, rows=10) is None, "a flush across midnight spans two days"
    assert pinned(day, None, None, nulls=10, rows=10) == Pin(None), "every row null: the null partition"
    assert pinned(day, midnight, after, nulls=1, rows=10) is None, "some null: two partitions"
    assert pinned(day, None, None, nulls=0, rows=10) is None, "bounds unknown"
    assert pinned(day, None, None, nulls=0, rows=0) is None
    bucket = PartitionField(Transform.BUCKET, "id", 8)
    assert pinned(bucket, 7, 7, nulls=0, rows=3) == Pin(7, hashed_by_format=True)
    assert pinned(bucket, 7, 8, nulls=0, rows=3) is None
    trunc = PartitionField(Transform.TRUNCATE, "name", 2)
    assert pinned(trunc, "eu-north", "eu-west", nulls=0, rows=3) == Pin("eu")
    assert pinned(PartitionField(Transform.IDENTITY, "region"), "eu", "us", nulls=0, rows=3) is None
    with pytest.raises(PartitionSpecError, match="not a timestamp or date"):
        pinned(day, 1, 2, nulls=0, rows=2)
