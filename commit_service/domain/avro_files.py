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


def _offset_reader(writer: Any) -> dict[str, Any] | None:
    """A reader schema of the envelope's ``offset`` alone, for a record writer schema that has one
    (an ``int`` or ``long``); None otherwise."""
    if not isinstance(writer, dict) or writer.get("type") != "record":
        return None
    offset_type = next((f["type"] for f in writer["fields"] if f["name"] == OFFSET_FIELD), None)
    if offset_type not in ("long", "int"):
        return None
    return {"type": "record", "name": writer["name"], "fields": [{"name": OFFSET_FIELD, "type": offset_type}]}
