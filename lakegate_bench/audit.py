"""Benchmark: what an audit of a Delta table costs as the table grows (real Spark + Delta).

For each ``--sizes`` (rows), commits rounds of one Parquet file per partition through the service's
own committer (``--rows-per-file`` rows each, the sink's ``offset`` column in them: the maintenance
benchmark's files), then audits the
table from the table alone as ``GET /v1/tables/{table}/audit`` does (history, rows per offset against
the ledger, each file's offsets) and reads the rows at ``--sample`` offsets (the table's side of the
value audit; Kafka's side is one fetch per record). Prints progress and a table, writes JSON
(default .lakegate/bench/audit.json). Run through ``scripts/bench-audit``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

from commit_service.audit.auditor import Auditor, AuditRequest
from commit_service.config import SparkSettings
from commit_service.spark.session import create_session
from lakegate_bench.maintenance import PARTITIONS, commit_rounds
from lakegate_bench.result import work_dir


def measure(spark: Any, root: Path, rows: int, per_file: int, sample: int) -> dict[str, Any]:
    print(f"  building a table of {rows:,} rows ...", flush=True)
    committer = commit_rounds(spark, root, max(1, rows // (per_file * PARTITIONS)), per_file, every=50)
    ledger = committer.ledger()
    auditor = Auditor("bench", "delta", ledger)
    t = time.perf_counter()
    report = auditor.audit(AuditRequest(sample=0))
    audit_s = time.perf_counter() - t
    offsets = random.Random(1).sample(range(rows // PARTITIONS), min(sample, rows // PARTITIONS))
    t = time.perf_counter()
    found = ledger.rows_at(offsets)
    rows_at_s = time.perf_counter() - t
    breaches = [f.message for f in report.breaches()]
    print(
        f"  {rows:,} rows, {report.counts.files} files, {report.counts.commits} commits: audit {audit_s:.1f} s "
        f"({'ok' if report.ok else 'BREACH'}), rows at {len(offsets)} offsets {rows_at_s:.1f} s",
        flush=True,
    )
    return {
        "rows": rows,
        "files": report.counts.files,
        "commits": report.counts.commits,
        "audit_seconds": round(audit_s, 2),
        "rows_at_seconds": round(rows_at_s, 2),
        "sampled_offsets": len(offsets),
        "rows_found": sum(len(v) for v in found.values()),
        "ok": report.ok,
        "breaches": breaches,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-audit", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[100_000, 1_000_000],
        help="table sizes in rows (default 100000 1000000; the first run also warms the JVM)",
    )
    parser.add_argument("--rows-per-file", type=int, default=5000, help="rows per committed file (default 5000)")
    parser.add_argument("--sample", type=int, default=100, help="offsets whose rows are read (default 100)")
    parser.add_argument("--out", type=Path, default=Path(".lakegate/bench/audit.json"))
    args = parser.parse_args(argv)
    if any(s < args.rows_per_file * PARTITIONS for s in args.sizes) or args.rows_per_file < 1:
        parser.error(f"each size must be at least --rows-per-file x {PARTITIONS}")

    work = work_dir("lakegate-bench-audit-")
    print(f"starting Spark (local[2]) in {work} ...", flush=True)
    spark = create_session(SparkSettings(master="local[2]", ui_enabled=False, local_dir=work / "spark"))
    try:
        results = [
            measure(spark, work / f"table-{i}", size, args.rows_per_file, args.sample)
            for i, size in enumerate(args.sizes)
        ]
    finally:
        spark.stop()
    print(f"{'rows':>10} {'files':>6} {'commits':>8} {'audit s':>8} {'rows-at s':>10}")
    for r in results:
        print(
            f"{r['rows']:>10,} {r['files']:>6} {r['commits']:>8} {r['audit_seconds']:>8.1f} {r['rows_at_seconds']:>10.1f}"
        )
    report = {
        "benchmark": "audit",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "rows_per_file": args.rows_per_file,
        "partitions": PARTITIONS,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
