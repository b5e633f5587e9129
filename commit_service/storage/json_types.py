"""A JSON-lines file's schema as :func:`commit_service.domain.json_infer.infer` types it, read by
Arrow's C++ JSON reader instead of a Python object per record.

Called by :class:`~commit_service.round.convert.FrameReader` for JSON lines and JSON arrays. The
answer is None wherever Arrow's reading might differ from ``infer`` (a number as large as a long's
limits, which Arrow reads as a double and ``infer`` as a decimal; a column of mixed kinds, which
Arrow refuses and ``infer`` joins; a line that is not one object, ...): the caller then parses the
records in Python. ``tests/unit/service/domain/test_round_schema.py`` holds the two equal wherever
this answers.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from commit_service.domain.json_infer import LONG_MAX
from commit_service.domain.round_schema import VOID, Schema, SparkType

# Arrow reads an integer past a long as a double, infer as a decimal: a double column holding a
# value this large (or a number written so) is typed in Python instead
_PAST_LONG = float(LONG_MAX)


def infer_lines(lines: Sequence[str]) -> Schema | None:
    """The struct type of ``lines`` (JSON objects, one a line) as ``json_infer.infer`` gives it, typed by
    Arrow's JSON reader without a Python object per record; None where Arrow's reading might
    differ (parse the records and call ``json_infer.infer``)."""
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
    """An Arrow type ``json_infer`` has no counterpart for."""


def _field(f: pa.Field) -> dict[str, Any]:
    return {"name": f.name, "type": _spark(f.type), "nullable": True, "metadata": {}}


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
