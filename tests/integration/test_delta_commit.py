"""DeltaCommitter on real Spark + Delta: in-place Parquet adds, txn offsets, metadata, evolution.

Every table is read back three ways: delta-spark, the independent delta-rs reader (``deltalake``),
and the raw ``_delta_log`` JSON.
"""

from __future__ import annotations

import base64
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.txn import app_id
from commit_service.domain.coverage import OffsetCheck
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.errors import OffsetsMovedError, RoundShortfallError, SchemaMismatchError
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import CsvLayout, DataFile, FileFormat
from tests.delta_helpers import commit_all

TOPIC = "orders"


def write_file(
    root: Path, partition: int, start: int, count: int, *, extra: dict[str, Any] | None = None
) -> PendingFile:
    path = root / "data" / f"{TOPIC}-{partition}-{start}"
    path.parent.mkdir(parents=True, exist_ok=True)
    cols: dict[str, Any] = {
        "id": pa.array([partition * 100_000 + o for o in range(start, start + count)], pa.int64()),
        "offset": pa.array(list(range(start, start + count)), pa.int64()),
        "note": pa.array([f"n{o}" for o in range(start, start + count)], pa.string()),
    }
    cols.update(extra or {})
    pq.write_table(pa.table(cols), path)
    f = DataFile(
        f"file://{path}", TOPIC, partition, start, start + count - 1, path.stat().st_size, FileFormat.PARQUET, count
    )
    return PendingFile(f, f"m-{partition}-{start}", "sc-1")


