"""JSON records read by Arrow's C++ JSON reader instead of a Python object per record: a JSON-lines
file's schema as :func:`commit_service.domain.json_infer.infer` types it (:func:`infer_lines`), and
a group of files' records as Arrow columns of a known schema (:func:`read_lines`).

Called by :class:`~commit_service.round.convert.FrameReader` for JSON lines and JSON arrays. The
answer is None wherever Arrow's reading might differ from ``infer`` (a number as large as a long's
limits, which Arrow reads as a double and ``infer`` as a decimal; a column of mixed kinds, which
Arrow refuses and ``infer`` joins; a line that is not one object, ...), or from Spark's JSON reader
(a type Arrow's reader does not read as Spark's does): the caller then parses the records in
Python (typing), or hands Spark the lines (reading). ``tests/unit/service/domain/test_round_schema.py``
holds the typing equal to ``infer`` wherever this answers; the fidelity suite holds the records
read equal to what was written.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from commit_service.domain.json_infer import LONG_MAX
from commit_service.domain.round_schema import VOID, Schema, SparkType

# Arrow reads an integer past a long as a double, infer as a decimal: a double column holding a
# value this large (or a number written so) is typed in Python instead
_PAST_LONG = float(LONG_MAX)


@dataclass(frozen=True)
class JsonRecords:
    """A file's JSON records as Arrow read them: their shape, as ``json_infer.infer`` types them, and
    the records as Arrow columns of exactly that shape (voids as strings), each value as its text
    wrote it."""

    shape: Schema
    columns: pa.Table


def read_records(lines: Sequence[str]) -> JsonRecords | None:
    """``lines`` (JSON objects, one a line) typed and read by Arrow's JSON reader without a Python
    object per record; None where Arrow's reading might differ from ``json_infer.infer``'s typing or
    from Spark's JSON reader (parse the records in Python, and give Spark the lines). Arrow reads
    ISO-8601 text as a time: a file holding such text is read a second time, its types given."""
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
        shape: Schema = {
            "type": "struct",
            "fields": [_field(f) for f in sorted(table.schema, key=lambda f: f.name) if f.name],
        }
        arrow = _arrow_schema(shape)
    except _Unmapped:
        return None
    if not shape["fields"] or len(shape["fields"]) != table.num_columns:  # no columns, or a key ""
        return None
    if _holds_time(table.schema):
        columns = _read(data, arrow, len(lines), threads=False)
    else:
        try:
            columns = table.select([f["name"] for f in shape["fields"]]).cast(arrow)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            columns = None
    return JsonRecords(shape, columns) if columns is not None else None


def infer_lines(lines: Sequence[str]) -> Schema | None:
    """The struct type of ``lines`` as ``json_infer.infer`` gives it (:func:`read_records`)."""
    records = read_records(lines)
    return records.shape if records is not None else None


def read_lines(lines: Sequence[str], schema: Schema) -> pa.Table | None:
    """``lines`` (JSON objects, one a line) as an Arrow table of exactly ``schema`` (Spark's JSON
    form, no void: the types :func:`read_records` gives), read in parallel; None where Arrow's
    reading might differ from Spark's (a type outside those, a line Arrow refuses, a field the schema
    lacks, a row count that differs), so the caller reads them with Spark instead."""
    if not lines:
        return None
    try:
        arrow = _arrow_schema(schema)
    except _Unmapped:
        return None
    return _read("\n".join(lines).encode(), arrow, len(lines), threads=True)


def joined(parts: Sequence[JsonRecords]) -> pa.Table:
    """The records of files of one shape, in order, as one table in one chunk (Spark makes a task of
    each of its batches)."""
    return pa.concat_tables([p.columns for p in parts]).combine_chunks()


def _read(data: bytes, arrow: pa.Schema, rows: int, *, threads: bool) -> pa.Table | None:
    parse = pa_json.ParseOptions(explicit_schema=arrow, unexpected_field_behavior="error")
    options = pa_json.ReadOptions(use_threads=threads, **({} if threads else {"block_size": len(data) + 1}))
    try:
        table = pa_json.read_json(io.BytesIO(data), read_options=options, parse_options=parse)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table if table.num_rows == rows and table.schema == arrow else None


def _holds_time(schema: pa.Schema | pa.StructType) -> bool:
    """Whether a column (or a field within one) is read as a time: Arrow's reading of ISO-8601 text."""
    return any(_time_in(f.type) for f in schema)


def _time_in(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t):
        return True
    if pa.types.is_list(t):
        return _time_in(t.value_type)
    return pa.types.is_struct(t) and _holds_time(t)


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
    """An Arrow type ``json_infer`` has no counterpart for."""


def _field(f: pa.Field) -> dict[str, Any]:
    return {"name": f.name, "type": _spark(f.type), "nullable": True, "metadata": {}}


_ARROW = {"boolean": pa.bool_(), "long": pa.int64(), "double": pa.float64(), "string": pa.string()}


def _arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema a struct of Spark types is read into, voids as strings (as Spark reads them)."""
    return pa.schema([_arrow_field(f) for f in schema["fields"]])


def _arrow_field(f: dict[str, Any]) -> pa.Field:
    return pa.field(f["name"], _arrow(f["type"]), nullable=True)


def _arrow(t: SparkType) -> pa.DataType:
    """The Arrow type Spark's ``t`` is read as, for the types :func:`_spark` gives (else :class:`_Unmapped`)."""
    if t == VOID:
        return pa.string()
    if isinstance(t, str):
        if t not in _ARROW:
            raise _Unmapped(t)
        return _ARROW[t]
    if t.get("type") == "array":
        return pa.list_(_arrow(t["elementType"]))
    if t.get("type") == "struct":
        return pa.struct([_arrow_field(f) for f in t["fields"]])
    raise _Unmapped(str(t))


def _spark(t: pa.DataType) -> SparkType:
    """Arrow's inferred JSON type as ``json_infer.type_of`` types the same values."""
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
