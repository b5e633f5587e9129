"""Benchmark: how long the commit service takes to be ready again after a SIGKILL.

Starts the real ``lakegate-service`` (gunicorn, Spark, Delta) on a local table, makes
``--commits`` commit rounds of one small Parquet file per partition (Delta checkpoints every 10
versions in the background, as configured by default), then repeatedly: SIGKILL, remove the newest
version checksum (``.crc``: a SIGKILL between a commit and its checksum leaves none, which is the
case that made Delta replay the log with Spark), restart, and time spawn -> ``/readyz`` 200. Also
checks that the restarted service reports the offsets the table holds. Prints progress and a
table, writes JSON (default .lakegate/bench/recovery.json). Run through ``scripts/bench-recovery``.
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

from deltalake import DeltaTable

from lakegate_stack.datafiles import write_parquet
from lakegate_stack.services import ServiceProcess

TABLE, TOPIC = "bench", "bench"


def data_file(root: Path, partition: int, start: int, rows: int) -> dict[str, Any]:
    return write_parquet(root / "data" / f"{TOPIC}-{partition}-{start:020d}", TOPIC, partition, start, rows)


def fill(svc: ServiceProcess, root: Path, commits: int, partitions: int, rows: int, first: int = 0) -> None:
    for n in range(first, first + commits):
        files = [data_file(root, p, n * rows, rows) for p in range(partitions)]
        body = {"manifest_id": f"m{n}", "sidecar": {"id": "bench", "worker": "w:1"}, "files": files}
        assert svc.call("POST", "/v1/manifests", json=body).status_code == 202
        assert svc.commit_now(TABLE)["committed"]
        if (n + 1 - first) % 50 == 0:
            print(f"  {n + 1 - first}/{commits} commits", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-recovery", description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=300, help="commit rounds before the first crash (300)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions, one file each per commit (4)")
    parser.add_argument("--rows", type=int, default=100, help="rows per file (100)")
    parser.add_argument("--crashes", type=int, default=3, help="SIGKILL + restart cycles to time (3)")
    parser.add_argument("--out", type=Path, default=Path(".lakegate/bench/recovery.json"), help="JSON output")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="lakegate-bench-recovery-"))
    root = work / "lake" / TABLE
    tables = [{"name": TABLE, "path": str(root), "topics": [TOPIC], "commit": {"interval_seconds": 3600}}]
    roots = [f"file://{work}/lake/"]
    print(f"filling {root}: {args.commits} commits x {args.partitions} files", flush=True)
    svc = ServiceProcess(work, tables, roots, name="fill").start()
    try:
        fill(svc, root, args.commits, args.partitions, args.rows)
    finally:
        svc.kill()
    expected = {str(p): args.commits * args.rows for p in range(args.partitions)}
    runs = []
    for i in range(args.crashes):
        logs = root / "_delta_log"
        version = DeltaTable(str(root)).version()
        (logs / f"{version:020d}.crc").unlink(missing_ok=True)
        again = ServiceProcess(work, tables, roots, name=f"restart-{i}")
        started = time.monotonic()
        again.spawn().wait_ready(timeout=600)
        ready_s = time.monotonic() - started
        offsets = again.call("GET", f"/v1/tables/{TABLE}/offsets").json()
        assert offsets == {TOPIC: expected}, offsets
        t = time.monotonic()
        fill(again, root, 1, args.partitions, args.rows, first=args.commits + i)  # one more commit, then crash
        first_commit_s = time.monotonic() - t
        runs.append({"ready_s": round(ready_s, 2), "first_commit_s": round(first_commit_s, 2), "version": version})
        print(
            f"restart {i + 1}: ready in {ready_s:.1f} s at version {version} (no checksum); "
            f"first commit after it {first_commit_s:.1f} s",
            flush=True,
        )
        expected = {p: v + args.rows for p, v in expected.items()}
        again.kill()

    ready = [r["ready_s"] for r in runs]
    result = {
        "benchmark": "recovery",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "commits": args.commits,
        "partitions": args.partitions,
        "runs": runs,
        "ready_s_median": statistics.median(ready),
        "ready_s_max": max(ready),
        "first_commit_s_median": statistics.median(r["first_commit_s"] for r in runs),
    }
    print(
        f"\nready after SIGKILL (no checksum of the last version): median {result['ready_s_median']:.1f} s, "
        f"max {result['ready_s_max']:.1f} s over {len(ready)} restarts"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