def log_actions(root: Path, version: int) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_commit_parquet_in_place_with_offsets(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "orders"
    committer = DeltaCommitter(spark, "orders", str(root), StorageReader())
    state = TableState("orders")
    files = [write_file(root, p, s, 50) for p in range(3) for s in (0, 50)]
    record = commit_all(committer, state, files)

    assert record.version == 0 and record.files == 6 and record.records == 300
    assert record.offsets == {(TOPIC, p): 100 for p in range(3)}
    assert spark.read.format("delta").load(str(root)).count() == 300

    table = DeltaTable(str(root))
    ids = table.to_pyarrow_table().column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 300
    for p in range(3):
        assert table.transaction_version(app_id("orders", (TOPIC, p))) == 100
    meta = json.loads(table.history()[0]["userMetadata"])
    assert meta["offsets"] == {TOPIC: {"0": 100, "1": 100, "2": 100}} and meta["records"] == 300

    actions = log_actions(root, 0)
    adds = [a["add"] for a in actions if "add" in a]
    assert sorted(a["path"] for a in adds) == sorted(f"data/{TOPIC}-{p}-{s}" for p in range(3) for s in (0, 50))
    stats = json.loads(adds[0]["stats"])
    assert stats["numRecords"] == 50 and stats["nullCount"]["id"] == 0 and "id" in stats["minValues"]
    txns = {a["txn"]["appId"]: a["txn"]["version"] for a in actions if "txn" in a}
    assert txns == {f"lakegate-orders-{TOPIC}-{p}": 100 for p in range(3)}
    commit_info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert commit_info["operation"] == "STREAMING UPDATE"

    history = spark.sql(f"DESCRIBE HISTORY delta.`{root}`").collect()
    assert json.loads(history[0]["userMetadata"])["commit_id"] == record.commit_id

    snap = committer.snapshot()
    assert snap.version == 0 and snap.offsets == {(TOPIC, p): 100 for p in range(3)}


def test_second_writer_with_the_same_plan_never_duplicates(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "orders"
    files = [write_file(root, 0, 0, 10), write_file(root, 0, 10, 10)]
    a = DeltaCommitter(spark, "orders", str(root), StorageReader())
    b = DeltaCommitter(spark, "orders", str(root), StorageReader())
    sa, sb = TableState("orders"), TableState("orders")
    commit_all(a, sa, files[:1])
    for f in files:
        sb.offer(f, now=0)
    plan = sb.plan(now=0, force=True)
    with pytest.raises(OffsetsMovedError) as err:
        b.commit(plan)  # type: ignore[arg-type]
    assert err.value.offsets == {(TOPIC, 0): 10}
    sb.recovered(err.value.offsets, err.value.version)
    plan = sb.plan(now=0, force=True)
    assert plan is not None and [p.file.start_offset for p in plan.files] == [10]
    b.commit(plan)
    offsets = DeltaTable(str(root)).to_pyarrow_table().column("offset").to_pylist()
    assert sorted(offsets) == list(range(20))


def test_two_writers_racing_for_each_version_lose_no_commit(spark: Any, tmp_path: Path) -> None:
    """Log writes to a file: table go through Delta's LocalLogStore (no child process per rename),
    which checks that a version is new and renames under one lock. Two committers of the process
    commit at the same moment, round after round: each commit gets a version of its own and none
    replaces another (with Delta's HDFSLogStore, the default it replaces, this passes too)."""
    root = tmp_path / "orders"
    rounds = 8
    files = {p: [write_file(root, p, n * 10, 10) for n in range(rounds)] for p in (0, 1)}
    writers = {p: (DeltaCommitter(spark, "orders", str(root), StorageReader()), TableState("orders")) for p in (0, 1)}
    commit_all(*writers[0], [write_file(root, 2, 0, 1)])  # the table exists before the race
    barrier = threading.Barrier(2)

    def write(partition: int) -> list[int]:
        committer, state = writers[partition]
        versions = []
        for f in files[partition]:
            barrier.wait(timeout=60)  # both start each round together
            versions.append(commit_all(committer, state, [f]).version)
        return versions

    with ThreadPoolExecutor(2) as pool:
        versions = [v for vs in pool.map(write, (0, 1)) for v in vs]
    assert sorted(versions) == list(range(1, 2 * rounds + 1)), "every commit has a version of its own"
    table = DeltaTable(str(root)).to_pyarrow_table(columns=["id"])
    expected = sorted([p * 100_000 + o for p in (0, 1) for o in range(rounds * 10)] + [200_000])
    assert sorted(table.column("id").to_pylist()) == expected, "no commit was replaced"


def test_schema_evolves_with_a_nullable_column_and_rejects_a_type_change(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "orders"
    committer = DeltaCommitter(spark, "orders", str(root), StorageReader())
    state = TableState("orders")
    commit_all(committer, state, [write_file(root, 0, 0, 5)])
    commit_all(committer, state, [write_file(root, 0, 5, 5, extra={"coupon": pa.array(["x"] * 5)})])
    df = spark.read.format("delta").load(str(root))
    assert "coupon" in df.columns and df.where("coupon IS NULL").count() == 5

    bad = write_file(root, 0, 10, 5, extra={"note": pa.array([1, 2, 3, 4, 5], pa.int64())})
    state.offer(bad, now=0)
    plan = state.plan(now=0, force=True)
    with pytest.raises(SchemaMismatchError, match="'note' is long in this file but string in the table"):
        committer.commit(plan)  # type: ignore[arg-type]
    assert committer.snapshot().version == 1  # nothing committed


def test_jsonl_files_are_converted_in_the_same_commit(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "events"
    src = tmp_path / "landing" / "events-0-0"
    src.parent.mkdir(parents=True)
    src.write_text("".join(json.dumps({"id": i, "kind": "click"}) + "\n" for i in range(7)))
    f = DataFile(f"file://{src}", "events", 0, 0, 6, src.stat().st_size, FileFormat.JSONL, 7)
    committer = DeltaCommitter(spark, "events", str(root), StorageReader())
    record = commit_all(committer, TableState("events"), [PendingFile(f, "m", "sc")])
    table = DeltaTable(str(root))
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(7))
    assert table.transaction_version(app_id("events", ("events", 0))) == 7
    assert record.version == 0


def test_many_jsonl_files_are_one_frame_and_a_mistyped_one_is_named(spark: Any, tmp_path: Path) -> None:
    """A commit's JSON-lines files are read as one frame (one schema inference for all); when that
    frame does not fit the table, each file is checked alone so the error names the culprit."""
    root, landing = tmp_path / "events", tmp_path / "landing"
    landing.mkdir()

    def jsonl(partition: int, start: int, rows: list[dict[str, Any]]) -> PendingFile:
        src = landing / f"events-{partition}-{start}"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
        end = start + len(rows) - 1
        return PendingFile(
            DataFile(f"file://{src}", "events", partition, start, end, src.stat().st_size, FileFormat.JSONL, len(rows)),
            "m",
            "sc",
        )

    committer = DeltaCommitter(spark, "events", str(root), StorageReader())
    state = TableState("events")
    files = [jsonl(p, 0, [{"id": p * 100 + i, "kind": "click"} for i in range(5)]) for p in range(6)]
    commit_all(committer, state, files)
    assert DeltaTable(str(root)).to_pyarrow_table().num_rows == 30

    good = [jsonl(p, 5, [{"id": 1, "kind": "view"}] * 5) for p in range(5)]
    bad = jsonl(5, 5, [{"id": "not-a-number", "kind": "view"}] * 5)
    for f in [*good, bad]:
        state.offer(f, now=0)
    plan = state.plan(now=0, force=True)
    assert plan is not None and len(plan.files) == 6
    with pytest.raises(SchemaMismatchError) as caught:
        committer.commit(plan)
    assert caught.value.path == bad.file.path and "'id'" in str(caught.value)
    assert committer.snapshot().version == 0


def aiven_csv(path: Path, start: int, values: list[Any]) -> DataFile:
    """A CSV file as Aiven's sink writes it with ``format.output.fields=key,value,offset,timestamp``:
    no header, key and value base64, no newline after the last record."""
    b64 = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
    lines = [
        f"{b64(f'k{start + i}')},{'' if v is None else b64(json.dumps(v))},{start + i},{1_700_000_000_000 + i}"
        for i, v in enumerate(values)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    layout = CsvLayout(("key", "value", "offset", "timestamp"))
    return DataFile(
        f"file://{path}", "clicks", 0, start, start + len(values) - 1, path.stat().st_size, FileFormat.CSV, csv=layout
    )


def test_aivens_headerless_csv_lands_every_record_and_field(spark: Any, tmp_path: Path) -> None:
    values = [{"id": i, "page": f"/p{i % 3}", "geo": {"c": "NO"} if i % 2 else None} for i in range(5)] + [None]
    f = aiven_csv(tmp_path / "landing" / "clicks-0-0", 0, values)
    root = tmp_path / "clicks"
    commit_all(
        DeltaCommitter(spark, "clicks", str(root), StorageReader()), TableState("clicks"), [PendingFile(f, "m", "sc")]
    )
    rows = sorted(DeltaTable(str(root)).to_pyarrow_table().to_pylist(), key=lambda r: r["_kafka_offset"])
    assert len(rows) == 6
    for i, (row, value) in enumerate(zip(rows, values, strict=True)):
        assert row["_kafka_key"] == f"k{i}" and row["_kafka_offset"] == i
        assert row["_kafka_timestamp"] == datetime.fromtimestamp((1_700_000_000_000 + i) / 1000, UTC)
        assert {k: row[k] for k in ("id", "page", "geo")} == (value or {"id": None, "page": None, "geo": None})


def test_a_csv_read_with_a_header_row_is_refused_by_the_round_guard(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read as if its first line were a header (what the service did before), a file would commit
    one record short; the round guard counts the file's lines and refuses the round. (The orphan
    guard would see the first offset missing too; it is off here, so the round guard stands alone.)"""
    from commit_service.domain import csv_records

    f = aiven_csv(tmp_path / "landing" / "clicks-0-0", 0, [{"id": i} for i in range(6)])
    real = csv_records.records
    monkeypatch.setattr(csv_records, "records", lambda lines, layout: real(lines[1:], layout))
    root = tmp_path / "clicks"
    committer = DeltaCommitter(spark, "clicks", str(root), StorageReader(), offset_check=OffsetCheck.OFF)
    with pytest.raises(RoundShortfallError, match="hold 6 records but 5 rows were written"):
        commit_all(committer, TableState("clicks"), [PendingFile(f, "m", "sc")])
    assert committer.snapshot().version == -1


def test_a_release_commits_offsets_without_files_even_on_a_new_table(spark: Any, tmp_path: Path) -> None:
    """An admin release (a quarantined range skipped) is a commit of txn actions only, named in its
    metadata; on a table with no commit yet it creates the table, and the next file sets the schema."""
    from commit_service.domain.plan import CommitPlan
    from lakegate_core.types import PartitionOffsets

    root = tmp_path / "orders"
    committer = DeltaCommitter(spark, "orders", str(root), StorageReader())
    tp = (TOPIC, 0)
    release = CommitPlan((), PartitionOffsets({tp: 50}), None, "released", ("dl-1",), PartitionOffsets({tp: 0}))
    record = committer.commit(release)
    assert record.version == 0 and record.files == 0 and record.released == ("dl-1",)
    state = TableState("orders", {tp: 50})  # type: ignore[dict-item]
    commit_all(committer, state, [write_file(root, 0, 50, 10)])
    table = DeltaTable(str(root))
    assert table.transaction_version(app_id("orders", tp)) == 60  # type: ignore[arg-type]
    assert json.loads(table.history()[-1]["userMetadata"])["released"] == ["dl-1"]
    assert sorted(table.to_pyarrow_table().column("offset").to_pylist()) == list(range(50, 60))
    assert spark.read.format("delta").load(str(root)).count() == 10


def test_batched_actions_equal_delta_s_own_one_by_one(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit path builds all AddFiles / SetTransactions in one py4j call per slice: every
    action must equal what ``Action.fromJson`` gives for it alone, in order across slices (paths
    with escapes, stats, no stats, 64-bit sizes and offsets)."""
    from commit_service.delta import jvm_actions
    from commit_service.delta.jvm_actions import ActionBuilder, ActionKind
    from commit_service.delta.jvm_handles import JvmHandles

    monkeypatch.setattr(jvm_actions, "SLICE", 128)  # the 300 AddFiles go in three slices

    builder = ActionBuilder(spark._jvm, JvmHandles.resolve(spark._jvm))
    adds = [
        {
            "path": f"data/o%20r%25d-{i}",
            "partitionValues": {},
            "size": 2**40 + i,
            "modificationTime": 1_700_000_000_000 + i,
            "dataChange": True,
            **({"stats": json.dumps({"numRecords": i, "minValues": {"a": "ü"}})} if i % 2 else {}),
        }
        for i in range(300)
    ]
    txns = [{"appId": f"lakegate-t-orders-{p}", "version": 2**62 + p, "lastUpdated": 5} for p in range(40)]
    one = spark._jvm.org.apache.spark.sql.delta.actions.Action.fromJson
    for kind, objects, wrap in ((ActionKind.ADD, adds, "add"), (ActionKind.TXN, txns, "txn")):
        batch = builder.many(kind, iter(objects))
        assert batch.size() == len(objects)
        for i, obj in enumerate(objects):
            assert batch.get(i).equals(one(json.dumps({wrap: obj}))), obj
    seq = builder.seq(
        builder.many(ActionKind.ADD, adds[:3]), builder.many(ActionKind.TXN, []), builder.many(ActionKind.TXN, txns[:2])
    )
    assert seq.size() == 5
