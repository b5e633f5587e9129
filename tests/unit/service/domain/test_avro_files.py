"""What the service reads from an Avro file's bytes before Spark reads its records: the writer
schema, the record count (every block's), and the envelope's offsets."""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable
from typing import Any

import cramjam
import fastavro
import pytest

from commit_service.domain.avro_files import AvroFileError, open_container, summary
from commit_service.domain.content import Encoding
from commit_service.domain.coverage import Coverage
from lakegate_core.protocol import OffsetSpan

ENVELOPE = {
    "type": "record",
    "name": "connector_records",
    "namespace": "io.aiven.avro.output.schema",
    "fields": [
        {"name": "key", "type": ["null", "string"]},
        {
            "name": "value",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Value",
                    "fields": [
                        {
                            "name": "amount",
                            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
                        },
                        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                    ],
                },
            ],
        },
        {"name": "offset", "type": "long"},
        {"name": "timestamp", "type": "long"},
    ],
}


def avro(schema: dict[str, Any], records: list[dict[str, Any]], codec: str = "null", block: int = 16000) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec=codec, sync_interval=block)
    return buf.getvalue()


def envelopes(first: int, count: int) -> list[dict[str, Any]]:
    import datetime
    import decimal

    at = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    value = {"amount": decimal.Decimal("12.34"), "at": at}
    return [{"key": None, "value": value, "offset": first + i, "timestamp": 1} for i in range(count)]


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "zstandard"])
@pytest.mark.parametrize("count", [1, 2, 300])  # one block, or many
def test_an_enveloped_files_count_and_offsets_come_from_its_blocks_and_records(codec: str, count: int) -> None:
    data = avro(ENVELOPE, envelopes(500, count), codec, block=100)
    got = summary(data)
    assert got.records == count
    assert got.coverage == Coverage(OffsetSpan(500, 499 + count), count)
    assert "connector_records" in got.schema_key
    assert fastavro.reader(io.BytesIO(data)).metadata["avro.codec"] == codec


def test_a_plain_value_file_has_a_count_and_no_offsets() -> None:
    value = ENVELOPE["fields"][1]["type"][1]  # type: ignore[index]
    got = summary(avro(value, [e["value"] for e in envelopes(0, 7)]))
    assert got.records == 7 and got.coverage is None
    assert summary(avro(value, [])).records == 0


def test_files_of_one_writer_schema_share_a_key_and_others_do_not() -> None:
    a, b = summary(avro(ENVELOPE, envelopes(0, 2))), summary(avro(ENVELOPE, envelopes(2, 5)))
    assert a.schema_key == b.schema_key
    renamed = {**ENVELOPE, "name": "other"}
    assert summary(avro(renamed, envelopes(0, 1))).schema_key != a.schema_key


@pytest.mark.parametrize(
    ("wrap", "encoding"),
    [
        (gzip.compress, Encoding.GZIP),
        (lambda b: bytes(cramjam.zstd.compress(b)), Encoding.ZSTD),
        (lambda b: b, None),
    ],
)
def test_the_container_inside_a_sinks_stream_is_found(
    wrap: Callable[[bytes], bytes], encoding: Encoding | None
) -> None:
    data = avro(ENVELOPE, envelopes(0, 2))
    assert open_container(wrap(data)) == (data, encoding)
    assert summary(open_container(wrap(data))[0]).records == 2


def test_a_stream_holding_no_avro_container_is_refused() -> None:
    with pytest.raises(AvroFileError, match="holds no Avro container file inside its gzip stream"):
        open_container(gzip.compress(b'{"a": 1}\n'))
    with pytest.raises(AvroFileError, match="is not a valid gzip stream"):
        open_container(gzip.compress(avro(ENVELOPE, envelopes(0, 2)))[:-30])
    with pytest.raises(AvroFileError, match="is not an Avro container file"):
        open_container(b'{"a": 1}\n')


@pytest.mark.parametrize("data", [b"", b'{"a": 1}\n', b"Obj\x01garbage", b"PAR1xxxxPAR1"])
def test_bytes_that_are_no_avro_file_are_refused(data: bytes) -> None:
    with pytest.raises(AvroFileError, match="is not"):
        summary(data)


def test_a_truncated_file_is_refused() -> None:
    data = avro(ENVELOPE, envelopes(0, 50))
    with pytest.raises(AvroFileError, match="not a readable Avro container file"):
        summary(data[: len(data) - 20])
