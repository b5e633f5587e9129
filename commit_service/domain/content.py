"""What a data file holds, told from its bytes: its encoding, its text, and the sink's envelope.

Pure (no I/O): called by :mod:`commit_service.round.convert` on bytes the storage reader fetched.
Sinks compress objects whatever their names say — Aiven's S3 sink writes gzip by default and adds
no extension with a custom ``file.name.template`` — so the encoding is read from the magic bytes,
never from the name:

- Parquet: ``PAR1``; gzip: ``1f 8b``; zstd: ``28 b5 2f fd``; snappy-java's stream (what Aiven's
  ``snappy`` writes for text formats, ``SnappyOutputStream``): ``82 SNAPPY 00``, two 4-byte
  versions, then blocks of a 4-byte big-endian length and a raw Snappy block; the Snappy framed
  stream: the ``ff 06 00 00 sNaPpY`` stream identifier.

Aiven's envelope (``format.output.envelope``, on by default) wraps each record as
``{"value": {...}}`` plus any of ``key``, ``offset``, ``timestamp``, ``headers``
(``format.output.fields``). :func:`envelope_shape` recognises it and :data:`KAFKA_COLUMNS` names
the columns the envelope's fields become when the value's fields are lifted to the top level.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any


class Encoding(str, Enum):
    """How an object's bytes are encoded, from its first bytes."""

    PARQUET = "parquet"
    GZIP = "gzip"
    ZSTD = "zstd"
    SNAPPY = "snappy"  # the Snappy framed format
    SNAPPY_JAVA = "snappy-java"  # snappy-java's SnappyOutputStream
    PLAIN = "plain"


class Unwrap(str, Enum):
    """A table's ``unwrap`` setting: whether the envelope's ``value`` is lifted to columns."""

    AUTO = "auto"  # lift when a file has the envelope's shape (the default)
    VALUE = "value"  # lift ``value`` whenever a file has that column, whatever else it has
    NONE = "none"  # keep the columns as the file has them


MAGIC: tuple[tuple[bytes, Encoding], ...] = (
    (b"PAR1", Encoding.PARQUET),
    (b"\x1f\x8b", Encoding.GZIP),
    (b"\x28\xb5\x2f\xfd", Encoding.ZSTD),
    (b"\xff\x06\x00\x00sNaPpY", Encoding.SNAPPY),
    (b"\x82SNAPPY\x00", Encoding.SNAPPY_JAVA),
)
SNAPPY_JAVA_HEADER = 16  # the magic and two 4-byte versions
HEAD_BYTES = max(len(m) for m, _ in MAGIC)  # how many leading bytes :func:`sniff` needs
ENVELOPE_FIELDS = frozenset({"key", "value", "offset", "timestamp", "headers"})
KAFKA_COLUMNS = {
    "key": "_kafka_key",
    "offset": "_kafka_offset",
    "timestamp": "_kafka_timestamp",
    "headers": "_kafka_headers",
}


class ContentError(ValueError):
    """The bytes are not what they claim to be (a corrupt or truncated compressed stream)."""


def sniff(head: bytes) -> Encoding:
    """The encoding of an object whose first bytes are ``head`` (at least :data:`HEAD_BYTES`)."""
    for magic, encoding in MAGIC:
        if head.startswith(magic):
            return encoding
    return Encoding.PLAIN


def decode_text(data: bytes) -> bytes:
    """The text inside ``data``, decompressed by its magic bytes (plain text is returned as is)."""
    import cramjam  # imported here: the config (which names Unwrap) must load without it

    encoding = sniff(data[:HEAD_BYTES])
    try:
        if encoding is Encoding.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if encoding is Encoding.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
        if encoding is Encoding.SNAPPY:
            return bytes(cramjam.snappy.decompress(data))
        if encoding is Encoding.SNAPPY_JAVA:
            return _snappy_java(data, cramjam)
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise ContentError(f"is not a valid {encoding.value} stream: {exc}") from exc
    if encoding is Encoding.PARQUET:
        raise ContentError("is a Parquet file, not text")
    return data


def _snappy_java(data: bytes, cramjam: Any) -> bytes:
    """The bytes of snappy-java's stream: after the header, blocks of a big-endian length and a raw
    Snappy block (a truncated block is a corrupt stream)."""
    out = bytearray()
    pos = SNAPPY_JAVA_HEADER
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError("a block's length is cut short")
        size = int.from_bytes(data[pos : pos + 4], "big")
        block = data[pos + 4 : pos + 4 + size]
        if len(block) != size:
            raise ValueError(f"a block of {size} bytes is cut short at {len(block)}")
        out += bytes(cramjam.snappy.decompress_raw(block))
        pos += 4 + size
    return bytes(out)


def envelope_shape(columns: Mapping[str, bool], unwrap: Unwrap) -> bool:
    """Whether to lift ``value``: ``columns`` maps each top-level column to "is a struct".

    ``auto`` lifts only a file whose columns are all envelope fields and whose ``value`` is a
    struct (a record); ``value`` lifts whenever there is a ``value`` column; ``none`` never.
    """
    if unwrap is Unwrap.NONE or "value" not in columns:
        return False
    if unwrap is Unwrap.VALUE:
        return True
    return set(columns) <= ENVELOPE_FIELDS and columns["value"]
