"""An Iceberg table's partition spec in a round's terms.

Lakegate creates a table with ``partition_by``'s spec (Iceberg's transforms and its default field
names: ``ts_day``, ``id_bucket``, ``s_trunc``); an existing table is adopted with its own spec,
read afresh each round, so a spec evolved by others is followed. From the spec come a pinned
file's partition values (as ``DataFiles.Builder.withPartitionValues`` parses them: a day as its
ISO date, years, months and hours as integers since 1970, the null partition as Hive's marker) and
the columns a rewritten frame is split by, computed by Iceberg's own Spark functions
(``<catalog>.system.days(ts)``, ``bucket(16, id)``, ...), so Spark's split and Iceberg's
partition agree by construction.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from commit_service.domain.partitioning import EPOCH, KeyPartition, PartitionField, Pin, Transform, key_fields
from commit_service.errors import TableLayoutError
from commit_service.round.partitions import EPOCH as EPOCH_UTC
from commit_service.spark.jvm_classes import java_class, java_elements

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # the null partition, as Iceberg and Spark write it
SPLIT_COLUMN = "__lakegate_part_{}"  # a rewritten frame's i-th partition value (never in a file)
MARK = "v"  # before every split value: an empty string's directory is not the null partition's
# A NUL in a split value cannot be in a directory's name, and Spark's path escaping leaves it as it
# is: it is written as ``~0``, and ``~`` itself as ``~~`` (a value Spark's escaping leaves alone)
ESCAPE = "~"
FUNCTIONS = {
    Transform.YEAR: "years",
    Transform.MONTH: "months",
    Transform.DAY: "days",
    Transform.HOUR: "hours",
    Transform.BUCKET: "bucket",
    Transform.TRUNCATE: "truncate",
}
TRANSFORM_TEXT = re.compile(r"^(?P<name>[a-z]+)(?:\[(?P<width>\d+)\])?$")


class UnknownSpecError(ValueError):
    """The table's spec has a transform or a source column Lakegate cannot place files by."""


def build_spec(jvm: Any, schema: Any, fields: Sequence[PartitionField]) -> Any:
    """``partition_by``'s ``PartitionSpec`` over Iceberg ``schema`` (unpartitioned when empty)."""
    builder = java_class(jvm, "org.apache.iceberg.PartitionSpec").builderFor(schema)
    for f in fields:
        if f.transform is Transform.IDENTITY:
            builder = builder.identity(f.column)
        elif f.transform in (Transform.BUCKET, Transform.TRUNCATE):
            builder = getattr(builder, f.transform.value)(f.column, f.width)
        else:
            builder = getattr(builder, f.transform.value)(f.column)
    return builder.build()


@dataclass(frozen=True)
class IcebergPartitioning:
    """One table's spec: its fields (Lakegate's terms) and their names, in the spec's order."""

    fields: tuple[PartitionField, ...]
    names: tuple[str, ...]

    @classmethod
    def of(cls, table: Any) -> IcebergPartitioning:
        """The table's current spec (:class:`UnknownSpecError` for one Lakegate cannot place files by)."""
        schema = table.schema()
        fields, names = [], []
        for pf in java_elements(table.spec().fields()):
            text = str(pf.transform().toString())
            column = str(schema.findColumnName(pf.sourceId()))
            m = TRANSFORM_TEXT.match(text)
            transform = next((t for t in Transform if m is not None and t.value == m["name"]), None)
            if m is None or transform is None or "." in column:
                raise UnknownSpecError(f"{pf.name()} = {text}({column})")
            width = int(m["width"]) if m["width"] else None
            fields.append(PartitionField(transform, column, width))
            names.append(str(pf.name()))
        return cls(tuple(fields), tuple(names))

    def values(self, pins: Sequence[Pin]) -> list[str] | None:
        """A pinned file's partition values, or None when one is Iceberg's to compute (a bucket's
        hash, a timestamp's identity): the file is then rewritten."""
        out = []
        for f, pin in zip(self.fields, pins, strict=True):
            if pin.value is None:
                out.append(HIVE_NULL)
            elif pin.hashed_by_format or isinstance(pin.value, datetime):
                return None
            elif f.transform is Transform.DAY:
                out.append((EPOCH + timedelta(days=int(pin.value))).isoformat())  # type: ignore[arg-type]
            elif isinstance(pin.value, date):
                out.append(pin.value.isoformat())
            else:
                out.append(str(pin.value))
        return out

    def split_columns(self, catalog: str) -> list[tuple[str, str]]:
        """The (name, Spark SQL expression) of each partition value of a rewritten frame's rows, as
        text after a ``v`` (Spark writes an empty string's directory as the null partition's: the
        mark keeps ``''`` apart from null; :func:`partition_text` takes it off)."""
        return [(SPLIT_COLUMN.format(i), marked(_expression(f, catalog))) for i, f in enumerate(self.fields)]

    def key_parts(self, catalog: str, key: Sequence[str]) -> list[KeyPartition]:
        """The partition values an upsert ``key`` decides, by Iceberg's own functions (which its
        Spark scan pushes down to prune by), over a table's row and a key's columns alike."""
        return [KeyPartition(_expression(f, catalog), _expression(f, catalog)) for f in key_fields(self.fields, key)]


def timestamp_micros(text: str) -> int:
    """A timestamp partition value as Spark writes it as text in the service's UTC session
    (``2026-12-31 23:59:00.5``), as Iceberg holds it: microseconds since the epoch."""
    at = datetime.fromisoformat(text)
    return ((at if at.tzinfo else at.replace(tzinfo=UTC)) - EPOCH_UTC) // timedelta(microseconds=1)


def marked(expression: str) -> str:
    """A split column's SQL: ``expression``'s value as text after :data:`MARK` (null stays null)."""
    text = f"REPLACE(REPLACE(CAST({expression} AS STRING), '{ESCAPE}', '{ESCAPE}{ESCAPE}'), CHAR(0), '{ESCAPE}0')"
    return f"CONCAT('{MARK}', {text})"


def _expression(f: PartitionField, catalog: str) -> str:
    """Spark SQL computing ``f``'s partition value of a row, by Iceberg's functions in ``catalog``."""
    column = f"`{f.column}`"
    if f.transform is Transform.IDENTITY:
        return column
    if f.width is not None:
        return f"{catalog}.system.{FUNCTIONS[f.transform]}({f.width}, {column})"
    return f"{catalog}.system.{FUNCTIONS[f.transform]}({column})"


def spec_of(table: Any, name: str) -> IcebergPartitioning:
    """``table``'s current spec; one Lakegate cannot place files by is refused (nothing commits)."""
    try:
        return IcebergPartitioning.of(table)
    except UnknownSpecError as exc:
        raise TableLayoutError(
            f"table {name} is partitioned by {exc}, which Lakegate cannot place files by; nothing was committed"
        ) from None


def partition_text(directory_value: str) -> str:
    """A partition value as ``withPartitionValues`` reads it, from the (unescaped) directory name
    Spark gave a :meth:`IcebergPartitioning.split_columns` value."""
    if directory_value == HIVE_NULL:
        return HIVE_NULL
    return re.sub(f"{ESCAPE}(.)", lambda m: "\0" if m[1] == "0" else m[1], directory_value.removeprefix(MARK))
