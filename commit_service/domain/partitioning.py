"""A table's partition spec (``tables[].partition_by``): transforms over top-level columns, and
where a file's rows fall by its footer's bounds.

Pure: no I/O, no Spark. The transforms are Iceberg's (its spec, "Partition Transforms"), in UTC:

- ``col``: identity; ``year(col)``, ``month(col)``, ``day(col)``, ``hour(col)`` of a timestamp or
  a date: years, months, days or hours since 1970-01-01 (a day is a date);
- ``bucket(N, col)``: a hash of the value modulo N (computed by the table format, never here);
- ``truncate(W, col)``: an integer rounded down to a multiple of W, a string's first W characters.

A file is added where it lies only when its bounds put every row in one partition
(:func:`pinned`); otherwise its rows are rewritten, split by partition.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from enum import Enum

EPOCH = date(1970, 1, 1)
TEXT = re.compile(
    r"^\s*(?:(?P<fn>[a-z]+)\s*\(\s*(?:(?P<width>\d+)\s*,\s*)?(?P<arg>[A-Za-z_]\w*)\s*\)|(?P<col>[A-Za-z_]\w*))\s*$"
)


class Transform(str, Enum):
    IDENTITY = "identity"
    YEAR = "year"
    MONTH = "month"
    DAY = "day"
    HOUR = "hour"
    BUCKET = "bucket"
    TRUNCATE = "truncate"


TIME = (Transform.YEAR, Transform.MONTH, Transform.DAY, Transform.HOUR)
TIMESTAMPS = ("timestamp", "timestamp_ntz")  # Spark's type names
INTEGERS = ("byte", "short", "integer", "long")
WIDTHS = (Transform.BUCKET, Transform.TRUNCATE)
SUFFIX = {Transform.BUCKET: "bucket", Transform.TRUNCATE: "trunc"}


class PartitionSpecError(ValueError):
    """``partition_by`` names a transform or column that cannot be (the config refuses it)."""


@dataclass(frozen=True)
class PartitionField:
    """One entry of ``partition_by``."""

    transform: Transform
    column: str
    width: int | None = None  # bucket's N, truncate's W

    @property
    def name(self) -> str:
        """The partition's column: the source column itself for ``identity``, else
        ``<column>_<transform>`` (Iceberg's own default names: ``ts_day``, ``id_bucket``, ``s_trunc``)."""
        if self.transform is Transform.IDENTITY:
            return self.column
        return f"{self.column}_{SUFFIX.get(self.transform, self.transform.value)}"

    def __str__(self) -> str:
        if self.transform is Transform.IDENTITY:
            return self.column
        if self.width is not None:
            return f"{self.transform.value}({self.width}, {self.column})"
        return f"{self.transform.value}({self.column})"


def parse_field(text: str) -> PartitionField:
    """One ``partition_by`` entry: ``col``, ``day(col)``, ``bucket(16, col)``, ..."""
    m = TEXT.match(text)
    if m is None:
        raise PartitionSpecError(
            f"{text!r} is not a partition transform: write col, year(col), month(col), day(col), hour(col), "
            "bucket(N, col) or truncate(W, col) over a top-level column"
        )
    if m["col"]:
        return PartitionField(Transform.IDENTITY, m["col"])
    try:
        transform = Transform(m["fn"])
    except ValueError:
        raise PartitionSpecError(
            f"{text!r}: no transform {m['fn']!r} (year, month, day, hour, bucket, truncate)"
        ) from None
    if transform is Transform.IDENTITY:
        raise PartitionSpecError(f"{text!r}: an identity partition is written as the column alone")
    width = int(m["width"]) if m["width"] is not None else None
    if transform in WIDTHS and (width is None or width < 1):
        raise PartitionSpecError(
            f"{text!r}: {transform.value} takes a positive width first, e.g. {transform.value}(16, {m['arg']})"
        )
    if transform not in WIDTHS and width is not None:
        raise PartitionSpecError(f"{text!r}: {transform.value} takes the column alone")
    return PartitionField(transform, m["arg"], width)


def parse_spec(texts: Sequence[str]) -> tuple[PartitionField, ...]:
    """The whole ``partition_by``: each entry parsed; no partition named twice and at most one
    time transform per column (Iceberg refuses ``day(ts)`` beside ``hour(ts)``: one implies the other)."""
    fields = tuple(parse_field(t) for t in texts)
    names = [f.name for f in fields]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PartitionSpecError(f"the partitions {twice} are named twice")
    timed = [f.column for f in fields if f.transform in TIME]
    again = sorted({c for c in timed if timed.count(c) > 1})
    if again:
        raise PartitionSpecError(f"more than one of year/month/day/hour of {again}: keep the finest one")
    return fields


def time_value(transform: Transform, value: datetime | date) -> int:
    """Iceberg's year, month, day or hour of ``value`` (a timestamp in UTC, or a date): whole
    units since 1970-01-01, rounded down (before 1970 they are negative)."""
    if isinstance(value, datetime):
        at = value.astimezone(UTC) if value.tzinfo is not None else value  # naive: already UTC
        day = at.date()
    else:
        at, day = None, value
    if transform is Transform.YEAR:
        return day.year - 1970
    if transform is Transform.MONTH:
        return (day.year - 1970) * 12 + day.month - 1
    days = (day - EPOCH).days
    if transform is Transform.DAY:
        return days
    if transform is Transform.HOUR:
        if at is None:
            raise PartitionSpecError("hour(col) needs a timestamp column, not a date")
        return days * 24 + at.hour
    raise PartitionSpecError(f"{transform.value} is not a time transform")


def truncated(width: int, value: int | str) -> int | str:
    """``truncate(width, ...)`` of an integer (down to a multiple of ``width``, toward minus
    infinity as Iceberg's spec says) or a string (its first ``width`` characters)."""
    if isinstance(value, str):
        return value[:width]
    return value - value % width  # Python's % is the floor modulus: -7 -> -10 for width 5


Bound = int | str | date | datetime


def value_of(field: PartitionField, value: Bound) -> Bound:
    """The partition value of one (non-null) source value, for the transforms computed here."""
    if field.transform is Transform.IDENTITY:
        return value
    if field.transform in TIME:
        if not isinstance(value, (date, datetime)):
            raise PartitionSpecError(f"{field}: {field.column} holds {type(value).__name__}, not a timestamp or date")
        return time_value(field.transform, value)
    if field.transform is Transform.TRUNCATE:
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            raise PartitionSpecError(f"{field}: {field.column} holds {type(value).__name__}, not an integer or string")
        assert field.width is not None
        return truncated(field.width, value)
    raise PartitionSpecError(f"{field}: computed by the table format")


@dataclass(frozen=True)
class Pin:
    """The one partition of ``field`` every row of a file falls in: ``value`` the partition's value
    (None: the null partition), or for ``bucket`` the one source value, hashed by the table format."""

    value: Bound | None
    hashed_by_format: bool = False


def pinned(field: PartitionField, low: Bound | None, high: Bound | None, nulls: int, rows: int) -> Pin | None:
    """The partition of ``field`` every row of a file falls in, by its footer's exact bounds of
    ``field.column`` (``low``..``high``, ``nulls`` of its ``rows`` null); None when its rows may
    fall in more than one, or the bounds are unknown: the file is then rewritten, split by partition."""
    if rows == 0:
        return None
    if nulls == rows:
        return Pin(None)
    if nulls or low is None or high is None:
        return None
    if field.transform is Transform.BUCKET:
        return Pin(low, hashed_by_format=True) if low == high else None
    lo, hi = value_of(field, low), value_of(field, high)
    return Pin(lo) if lo == hi else None


@dataclass(frozen=True)
class ColumnBounds:
    """A file's exact footer bounds of one column (``low``..``high``, None when unknown) and how
    many of its ``rows`` are null there."""

    low: Bound | None
    high: Bound | None
    nulls: int


def file_pins(fields: Sequence[PartitionField], bounds: dict[str, ColumnBounds], rows: int) -> tuple[Pin, ...] | None:
    """The one partition (a :class:`Pin` per field) every row of a file falls in, by its footer's
    bounds of each field's column; None when its rows may fall in more than one, or a column's
    bounds are unknown: the file is then rewritten, split by partition."""
    pins = []
    for f in fields:
        b = bounds.get(f.column)
        if b is None:
            return None
        try:
            pin = pinned(f, b.low, b.high, b.nulls, rows)
        except PartitionSpecError:  # a bound of a type the transform does not take: Spark says what is wrong
            return None
        if pin is None:
            return None
        pins.append(pin)
    return tuple(pins)


def takes(field: PartitionField, spark_type: str) -> bool:
    """Whether ``field``'s transform takes a column of Spark type ``spark_type``."""
    if field.transform is Transform.HOUR:
        return spark_type in TIMESTAMPS
    if field.transform in TIME:
        return spark_type in TIMESTAMPS or spark_type == "date"
    if field.transform is Transform.TRUNCATE:
        return spark_type == "string" or spark_type in INTEGERS
    return True


def spec_problem(fields: Sequence[PartitionField], types: dict[str, str]) -> str | None:
    """Why columns of these Spark ``types`` (top-level name -> type) cannot be partitioned by
    ``fields``, or None."""
    for f in fields:
        kind = types.get(f.column)
        if kind is None:
            return f"partition_by {f} names the column {f.column!r}, which the table's files do not have"
        if not takes(f, kind):
            return f"partition_by {f}: the column {f.column!r} is {kind}, which {f.transform.value} does not take"
    return None


@dataclass(frozen=True)
class KeyPartition:
    """A partition value a row's key decides (its transform's source is a key column), so an upsert
    round's changed keys name the only partitions their old rows can be in: the value as SQL over
    a table's row (what its reader prunes by), and as SQL over a changed key's columns."""

    on_table: str  # e.g. Delta's generated column `id_bucket`, or Iceberg's `cat.system.bucket(8, `id`)`
    of_key: str  # the same value from the key's columns, e.g. `pmod(hash(`id`), 8)`


def key_fields(fields: Sequence[PartitionField], key: Sequence[str]) -> list[PartitionField]:
    """The partition fields whose source column is one of the upsert ``key``'s columns."""
    return [f for f in fields if f.column in key]
