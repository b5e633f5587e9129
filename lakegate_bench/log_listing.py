"""Benchmark: a commit's cost against the size of the table's ``_delta_log``, per log listing.

Every Delta commit lists the log from the table's last checkpoint on. Delta's own log stores do
that by reading the *whole* log folder, which keeps ``delta.logRetentionDuration`` (30 days by
default) of commits: at a 10 s interval, about 260,000 versions. Two places, each with the
service's setting beside Delta's default (``--store``):

- ``s3`` (the local S3 server, moto): ``fast`` lists from the checkpoint's key on
  (``delta.enableFastS3AListFrom``, the service's setting), ``full`` lists every object;
- ``local`` (a ``file:`` table): ``lakegate`` is the service's ``LocalListFromLogStore``
  (delta-log-store/), which stats only the entries from the checkpoint on, ``delta`` is Delta's
  ``LocalLogStore``, which stats every entry.

The script makes a table through :class:`~commit_service.delta.committer.DeltaCommitter`, checkpoints
it, times one-file commits, adds ``--extra`` entries to its log that sort before the checkpoint
(as old commits' files do; Delta ignores their names), and times the commits again; each mode in a
process and a Spark session of its own. Prints the figures and writes JSON (default
.lakegate/bench/log-listing.json). Run through ``scripts/bench-log-listing``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commit_service.config import Placement, S3Settings, SparkSettings
from commit_service.delta.committer import DeltaCommitter
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.spark.session import LOCAL_LOG_WRITES, create_session
from commit_service.storage.reader import StorageReader
from lakegate_bench.result import report, work_dir
from lakegate_bench.s3_commit import BUCKET, PARTITIONS, ROWS, TOPIC, parquet_body, upload
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_stack.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server

FAST_LIST = "spark.hadoop.delta.enableFastS3AListFrom"
DELTA_LOCAL_STORE = {k: "io.delta.storage.LocalLogStore" for k in LOCAL_LOG_WRITES if "logStore" in k}
# Per store: each mode's Spark settings, the service's mode first.
STORES: dict[str, dict[str, dict[str, str]]] = {
    "s3": {"fast": {FAST_LIST: "true"}, "full": {FAST_LIST: "false"}},
    "local": {"lakegate": {}, "delta": DELTA_LOCAL_STORE},
}
DEFAULT_EXTRA = {"s3": 3_000, "local": 20_000}  # local: a v5,000 table's folder (4 entries a version)
FIRST_COMMITS = 12  # the table's history before the checkpoint


@dataclass(frozen=True)
class Place:
    """Where a mode's table lives: its path, the Spark settings to reach it, how to land a file
    (the i-th of the run) and how to put ``n`` entries into its log."""

    table: str
    settings: SparkSettings
    storage: StorageReader
    land: Callable[[int], DataFile]
    add_log_entries: Callable[[int], None]


@contextmanager
def s3_place(work: Path, conf: dict[str, str]) -> Iterator[Place]:
    server = S3Server(work).start()
    try:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        s3 = S3Settings(server.endpoint, REGION, True, ACCESS_KEY, SECRET_KEY)

        def add(n: int) -> None:
            keys = [f"bench/_delta_log/{1:020d}.json.bench-{k:07d}" for k in range(n)]
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda key: client.put_object(Bucket=BUCKET, Key=key, Body=b""), keys))

        yield Place(
            f"s3a://{BUCKET}/bench",
            SparkSettings(master="local[2]", ui_enabled=False, local_dir=work / "spark", s3=s3, conf=conf),
            StorageReader(s3, [f"s3a://{BUCKET}/landing/"]),
            lambda i: upload(client, i * PARTITIONS),  # partition 0, offsets continuing
            add,
        )
    finally:
        server.stop()


@contextmanager
def local_place(work: Path, conf: dict[str, str]) -> Iterator[Place]:
    landing, table = work / "landing", work / "bench"
    landing.mkdir()

    def land(i: int) -> DataFile:
        start = i * ROWS
        path = landing / f"{TOPIC}-0-{start:020d}"
        path.write_bytes(parquet_body(0, start))
        return DataFile(
            f"file://{path}", TOPIC, 0, start, start + ROWS - 1, path.stat().st_size, FileFormat.PARQUET, ROWS
        )

    def add(n: int) -> None:
        for k in range(n):
            (table / "_delta_log" / f"{1:020d}.json.bench-{k:07d}").touch()

    yield Place(
        str(table),
        SparkSettings(master="local[2]", ui_enabled=False, local_dir=work / "spark", conf=conf),
        StorageReader(),
        land,
        add,
    )


def run_mode(store: str, mode: str, extra: int, commits: int) -> dict[str, Any]:
    """One mode in this process: a fresh table, its checkpoint, extra log entries, commits."""
    work = work_dir(f"lakegate-bench-log-{mode}-")
    conf = STORES[store][mode]
    place_of = s3_place if store == "s3" else local_place
    with place_of(work, conf) as place:
        print(f"[{mode}] starting Spark (local[2], {conf or 'the service settings'}) ...", flush=True)
        spark = create_session(place.settings)
        committer = DeltaCommitter(  # the landing is outside the table root: add by absolute URI, never rewrite
            spark,
            "bench",
            place.table,
            place.storage,
            checkpoint_in_commit=False,
            placement=Placement.IN_PLACE_ABSOLUTE,
        )
        state = TableState("bench")
        landed = iter(range(10**9))

        def commit() -> float:
            state.offer(PendingFile(place.land(next(landed)), "bench-sidecar", "bench-worker"), now=0)
            plan = state.plan(now=0, force=True)
            assert plan is not None
            started = time.perf_counter()
            version = committer.commit(plan).version
            took = time.perf_counter() - started
            state.committed_plan(plan, version, now=0)
            return took

        for _ in range(FIRST_COMMITS):
            commit()
        with ThreadPoolExecutor(1) as pool:  # as the service does: never on a committing thread
            checkpoint = pool.submit(committer.checkpoint).result()
        print(f"[{mode}] table at v{FIRST_COMMITS - 1}, checkpoint of v{checkpoint.version_before}", flush=True)
        before = [commit() for _ in range(commits)]
        print(f"[{mode}] adding {extra:,} entries to the log ...", flush=True)
        place.add_log_entries(extra)
        after = [commit() for _ in range(commits)]
        spark.stop()
    result = {
        "store": store,
        "mode": mode,
        "extra_log_entries": extra,
        "commits": commits,
        "commit_p50_s_before": round(statistics.median(before), 3),
        "commit_p50_s_after": round(statistics.median(after), 3),
        "commit_max_s_after": round(max(after), 3),
    }
    print(
        f"[{mode}] one-file commit p50: {result['commit_p50_s_before']:.3f} s -> {result['commit_p50_s_after']:.3f} s "
        f"with {extra:,} more log entries",
        flush=True,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench-log-listing", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--store", choices=STORES, default="s3", help="where the table is (default s3)")
    parser.add_argument(
        "--extra", type=int, default=None, help="entries added to the log (default 3000 on s3, 20000 local)"
    )
    parser.add_argument("--commits", type=int, default=10, help="commits timed before and after (default 10)")
    parser.add_argument("--mode", default="both", help="one of the store's listing modes (default both)")
    parser.add_argument("--out", type=Path, default=None, help="default .lakegate/bench/log-listing[-local].json")
    args = parser.parse_args(argv)
    modes = STORES[args.store]
    if args.mode not in (*modes, "both"):
        parser.error(f"--mode for --store {args.store}: one of {', '.join(modes)} or both")
    extra = DEFAULT_EXTRA[args.store] if args.extra is None else args.extra
    if args.mode != "both":  # one mode, as a child of "both": its result as the last line
        print(json.dumps(run_mode(args.store, args.mode, extra, args.commits)))
        return 0
    results = []
    for mode in modes:  # each in a process (and a Spark session) of its own
        cmd = [sys.executable, __file__, "--store", args.store, "--mode", mode, "--extra", str(extra)]
        done = subprocess.run([*cmd, "--commits", str(args.commits)], stdout=subprocess.PIPE, text=True, check=True)
        lines = done.stdout.strip().splitlines()
        print("\n".join(lines[:-1]), flush=True)
        results.append(json.loads(lines[-1]))
    suffix = "" if args.store == "s3" else f"-{args.store}"
    out = args.out or Path(f".lakegate/bench/log-listing{suffix}.json")
    report({"benchmark": "log-listing", "store": args.store, "results": results}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
