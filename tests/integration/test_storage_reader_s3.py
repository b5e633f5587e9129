"""The service's storage reader on the S3 server: a Parquet file's facts read at the size a
manifest gives, without a stat, and the stat's answer whenever that size is not the object's."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.config import S3Settings
from commit_service.errors import DataFileError
from commit_service.storage.reader import StorageReader, _fits
from lakegate_stack import s3 as s3mod
from lakegate_stack.s3 import S3Server

BUCKET = "reader"
SAID_MS = 1_234_567  # a modification time no stat would give: seen in the facts, no stat was made


def parquet(rows: int) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"offset": list(range(rows)), "v": [f"value {o}" for o in range(rows)]}), buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def reader(s3_server: S3Server) -> StorageReader:
    s3_server.client().create_bucket(Bucket=BUCKET)
    return StorageReader(S3Settings(s3_server.endpoint, access_key=s3mod.ACCESS_KEY, secret_key=s3mod.SECRET_KEY))


def put(s3_server: S3Server, key: str, body: bytes) -> str:
    s3_server.client().put_object(Bucket=BUCKET, Key=key, Body=body)
    return f"s3a://{BUCKET}/{key}"


def test_a_listed_parquet_file_is_read_at_its_size_without_a_stat(s3_server: S3Server, reader: StorageReader) -> None:
    body = parquet(5)
    uri = put(s3_server, "landing/orders-0-00000000000000000000", body)
    stat = reader.facts(uri, parquet=True)
    said = reader.facts(uri, parquet=True, size=len(body), modified_ms=SAID_MS)
    assert said.modification_time_ms == SAID_MS != stat.modification_time_ms
    assert said.size_bytes == stat.size_bytes == len(body)
    assert (said.num_records, said.schema_key, said.columns, said.coverage) == (
        stat.num_records,
        stat.schema_key,
        stat.columns,
        stat.coverage,
    )
    assert (
        json.loads(said.stats_json or "")
        == json.loads(stat.stats_json or "")
        == {
            "numRecords": 5,
            "minValues": {"offset": 0, "v": "value 0"},
            "maxValues": {"offset": 4, "v": "value 4"},
            "nullCount": {"offset": 0, "v": 0},
        }
    )


@pytest.mark.parametrize("rows_now", [2, 50], ids=["rewritten-shorter", "rewritten-longer"])
def test_an_object_not_of_the_listed_size_is_stated(s3_server: S3Server, reader: StorageReader, rows_now: int) -> None:
    """Listed at one size, then written again at another (a sink's retry): the read at the listed
    size fails (its bytes there are not a footer), and the stat's size and time are what the
    commit sees, so its check of the manifest's size refuses the file."""
    key = f"landing/orders-1-{rows_now:020d}"
    listed = len(parquet(10))
    put(s3_server, key, parquet(10))
    now = parquet(rows_now)
    uri = put(s3_server, key, now)
    got = reader.facts(uri, parquet=True, size=listed, modified_ms=SAID_MS)
    assert (got.size_bytes, got.num_records) == (len(now), rows_now)
    assert got.modification_time_ms != SAID_MS


def test_a_gone_or_foreign_object_is_refused_as_before(s3_server: S3Server, reader: StorageReader) -> None:
    with pytest.raises(DataFileError, match="does not exist"):
        reader.facts(f"s3a://{BUCKET}/landing/orders-2-0", parquet=True, size=100, modified_ms=SAID_MS)
    text = b'{"id": 1}\n' * 20
    uri = put(s3_server, "landing/orders-2-00000000000000000020", text)
    with pytest.raises(DataFileError, match="is not a readable Parquet file"):
        reader.facts(uri, parquet=True, size=len(text), modified_ms=SAID_MS)


def test_a_footer_whose_row_groups_reach_into_it_does_not_fit() -> None:
    body = parquet(100)
    meta = pq.ParquetFile(io.BytesIO(body)).metadata
    assert _fits(meta, len(body))
    assert not _fits(meta, len(body) - 1)


@pytest.mark.parametrize("where", ["s3", "local"])
def test_a_folder_of_own_objects_is_deleted_whole_and_a_missing_one_is_no_error(
    where: str, reader: StorageReader, tmp_path: Path
) -> None:
    base = f"s3a://{BUCKET}/t/" if where == "s3" else f"file://{tmp_path}/t/"
    for name in ("a.avro", "b.avro"):
        reader.put(f"{base}_lakegate/staging/{name}", b"Obj\x01")
    reader.put(f"{base}_lakegate/dead-letters/x.json", b"{}")
    reader.delete_own(f"{base}_lakegate/staging/")
    assert reader.list_own(f"{base}_lakegate/staging/") == []
    assert reader.list_own(f"{base}_lakegate/dead-letters/") == [f"{base}_lakegate/dead-letters/x.json"]
    reader.delete_own(f"{base}_lakegate/staging/")  # gone already: nothing to do
