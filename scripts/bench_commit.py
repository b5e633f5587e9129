"""Benchmark: how long one Delta commit of N Parquet files takes (DeltaCommitter, real Spark).

For each N it writes N small Parquet files (3 partitions) into a fresh table root, then times
(a) the first commit, which also creates the table, and (b) a second commit of N more files on
the existing table (the steady state). Prints a table and writes JSON (default
.lakegate/bench/commit.json). Run through ``scripts/bench-commit``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from commit_service.delta_commit import DeltaCommitter
from commit_service.spark import SparkSettings, create_session
from commit_service.state import PendingFile, TableState
from commit_service.storage import StorageReader
from lakegate_core.protocol import DataFile, FileFormat

PARTITIONS = 3


def write_files(root: Path, n: int, rows: int, next_offsets: dict[int, int]) -> list[PendingFile]:
    """N files round-robin over the partitions, continuing at ``next_offsets`` (updated)."""
    files = []
    for i in range(n):
        partition = i % PARTITIONS
        start = next_offsets.get(partition, 0)
        next_offsets[partition] = start + rows
        path = root / "data" / f"bench-{partition}-{start}"
        path.parent.mkdir(parents=True, exist_ok=True)
        offsets = list(range(start, start + rows))
        pq.write_table(
            pa.table(
                {"id": [f"{partition}-{o}" for o in offsets], "offset": offsets, "amount": [o * 0.25 for o in offsets]}
            ),
            path,
        )
        f = DataFile(
            f"file://{path}", "bench", partition, start, start + rows - 1, path.stat().st_size, FileFormat.PARQUET, rows
        )
        files.append(PendingFile(f, "bench", "bench"))
    return files


def timed_commit(committer: DeltaCommitter, state: TableState, files: list[PendingFile]) -> float:
    for f in files:
        state.offer(f, now=0)
    plan = state.plan(now=0, force=True)
    assert plan is not None and len(plan.files) == len(files)
    started = time.perf_counter()
    record = committer.commit(plan)
    elapsed = time.perf_counter() - started
    state.committed_plan(plan, record.version, now=0)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[1, 100, 1000], help="N values (default 1 100 1000)")
    parser.add_argument("--rows", type=int, default=1000, help="rows per file (default 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="steady-state commits per N (default 3)")
    parser.add_argument("--out", type=Path, default=Path(".lakegate/bench/commit.json"))
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="lakegate-bench-"))
    print(f"starting Spark (local[2]) in {work} ...", flush=True)
    spark = create_session(SparkSettings(master="local[2]", ui_enabled=False, local_dir=work / "spark"))
    results: list[dict[str, Any]] = []
    print(f"{'files':>6} {'create s':>9} {'steady s (median)':>18} {'per file ms':>12}", flush=True)
    for n in args.files:
        root = work / f"t{n}"
        committer = DeltaCommitter(spark, f"bench{n}", str(root), StorageReader())
        state = TableState(f"bench{n}")
        offsets: dict[int, int] = {}
        create = timed_commit(committer, state, write_files(root, n, args.rows, offsets))
        steady = [timed_commit(committer, state, write_files(root, n, args.rows, offsets)) for _ in range(args.repeat)]
        median = statistics.median(steady)
        results.append(
            {
                "files": n,
                "rows_per_file": args.rows,
                "create_seconds": round(create, 3),
                "steady_seconds": [round(s, 3) for s in steady],
                "steady_median_seconds": round(median, 3),
            }
        )
        print(f"{n:>6} {create:>9.2f} {median:>18.2f} {1000 * median / n:>12.1f}", flush=True)
    spark.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "delta_commit",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
