"""What an Avro container file holds, from its bytes: its writer schema, its record count and (in
the sink's envelope) the offsets it covers.

Pure (bytes in, facts out; no Spark): :class:`~commit_service.round.convert.FrameReader` calls
:func:`summary` once per Avro file of a commit, then Spark's Avro source reads the records (the
files of one writer schema together). Decoding is fastavro's; nothing here parses Avro itself.

The record count is the blocks' own. The offsets are the first block's first record's and the last
block's last record's (the sink writes in offset order), read through a reader schema of the
envelope's ``offset`` field alone: only those two blocks are decoded, and in them fastavro skips
every other field (the value with its decimals and timestamps).

Aiven's sink wraps every format but Parquet in ``file.compression.type``'s stream, gzip by default,
so its Avro files are containers inside a gzip (zstd, snappy) stream: :func:`open_container` finds
the container inside, which the reader then stages where Spark's Avro source can read it (that
source reads containers only). Anything that holds no container is refused.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

import fastavro

from commit_service.domain.content import HEAD_BYTES, ContentError, Encoding, decode_text, sniff
from commit_service.domain.coverage import OFFSET_FIELD, Coverage, from_bounds

MAGIC = b"Obj\x01"  # an Avro object container file's first bytes


class AvroFileError(ValueError):
    """The bytes are not an Avro container file fastavro can read (the message says why)."""


@dataclass(frozen=True)
class AvroSummary:
    """One Avro file: ``schema_key`` is its writer schema as the header holds it (files sharing it
    are read by Spark together), ``records`` how many it holds, ``coverage`` the offsets of the
    sink's envelope (None without one)."""

    schema_key: str
    records: int
    coverage: Coverage | None


def open_container(data: bytes) -> tuple[bytes, Encoding | None]:
    """The Avro container file in ``data`` and the stream it was wrapped in (None: it was not);
    :class:`AvroFileError` when there is none, wrapped or not."""
    if data.startswith(MAGIC):
        return data, None
    kind = sniff(data[:HEAD_BYTES])
    if kind in (Encoding.PLAIN, Encoding.PARQUET):
        raise AvroFileError("is not an Avro container file")
    try:
        inner = decode_text(data)
    except ContentError as exc:
        raise AvroFileError(str(exc)) from None
    if not inner.startswith(MAGIC):
        raise AvroFileError(f"holds no Avro container file inside its {kind.value} stream")
    return inner, kind


def summary(data: bytes) -> AvroSummary:
    """What the Avro container file ``data`` holds; :class:`AvroFileError` if it is none."""
    if not data.startswith(MAGIC):
        raise AvroFileError("is not an Avro container file")
    try:
        header = fastavro.block_reader(io.BytesIO(data))
        schema_key = header.metadata["avro.schema"]
        writer: Any = header.writer_schema
        reader = _offset_reader(writer)
        blocks = fastavro.block_reader(io.BytesIO(data), reader_schema=reader) if reader else header
        records, first, last = 0, None, None
        for block in blocks:
            records += block.num_records
            if reader is not None and block.num_records:
                first = block if first is None else first
                last = block
        if first is None or last is None:
            return AvroSummary(schema_key, records, None)
        # a block's records are read once (its iterator is its own): the first and last of each
        head: list[Any] = list(first)
        tail: list[Any] = head if last is first else list(last)
        low, high = head[0][OFFSET_FIELD], tail[-1][OFFSET_FIELD]
        fields = [f["name"] for f in writer["fields"]]
        return AvroSummary(schema_key, records, from_bounds(fields, low, high, records))
    except (ValueError, EOFError, KeyError, TypeError, fastavro.read.SchemaResolutionError) as exc:
        raise AvroFileError(f"is not a readable Avro container file: {exc}") from None


def blocks(data: bytes) -> AvroSummary:
    """The Avro container file ``data``'s writer schema and record count, from its header and block
    headers alone (no record decoded), without its offsets: :func:`bounded` adds them from a
    decoding of its records elsewhere. :class:`AvroFileError` if it is no container."""
    if not data.startswith(MAGIC):
        raise AvroFileError("is not an Avro container file")
    try:
        header = fastavro.block_reader(io.BytesIO(data))
        return AvroSummary(header.metadata["avro.schema"], sum(b.num_records for b in header), None)
    except (ValueError, EOFError, KeyError, TypeError) as exc:
        raise AvroFileError(f"is not a readable Avro container file: {exc}") from None


