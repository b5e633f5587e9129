"""Compaction, vacuum and catalog registration on real Spark + Delta, read back by delta-rs.

Many small commits (as a Connect sink's flushes give) are compacted into a few files: every row
and every partition's ``txn`` offset is the same before and after, in both readers. VACUUM then
deletes the replaced files and an orphan a sink left under the table root, and the table stays
readable. Registration puts the table in Spark's session catalog.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.maintenance import CHECKPOINT_NICE_INCREMENT
from commit_service.delta.txn import app_id
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_core.status import MaintenanceKind
from tests.delta_helpers import checkpoint_in_thread, peer_nice

TOPIC, COMMITS = "orders", 24


def small_file(root: Path, partition: int, start: int, count: int) -> PendingFile:
    path = root / "data" / f"{TOPIC}-{partition}-{start:020d}"
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = [partition * 100_000 + o for o in range(start, start + count)]
    pq.write_table(pa.table({"id": ids, "offset": list(range(start, start + count))}), path)
    f = DataFile(f"file://{path}", TOPIC, partition, start, start + count - 1, path.stat().st_size, FileFormat.PARQUET)
    return PendingFile(f, f"m{partition}-{start}", "sc")


def commit_next(committer: DeltaCommitter, state: TableState, root: Path, n: int) -> int:
    """Commit the ``n``-th small file of partition 0 (offsets ``5n .. 5n+4``); its version."""
    state.offer(small_file(root, 0, n * 5, 5), now=0)
    plan = state.plan(now=0, force=True)
    assert plan is not None
    version = committer.commit(plan).version
    state.committed_plan(plan, version, now=0)
    return version


def snapshot_of(root: Path) -> tuple[list[int], dict[int, int | None]]:
    table = DeltaTable(str(root))
    ids = sorted(table.to_pyarrow_table(columns=["id"]).column("id").to_pylist())
    return ids, {p: table.transaction_version(app_id(TOPIC, (TOPIC, p))) for p in range(2)}


def test_compaction_keeps_rows_and_offsets_and_vacuum_cleans_up(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "orders"
    committer = DeltaCommitter(spark, TOPIC, str(root), StorageReader())
    state = TableState(TOPIC)
    for n in range(COMMITS):  # one small file per partition per commit
        for p in range(2):
            state.offer(small_file(root, p, n * 5, 5), now=0)
        plan = state.plan(now=0, force=True)
        assert plan is not None
        state.committed_plan(plan, committer.commit(plan).version, now=0)
    before_ids, before_offsets = snapshot_of(root)
    assert len(before_ids) == COMMITS * 10 and before_offsets == {0: COMMITS * 5, 1: COMMITS * 5}
    assert committer.file_count() == COMMITS * 2

    policy = MaintenancePolicy(enabled=True, zorder_by=("id",), vacuum_retention_hours=0)
    compacted = committer.maintain(MaintenanceKind.COMPACT, policy)
    assert compacted.files_before == COMMITS * 2 and compacted.files_after <= 2
    assert compacted.version_after == compacted.version_before + 1 and "rewritten" in (compacted.detail or "")
    assert snapshot_of(root) == (before_ids, before_offsets), "rows and txn offsets unchanged by compaction"
    assert committer.snapshot().offsets == {(TOPIC, 0): COMMITS * 5, (TOPIC, 1): COMMITS * 5}

    orphan = root / "data" / f"{TOPIC}-0-{COMMITS * 5:020d}"  # a sink's file no commit references
    pq.write_table(pa.table({"id": [-1], "offset": [COMMITS * 5]}), orphan)
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    on_disk = len(list((root / "data").iterdir()))
    vacuumed = committer.maintain(MaintenanceKind.VACUUM, policy)
    assert vacuumed.version_after >= vacuumed.version_before and vacuumed.files_after == compacted.files_after
    assert not orphan.exists(), "an orphan under the table root older than the retention is deleted"
    assert len(list((root / "data").iterdir())) < on_disk - COMMITS, "the replaced small files are gone"
    assert snapshot_of(root) == (before_ids, before_offsets)
    assert spark.read.format("delta").load(str(root)).count() == COMMITS * 10

    committer.register("lakegate_orders_compacted")
    committer.register("lakegate_orders_compacted")  # idempotent
    assert spark.table("lakegate_orders_compacted").count() == COMMITS * 10
    history = spark.sql(f"DESCRIBE HISTORY delta.`{root}`").select("operation").collect()
    assert [r.operation for r in history][:3] == ["VACUUM END", "VACUUM START", "OPTIMIZE"]


def test_checkpoints_move_off_the_commit_path(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "orders"
    state = TableState(TOPIC)
    logs = root / "_delta_log"

    def commit(committer: DeltaCommitter, n: int) -> int:
        return commit_next(committer, state, root, n)

    inline = DeltaCommitter(spark, TOPIC, str(root), StorageReader())
    for n in range(3):  # a table made before background checkpoints were turned on
        commit(inline, n)
    background = DeltaCommitter(spark, TOPIC, str(root), StorageReader(), checkpoint_in_commit=False)
    for n in range(3, 14):
        last = commit(background, n)
    assert last == 13
    assert not list(logs.glob("*.checkpoint.parquet")), "Delta wrote no checkpoint inside a commit (v10 passed)"
    config = DeltaTable(str(root)).metadata().configuration
    assert config["delta.checkpointInterval"] == str(2**31 - 1)

    persisted = spark.sparkContext._jsc.getPersistentRDDs().size()
    commits_nice = peer_nice(spark._jvm)
    run, checkpoint_nice = checkpoint_in_thread(spark, background)  # of v12: v13's is the next commit's
    assert checkpoint_nice == min(19, commits_nice + CHECKPOINT_NICE_INCREMENT), (
        "the checkpoint ran at a lower priority"
    )
    assert peer_nice(spark._jvm) == commits_nice, "and the commits not"
    assert run.kind is MaintenanceKind.CHECKPOINT and run.version_before == 12
    assert run.detail == "checkpoint of version 12 (Delta Kernel)", "written without a Spark job"
    assert (logs / f"{12:020d}.checkpoint.parquet").is_file()
    assert json_last_checkpoint(logs)["version"] == 12
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == persisted, "the checkpoint's own state stays cached"
    ids = sorted(DeltaTable(str(root)).to_pyarrow_table(columns=["id"]).column("id").to_pylist())
    assert ids == list(range(14 * 5)) and spark.read.format("delta").load(str(root)).count() == 14 * 5
    assert background.snapshot().offsets == {(TOPIC, 0): 14 * 5}

    # offsets read from the files (checkpoint + later commits) agree with Delta's own snapshot,
    # also when the checksum a SIGKILL would leave unwritten is gone
    for n in range(14, 17):
        last = commit(background, n)
    (logs / f"{last:020d}.crc").unlink(missing_ok=True)
    fresh = DeltaCommitter(spark, TOPIC, str(root), StorageReader())
    direct, delta = fresh.snapshot(), fresh._delta_snapshot()
    assert direct == delta and direct.version == last and direct.offsets == {(TOPIC, 0): 17 * 5}

    # where Delta Kernel cannot write a checkpoint, Spark writes it (in a snapshot of its own)
    background._maintainer._kernel_checkpoint = lambda version: False  # type: ignore[method-assign]
    run, _ = checkpoint_in_thread(spark, background)
    assert (
        run.detail == f"checkpoint of version {last - 1} (Spark)" and json_last_checkpoint(logs)["version"] == last - 1
    )
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == persisted
    jvm = spark._jvm
    jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert spark.read.format("delta").load(str(root)).count() == 17 * 5
    assert sorted(DeltaTable(str(root)).to_pyarrow_table(columns=["id"]).column("id").to_pylist()) == list(
        range(17 * 5)
    )


def test_background_checkpoints_delete_expired_log_files(spark: Any, tmp_path: Path) -> None:
    """With Delta's in-commit checkpoints off, its commits no longer clean the log up either; the
    background checkpoint does (Delta's checkpoint call cleans up after itself), so the log keeps
    ``delta.logRetentionDuration`` of history, not all of it: every commit lists the log, which
    must not grow forever. The file reader of start-up still finds every offset afterwards."""
    root = tmp_path / "orders"
    logs = root / "_delta_log"
    committer = DeltaCommitter(spark, TOPIC, str(root), StorageReader(), checkpoint_in_commit=False)
    state = TableState(TOPIC)

    def commit(n: int) -> int:
        return commit_next(committer, state, root, n)

    for n in range(12):
        commit(n)
    assert checkpoint_in_thread(spark, committer)[0].version_before == 10
    last = max(commit(n) for n in range(12, 15))
    assert last == 14
    old = time.time() - 40 * 86400  # versions 0..11 (and v10's checkpoint) were written 40 days ago
    for f in logs.iterdir():
        if f.name[:20].isdigit() and (version := int(f.name[:20])) <= 11:
            os.utime(f, (old + version, old + version))  # a second apart, in order
    assert (logs / f"{0:020d}.json").is_file()

    assert checkpoint_in_thread(spark, committer)[0].version_before == 13  # past the default 30 days: cleaned up
    kept = sorted(int(f.name[:20]) for f in logs.glob("*.json"))
    # Delta keeps what time travel to the retention's start needs: from the last expired checkpoint on
    assert kept == list(range(10, last + 1)), f"the expired commits are deleted, the recent ones kept: {kept}"
    assert (logs / f"{13:020d}.checkpoint.parquet").is_file()
    ids, offsets = snapshot_of(root)
    assert ids == list(range(15 * 5)) and offsets[0] == 15 * 5
    assert committer.snapshot().offsets == {(TOPIC, 0): 15 * 5} == committer._delta_snapshot().offsets
    assert commit(15) == last + 1, "commits go on after the cleanup"


def json_last_checkpoint(logs: Path) -> dict[str, Any]:
    import json

    return dict(json.loads((logs / "_last_checkpoint").read_text()))
