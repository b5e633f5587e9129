"""Smoke: the Spark factory writes Delta tables (local and s3a) that delta-rs reads back alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from lakegate_stack.s3 import S3Server
from tests.delta_helpers import delta_rs_options

ROWS = [(i, f"name-{i}", i % 3) for i in range(250)]


def _write_and_check(spark: Any, uri: str, storage_options: dict[str, str] | None) -> None:
    df = spark.createDataFrame(ROWS, "id long, name string, part int")
    df.write.format("delta").mode("overwrite").save(uri)
    spark.createDataFrame([(1000, "late", 1)], "id long, name string, part int").write.format("delta").mode(
        "append"
    ).save(uri)

    expected = {(i, n, p) for i, n, p in ROWS} | {(1000, "late", 1)}
    by_spark = {(r.id, r.name, r.part) for r in spark.read.format("delta").load(uri).collect()}
    assert by_spark == expected

    table = DeltaTable(uri, storage_options=storage_options)
    assert table.version() == 1
    data = table.to_pyarrow_table().to_pydict()
    by_delta_rs = set(zip(data["id"], data["name"], data["part"], strict=True))
    assert by_delta_rs == expected
    history = table.history()
    assert [h["operation"] for h in history] == ["WRITE", "WRITE"]


def test_local_delta_table_round_trip(spark: Any, tmp_path: Path) -> None:
    _write_and_check(spark, str(tmp_path / "table"), None)


def test_s3a_delta_table_round_trip(spark: Any, s3_server: S3Server) -> None:
    s3_server.create_bucket("lake-smoke")
    options = delta_rs_options(s3_server.endpoint)
    _write_and_check(spark, "s3a://lake-smoke/orders", options)
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket="lake-smoke")["Contents"]]
    assert "orders/_delta_log/00000000000000000001.json" in keys
