"""A JSON-lines file's schema, typed as Spark's JSON reader types it, but keeping what it cannot type.

Pure: called by :mod:`commit_service.round.convert` on the lines it read, so a round's text files are
read by Spark with an explicit schema (no inference job per round) reconciled by
:mod:`commit_service.domain.round_schema`. The types follow Spark's JSON inference (``JsonInferSchema``):
whole numbers are ``long`` (``decimal(p,0)`` past a long, ``double`` past 38 digits), fractions
``double``, ``true``/``false`` ``boolean``, text ``string``, objects structs with their fields
sorted by name, arrays of their elements' joined type; where one file mixes types Spark cannot
join in a column, it holds them as text (``string``), as Spark does.

Two ways to the same types: :func:`infer` over records parsed in Python, and :func:`infer_lines`,
Arrow's C++ JSON reader typing the lines, mapped to the same rules, which answers None wherever
Arrow's reading might differ from :func:`infer` (a number as large as a long's limits, a column of
mixed kinds, a line that is not one object, ...): the caller then parses in Python. A property
test holds the two equal wherever :func:`infer_lines` answers.

Where this differs from Spark, on purpose: a value that is null in every record (or an array
that is always empty) stays :data:`~commit_service.domain.round_schema.VOID` instead of becoming
``string``, so that a file of nulls never gives a column a type (a tombstone's ``value``, a
Debezium delete's ``after``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

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


# Arrow reads an integer past a long as a double, infer as a decimal: a double column holding a
# value this large (or a number written so) is typed in Python instead
_PAST_LONG = float(LONG_MAX)


def infer_lines(lines: Sequence[str]) -> Schema | None:
    """The struct type of ``lines`` (JSON objects, one a line) as :func:`infer` gives it, typed by
    Arrow's JSON reader without a Python object per record; None where Arrow's reading might
    differ (parse the records and call :func:`infer`)."""
    if not lines:
        return None
    data = "\n".join(lines).encode()
    options = pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1)
    try:
        table = pa_json.read_json(io.BytesIO(data), read_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(lines) or any(_past_long(chunk) for c in table.columns for chunk in c.chunks):
        return None
    try:
        fields = [_field(f) for f in sorted(table.schema, key=lambda f: f.name) if f.name]
    except _Unmapped:
        return None
    return {"type": "struct", "fields": fields}


def _past_long(array: pa.Array) -> bool:
    """Whether a double anywhere in ``array`` (nested too) is as large as a long's limits."""
    t = array.type
    if pa.types.is_float64(t):
        top = pc.max(pc.abs(array)).as_py()
        return top is not None and top >= _PAST_LONG
    if pa.types.is_list(t):
        return _past_long(array.flatten())
    if pa.types.is_struct(t):
        return any(_past_long(array.field(i)) for i in range(t.num_fields))
    return False


class _Unmapped(ValueError):
    """An Arrow type :func:`infer` has no counterpart for."""


def _field(f: pa.Field) -> dict[str, Any]:
    return {"name": f.name, "type": _spark(f.type), "nullable": True, "metadata": {}}


def _spark(t: pa.DataType) -> SparkType:
    """Arrow's inferred JSON type as :func:`type_of` types the same values."""
    if pa.types.is_null(t):
        return VOID
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int64(t):
        return "long"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_timestamp(t):  # Arrow reads ISO-8601 text as a time
        return "string"
    if pa.types.is_list(t):
        return {"type": "array", "elementType": _spark(t.value_type), "containsNull": True}
    if pa.types.is_struct(t):
        names = [t.field(i) for i in range(t.num_fields)]
        return {"type": "struct", "fields": [_field(f) for f in sorted(names, key=lambda f: f.name) if f.name]}
    raise _Unmapped(str(t))


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
