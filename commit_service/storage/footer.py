"""What a Parquet footer says that a commit needs: Delta statistics, the offsets it covers, the
string columns that hold no value, and its schema's key and columns.

Called by :meth:`commit_service.storage.reader.StorageReader.facts` for every Parquet file a
manifest brings (on the read-ahead's threads, 10,000 files per round at scale). What depends only
on a footer's schema (which columns get bounds, which are string leaves, the Arrow schema's text)
is worked out once per distinct schema (:class:`FooterLayout`, remembered by :func:`layout_of`):
the files of one sink share a handful of schemas, and that work was half of a file's cost.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from commit_service.domain.coverage import Coverage, from_statistics

MAX_STAT_STRING = 32  # longer strings get no min/max (never a wrong bound)
MAX_LAYOUTS = 1024  # distinct footer schemas remembered; past it the memory starts over
ARROW_SCHEMA_KEY = b"ARROW:schema"  # the Arrow schema a writer stored, which to_arrow_schema follows
FLOATING = ("FLOAT", "DOUBLE")
# Writers whose float bounds count a NaN (as the largest value, which then gives no bound): the
# others (parquet-cpp, so pyarrow) leave NaN out of min/max, and a file holding a NaN whose max says
# 2.0 would be skipped by a query for x > 3, which Spark answers with the NaN row (Delta itself
# drops those writers' float bounds: delta-io/delta#7101)
NAN_AWARE_WRITERS = ("parquet-mr", "parquet-java")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class FooterLayout:
    """What one footer schema says, the same for every file of that schema."""

    schema_key: str  # the Arrow schema as text: files sharing it share a schema
    columns: tuple[tuple[str, bool], ...]  # each top-level column and whether it is a struct
    # (leaf index, name, floating) of top-level simple columns: min/max/nulls
    bounded: tuple[tuple[int, str, bool], ...]
    string_leaves: tuple[tuple[int, str], ...]  # (leaf index, dotted path) of strings outside lists/maps


@dataclass(frozen=True)
class FooterFacts:
    """What one file's footer says (see the module docstring)."""

    layout: FooterLayout
    num_rows: int
    stats_json: str  # Delta AddFile stats (numRecords, minValues, maxValues, nullCount)
    coverage: Coverage | None  # the sink's envelope: the offsets its ``offset`` column bounds
    null_strings: tuple[str, ...]
    # top-level timestamp columns' exact bounds (microseconds since the epoch, UTC; a timestamp
    # without a zone read as UTC; the stats hold only UTC ones, in milliseconds): where a
    # partitioned table's file lies
    times: tuple[tuple[str, int, int], ...] = ()


_layouts: dict[tuple[str, bytes | None], FooterLayout] = {}
_layouts_lock = threading.Lock()
# the schema (and stored Arrow schema) of the last layout looked up, and the layout: the files a
# table reads ahead mostly share one schema, which one comparison of schemas (1.7 us) tells,
# where the schema's text that keys ``_layouts`` takes 4 us to make
_last: tuple[pq.ParquetSchema, bytes | None, FooterLayout] | None = None


def layout_of(meta: pq.FileMetaData) -> FooterLayout:
    """The layout of ``meta``'s schema, worked out on its first file and remembered."""
    global _last
    schema = meta.schema
    stored = meta.metadata.get(ARROW_SCHEMA_KEY) if meta.metadata else None
    last = _last  # one read: another thread may set it meanwhile
    if last is not None and last[1] == stored and schema.equals(last[0]):
        return last[2]
    text = str(schema)
    key = (text[text.find("\n") + 1 :], stored)  # the first line names the object's address
    found = _layouts.get(key)
    if found is None:
        found = _layout(meta)
        with _layouts_lock:
            if len(_layouts) >= MAX_LAYOUTS:
                _layouts.clear()
            _layouts[key] = found
    _last = (schema, stored, found)
    return found


def _layout(meta: pq.FileMetaData) -> FooterLayout:
    schema = meta.schema
    arrow = schema.to_arrow_schema()
    bounded = []
    strings = []
    for col in range(meta.num_columns):
        column = schema.column(col)
        path = column.path.split(".")
        if len(path) == 1 and not arrow.field(path[0]).type.num_fields:  # nested/list: nulls only below
            bounded.append((col, path[0], column.physical_type in FLOATING))
        if not column.max_repetition_level and column.logical_type.type == "STRING":
            strings.append((col, column.path))
    return FooterLayout(
        arrow.to_string(show_schema_metadata=False),
        tuple((f.name, pa.types.is_struct(f.type)) for f in arrow),
        tuple(bounded),
        tuple(strings),
    )


