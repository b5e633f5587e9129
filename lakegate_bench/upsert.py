"""The ``upsert`` part of ``scripts/bench``: one upsert round's cost against its size.

A Delta table of ``rows`` rows (``id``, ``name``, ``amount``, ``_kafka_offset``) is written in
``files`` files, each holding one range of ids (as a table filled in key order over time is).
Then, for each size, one round of that many changed keys (a tenth of them new, a twentieth
deletes by tombstone) lands as a JSON-lines file in the sink's envelope and is committed by
Lakegate's upsert path (:class:`~commit_service.delta.committer.DeltaCommitter`, ``upsert=``), twice:

- **clustered**: the changed ids are one contiguous run somewhere in the table: few files hold them;
- **random**: the changed ids are spread over the whole table: every file holds some;
- **recent**: the changed ids are the table's last ones (the newest rows updated again, as a
  table filled in key order mostly changes): with the new keys above them, the round's key range
  is the table's top, so the merge reads the last file alone.

Lakegate's round runs twice, each on its own copy of the table: with deletion vectors (the
default: replaced rows marked, files kept) and copy-on-write (``deletion_vectors: false``: files
holding a changed key rewritten). For comparison, the same changes go through Delta's own
``MERGE`` with deletion vectors on a third copy: what Lakegate's round, which must carry the
partitions' ``txn`` actions in its own transaction, costs against Delta's.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

from commit_service.delta.committer import DeltaCommitter
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.domain.upsert import UpsertSpec
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat

TOPIC = "bench-upsert"
KINDS = ("clustered", "random", "recent")  # where a round's changed keys lie (the module's docstring)


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


def _changes(rows: int, size: int, kind: str, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    if kind == "recent":
        ids = list(range(rows - (size - size // 10), rows))
    elif kind == "clustered":
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
    results = []
    print("  warm-up round (not counted) ...", flush=True)
    _one(spark, work, base, rows, 100, "clustered", seed=99)
    for n, size in enumerate(sizes):
        for k, kind in enumerate(KINDS):
            results.append(_one(spark, work, base, rows, size, kind, seed=n * len(KINDS) + k))
    return {"table_rows": rows, "table_files": files, "results": results}


def _one(spark: Any, work: Path, base: Path, rows: int, size: int, kind: str, seed: int) -> dict[str, Any]:
    """One round of ``size`` changed keys of ``kind`` (:data:`KINDS`) by Lakegate (deletion vectors,
    then copy-on-write) and by Delta's MERGE, each on its own copy of ``base`` with the same changes."""
    records = _changes(rows, size, kind, seed)
    pending = _land(work / kind / str(size), f"{size}-{kind}", records, partition=0)
    vectors = _lakegate(spark, work, base, pending, f"dv-{size}-{kind}", deletion_vectors=True)
    rewrite = _lakegate(spark, work, base, pending, f"cow-{size}-{kind}", deletion_vectors=False)
    theirs = _copy(spark, base, work / f"merge-{size}-{kind}", deletion_vectors=True)
    merge_s = _delta_merge(spark, theirs, records)
    theirs_rows = _count(spark, theirs)
    shutil.rmtree(theirs)
    counts = {"Lakegate, deletion vectors": vectors["rows"], "Lakegate, copy-on-write": rewrite["rows"]}
    assert set(counts.values()) == {theirs_rows}, f"{counts}, Delta MERGE {theirs_rows} rows"
    row = {
        "changed_keys": size,
        "keys": kind,
        "table_rows": rows,
        "table_files": vectors["files"],
        "lakegate_dv_s": vectors["seconds"],
        "files_with_new_vectors": vectors["touched"],
        "lakegate_s": rewrite["seconds"],
        "files_rewritten": rewrite["touched"],
        "delta_merge_dv_s": round(merge_s, 2),
        "rows_after": theirs_rows,
    }
    print(
        f"  {size:>7,} {kind:>9} keys: Lakegate with deletion vectors {vectors['seconds']:6.2f} s "
        f"({vectors['touched']}/{vectors['files']} files marked), copy-on-write {rewrite['seconds']:6.2f} s "
        f"({rewrite['touched']}/{rewrite['files']} rewritten), Delta MERGE with deletion vectors {merge_s:6.2f} s",
        flush=True,
    )
    return row


def _lakegate(
    spark: Any, work: Path, base: Path, pending: PendingFile, name: str, *, deletion_vectors: bool
) -> dict[str, Any]:
    """One Lakegate upsert round of ``pending`` on a copy of ``base``: its seconds, the table's
    files before, how many of them the round touched (marked or rewritten) and the rows after."""
    path = _copy(spark, base, work / f"upsert-{name}", deletion_vectors=deletion_vectors)
    spec = UpsertSpec(("id",), delete_on_tombstone=True, deletion_vectors=deletion_vectors)
    committer = DeltaCommitter(spark, "bench", str(path), StorageReader(local_roots=[str(work)]), upsert=spec)
    state = TableState("bench")
    state.offer(pending, now=0)
    plan = state.plan(now=0, force=True)
    assert plan is not None
    before = _files(spark, path)
    started = time.perf_counter()
    committer.commit(plan)
    seconds = time.perf_counter() - started
    after = _files(spark, path)
    touched = len({name for name, dv in before.items() if after.get(name, "gone") != dv})
    out = {"seconds": round(seconds, 2), "files": len(before), "touched": touched, "rows": _count(spark, path)}
    shutil.rmtree(path)
    return out


def _copy(spark: Any, base: Path, path: Path, *, deletion_vectors: bool) -> Path:
    shutil.copytree(base, path)
    if deletion_vectors:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    return path


def _files(spark: Any, path: Path) -> dict[str, str | None]:
    """The table's live data files from its Delta log: name -> its deletion vector (None without)."""
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path))
    snapshot = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    out: dict[str, str | None] = {}
    for add in snapshot.allFiles().collectAsList():
        dv = add.deletionVector()
        out[Path(add.path()).name] = None if dv is None else dv.toString()
    return out


def _count(spark: Any, path: Path) -> int:
    return int(spark.read.format("delta").load(str(path)).count())
