"""The commit path on S3: files in the S3 server, table at s3a://, footers read over S3."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from commit_service.config import S3Settings
from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.txn import app_id
from commit_service.domain.compaction import plan_compaction
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.errors import DataFileError
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_stack import s3 as s3mod
from lakegate_stack.s3 import S3Server
from tests.delta_helpers import checkpoint_in_thread, delta_rs_options


def upload(s3: Any, bucket: str, key: str, partition: int, start: int, count: int) -> PendingFile:
    buf = io.BytesIO()
    pq.write_table(
        pa.table({"offset": list(range(start, start + count)), "v": [f"x{o}" for o in range(start, start + count)]}),
        buf,
    )
    s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())
    f = DataFile(
        f"s3a://{bucket}/{key}",
        "orders",
        partition,
        start,
        start + count - 1,
        len(buf.getvalue()),
        FileFormat.PARQUET,
        count,
    )
    return PendingFile(f, f"m-{key}", "sc")


def test_commit_on_s3(spark: Any, s3_server: S3Server) -> None:
    s3 = s3_server.client()
    s3.create_bucket(Bucket="lake-commit")
    storage = StorageReader(S3Settings(s3_server.endpoint, access_key=s3mod.ACCESS_KEY, secret_key=s3mod.SECRET_KEY))
    committer = DeltaCommitter(spark, "orders", "s3://lake-commit/orders", storage)
    state = TableState("orders")
    files = [upload(s3, "lake-commit", f"orders/data/orders-{p}-{s}", p, s, 25) for p in range(2) for s in (0, 25)]
    for f in files:
        state.offer(f, now=0)
    plan = state.plan(now=0, force=True)
    record = committer.commit(plan)  # type: ignore[arg-type]
    state.committed_plan(plan, record.version, now=0)  # type: ignore[arg-type]

    options = delta_rs_options(s3_server.endpoint)
    table = DeltaTable("s3://lake-commit/orders", storage_options=options)
    assert sorted(table.to_pyarrow_table().column("offset").to_pylist()) == sorted(list(range(50)) * 2)
    assert table.transaction_version(app_id("orders", ("orders", 1))) == 50
    assert spark.read.format("delta").load("s3a://lake-commit/orders").count() == 100
    assert set(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()) == {
        f"data/orders-{p}-{s}" for p in range(2) for s in (0, 25)
    }

    wrong = upload(s3, "lake-commit", "orders/data/orders-0-50", 0, 50, 10)
    wrong = PendingFile(DataFile(**{**wrong.file.__dict__, "size_bytes": wrong.file.size_bytes + 1}), "m", "sc")
    state.offer(wrong, now=0)
    with pytest.raises(DataFileError, match="the manifest said"):
        committer.commit(state.plan(now=0, force=True))  # type: ignore[arg-type]
    assert committer.snapshot().version == 0


def test_background_checkpoint_on_s3(spark: Any, s3_server: S3Server) -> None:
    """Delta Kernel writes the checkpoint over s3a with the session's storage settings (no Spark
    job), and Delta on Spark and delta-rs both start from it."""
    s3 = s3_server.client()
    s3.create_bucket(Bucket="lake-checkpoint")
    storage = StorageReader(S3Settings(s3_server.endpoint, access_key=s3mod.ACCESS_KEY, secret_key=s3mod.SECRET_KEY))
    committer = DeltaCommitter(spark, "orders", "s3://lake-checkpoint/orders", storage, checkpoint_in_commit=False)
    state = TableState("orders")
    for n in range(12):
        state.offer(upload(s3, "lake-checkpoint", f"orders/data/orders-0-{n * 10}", 0, n * 10, 10), now=0)
        plan = state.plan(now=0, force=True)
        assert plan is not None
        state.committed_plan(plan, committer.commit(plan).version, now=0)
    run, _ = checkpoint_in_thread(spark, committer)
    assert run.detail == "checkpoint of version 10 (Delta Kernel)"
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="lake-checkpoint", Prefix="orders/_delta_log/")["Contents"]}
    assert "orders/_delta_log/00000000000000000010.checkpoint.parquet" in keys
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert spark.read.format("delta").load("s3a://lake-checkpoint/orders").count() == 120
    table = DeltaTable("s3://lake-checkpoint/orders", storage_options=delta_rs_options(s3_server.endpoint))
    assert sorted(table.to_pyarrow_table().column("offset").to_pylist()) == list(range(120))
    assert table.transaction_version(app_id("orders", ("orders", 0))) == 120


def test_small_files_merged_by_arrow_on_s3(spark: Any, s3_server: S3Server) -> None:
    """A merge of small files reads them over S3 and puts the merged file there; delta-rs and
    Spark read every value back, and the offsets are those of the rounds."""
    s3 = s3_server.client()
    s3.create_bucket(Bucket="lake-merge")
    storage = StorageReader(S3Settings(s3_server.endpoint, access_key=s3mod.ACCESS_KEY, secret_key=s3mod.SECRET_KEY))
    committer = DeltaCommitter(spark, "orders", "s3://lake-merge/orders", storage)
    state = TableState("orders")
    for start in (0, 25, 50):  # three rounds of two files each
        for p in range(2):
            state.offer(upload(s3, "lake-merge", f"orders/data/orders-{p}-{start}", p, start, 25), now=0)
        plan = state.plan(now=0, force=True)
        record = committer.commit(plan)  # type: ignore[arg-type]
        state.committed_plan(plan, record.version, now=0)  # type: ignore[arg-type]

    small = committer.small_files(1 << 20)
    merged = committer.compact_small(plan_compaction(small, 1 << 20, 2))
    assert (
        merged.detail is not None and "merged 6 small files" in merged.detail and "1 of the 1 by Arrow" in merged.detail
    )
    assert merged.files_after == 1

    table = DeltaTable("s3://lake-merge/orders", storage_options=delta_rs_options(s3_server.endpoint))
    [path] = pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()
    assert path.startswith("merged/"), path
    rows = table.to_pyarrow_table().to_pylist()
    assert sorted((r["offset"], r["v"]) for r in rows) == sorted((o, f"x{o}") for o in range(75) for _ in range(2))
    assert spark.read.format("delta").load("s3a://lake-merge/orders").count() == 150
    assert committer.snapshot().offsets == {("orders", 0): 75, ("orders", 1): 75}
    assert committer.ledger().history().commits[-1].rewrite