def footer_facts(meta: pq.FileMetaData) -> FooterFacts:
    """Everything the commit needs from one footer."""
    layout = layout_of(meta)
    rows = meta.num_rows
    groups = [meta.row_group(rg) for rg in range(meta.num_row_groups)]
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    counted: dict[int, int] = {}  # leaf index -> its nulls, summed once for the bounds and the voids
    nan_aware = (meta.created_by or "").startswith(NAN_AWARE_WRITERS)
    times = []
    for col, name, floating in layout.bounded:
        if floating and not nan_aware:  # its bounds would be left out: only its nulls are counted
            counted_nulls = _null_count(groups, col)
            if counted_nulls is not None:
                nulls[name] = counted[col] = counted_nulls
            continue
        bound = _column_bounds(groups, col)
        if bound is None:
            continue
        null_count, raw_lo, raw_hi = bound
        nulls[name] = counted[col] = null_count
        lo, hi = _json_bound(raw_lo), _json_bound(raw_hi)
        if lo is not None and hi is not None:
            mins[name], maxs[name] = lo, hi
        elif isinstance(raw_lo, datetime) and isinstance(raw_hi, datetime):
            low_us, high_us = _micros(raw_lo), _micros(raw_hi)
            times.append((name, low_us, high_us))
            if raw_lo.tzinfo is not None:  # a UTC instant (Spark's timestamp): Delta's stats hold it
                mins[name], maxs[name] = _stat_time(low_us // 1000), _stat_time(high_us // 1000 + 1)
    stats = json.dumps({"numRecords": rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})
    exact = {name: (low, maxs[name]) for name, low in mins.items() if nulls.get(name) == 0}
    covered = from_statistics([name for name, _ in layout.columns], exact, rows)
    empty = tuple(
        path
        for col, path in layout.string_leaves
        if (counted[col] if col in counted else _null_count(groups, col)) == rows
    )
    return FooterFacts(layout, rows, stats, covered, empty, tuple(times))


def _column_bounds(groups: list[Any], col: int) -> tuple[int, Any, Any] | None:
    """A simple column's null count and bounds over the row groups, as the footer gives them
    (bounds None when any group has values without bounds); None when any group lacks statistics."""
    if len(groups) == 1:  # most files: one group, its statistics as they are
        st = groups[0].column(col).statistics
        if st is None or not st.has_null_count:
            return None
        return (st.null_count, st.min, st.max) if st.has_min_max else (st.null_count, None, None)
    lo = hi = None
    null_count, bounded = 0, True
    for group in groups:
        st = group.column(col).statistics
        if st is None or not st.has_null_count:
            return None
        null_count += st.null_count
        if st.has_min_max:
            lo = st.min if lo is None else min(lo, st.min)
            hi = st.max if hi is None else max(hi, st.max)
        elif st.null_count < group.num_rows:  # values without bounds: no bound is exact
            bounded = False
    if not bounded:
        return null_count, None, None
    return null_count, lo, hi


def _null_count(groups: list[Any], col: int) -> int | None:
    """A leaf's nulls over the row groups; None when any group's statistics do not count them."""
    total = 0
    for group in groups:
        st = group.column(col).statistics
        if st is None or not st.has_null_count:
            return None
        total += st.null_count
    return total


def _micros(value: datetime) -> int:
    """A footer's timestamp bound as microseconds since the epoch (a zone-less one read as UTC;
    a nanosecond bound rounded down, which keeps it in the same hour and day)."""
    at = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (at - EPOCH) // MICROSECOND


def _stat_time(millis: int) -> str:
    """A timestamp bound as Delta's stats write it: UTC, in milliseconds. The protocol truncates
    both bounds to the millisecond and readers widen the max by one; Lakegate writes the max one
    millisecond up instead (never below a value, even for a nanosecond bound rounded down), so
    a reader that does not widen it skips no file it needs."""
    at = EPOCH + timedelta(milliseconds=millis)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _json_bound(value: Any) -> Any:
    """A bound as Delta's stats write it, or None when it cannot be written exactly (see also
    :data:`NAN_AWARE_WRITERS`): a NaN, an infinity or a string longer than 32 characters gives none."""
    if isinstance(value, bool) or value is None:
        return None  # Delta keeps no min/max for booleans
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, str):
        return value if len(value) <= MAX_STAT_STRING else None
    if isinstance(value, date) and type(value) is date:
        return value.isoformat()
    return None  # timestamps (see _stat_time), decimals, bytes: left out rather than risk a wrong bound
