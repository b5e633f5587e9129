"""Telling a data file's encoding from its bytes, and the sink envelope (no JVM)."""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path

import cramjam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.domain.content import ContentError, Encoding, Unwrap, decode_text, envelope_shape, sniff
from commit_service.errors import DataFileError
from commit_service.storage.reader import StorageReader

TEXT = b'{"value": {"id": 1}, "offset": 7}\n{"value": {"id": 2}, "offset": 8}\n'


def parquet_bytes() -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2]}), buf)
    return buf.getvalue()


def snappy_java(data: bytes, block: int = 7) -> bytes:
    """snappy-java's SnappyOutputStream format (what Aiven's sink writes for snappy JSON lines),
    in blocks of ``block`` bytes: its header, then each raw block behind its big-endian length."""
    out = bytearray(b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") + (1).to_bytes(4, "big"))
    for i in range(0, len(data), block):
        raw = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out += len(raw).to_bytes(4, "big") + raw
    return bytes(out)


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (gzip.compress(TEXT), Encoding.GZIP),
        (bytes(cramjam.zstd.compress(TEXT)), Encoding.ZSTD),
        (bytes(cramjam.snappy.compress(TEXT)), Encoding.SNAPPY),
        (snappy_java(TEXT), Encoding.SNAPPY_JAVA),
        (TEXT, Encoding.PLAIN),
        (b"", Encoding.PLAIN),
    ],
)
def test_text_is_decoded_by_its_magic_bytes_whatever_the_name(data: bytes, encoding: Encoding) -> None:
    assert sniff(data[:16]) is encoding
    assert decode_text(data) == (TEXT if data else b"")


def test_parquet_and_corrupt_streams_are_refused() -> None:
    assert sniff(parquet_bytes()[:16]) is Encoding.PARQUET
    with pytest.raises(ContentError, match="Parquet"):
        decode_text(parquet_bytes())
    with pytest.raises(ContentError, match="gzip"):
        decode_text(gzip.compress(TEXT)[:20])
    with pytest.raises(ContentError, match="snappy-java stream: a block of"):
        decode_text(snappy_java(TEXT)[:-3])


@pytest.mark.parametrize(
    ("columns", "unwrap", "lifted"),
    [
        ({"value": True}, Unwrap.AUTO, True),
        ({"key": False, "value": True, "offset": False, "timestamp": False, "headers": False}, Unwrap.AUTO, True),
        ({"value": False}, Unwrap.AUTO, False),  # a string value: nothing to lift
        ({"value": True, "id": False}, Unwrap.AUTO, False),  # a record that merely has a value column
        ({"value": True, "id": False}, Unwrap.VALUE, True),
        ({"id": False}, Unwrap.VALUE, False),
        ({"value": True}, Unwrap.NONE, False),
    ],
)
def test_envelope_shape(columns: dict[str, bool], unwrap: Unwrap, lifted: bool) -> None:
    assert envelope_shape(columns, unwrap) is lifted


def test_local_copy_is_whole_and_idempotent(tmp_path: Path) -> None:
    src = tmp_path / "landing" / "orders-0-00000000000000000000"
    src.parent.mkdir()
    src.write_bytes(parquet_bytes())
    dst = tmp_path / "table" / "data" / "orders" / "0" / src.name
    storage = StorageReader()
    for _ in range(2):  # a retried commit copies again: same bytes, no leftovers
        storage.copy(f"file://{src}", f"file://{dst}")
        assert dst.read_bytes() == src.read_bytes()
        assert sorted(p.name for p in dst.parent.iterdir()) == [src.name]
    assert os.stat(dst).st_ino == os.stat(src).st_ino, "same file system: a hard link, no bytes copied"
    assert storage.facts(f"file://{dst}", parquet=True).columns == (("id", False),)
    with pytest.raises(DataFileError, match="does not exist"):
        storage.copy(f"file://{src}.missing", f"file://{dst}.x")


def test_a_jsonl_file_reported_as_parquet_is_named_for_what_it_is(tmp_path: Path) -> None:
    f = tmp_path / "orders-0-0"
    f.write_bytes(gzip.compress(TEXT))
    with pytest.raises(DataFileError, match="its bytes are gzip"):
        StorageReader().facts(f"file://{f}", parquet=True)
