"""An upsert table partitioned by ``[bucket(4, id), day(ts)]`` (key ``id``), on real Spark, Delta
and Iceberg, read back by value: keys updated into another day, deleted by tombstones, updated
back. After every round each live key is one row (its old row deleted from the partition it was in,
never left behind), every field equals the model's, each row lies in the partition its ``id`` and
``ts`` name, and the offsets are the sink's. The merge reads only the buckets the round's changed
keys are in (``bucket`` is decided by the key; ``day`` is not, so every day of those buckets is
read). The same test for both formats: only reading the table back differs."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from commit_service.delta.partitions import DeltaPartitioning
from commit_service.domain.partitioning import KeyPartition, parse_spec
from commit_service.domain.state import TableState
from commit_service.domain.upsert import UpsertSpec
from commit_service.errors import DataFileError
from commit_service.iceberg.partitions import IcebergPartitioning
from commit_service.round.partitions import key_scope
from lakegate_core.protocol import FileFormat
from lakegate_stack.fidelity import same
from tests.fixtures import ICEBERG_CATALOG
from tests.partition_helpers import DAY, Table
from tests.upsert_helpers import Landing, upsert_model

SPEC = ("bucket(4, id)", "day(ts)")


def change(i: int, day: int, minute: int, name: str) -> tuple[dict[str, int], dict[str, Any]]:
    return {"id": i}, {"id": i, "ts": DAY + timedelta(days=day, minutes=minute), "name": name, "n": i * 10 + day}


def placed(spark: Any, table: Table) -> list[tuple[int, Any, int, Any]]:
    """Each row's (id, ts) and the partition it lies in, (bucket, day), as the table records it:
    Delta's partition values (read by delta-rs), Iceberg's ``_partition`` (from its manifests)."""
    if table.format == "delta":
        return [(r["id"], r["ts"], r["id_bucket"], r["ts_day"]) for r in table.rows()]
    rows = spark.sql(f"SELECT id, ts, _partition FROM {ICEBERG_CATALOG}.{table.name}").collect()
    return [(r["id"], r["ts"], r["_partition"]["id_bucket"], r["_partition"]["ts_day"]) for r in rows]


def buckets(spark: Any, table: Table, ids: list[int]) -> dict[int, int]:
    """Each id's bucket as the table's format computes it (Spark's hash for Delta's generated
    column, Iceberg's murmur3 bucket function)."""
    bucket = "pmod(hash(id), 4)" if table.format == "delta" else f"{ICEBERG_CATALOG}.system.bucket(4, id)"
    frame = spark.createDataFrame([(i,) for i in ids], "id BIGINT").selectExpr("id", f"{bucket} AS b")
    return {r["id"]: r["b"] for r in frame.collect()}


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_keys_moving_days_in_a_bucketed_daily_upsert_table_leave_no_old_row_behind(
    spark: Any, tmp_path: Any, table_format: str, caplog: pytest.LogCaptureFixture
) -> None:
    upsert = UpsertSpec(("id",), delete_on_tombstone=True)
    table = Table(spark, tmp_path, table_format, "accounts", *SPEC, upsert=upsert)
    landing = Landing(table.root, "accounts")
    sent: list[dict[str, Any]] = []
    rounds = [
        [change(i, i % 2, i, "first") for i in range(40)],  # the 27th and the 28th
        [
            *(change(i, 2, i, "moved") for i in range(10)),  # to the 29th
            *(({"id": i}, None) for i in range(10, 15)),  # tombstones
            *(change(i, 2, i, "new") for i in range(40, 45)),
        ],
        [change(0, 0, 59, "back"), change(1, 0, 58, "back"), change(3, 2, 30, "again")],
    ]
    for n, records in enumerate(rounds):
        caplog.clear()
        with caplog.at_level(logging.INFO):
            pending, envelopes = landing.write(0, records, FileFormat.PARQUET)
            table.commit([pending])
        sent.extend(envelopes)
        model = upsert_model(sent, tombstones_delete=True)

        rows = table.rows()
        assert sorted(r["id"] for r in rows) == sorted(model), f"round {n}: a key missing or twice"
        for r in rows:
            want = model[r["id"]]
            assert same(want, {k: r[k] for k in want}), f"round {n}: {want} != {r}"
        bucket_of = buckets(spark, table, sorted(model))
        for i, ts, bucket, day in placed(spark, table):
            assert (bucket, day) == (bucket_of[i], ts.date()), f"round {n}: id {i} at {ts} lies in {bucket}, {day}"
        assert table.committer.snapshot().offsets == {tp: end for tp, end in landing_ends(landing).items()}

        merge = [m for m in caplog.messages if "the merge reads the partitions where" in m]
        if n == 0:
            assert merge == [], "the first round has no table to merge with"
            continue
        changed = sorted({(e["key"] or {})["id"] for e in envelopes})
        reads = len(set(buckets(spark, table, changed).values()))
        assert len(merge) == 1 and f"in {reads} value" in merge[0], (reads, merge)
        if n == 2:  # 3 keys, in fewer than 4 buckets: the scope leaves files out, for Spark's scan of each format
            assert reads < 4
            scope = key_scope(spark.createDataFrame([(i,) for i in changed], "id BIGINT"), key_parts(table))
            assert scope is not None
            assert 0 < scanned(table, scope[0]) < scanned(table, None)


def key_parts(table: Table) -> list[KeyPartition]:
    fields = parse_spec(SPEC)
    if table.format == "delta":
        return DeltaPartitioning(fields).key_parts(("id",), {"id": "long"})
    return IcebergPartitioning(fields, ("id_bucket", "ts_day")).key_parts(ICEBERG_CATALOG, ("id",))


def scanned(table: Table, where: str | None) -> int:
    """How many data files Spark's scan of the table reads (with the filter ``where``): Delta's
    file index after partition pruning, Iceberg's planned data files (its scan's metric)."""
    frame = table.spark_frame() if where is None else table.spark_frame().where(where)
    if table.format == "delta":
        return len(frame.inputFiles())
    frame.collect()
    leaves = frame._jdf.queryExecution().executedPlan().collectLeaves()
    return sum(int(leaves.apply(i).metrics().apply("resultDataFiles").value()) for i in range(leaves.size()))


def landing_ends(landing: Landing) -> dict[Any, int]:
    from kafka import TopicPartition

    return {TopicPartition(landing.topic, p): n for p, n in landing.next.items()}


def test_a_delta_upsert_round_names_the_file_whose_row_puts_nul_in_a_partition_value(spark: Any, tmp_path: Any) -> None:
    """An upsert round's rows are written by Spark into the partition each names: a row whose
    text partition value holds NUL (U+0000) would go raw into a path, so the write stops at it and
    the round names the file it came from (read alone), not the round's first file; the round's
    other file then commits without it, and later rounds go on."""
    table = Table(spark, tmp_path, "delta", "names", "truncate(1, name)", upsert=UpsertSpec(("id",)))
    landing = Landing(table.root, "names")

    def row(i: int, name: str) -> tuple[dict[str, int], dict[str, Any]]:
        return {"id": i}, {"id": i, "name": name, "n": i}

    first, sent = landing.write(0, [row(1, "a"), row(2, "b")], FileFormat.JSONL)
    table.commit([first])
    fine, fine_sent = landing.write(0, [row(1, "aa"), row(3, "c")], FileFormat.JSONL)
    bad, _ = landing.write(1, [row(4, "d"), row(5, "\x00e")], FileFormat.JSONL)
    with pytest.raises(DataFileError, match=r"partition name_trunc has a NUL character") as refused:
        table.commit([fine, bad])
    assert refused.value.path == bad.file.path
    table.state = TableState("names")  # the coordinator takes the refused file out of the plan
    table.state.recovered(table.committer.snapshot().offsets, table.committer.snapshot().version)
    table.commit([fine])
    model = upsert_model(sent + fine_sent, tombstones_delete=False)
    rows = table.rows()
    assert sorted(r["id"] for r in rows) == sorted(model)
    for r in rows:
        assert same(model[r["id"]], {k: v for k, v in r.items() if not k.startswith("_kafka_") and k != "name_trunc"})
