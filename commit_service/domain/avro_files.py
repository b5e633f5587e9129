"""What an Avro container file holds, from its bytes: its writer schema, its record count and (in
the sink's envelope) the offsets it covers.

Pure (bytes in, facts out; no Spark): :class:`~commit_service.round.convert.FrameReader` calls
:func:`summary` once per Avro file of a commit, then Spark's Avro source reads the records (the
files of one writer schema together). Decoding is fastavro's; nothing here parses Avro itself.

The record count is the blocks' own (no record is decoded). The offsets are read through a reader
schema of the envelope's ``offset`` field alone: fastavro skips every other field (the value with
its decimals and timestamps) without making Python objects of it. Avro wrapped in a compressed
stream (Aiven's ``file.compression.type`` other than ``none``) is no container file: it is refused
with what to set, as is anything else that is not one.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import fastavro

from commit_service.domain.content import Encoding, sniff
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


def summary(data: bytes) -> AvroSummary:
    """What the Avro container file ``data`` holds; :class:`AvroFileError` if it is none."""
    if not data.startswith(MAGIC):
        kind = sniff(data)
        inside = f" (its bytes are a {kind.value} stream: set the sink's file.compression.type=none)"
        wrapped = kind not in (Encoding.PLAIN, Encoding.PARQUET)
        raise AvroFileError("is not an Avro container file" + (inside if wrapped else ""))
    try:
        blocks = fastavro.block_reader(io.BytesIO(data))
        schema_key = blocks.metadata["avro.schema"]
        writer: Any = blocks.writer_schema
        records = sum(block.num_records for block in blocks)
        if not isinstance(writer, dict) or writer.get("type") != "record":
            return AvroSummary(schema_key, records, None)
        return AvroSummary(schema_key, records, _coverage(data, writer, records))
    except (ValueError, EOFError, KeyError, TypeError, fastavro.read.SchemaResolutionError) as exc:
        raise AvroFileError(f"is not a readable Avro container file: {exc}") from None


def _coverage(data: bytes, writer: dict[str, Any], records: int) -> Coverage | None:
    """The first and last record's envelope ``offset`` (the sink writes records in offset order)."""
    fields = [f["name"] for f in writer["fields"]]
    if records == 0 or OFFSET_FIELD not in fields:
        return None
    offset_type = next(f["type"] for f in writer["fields"] if f["name"] == OFFSET_FIELD)
    if offset_type not in ("long", "int"):
        return None
    reader_schema = {"type": "record", "name": writer["name"], "fields": [{"name": OFFSET_FIELD, "type": offset_type}]}
    offsets = fastavro.reader(io.BytesIO(data), reader_schema=reader_schema)
    first = last = None
    for record in offsets:
        last = record[OFFSET_FIELD]  # type: ignore[index,call-overload]
        first = last if first is None else first
    return from_bounds(fields, first, last, records)
