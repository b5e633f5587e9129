"""Benchmark: a table after many small commits, before and after compaction (real Spark + Delta).

Commits ``--commits`` rounds of one small Parquet file per partition (what a Connect sink's
frequent flushes give), then measures the table's file count and a full-scan query, compacts it
(``OPTIMIZE`` through the service's own maintenance path), vacuums it, and measures again. The
Kafka offsets (``txn``) are checked equal before and after. Prints progress and a table, writes
JSON (default .lakegate/bench/maintenance.json). Run through ``scripts/bench-maintenance``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from commit_service.config import SparkSettings
from commit_service.delta.committer import DeltaCommitter
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.spark.session import create_session
from commit_service.storage.reader import StorageReader
from lakegate_bench.result import work_dir
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_core.status import MaintenanceKind

PARTITIONS = 2


def small_files(root: Path, commit: int, rows: int) -> list[PendingFile]:
    files = []
    for p in range(PARTITIONS):
        start = commit * rows
        path = root / "data" / f"bench-{p}-{start:020d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        offsets = list(range(start, start + rows))
        pq.write_table(
            pa.table(
                {"id": [p * 10**9 + o for o in offsets], "offset": offsets, "amount": [o * 0.25 for o in offsets]}
            ),
            path,
        )
        f = DataFile(f"file://{path}", "bench", p, start, start + rows - 1, path.stat().st_size, FileFormat.PARQUET)
        files.append(PendingFile(f, f"m{commit}", "bench"))
    return files


def commit_rounds(spark: Any, root: Path, commits: int, rows: int, every: int = 100) -> DeltaCommitter:
    """A Delta table at ``root`` after ``commits`` rounds of :func:`small_files` (``rows`` per file),
    each committed by the service's own committer; progress every ``every`` commits."""
    committer = DeltaCommitter(spark, "bench", str(root), StorageReader())
    state = TableState("bench")
    started = time.perf_counter()
    for n in range(commits):
        for f in small_files(root, n, rows):
            state.offer(f, now=0)
        plan = state.plan(now=0, force=True)
        assert plan is not None
        state.committed_plan(plan, committer.commit(plan).version, now=0)
        if (n + 1) % every == 0 or n + 1 == commits:
            print(f"  {n + 1}/{commits} commits ({time.perf_counter() - started:.0f} s)", flush=True)
    return committer


def scan(spark: Any, root: Path, repeat: int) -> dict[str, float]:
    """Median seconds of a full scan with Spark (sum over every row) and with delta-rs (to Arrow)."""
    spark_s, rs_s = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        spark.read.format("delta").load(str(root)).selectExpr("sum(amount)", "count(*)").collect()
        spark_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        DeltaTable(str(root)).to_pyarrow_table()
        rs_s.append(time.perf_counter() - t)
    return {
        "spark_full_scan_seconds": round(statistics.median(spark_s), 3),
        "delta_rs_full_scan_seconds": round(statistics.median(rs_s), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-maintenance", description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000, help="small commits before compaction (default 1000)")
    parser.add_argument("--rows", type=int, default=100, help="rows per file (default 100)")
    parser.add_argument("--repeat", type=int, default=3, help="scans per measurement (default 3)")
    parser.add_argument("--out", type=Path, default=Path(".lakegate/bench/maintenance.json"))
    args = parser.parse_args(argv)

    work = work_dir("lakegate-bench-")
    print(f"starting Spark (local[2]) in {work} ...", flush=True)
    spark = create_session(SparkSettings(master="local[2]", ui_enabled=False, local_dir=work / "spark"))
    root = work / "table"
    started = time.perf_counter()
    committer = commit_rounds(spark, root, args.commits, args.rows)
    offsets_before = dict(committer.snapshot().offsets)
    before = {"files": committer.file_count(), **scan(spark, root, args.repeat)}
    policy = MaintenancePolicy(enabled=True, vacuum_retention_hours=0)
    compacted = committer.maintain(MaintenanceKind.COMPACT, policy)
    vacuumed = committer.maintain(MaintenanceKind.VACUUM, policy)
    after = {"files": committer.file_count(), **scan(spark, root, args.repeat)}
    offsets_same = dict(committer.snapshot().offsets) == offsets_before
    spark.stop()

    print(f"{'':>8} {'files':>7} {'Spark scan s':>13} {'delta-rs scan s':>16}")
    for name, m in (("before", before), ("after", after)):
        print(
            f"{name:>8} {m['files']:>7} {m['spark_full_scan_seconds']:>13.3f} {m['delta_rs_full_scan_seconds']:>16.3f}"
        )
    print(
        f"compaction {compacted.duration_ms / 1000:.1f} s ({compacted.detail}), vacuum "
        f"{vacuumed.duration_ms / 1000:.1f} s; txn offsets unchanged: {offsets_same}"
    )
    report = {
        "benchmark": "maintenance",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "commits": args.commits,
        "rows_per_file": args.rows,
        "partitions": PARTITIONS,
        "commit_phase_seconds": round(time.perf_counter() - started, 1),
        "before": before,
        "after": after,
        "compaction": compacted.to_dict(),
        "vacuum": vacuumed.to_dict(),
        "txn_offsets_unchanged": offsets_same,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0 if offsets_same else 1


if __name__ == "__main__":
    sys.exit(main())
