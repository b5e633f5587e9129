"""Partitioned Delta tables (``tables[].partition_by``) on real Spark + Delta, read back by value.

Files as a sink writes them: a Parquet file whose rows all fall in one partition is added where it
lies with that partition's values; one that spans partitions (a flush across midnight) is rewritten
by Spark, one file per partition; JSON lines in Aiven's envelope are rewritten into partitions of
``_kafka_timestamp``. Every field of every record is compared with what delta-rs and Spark read,
and both readers are shown to prune by a filter on the source column.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.partitions import DeltaPartitioning
from commit_service.domain.partitioning import parse_spec
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.errors import SchemaMismatchError, TableLayoutError
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_stack.fidelity import same
from tests.delta_helpers import commit_all

TOPIC = "clicks"
DAY = datetime(2026, 11, 27, tzinfo=UTC)


def parquet_file(root: Path, partition: int, start: int, times: list[datetime | None]) -> tuple[PendingFile, list]:
    """A plain Parquet file of the sink under the table root (``id``, ``ts``, ``page``)."""
    rows = [
        {"id": partition * 1000 + start + i, "ts": t, "page": f"/p/{start + i}", "offset": start + i}
        for i, t in enumerate(times)
    ]
    schema = pa.schema(
        [("id", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("page", pa.string()), ("offset", pa.int64())]
    )
    path = root / "landing" / f"{TOPIC}-{partition}-{start}"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    end = start + len(times) - 1
    f = DataFile(f"file://{path}", TOPIC, partition, start, end, path.stat().st_size, FileFormat.PARQUET, len(times))
    return PendingFile(f, f"m-{partition}-{start}", "sc-1"), rows


def adds(root: Path, version: int) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line)["add"] for line in text.splitlines() if "add" in json.loads(line)]


def committer_for(spark: Any, root: Path, tmp_path: Path, *spec: str) -> DeltaCommitter:
    return DeltaCommitter(
        spark,
        "clicks",
        str(root),
        StorageReader(local_roots=[str(tmp_path)]),
        partitioning=DeltaPartitioning(parse_spec(spec)),
    )


def test_a_day_partitioned_table_adds_pinned_files_in_place_and_splits_one_across_midnight(
    spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "clicks"
    committer = committer_for(spark, root, tmp_path, "day(ts)")
    one_day = [DAY + timedelta(hours=10, minutes=i) for i in range(50)]  # all on the 27th
    midnight = [DAY + timedelta(hours=23, minutes=35 + i) for i in range(50)]  # 25 on the 27th, 25 on the 28th
    a, rows_a = parquet_file(root, 0, 0, one_day)
    b, rows_b = parquet_file(root, 0, 50, midnight)
    c, rows_c = parquet_file(root, 1, 0, [None] * 10)  # no time at all: the null partition
    state = TableState("clicks")
    record = commit_all(committer, state, [a, b, c])
    assert record.version == 0 and record.records == 110

    landed = adds(root, 0)
    by_path = {x["path"]: x for x in landed}
    assert by_path[f"landing/{TOPIC}-0-0"]["partitionValues"] == {"ts_day": "2026-11-27"}  # in place, not copied
    assert by_path[f"landing/{TOPIC}-1-0"]["partitionValues"] == {"ts_day": None}
    split = [x for x in landed if not x["path"].startswith("landing/")]
    assert sorted(x["partitionValues"]["ts_day"] for x in split) == ["2026-11-27", "2026-11-28"]
    assert all(x["path"].startswith(f"ts_day={x['partitionValues']['ts_day']}/") for x in split)
    assert sorted(json.loads(x["stats"])["numRecords"] for x in split) == [25, 25]

    meta = json.loads(DeltaTable(str(root)).metadata().schema.to_json())  # the generated column, as Delta holds it
    generated = {f["name"]: f["metadata"] for f in meta["fields"]}["ts_day"]
    assert generated == {"delta.generationExpression": "CAST(`ts` AS DATE)"}
    assert DeltaTable(str(root)).metadata().partition_columns == ["ts_day"]

    expected = {r["id"]: {**r, "ts_day": r["ts"].date() if r["ts"] else None} for r in rows_a + rows_b + rows_c}
    spark_rows = [r.asDict() for r in spark.read.format("delta").load(str(root)).collect()]
    rs_rows = DeltaTable(str(root)).to_pyarrow_table().to_pylist()
    for got in (spark_rows, rs_rows):
        assert sorted(r["id"] for r in got) == sorted(expected)
        for r in got:
            assert same(expected[r["id"]], r), f"{expected[r['id']]} != {r}"

    # a filter on the source column prunes by the generated partition (Spark), and delta-rs by the partition
    late = spark.read.format("delta").load(str(root)).where("ts >= '2026-11-28 00:00:00'")
    assert [f.rsplit("/", 2)[-2] for f in late.inputFiles()] == ["ts_day=2026-11-28"]
    assert late.count() == 25
    on_28th = DeltaTable(str(root)).to_pyarrow_table(partitions=[("ts_day", "=", "2026-11-28")])
    assert sorted(on_28th.column("id").to_pylist()) == sorted(r["id"] for r in rows_b if r["ts"] >= DAY + timedelta(1))

    # the next round goes into the same table and layout
    d, _ = parquet_file(root, 0, 100, [DAY + timedelta(days=1, hours=3)] * 5)
    commit_all(committer, state, [d])
    assert [x["partitionValues"] for x in adds(root, 1)] == [{"ts_day": "2026-11-28"}]
    assert spark.read.format("delta").load(str(root)).where("ts_day = '2026-11-28'").count() == 30


def test_envelope_json_lines_are_rewritten_into_hour_and_identity_partitions(spark: Any, tmp_path: Path) -> None:
    """Aiven's default output (JSON lines in the envelope) into ``[region, hour(_kafka_timestamp)]``:
    every record in the partition of its Kafka timestamp's hour, every field read back."""
    root = tmp_path / "events"
    committer = committer_for(spark, root, tmp_path, "region", "hour(_kafka_timestamp)")
    base = int((DAY + timedelta(hours=13, minutes=50)).timestamp() * 1000)
    envelopes = [
        {
            "key": f"k{i}",
            "value": {"id": i, "region": "eu" if i % 3 else "us", "amount": i * 1.5},
            "offset": i,
            "timestamp": base + i * 60_000,  # 13:50 .. 14:09: two hours
        }
        for i in range(20)
    ]
    path = tmp_path / "landing" / f"{TOPIC}-0-0"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in envelopes))
    f = DataFile(f"file://{path}", TOPIC, 0, 0, 19, path.stat().st_size, FileFormat.JSONL)
    commit_all(committer, TableState("clicks"), [PendingFile(f, "m-0-0", "sc-1")])

    landed = adds(root, 0)
    assert sorted(tuple(sorted(x["partitionValues"].items())) for x in landed) == sorted(
        (("_kafka_timestamp_hour", h), ("region", r)) for h in ("2026-11-27-13", "2026-11-27-14") for r in ("eu", "us")
    )
    rows = {r["id"]: r for r in DeltaTable(str(root)).to_pyarrow_table().to_pylist()}
    assert sorted(rows) == list(range(20))
    for e in envelopes:
        at = datetime.fromtimestamp(e["timestamp"] / 1000, UTC)
        want = {
            **e["value"],
            "_kafka_key": e["key"],
            "_kafka_offset": e["offset"],
            "_kafka_timestamp": at,
            "_kafka_timestamp_hour": at.strftime("%Y-%m-%d-%H"),
        }
        assert same(want, {k: v for k, v in rows[e["value"]["id"]].items() if k in want}), rows[e["value"]["id"]]
    two = DeltaTable(str(root)).to_pyarrow_table(partitions=[("_kafka_timestamp_hour", "=", "2026-11-27-14")])
    assert two.num_rows == 10


