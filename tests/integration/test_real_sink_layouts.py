"""What real storage sinks write, committed on real Spark + Delta and read back by delta-rs.

Aiven's S3 sink writes gzip JSON lines by default, names them without an extension under a custom
template or ``aws.s3.prefix``, and wraps each record as ``{"value": {...}}`` (plus ``key``,
``offset``, ``timestamp`` as configured); sinks often write to a landing prefix outside the table.
Each test builds such files byte for byte and checks the table with both readers.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import cramjam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from commit_service.config import Placement, S3Settings
from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.txn import app_id
from commit_service.domain.content import Unwrap
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_stack import s3 as s3mod
from lakegate_stack.s3 import S3Server
from tests.delta_helpers import commit_all, delta_rs_options

TOPIC = "orders"
CODECS = {
    "gzip": gzip.compress,
    "zstd": lambda b: bytes(cramjam.zstd.compress(b)),
    "snappy": lambda b: bytes(cramjam.snappy.compress(b)),
    "none": lambda b: b,
}


def envelope_lines(partition: int, start: int, count: int) -> bytes:
    """Aiven's JSONL with format.output.fields=key,value,offset,timestamp and the envelope on."""
    rows = (
        {
            "key": f"k{o}",
            "value": {"id": partition * 1_000 + o, "amount": o * 0.5, "customer": {"name": f"c{o % 3}"}},
            "offset": o,
            "timestamp": 1_700_000_000_000 + o,
        }
        for o in range(start, start + count)
    )
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def landed(path: Path, data: bytes, partition: int, start: int, count: int, fmt: FileFormat) -> PendingFile:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    f = DataFile(f"file://{path}", TOPIC, partition, start, start + count - 1, len(data), fmt, count)
    return PendingFile(f, f"m-{path.name}", "sc")


def adds(table: DeltaTable) -> list[str]:
    return list(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())


def test_aiven_jsonl_in_any_codec_and_name_lands_as_top_level_columns(spark: Any, tmp_path: Path) -> None:
    landing, root = tmp_path / "landing", tmp_path / "lake" / "orders"
    files = [  # the names Aiven gives: default template (+ codec extension), prefix naming (none)
        landed(landing / "orders-0-0.gz", CODECS["gzip"](envelope_lines(0, 0, 40)), 0, 0, 40, FileFormat.JSONL),
        landed(
            landing / "orders-0-00000000000000000040",
            CODECS["gzip"](envelope_lines(0, 40, 10)),
            0,
            40,
            10,
            FileFormat.JSONL,
        ),
        landed(landing / "orders-1-0.zst", CODECS["zstd"](envelope_lines(1, 0, 25)), 1, 0, 25, FileFormat.JSONL),
        landed(landing / "orders-2-0.snappy", CODECS["snappy"](envelope_lines(2, 0, 15)), 2, 0, 15, FileFormat.JSONL),
        landed(landing / "orders-3-0", CODECS["none"](envelope_lines(3, 0, 5)), 3, 0, 5, FileFormat.JSONL),
    ]
    committer = DeltaCommitter(spark, TOPIC, str(root), StorageReader(), placement=Placement.COPY_INTO_TABLE)
    record = commit_all(committer, TableState(committer.table), files)
    assert record.records == 95 and record.offsets == {(TOPIC, 0): 50, (TOPIC, 1): 25, (TOPIC, 2): 15, (TOPIC, 3): 5}

    table = DeltaTable(str(root))
    data = table.to_pyarrow_table()
    assert "value" not in data.column_names
    assert {"id", "amount", "customer", "_kafka_key", "_kafka_offset", "_kafka_timestamp"} <= set(data.column_names)
    rows = sorted(zip(data.column("id").to_pylist(), data.column("_kafka_offset").to_pylist(), strict=True))
    expected = [(p * 1_000 + o, o) for p, n in ((0, 50), (1, 25), (2, 15), (3, 5)) for o in range(n)]
    assert rows == sorted(expected), "every record exactly once, with its Kafka offset"
    assert all(not path.startswith(("file:", "/")) for path in adds(table)), "rewritten inside the table root"
    assert table.transaction_version(app_id(TOPIC, (TOPIC, 0))) == 50
    assert spark.read.format("delta").load(str(root)).where("customer.name = 'c1'").count() == len(
        [e for e in expected if e[1] % 3 == 1]
    )