def has_offsets(writer: Any) -> bool:
    """Whether files of ``writer`` (parsed from a header's text) hold the envelope's offsets."""
    return _offset_reader(writer) is not None


def bounded(header: AvroSummary, writer: Any, low: Any, high: Any) -> AvroSummary:
    """``header`` (from :func:`blocks`) with the coverage of its records' lowest and highest
    ``offset`` (the sink writes in offset order: its first and last)."""
    if not has_offsets(writer):
        return header
    fields = [f["name"] for f in writer["fields"]]
    return AvroSummary(header.schema_key, header.records, from_bounds(fields, low, high, header.records))


def _offset_reader(writer: Any) -> dict[str, Any] | None:
    """A reader schema of the envelope's ``offset`` alone, for a record writer schema that has one
    (an ``int`` or ``long``); None otherwise."""
    if not isinstance(writer, dict) or writer.get("type") != "record":
        return None
    offset_type = next((f["type"] for f in writer["fields"] if f["name"] == OFFSET_FIELD), None)
    if offset_type not in ("long", "int"):
        return None
    return {"type": "record", "name": writer["name"], "fields": [{"name": OFFSET_FIELD, "type": offset_type}]}


# What DataFusion's Avro reader is known to decode as Spark's Avro source does (each checked by
# tests/unit/service/storage/test_avro_arrow.py against fastavro, and by the fidelity suite against
# delta-rs and Spark): every other type, logical type or name leaves the file to Spark
ARROW_PRIMITIVES = frozenset({"boolean", "int", "long", "float", "double", "bytes", "string"})
ARROW_LOGICAL = {
    "decimal": ("bytes", "fixed"),
    "date": ("int",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def arrow_refusal(writer: Any) -> str | None:
    """Why a file of Avro ``writer`` schema is left to Spark's Avro source rather than decoded to
    Arrow (None: it is decoded). Left to Spark: a top level that is no record; unions other than a
    type with null; a field of type null; an empty record; a named type used again by its name
    (DataFusion does not resolve it); names outside Avro's ``[A-Za-z_][A-Za-z0-9_]*`` (DataFusion
    refuses them, Spark reads them); ``uuid`` (DataFusion decodes its text into 16 bytes), times,
    local timestamps, durations and logical types unknown here."""
    if not isinstance(writer, dict) or writer.get("type") != "record":
        return "its top level is no record"
    return _refusal(writer)


def _refusal(t: Any) -> str | None:
    if isinstance(t, str):
        if t in ARROW_PRIMITIVES:
            return None
        return "a field of type null" if t == "null" else f"the named type {t!r} is used again by its name"
    if isinstance(t, list):
        branches = [b for b in t if b != "null"]
        if len(t) != 2 or len(branches) != 1:
            return f"a union of {len(t)} types: {[b if isinstance(b, str) else b.get('type') for b in t]}"
        return _refusal(branches[0])
    kind, logical = t.get("type"), t.get("logicalType")
    if logical is not None and not (logical in ARROW_LOGICAL and kind in ARROW_LOGICAL[logical]):
        return f"the logical type {logical} on {kind}"
    if kind in ARROW_PRIMITIVES:
        return None
    if kind in ("record", "enum", "fixed") and not _NAME.fullmatch(str(t.get("name", "")).rpartition(".")[2]):
        return f"the {kind} name {t.get('name')!r} is no Avro name"
    if kind == "record":
        if not t.get("fields"):
            return "a record without fields"
        for f in t["fields"]:
            if not _NAME.fullmatch(f["name"]):
                return f"the field name {f['name']!r} is no Avro name"
            reason = _refusal(f["type"])
            if reason is not None:
                return reason
        return None
    if kind == "array":
        return _refusal(t["items"])
    if kind == "map":
        return _refusal(t["values"])
    if kind == "enum":
        return None if all(_NAME.fullmatch(s) for s in t.get("symbols", ())) else "an enum symbol that is no Avro name"
    if kind == "fixed":
        return None
    return _refusal(kind)  # {"type": "long"} and the like