def test_a_table_of_another_layout_and_a_file_without_the_column_are_refused(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "clicks"
    a, _ = parquet_file(root, 0, 0, [DAY] * 3)
    commit_all(committer_for(spark, root, tmp_path, "day(ts)"), TableState("clicks"), [a])
    for other in (("hour(ts)",), ()):  # partition_by changed, or dropped, after the table was made
        committer = committer_for(spark, root, tmp_path, *other)
        b, _ = parquet_file(root, 0, 3, [DAY] * 3)
        state = TableState("clicks")
        snap = committer.snapshot()
        state.recovered(snap.offsets, snap.version)
        with pytest.raises(TableLayoutError, match=r"ts_day"):
            commit_all(committer, state, [b])
    assert DeltaTable(str(root)).version() == 0

    fresh = tmp_path / "fresh"
    path = fresh / "landing" / f"{TOPIC}-0-0"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"id": 1, "offset": 0}]), path)
    f = DataFile(f"file://{path}", TOPIC, 0, 0, 0, path.stat().st_size, FileFormat.PARQUET, 1)
    with pytest.raises(SchemaMismatchError, match=r"no column 'ts'.*day\(ts\)"):
        commit_all(committer_for(spark, fresh, tmp_path, "day(ts)"), TableState("clicks"), [PendingFile(f, "m", "s")])
