"""Benchmark: a commit's cost against the size of the table's ``_delta_log`` on the local S3 server.

Every Delta commit lists the log from the table's last checkpoint on, and Delta's S3 log store
lists once more to check the new version is not there yet. Unless ``delta.enableFastS3AListFrom``
is set (the service sets it), each listing reads the *whole* log folder, which keeps
``delta.logRetentionDuration`` (30 days by default) of commits: at a 10 s interval, about 520,000
objects. This script makes a table through :class:`~commit_service.delta_commit.DeltaCommitter`
on the local S3 server (moto), checkpoints it, adds ``--extra`` objects to its log that sort before
the checkpoint (as old commits' files do; Delta ignores their names), and times one-file commits
with the listing from the checkpoint on (``fast``, the service's setting) and with the whole
folder listed (``full``, Delta's default), each in a Spark session of its own. Prints the figures
and writes JSON (default .lakegate/bench/log-listing.json). Run through ``scripts/bench-log-listing``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_result import report
from bench_s3_commit import BUCKET, PARTITIONS, upload

from commit_service.delta_commit import DeltaCommitter
from commit_service.spark import S3Settings, SparkSettings, create_session
from commit_service.state import PendingFile, TableState
from commit_service.storage import StorageReader
from lakegate_stack.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server

FAST_LIST = "spark.hadoop.delta.enableFastS3AListFrom"
MODES = {"fast": "true", "full": "false"}
FIRST_COMMITS = 12  # the table's history before the checkpoint


def run_mode(mode: str, extra: int, commits: int) -> dict[str, Any]:
    """One mode in this process: a fresh S3 server, table, checkpoint, extra log objects, commits."""
    work = Path(tempfile.mkdtemp(prefix=f"lakegate-bench-log-{mode}-"))
    server = S3Server(work).start()
    try:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        settings = S3Settings(server.endpoint, REGION, True, ACCESS_KEY, SECRET_KEY)
        storage = StorageReader(settings, [f"s3a://{BUCKET}/landing/"])
        print(f"[{mode}] starting Spark (local[2], {FAST_LIST}={MODES[mode]}) ...", flush=True)
        spark = create_session(
            SparkSettings(
                master="local[2]",
                ui_enabled=False,
                local_dir=work / "spark",
                s3=settings,
                conf={FAST_LIST: MODES[mode]},
            )
        )
        committer = DeltaCommitter(spark, "bench", f"s3a://{BUCKET}/bench", storage, checkpoint_in_commit=False)
        state = TableState("bench")
        uploaded = iter(range(10**9))

        def commit() -> float:
            f = upload(client, next(uploaded) * PARTITIONS)  # partition 0, offsets continuing
            state.offer(PendingFile(f, "bench-sidecar", "bench-worker"), now=0)
            plan = state.plan(now=0, force=True)
            assert plan is not None
            started = time.perf_counter()
            version = committer.commit(plan).version
            took = time.perf_counter() - started
            state.committed_plan(plan, version, now=0)
            return took

        for _ in range(FIRST_COMMITS):
            commit()
        checkpoint = committer.checkpoint()
        print(f"[{mode}] table at v{FIRST_COMMITS - 1}, checkpoint of v{checkpoint.version_before}", flush=True)
        before = [commit() for _ in range(commits)]
        print(f"[{mode}] adding {extra:,} objects to the log ...", flush=True)
        with ThreadPoolExecutor(8) as pool:
            keys = [f"bench/_delta_log/{1:020d}.json.bench-{k:07d}" for k in range(extra)]
            list(pool.map(lambda key: client.put_object(Bucket=BUCKET, Key=key, Body=b""), keys))
        after = [commit() for _ in range(commits)]
        spark.stop()
    finally:
        server.stop()
    result = {
        "mode": mode,
        "extra_log_objects": extra,
        "commits": commits,
        "commit_p50_s_before": round(statistics.median(before), 3),
        "commit_p50_s_after": round(statistics.median(after), 3),
        "commit_max_s_after": round(max(after), 3),
    }
    print(
        f"[{mode}] one-file commit p50: {result['commit_p50_s_before']:.3f} s -> {result['commit_p50_s_after']:.3f} s "
        f"with {extra:,} more log objects",
        flush=True,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--extra", type=int, default=3000, help="objects added to the log (default 3000)")
    parser.add_argument("--commits", type=int, default=10, help="commits timed before and after (default 10)")
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both", help="listing mode (default both)")
    parser.add_argument("--out", type=Path, default=Path(".lakegate/bench/log-listing.json"))
    args = parser.parse_args(argv)
    if args.mode != "both":  # one mode, as a child of "both": its result as the last line
        print(json.dumps(run_mode(args.mode, args.extra, args.commits)))
        return 0
    results = []
    for mode in MODES:  # each in a process (and a Spark session) of its own
        cmd = [sys.executable, __file__, "--mode", mode, "--extra", str(args.extra), "--commits", str(args.commits)]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
        lines = done.stdout.strip().splitlines()
        print("\n".join(lines[:-1]), flush=True)
        results.append(json.loads(lines[-1]))
    report({"benchmark": "log-listing", "results": results}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
