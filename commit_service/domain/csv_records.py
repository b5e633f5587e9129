"""A sink's headerless CSV lines as the records they hold, in the envelope JSON lines would carry.

Pure. Called by :class:`~commit_service.round.convert.FrameReader` for a CSV file, with the layout its
sidecar sent (:class:`~lakegate_core.protocol.CsvLayout`, from the connector's config); the records
then take the JSON-lines path (typed by :mod:`commit_service.domain.json_infer`, unwrapped, reconciled), so
a CSV record lands exactly as the same record written as JSON lines would.

Aiven's S3 sink writes one record per line, no header, the configured fields in order, separated by
``,``: the key base64 (its bytes), the value base64 unless ``value_encoding`` is ``none``, the
offset and the timestamp (epoch milliseconds) as decimal numbers, the headers as
``b64(key):b64(value);`` for each header, and an empty field for a null. A value whose bytes are
UTF-8 JSON becomes that JSON (a record's fields), other UTF-8 text stays text, other bytes stay
base64 text; a key is its UTF-8 text (else base64) (JSON text for a schemaless key, as the sink's Parquet writes
it). A line that does not fit the layout refuses the file: never a record short or shifted.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from commit_service.domain.json_infer import LineError
from lakegate_core.protocol import CsvLayout


def records(lines: Sequence[str], layout: CsvLayout) -> list[dict[str, Any]]:
    """One envelope per line (``{"value": ..., "offset": ...}`` with the layout's fields)."""
    return [_record(i, line, layout) for i, line in enumerate(lines, 1)]


def _record(n: int, line: str, layout: CsvLayout) -> dict[str, Any]:
    line = line.rstrip("\r")
    fields = layout.fields
    raw_value_last = layout.value_encoding == "none" and fields[-1] == "value"
    parts = line.split(",", len(fields) - 1) if raw_value_last else line.split(",")
    if len(parts) != len(fields):
        raise LineError(
            n, f"has {len(parts)} comma-separated fields, the sink's layout {list(fields)} has {len(fields)}"
        )
    out: dict[str, Any] = {}
    for name, text in zip(fields, parts, strict=True):
        try:
            out[name] = _field(name, text, layout)
        except ValueError as exc:
            raise LineError(n, f"field {name!r}: {exc}") from None
    return out


def _field(name: str, text: str, layout: CsvLayout) -> Any:
    if text == "":
        return None
    if name in ("offset", "timestamp"):
        if not text.lstrip("-").isdigit():
            raise ValueError(f"{text[:40]!r} is not a number")
        return int(text)
    if name == "headers":
        return [_header(h) for h in text.split(";") if h]
    if name == "key":
        return _text(_bytes(text))
    data = _bytes(text) if layout.value_encoding == "base64" else text.encode("utf-8")
    value = _text(data)
    try:
        return json.loads(value)
    except ValueError:
        return value


def _header(text: str) -> dict[str, Any]:
    key, sep, value = text.partition(":")
    if not sep:
        raise ValueError(f"header {text[:40]!r} is not b64(key):b64(value)")
    return {"key": _text(_bytes(key)), "value": _text(_bytes(value)) if value else None}


def _bytes(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ValueError(f"{text[:40]!r} is not base64") from None


def _text(data: bytes) -> str:
    """UTF-8 bytes as their text; other bytes as their base64 text (kept, not lost)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii")
