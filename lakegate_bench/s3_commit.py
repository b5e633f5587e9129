"""Benchmark: one commit of N Parquet files on the local S3 server, split into its two costs.

Uploads N files (1,000 rows each, ``<topic>-<partition>-<start>``) to the local S3 server (moto),
then times: the files' facts (stat + footer) read through the service's read-ahead cache (16
threads), 50 of them read one after another, and the Delta commit over s3a once every fact is
read. Shows whether a slow commit on that server is the server's or the commit's. Prints each
figure and writes JSON (default .lakegate/bench/s3-commit.json). Run through ``scripts/bench-s3-commit``.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from commit_service.config import Placement, S3Settings, SparkSettings
from commit_service.delta.committer import DeltaCommitter
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.spark.session import create_session
from commit_service.storage.prefetch import THREADS, FactsCache, storage_facts
from commit_service.storage.reader import StorageReader
from lakegate_bench.result import report
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_stack.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server

TOPIC, PARTITIONS, ROWS, BUCKET = "bench", 3, 1000, "lake"


def parquet_body(partition: int, start: int) -> bytes:
    """The Parquet file of ``ROWS`` records of ``partition`` from offset ``start`` (``id``, ``offset``)."""
    offsets = range(start, start + ROWS)
    body = io.BytesIO()
    pq.write_table(
        pa.table({"id": [f"{partition}-{o}" for o in offsets], "offset": pa.array(offsets, pa.int64())}), body
    )
    return body.getvalue()


def upload(client: object, i: int) -> DataFile:
    """File ``i``: partition i % 3, offsets continuing within the partition."""
    partition, start = i % PARTITIONS, (i // PARTITIONS) * ROWS
    body = parquet_body(partition, start)
    key = f"landing/{TOPIC}-{partition}-{start:020d}"
    client.put_object(Bucket=BUCKET, Key=key, Body=body)  # type: ignore[attr-defined]
    return DataFile(
        f"s3a://{BUCKET}/{key}", TOPIC, partition, start, start + ROWS - 1, len(body), FileFormat.PARQUET, ROWS
    )


def timed(label: str, work: object) -> float:
    started = time.perf_counter()
    work()  # type: ignore[operator]
    elapsed = time.perf_counter() - started
    print(f"{label}: {elapsed:.2f} s", flush=True)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench-s3-commit", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--files", type=int, default=1000, help="files in the measured commit (default 1000)")
    parser.add_argument("--out", type=Path, default=Path(".lakegate/bench/s3-commit.json"))
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="lakegate-bench-s3-commit-"))
    server = S3Server(work).start()
    try:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        print(f"uploading {args.files + PARTITIONS} files to {server.endpoint} ...", flush=True)
        with ThreadPoolExecutor(8) as pool:
            files = list(pool.map(lambda i: upload(client, i), range(args.files + PARTITIONS)))
        first, measured = files[:PARTITIONS], files[PARTITIONS:]
        settings = S3Settings(server.endpoint, REGION, True, ACCESS_KEY, SECRET_KEY)
        storage = StorageReader(settings, [f"s3a://{BUCKET}/landing/"])
        facts = FactsCache(storage_facts(storage), name="bench")
        read_ahead = timed(f"facts of {len(files)} files, {THREADS} threads", lambda: facts.get_all(files))
        serial = timed(
            "facts of 50 files, one at a time", lambda: [storage.facts(f.path, parquet=True) for f in files[:50]]
        )
        print("starting Spark (local[2]) ...", flush=True)
        spark = create_session(
            SparkSettings(master="local[2]", ui_enabled=False, local_dir=work / "spark", s3=settings)
        )
        committer = DeltaCommitter(
            spark,
            "bench",
            f"s3a://{BUCKET}/bench",
            storage,
            checkpoint_in_commit=False,
            facts=facts,
            placement=Placement.IN_PLACE_ABSOLUTE,  # the landing is outside the table root: add, never rewrite
        )
        state = TableState("bench")

        def commit(batch: list[DataFile]) -> None:
            for f in batch:
                state.offer(PendingFile(f, "bench-sidecar", "bench-worker"), now=0)
            plan = state.plan(now=0, force=True)
            assert plan is not None and len(plan.files) == len(batch)
            state.committed_plan(plan, committer.commit(plan).version, now=0)

        timed("creating the table (3 files)", lambda: commit(first))
        commit_s = timed(f"Delta commit of {len(measured)} files, facts read", lambda: commit(measured))
    finally:
        server.stop()
    result = {
        "benchmark": "s3-commit",
        "files": len(measured),
        "facts_read_ahead_s": round(read_ahead, 3),
        "facts_read_ahead_files": len(files),
        "facts_per_second_read_ahead": round(len(files) / read_ahead, 1),
        "facts_per_second_one_at_a_time": round(50 / serial, 1),
        "commit_s": round(commit_s, 3),
    }
    report(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
