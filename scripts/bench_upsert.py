"""The ``upsert`` part of ``scripts/bench``: one upsert round's cost against its size.

A Delta table of ``rows`` rows (``id``, ``name``, ``amount``, ``_kafka_offset``) is written in
``files`` files, each holding one range of ids (as a table filled in key order over time is).
Then, for each size, one round of that many changed keys (a tenth of them new, a twentieth
deletes by tombstone) lands as a JSON-lines file in the sink's envelope and is committed by
Lakegate's upsert path (:class:`~commit_service.delta_commit.DeltaCommitter`, ``upsert=``), twice:

- **clustered**: the changed ids are one contiguous run (recent rows updated again): few files hold them;
- **random**: the changed ids are spread over the whole table: every file holds some.

For comparison, the same changes go through Delta's own ``MERGE`` on a copy of the table with
deletion vectors on: what Lakegate's copy-on-write round (which must carry the partitions' ``txn``
actions in its own transaction) costs against Delta's merge-on-read.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

from commit_service.delta_commit import DeltaCommitter
from commit_service.state import PendingFile, TableState
from commit_service.storage import StorageReader
from commit_service.upsert import UpsertSpec
from lakegate_core.protocol import DataFile, FileFormat

TOPIC = "bench-upsert"


def _base(spark: Any, path: Path, rows: int, files: int) -> None:
    from pyspark.sql import functions as F

    (
        spark.range(rows)
        .select(
            F.col("id"),
            F.concat(F.lit("name-"), F.col("id").cast("string")).alias("name"),
            (F.col("id") % 1000 / 10).alias("amount"),
            F.col("id").alias("_kafka_offset"),
        )
        .repartitionByRange(files, "id")
        .write.format("delta")
        .save(str(path))
    )


def _changes(rows: int, size: int, clustered: bool, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    if clustered:
        start = rng.randrange(max(1, rows - size))
        ids = list(range(start, start + size - size // 10))
    else:
        ids = rng.sample(range(rows), size - size // 10)
    ids += [rows + seed * 1_000_000 + i for i in range(size // 10)]  # new keys
    rng.shuffle(ids)
    out = []
    for i, key in enumerate(ids):
        value = None if i % 20 == 19 else {"id": key, "name": f"changed-{seed}-{i}", "amount": float(i % 100)}
        out.append({"key": {"id": key}, "value": value, "offset": i})
    return out


def _land(work: Path, name: str, records: list[dict[str, Any]], partition: int) -> PendingFile:
    path = work / "landing" / f"{TOPIC}-{partition}-0"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    f = DataFile(f"file://{path}", TOPIC, partition, 0, len(records) - 1, path.stat().st_size, FileFormat.JSONL)
    return PendingFile(f, f"m-{name}", "bench")


def _delta_merge(spark: Any, path: Path, records: list[dict[str, Any]]) -> float:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    lines = spark.sparkContext.parallelize([json.dumps(r) for r in records], 2)
    src = spark.read.json(lines)
    changes = src.select(
        F.col("key.id").alias("id"),
        F.col("value.name").alias("name"),
        F.col("value.amount").alias("amount"),
        F.col("offset").alias("_kafka_offset"),
        F.col("value").isNull().alias("deleted"),
    )
    started = time.perf_counter()
    (
        DeltaTable.forPath(spark, str(path))
        .alias("t")
        .merge(changes.alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.deleted")
        .whenMatchedUpdate(set={c: f"s.{c}" for c in ("name", "amount", "_kafka_offset")})
        .whenNotMatchedInsert("NOT s.deleted", values={c: f"s.{c}" for c in ("id", "name", "amount", "_kafka_offset")})
        .execute()
    )
    return time.perf_counter() - started


def run(spark: Any, work: Path, rows: int, files: int, sizes: list[int]) -> dict[str, Any]:
    base = work / "upsert-base"
    print(f"  writing the base table: {rows:,} rows in {files} files ...", flush=True)
    started = time.perf_counter()
    _base(spark, base, rows, files)
    print(f"  base table written in {time.perf_counter() - started:.1f} s", flush=True)
    spec = UpsertSpec(("id",), delete_on_tombstone=True)
    results = []
    print("  warm-up round (not counted) ...", flush=True)
    _one(spark, work, base, spec, rows, 100, clustered=True, seed=99)
    for n, size in enumerate(sizes):
        for clustered in (True, False):
            row = _one(spark, work, base, spec, rows, size, clustered, seed=n * 2 + clustered)
            results.append(row)
    return {"table_rows": rows, "table_files": files, "results": results}


def _one(
    spark: Any, work: Path, base: Path, spec: UpsertSpec, rows: int, size: int, clustered: bool, seed: int
) -> dict[str, Any]:
    """One round of ``size`` changed keys, by Lakegate and by Delta's MERGE, each on a copy of ``base``."""
    kind = "clustered" if clustered else "random"
    records = _changes(rows, size, clustered, seed)
    ours = work / f"upsert-{size}-{kind}"
    theirs = work / f"merge-{size}-{kind}"
    shutil.copytree(base, ours)
    shutil.copytree(base, theirs)
    spark.sql(f"ALTER TABLE delta.`{theirs}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    committer = DeltaCommitter(spark, "bench", str(ours), StorageReader(local_roots=[str(work)]), upsert=spec)
    state = TableState("bench")
    pending = _land(work / kind / str(size), f"{size}-{kind}", records, partition=0)
    state.offer(pending, now=0)
    plan = state.plan(now=0, force=True)
    assert plan is not None
    before = _file_names(spark, ours)
    t0 = time.perf_counter()
    committer.commit(plan)
    lakegate_s = time.perf_counter() - t0
    after = _file_names(spark, ours)
    merge_s = _delta_merge(spark, theirs, records)
    ours_rows, theirs_rows = _count(spark, ours), _count(spark, theirs)
    assert ours_rows == theirs_rows, f"Lakegate {ours_rows} rows, Delta MERGE {theirs_rows}"
    row = {
        "changed_keys": size,
        "keys": kind,
        "table_rows": rows,
        "files_rewritten": len(before - after),
        "table_files": len(before),
        "lakegate_s": round(lakegate_s, 2),
        "delta_merge_dv_s": round(merge_s, 2),
        "rows_after": ours_rows,
    }
    print(
        f"  {size:>7,} {kind:>9} keys: Lakegate {lakegate_s:6.2f} s ({row['files_rewritten']}/{len(before)} "
        f"files rewritten), Delta MERGE with deletion vectors {merge_s:6.2f} s",
        flush=True,
    )
    shutil.rmtree(ours)
    shutil.rmtree(theirs)
    return row


def _file_names(spark: Any, path: Path) -> set[str]:
    """The table's live data files (their names)."""
    return {Path(f).name for f in spark.read.format("delta").load(str(path)).inputFiles()}


def _count(spark: Any, path: Path) -> int:
    return int(spark.read.format("delta").load(str(path)).count())
