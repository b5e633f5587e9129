"""A JSON-lines file's schema, typed as Spark's JSON reader types it, but keeping what it cannot type.

Pure: called by :mod:`commit_service.round.convert` on the lines it read, so a round's text files are
read by Spark with an explicit schema (no inference job per round) reconciled by
:mod:`commit_service.domain.round_schema`. The types follow Spark's JSON inference (``JsonInferSchema``):
whole numbers are ``long`` (``decimal(p,0)`` past a long, ``double`` past 38 digits), fractions
``double``, ``true``/``false`` ``boolean``, text ``string``, objects structs with their fields
sorted by name, arrays of their elements' joined type; where one file mixes types Spark cannot
join in a column, it holds them as text (``string``), as Spark does.

The same types come faster from Arrow's reader where it agrees
(:func:`commit_service.storage.json_types.infer_lines`; a property test holds the two equal).

Where this differs from Spark, on purpose: a value that is null in every record (or an array
that is always empty) stays :data:`~commit_service.domain.round_schema.VOID` instead of becoming
``string``, so that a file of nulls never gives a column a type (a tombstone's ``value``, a
Debezium delete's ``after``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from commit_service.domain.round_schema import MAX_PRECISION, VOID, Schema, SparkType, wider_atomic

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class LineError(ValueError):
    """A line is not a JSON object (``line`` counts from 1)."""

    def __init__(self, line: int, why: str) -> None:
        self.line = line
        super().__init__(f"line {line} {why}")


def array_lines(text: str) -> list[str]:
    """The records of a file holding one JSON array, one per line as JSON lines hold them
    (:class:`ValueError` if the text is no array). Aiven's writer frames compact records as
    ``[`` newline, the records joined by ``,`` newline, newline ``]``; a compact record holds no raw
    newline, so such a file is cut apart without parsing (:func:`parse_lines` then parses each
    record once). Any other array is parsed here."""
    if text.startswith("[\n") and text.endswith("\n]"):
        return [line for line in text[2:-2].split(",\n") if line.strip()]
    records = json.loads(text)
    if not isinstance(records, list):
        raise ValueError(f"it holds a JSON {type(records).__name__}")
    return [json.dumps(r, ensure_ascii=False) for r in records]


def parse_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Each line as a JSON object, or :class:`LineError` naming the first line that is not one."""
    records = []
    for i, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise LineError(i, f"is not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise LineError(i, f"is a JSON {type(record).__name__}, not an object (a record)")
        records.append(record)
    return records


def infer(records: Iterable[dict[str, Any]]) -> Schema:
    """The struct type of ``records`` (JSON objects), voids kept."""
    schema: SparkType = {"type": "struct", "fields": []}
    for record in records:
        schema = join(schema, type_of(record))
    assert isinstance(schema, dict)
    return schema


def type_of(value: Any) -> SparkType:
    """The Spark type of one JSON value (``null`` and ``[]`` leave :data:`VOID` where unknown)."""
    if value is None:
        return VOID
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        if LONG_MIN <= value <= LONG_MAX:
            return "long"
        digits = len(str(abs(value)))
        return f"decimal({digits},0)" if digits <= MAX_PRECISION else "double"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        element: SparkType = VOID
        for item in value:
            element = join(element, type_of(item))
        return {"type": "array", "elementType": element, "containsNull": True}
    fields = [
        {"name": k, "type": type_of(v), "nullable": True, "metadata": {}}
        for k, v in sorted(value.items())
        if k  # Spark drops fields with an empty name
    ]
    return {"type": "struct", "fields": fields}


def join(a: SparkType, b: SparkType) -> SparkType:
    """Two types of one column in one file, joined as Spark's inference joins them (its
    ``compatibleType``): anything it cannot join becomes ``string``; voids never win."""
    if a == VOID:
        return b
    if b == VOID or a == b:
        return a
    if isinstance(a, str) and isinstance(b, str):
        if {a, b} <= {"long", "double"} or (a.startswith("decimal") and b.startswith("decimal")):
            return wider_atomic(a, b) or "double"
        if "double" in (a, b) and (a.startswith("decimal") or b.startswith("decimal")):
            return "double"
        if "long" in (a, b) and (a.startswith("decimal") or b.startswith("decimal")):
            return wider_atomic(a, b) or "double"
        return "string"
    kind_a = a.get("type") if isinstance(a, dict) else a
    kind_b = b.get("type") if isinstance(b, dict) else b
    if kind_a != kind_b:
        return "string"
    if kind_a == "array":
        return {"type": "array", "elementType": join(a["elementType"], b["elementType"]), "containsNull": True}
    by_name = {f["name"]: f for f in a["fields"]}
    for f in b["fields"]:
        have = by_name.get(f["name"])
        by_name[f["name"]] = f if have is None else {**have, "type": join(have["type"], f["type"])}
    return {"type": "struct", "fields": [by_name[k] for k in sorted(by_name)]}