def test_unwrap_none_keeps_the_envelope_and_corrupt_text_is_refused(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "raw"
    ok = landed(tmp_path / "l" / "orders-0-0", gzip.compress(envelope_lines(0, 0, 3)), 0, 0, 3, FileFormat.JSONL)
    committer = DeltaCommitter(spark, "raw", str(root), StorageReader(), unwrap=Unwrap.NONE)
    commit_all(committer, TableState(committer.table), [ok])
    assert set(DeltaTable(str(root)).to_pyarrow_table().column_names) == {"key", "value", "offset", "timestamp"}

    bad = landed(tmp_path / "l" / "orders-0-3", gzip.compress(b'{"value": 1}\nnot json\n'), 0, 3, 1, FileFormat.JSONL)
    with pytest.raises(Exception, match="not jsonl records"):
        commit_all(committer, TableState("raw", {(TOPIC, 0): 3}), [bad])
    truncated = landed(tmp_path / "l" / "orders-0-5", gzip.compress(b'{"a": 1}\n')[:12], 0, 3, 1, FileFormat.JSONL)
    with pytest.raises(Exception, match="not a valid gzip stream"):
        commit_all(committer, TableState("raw", {(TOPIC, 0): 3}), [truncated])
    assert committer.snapshot().version == 0, "nothing committed"


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def test_parquet_envelopes_are_rewritten_plain_parquet_is_copied_into_the_table(spark: Any, tmp_path: Path) -> None:
    landing, root = tmp_path / "landing", tmp_path / "lake" / "orders"
    value = pa.array([{"id": i, "note": f"n{i}"} for i in range(10)])
    wrapped = pa.table({"key": [f"k{i}" for i in range(10)], "offset": list(range(10)), "value": value})
    plain = pa.table({"id": list(range(10, 20)), "note": [f"n{i}" for i in range(10, 20)]})
    files = [
        landed(landing / "orders-0-0", parquet_bytes(wrapped), 0, 0, 10, FileFormat.PARQUET),
        landed(landing / "orders-1-0", parquet_bytes(plain), 1, 0, 10, FileFormat.PARQUET),
    ]
    committer = DeltaCommitter(spark, TOPIC, str(root), StorageReader(), placement=Placement.COPY_INTO_TABLE)
    commit_all(committer, TableState(committer.table), files)
    table = DeltaTable(str(root))
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(20))
    paths = adds(table)
    assert "data/orders/1/orders-1-0" in paths, "plain Parquet: copied under data/<topic>/<partition>/, not rewritten"
    assert len(paths) == 2 and all(not p.startswith(("file:", "/")) for p in paths)
    assert (root / "data" / "orders" / "1" / "orders-1-0").read_bytes() == (landing / "orders-1-0").read_bytes()
    assert not (root / "data" / "orders" / "0").exists(), "an envelope file is rewritten, never copied"
    assert spark.read.format("delta").load(str(root)).count() == 20


def test_copy_into_table_from_a_landing_bucket_on_s3(spark: Any, s3_server: S3Server) -> None:
    s3 = s3_server.client()
    for bucket in ("landing-copy", "lake-copy"):
        s3.create_bucket(Bucket=bucket)
    storage = StorageReader(S3Settings(s3_server.endpoint, access_key=s3mod.ACCESS_KEY, secret_key=s3mod.SECRET_KEY))
    committer = DeltaCommitter(spark, TOPIC, "s3a://lake-copy/orders", storage, placement=Placement.COPY_INTO_TABLE)
    files = []
    for p in range(2):
        body = parquet_bytes(pa.table({"id": [p * 100 + o for o in range(30)], "offset": list(range(30))}))
        key = f"topics/orders-{p}-00000000000000000000"
        s3.put_object(Bucket="landing-copy", Key=key, Body=body)
        f = DataFile(f"s3a://landing-copy/{key}", TOPIC, p, 0, 29, len(body), FileFormat.PARQUET, 30)
        files.append(PendingFile(f, f"m{p}", "sc"))
    text = gzip.compress(envelope_lines(2, 0, 20))
    s3.put_object(Bucket="landing-copy", Key="topics/orders-2-00000000000000000000", Body=text)
    f = DataFile(
        "s3a://landing-copy/topics/orders-2-00000000000000000000", TOPIC, 2, 0, 19, len(text), FileFormat.JSONL, 20
    )
    files.append(PendingFile(f, "m2", "sc"))
    commit_all(committer, TableState(committer.table), files)

    options = delta_rs_options(s3_server.endpoint)
    table = DeltaTable("s3://lake-copy/orders", storage_options=options)
    ids = table.to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == sorted([p * 100 + o for p in range(2) for o in range(30)] + [2_000 + o for o in range(20)])
    assert {p for p in adds(table) if p.startswith("data/")} == {
        f"data/orders/{p}/orders-{p}-00000000000000000000" for p in range(2)
    }
    assert spark.read.format("delta").load("s3a://lake-copy/orders").count() == 80
    assert len(s3.list_objects_v2(Bucket="landing-copy")["Contents"]) == 3, "the landing files stay where they are"
