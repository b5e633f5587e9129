"""A round's schema as an Iceberg table holds it: pure, on Spark's JSON form of a schema.

Used by :class:`~commit_service.iceberg.committer.IcebergCommitter` between the round's schema
(``commit_service.domain.round_schema``) and the table: Iceberg has no 8- or 16-bit integers (a
``byte`` or ``short`` column is an ``int``) and Lakegate makes every column optional (a later file
may lack it, or hold a null), so the frame written is this schema and the table's is the same.
"""

from __future__ import annotations

import re
from typing import Any

from commit_service.domain.round_schema import Schema, SparkType

ICEBERG_ATOMIC = {"byte": "integer", "short": "integer", "char": "string", "varchar": "string"}
# Arrow types of a Parquet footer Iceberg's readers do not all read as the table's type: timestamps
# in other units than microseconds (and INT96, which Arrow shows as nanoseconds), unsigned and
# 8/16-bit integers, and the rest Iceberg has no type for. A file holding one is rewritten.
NOT_ADDABLE = re.compile(
    r"timestamp\[(s|ms|ns)\b|\buint(8|16|32|64)\b|\bint(8|16)\b|time32|duration|halffloat|"
    r"large_(string|binary|list)|dictionary<|fixed_size_list|interval"
)


def iceberg_type(t: SparkType) -> SparkType:
    """``t`` with every type Iceberg lacks replaced by the one it reads as, every field nullable."""
    if isinstance(t, str):
        return ICEBERG_ATOMIC.get(t.split("(")[0], t)
    kind = t.get("type")
    if kind == "struct":
        return {**t, "fields": [{**f, "type": iceberg_type(f["type"]), "nullable": True} for f in t["fields"]]}
    if kind == "array":
        return {**t, "elementType": iceberg_type(t["elementType"]), "containsNull": True}
    if kind == "map":
        return {
            **t,
            "keyType": iceberg_type(t["keyType"]),
            "valueType": iceberg_type(t["valueType"]),
            "valueContainsNull": True,
        }
    return t


def iceberg_schema(schema: Schema) -> Schema:
    """:func:`iceberg_type` of a top-level schema."""
    result: dict[str, Any] = iceberg_type(schema)  # type: ignore[assignment]
    return result


def same_columns(a: SparkType, b: SparkType) -> bool:
    """Whether two schemas have the same columns and types, ignoring nullability, field metadata
    and the order of struct fields (what a schema update would not change)."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if a.get("type") != b.get("type"):
        return False
    if a["type"] == "struct":
        fa = {f["name"]: f["type"] for f in a["fields"]}
        fb = {f["name"]: f["type"] for f in b["fields"]}
        return fa.keys() == fb.keys() and all(same_columns(fa[k], fb[k]) for k in fa)
    if a["type"] == "array":
        return same_columns(a["elementType"], b["elementType"])
    return same_columns(a["keyType"], b["keyType"]) and same_columns(a["valueType"], b["valueType"])


def addable_as_is(footer_schema: str | None) -> bool:
    """Whether a Parquet file whose footer's Arrow schema reads as ``footer_schema`` (its text) can
    be added to an Iceberg table as it is (given that its columns fit the table's): only types
    every Iceberg reader reads as the table's. Unknown (None): no."""
    return footer_schema is not None and NOT_ADDABLE.search(footer_schema) is None
