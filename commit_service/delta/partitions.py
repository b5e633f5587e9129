"""A Delta table's partitioning from ``tables[].partition_by``: identity columns as partition
columns, every other transform as a generated partition column, so that Spark and delta-rs prune
by a filter on the source column (Delta's generated columns; the expressions Delta derives
partition filters from where it has one).

=====================  ========================================  =============================
``partition_by``       the generated column                      its partition value
=====================  ========================================  =============================
``col``                ``col`` itself (a partition column)       the value
``year(ts)``           ``ts_year INT = YEAR(ts)``                ``2026``
``month(ts)``          ``ts_month STRING = DATE_FORMAT(ts, 'yyyy-MM')``        ``2026-11``
``day(ts)``            ``ts_day DATE = CAST(ts AS DATE)``        ``2026-11-28``
``hour(ts)``           ``ts_hour STRING = DATE_FORMAT(ts, 'yyyy-MM-dd-HH')``   ``2026-11-28-09``
``bucket(N, c)``       ``c_bucket INT = pmod(hash(c), N)``       Spark's hash: always rewritten
``truncate(W, s)``     ``s_trunc = SUBSTRING(s, 1, W)``; of an integer ``n - pmod(n, W)``
=====================  ========================================  =============================

Times are in UTC (the service's Spark session). Pure but for the names of Delta's metadata keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from commit_service.domain.partitioning import EPOCH, INTEGERS, KeyPartition, PartitionField, Pin, Transform, key_fields

GENERATION = "delta.generationExpression"  # a generated column's expression in its field metadata


def _expression(f: PartitionField, source_type: str) -> tuple[str, str]:
    """The generated column's SQL expression and Spark type for a non-identity ``f``."""
    c = f"`{f.column}`"
    if f.transform is Transform.YEAR:
        return f"YEAR({c})", "integer"
    if f.transform is Transform.MONTH:
        return f"DATE_FORMAT({c}, 'yyyy-MM')", "string"
    if f.transform is Transform.DAY:
        return f"CAST({c} AS DATE)", "date"
    if f.transform is Transform.HOUR:
        return f"DATE_FORMAT({c}, 'yyyy-MM-dd-HH')", "string"
    if f.transform is Transform.BUCKET:
        return f"pmod(hash({c}), {f.width})", "integer"
    if source_type in INTEGERS:
        return f"{c} - pmod({c}, {f.width})", source_type
    return f"SUBSTRING({c}, 1, {f.width})", "string"


def _normal(expression: str) -> str:
    return re.sub(r"\s+", "", expression.replace("`", "")).lower()


