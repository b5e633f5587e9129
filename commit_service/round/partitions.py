"""Where each file of a round lies in a partitioned table: the one partition its footer's bounds
put all its rows in, or none (the file is then rewritten, split by partition by Spark); and which
partitions an upsert round's changed keys can be in (:func:`key_scope`).

Called by a format's append writer (:class:`~commit_service.delta.append.AppendWriter`) for every
Parquet file that would be added in place; the transforms and the pinning are
:mod:`commit_service.domain.partitioning`'s, the bounds the footer facts read ahead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from commit_service.domain.partitioning import (
    INTEGERS,
    TIMESTAMPS,
    Bound,
    ColumnBounds,
    KeyPartition,
    PartitionField,
    Pin,
    file_pins,
    spec_problem,
)
from commit_service.domain.plan import PendingFile
from commit_service.errors import SchemaMismatchError, TableLayoutError
from commit_service.storage.facts import FileFacts

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# An upsert round narrows its read of the table to its keys' partitions when they are at most this many
# per partition field (a bucket's N, a day per changed key's day...); more are read whole.
SCOPE_VALUES = 1_000


def column_types(schema: dict[str, Any]) -> dict[str, str]:
    """Each top-level column's Spark type name (``struct`` and the other nested types by their kind)."""
    return {f["name"]: f["type"] if isinstance(f["type"], str) else f["type"]["type"] for f in schema["fields"]}


def column_bounds(facts: FileFacts, types: Mapping[str, str], wanted: Sequence[str]) -> dict[str, ColumnBounds]:
    """The exact bounds of the ``wanted`` columns in one file's footer facts, typed by the table's
    Spark ``types`` (timestamps from the facts' microseconds, dates from Delta's ISO stats); a
    column without exact bounds is left out."""
    stats = json.loads(facts.stats_json) if facts.stats_json else {}
    mins, maxs, nulls = stats.get("minValues", {}), stats.get("maxValues", {}), stats.get("nullCount", {})
    times = {name: (lo, hi) for name, lo, hi in facts.times}
    out = {}
    for column in wanted:
        kind = types.get(column)
        if column not in nulls or kind is None:
            continue
        low: Bound | None
        high: Bound | None
        if kind in TIMESTAMPS:
            lo_us, hi_us = times.get(column, (None, None))
            low = None if lo_us is None else EPOCH + timedelta(microseconds=lo_us)
            high = None if hi_us is None else EPOCH + timedelta(microseconds=hi_us)
        elif kind == "date":
            low, high = _date(mins.get(column)), _date(maxs.get(column))
        elif kind == "string" or kind in INTEGERS:
            low, high = mins.get(column), maxs.get(column)
        else:
            continue
        out[column] = ColumnBounds(low, high, int(nulls[column]))
    return out


def pins_of(fields: Sequence[PartitionField], facts: FileFacts, types: Mapping[str, str]) -> tuple[Pin, ...] | None:
    """The partition every row of a file lies in (a pin per field), or None: split it."""
    if facts.num_records is None:
        return None
    bounds = column_bounds(facts, types, [f.column for f in fields])
    return file_pins(fields, bounds, facts.num_records)


def _date(value: Any) -> date | None:
    return date.fromisoformat(value) if isinstance(value, str) else None


def missing_column(
    fields: Sequence[PartitionField], files: Sequence[PendingFile], shapes: Mapping[str, dict[str, Any]]
) -> tuple[str, PartitionField] | None:
    """The first file (its path) lacking a partition's source column, and that partition; None when
    every file holds every one."""
    for p in files:
        held = {f["name"] for f in shapes[p.file.path]["fields"]}
        for f in fields:
            if f.column not in held:
                return p.file.path, f
    return None


def check_partitionable(
    table: str,
    fields: Sequence[PartitionField],
    files: Sequence[PendingFile],
    shapes: Mapping[str, dict[str, Any]],
    types: dict[str, str],
) -> None:
    """Every file holds each partition's source column (else that file is refused:
    :class:`SchemaMismatchError`), of a type its transform takes (else nothing commits:
    :class:`TableLayoutError`)."""
    lacking = missing_column(fields, files, shapes)
    if lacking is not None:
        path, f = lacking
        raise SchemaMismatchError(path, f"has no column {f.column!r}, which table {table}'s partition {f} needs")
    _check_types(table, fields, types)


def key_scope(keys: Any, parts: Sequence[KeyPartition], limit: int = SCOPE_VALUES) -> tuple[str, str] | None:
    """The filter (Spark SQL) keeping only the table's partitions that an upsert round's changed
    ``keys`` (a frame of their columns) can be in, and what it keeps in words: one ``IN`` per part
    (with ``OR IS NULL`` for a null value), joined by AND. SQL text, as both a DataFrame and
    Delta's ``filterFiles`` take it. None when no part narrows the table (none given, or each with
    more than ``limit`` distinct values, or of a type written here as no literal: the whole table
    is then read)."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's own idiom)

    clauses, text = [], []
    for part in parts:
        values = [r[0] for r in keys.select(F.expr(part.of_key)).distinct().limit(limit + 1).collect()]
        written = [sql_literal(v) for v in values if v is not None]
        literals = sorted(w for w in written if w is not None)
        if len(values) > limit or len(literals) < len(written):
            continue
        one = f"{part.on_table} IN ({', '.join(literals)})" if literals else "FALSE"
        if len(literals) < len(values):
            one = f"({one} OR {part.on_table} IS NULL)"
        clauses.append(one)
        text.append(f"{part.on_table} in {len(values)} value{'s' if len(values) != 1 else ''}")
    return (" AND ".join(clauses), " and ".join(text)) if clauses else None


def sql_literal(value: Any) -> str | None:
    """``value`` as a Spark SQL literal, or None for a type not written here (a float's, a
    timestamp's: Python holds them inexactly or in its local zone; their partitions are read whole)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, date) and not isinstance(value, datetime):
        return f"DATE'{value.isoformat()}'"
    return None


def check_round_columns(table: str, fields: Sequence[PartitionField], schema: dict[str, Any]) -> None:
    """An upsert round's rows (their ``schema``) hold each partition's source column, of a type its
    transform takes; else nothing commits (:class:`TableLayoutError`)."""
    _check_types(table, fields, column_types(schema))


def _check_types(table: str, fields: Sequence[PartitionField], types: dict[str, str]) -> None:
    problem = spec_problem(fields, types)
    if problem is not None:
        raise TableLayoutError(f"table {table}: {problem}; nothing was committed")