@dataclass(frozen=True)
class DeltaPartitioning:
    """One table's ``partition_by`` in Delta's terms."""

    fields: tuple[PartitionField, ...]

    @property
    def columns(self) -> list[str]:
        """The table's partitionColumns, in ``partition_by``'s order."""
        return [f.name for f in self.fields]

    def generated(self, types: Mapping[str, str]) -> list[dict[str, Any]]:
        """The generated partition columns, as Spark schema fields (appended to the table's schema)."""
        out = []
        for f in self.fields:
            if f.transform is Transform.IDENTITY:
                continue
            expression, kind = _expression(f, types[f.column])
            out.append({"name": f.name, "type": kind, "nullable": True, "metadata": {GENERATION: expression}})
        return out

    @property
    def generated_names(self) -> list[str]:
        """The generated partition columns (every transform but identity)."""
        return [f.name for f in self.fields if f.transform is not Transform.IDENTITY]

    @staticmethod
    def strip(schema: dict[str, Any]) -> dict[str, Any]:
        """``schema`` without its generated columns (which no file holds and Delta computes)."""
        return {**schema, "fields": [f for f in schema["fields"] if GENERATION not in (f.get("metadata") or {})]}

    def with_generated(self, schema: dict[str, Any]) -> dict[str, Any]:
        """A round's schema (no generated columns) with the table's generated columns after it."""
        types = {f["name"]: f["type"] for f in schema["fields"] if isinstance(f["type"], str)}
        return {**schema, "fields": [*schema["fields"], *self.generated(types)]}

    def key_parts(self, key: Sequence[str], types: Mapping[str, str]) -> list[KeyPartition]:
        """The partition columns an upsert ``key`` decides: each as the table holds it (a partition
        column, which Spark and Delta prune by) and as computed from a key's columns."""
        out = []
        for f in key_fields(self.fields, key):
            if f.transform is Transform.IDENTITY:
                out.append(KeyPartition(f"`{f.column}`", f"`{f.column}`"))
            else:
                out.append(KeyPartition(f"`{f.name}`", _expression(f, types[f.column])[0]))
        return out

    def text_values(self, types: Mapping[str, str]) -> list[tuple[PartitionField, str]]:
        """The partitions whose value is text (a string column's identity or truncation, by the
        round's Spark ``types``), each with the SQL expression of its value: what Spark writes
        into the path of a file it puts in that partition."""
        out = []
        for f in self.fields:
            if types.get(f.column) != "string" or f.transform not in (Transform.IDENTITY, Transform.TRUNCATE):
                continue
            out.append((f, f"`{f.column}`" if f.transform is Transform.IDENTITY else _expression(f, "string")[0]))
        return out

    def data_problem(self, schema: dict[str, Any]) -> str | None:
        """Why a table of ``schema`` cannot be written (every column an identity partition column:
        Delta stores those in no file and needs one that is), or None."""
        identity = {f.column for f in self.fields if f.transform is Transform.IDENTITY}
        if identity and all(f["name"] in identity for f in self.strip(schema)["fields"]):
            return (
                f"has no column but its partition columns ({', '.join(sorted(identity))}), and Delta needs one "
                "that is not; partition by a transform of it (bucket, truncate) instead"
            )
        return None

    def mismatch(self, partition_columns: Sequence[str], schema: dict[str, Any] | None) -> str | None:
        """Why an existing table's layout is not this one (its partition columns, and each generated
        column's expression, compared), or None when it is."""
        if list(partition_columns) != self.columns:
            have = ", ".join(partition_columns) or "nothing"
            return f"is partitioned by ({have}), not ({', '.join(self.columns) or 'nothing'}) as partition_by says"
        fields = {f["name"]: f for f in (schema or {}).get("fields", [])}
        for f in self.fields:
            if f.transform is Transform.IDENTITY:
                continue
            got = ((fields.get(f.name) or {}).get("metadata") or {}).get(GENERATION)
            source = fields.get(f.column, {}).get("type")
            want, _ = _expression(f, source if isinstance(source, str) else "string")
            if got is None or _normal(got) != _normal(want):
                return f"has {f.name} = {got!r}, not {want!r} as partition_by {f} makes it"
        return None

    def values(self, pins: Sequence[Pin]) -> dict[str, str | None] | None:
        """A pinned file's ``partitionValues`` (strings, as Delta writes them; None the null
        partition), or None when a value is Spark's to compute (a bucket, a timestamp's identity):
        the file is then rewritten."""
        out: dict[str, str | None] = {}
        for f, pin in zip(self.fields, pins, strict=True):
            if pin.value is None:
                out[f.name] = None
                continue
            if pin.hashed_by_format or isinstance(pin.value, datetime):
                return None
            out[f.name] = _text(f.transform, pin.value)
        return out


UNPARTITIONED = DeltaPartitioning(())


def _text(transform: Transform, value: Any) -> str:
    if transform is Transform.YEAR:
        return str(1970 + value)
    if transform is Transform.MONTH:
        return f"{1970 + value // 12:04d}-{value % 12 + 1:02d}"
    if transform is Transform.DAY:
        return (EPOCH + timedelta(days=value)).isoformat()
    if transform is Transform.HOUR:
        day, hour = divmod(value, 24)
        return f"{(EPOCH + timedelta(days=day)).isoformat()}-{hour:02d}"
    if isinstance(value, date):
        return value.isoformat()
    return str(value)
