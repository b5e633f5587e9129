"""Benchmark: commit rounds of N files on an S3 server, split into their costs.

Uploads N files (``--rows`` records each, ``<topic>-<partition>-<start>``) per round to an S3 server
(``--store``: moto, the tests' server, which answers one request at a time; or SeaweedFS, a real
one serving requests at once, built by ``scripts/install-seaweedfs``), as ``--kind`` says: Parquet
files of plain columns (added in place), gzip JSON lines in Aiven's envelope (``jsonl``) or Parquet
in that envelope (``parquet-envelope``), both rewritten. Then times: the files' facts (stat, and a
Parquet footer) read through the service's read-ahead cache (16 threads), 50 of them read one after
another, and ``--rounds`` rounds over s3a once every fact is read (the first creates the table and
is not counted), into an append table or, with ``--mode upsert``, an upsert table keyed by ``id``
(the keys repeat, so rounds update rows; ``--keys new``: each key above every earlier one); the
table is Delta, or with ``--format iceberg`` Iceberg in a JDBC catalog (SQLite, in the bench's
scratch directory) whose warehouse is on the S3 server. Shows whether a slow round on that server
is the server's or the commit's (``--profile``: where the last round's time went), and how many
classes Spark generated and compiled in each round and how long the JVM's JIT worked (a round
whose queries' generated code is new compiles its own, and the JIT then compiles those). Prints
each figure and writes JSON (default .lakegate/bench/s3-commit.json). Run through
``scripts/bench-s3-commit``.
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import io
import json
import os
import pstats
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from commit_service.config import Placement, S3Settings, SparkSettings
from commit_service.delta.committer import DeltaCommitter
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.domain.upsert import UpsertSpec
from commit_service.iceberg.committer import IcebergCommitter
from commit_service.spark.session import create_session
from commit_service.storage.prefetch import THREADS, FactsCache, storage_facts
from commit_service.storage.reader import StorageReader
from lakegate_bench.iceberg import CATALOG, bench_catalog
from lakegate_bench.process_cpu import cpu_seconds
from lakegate_bench.result import report, work_dir
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_stack.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server

TOPIC, PARTITIONS, ROWS, BUCKET = "bench", 3, 1000, "lake"
KINDS = {"parquet": FileFormat.PARQUET, "jsonl": FileFormat.JSONL, "parquet-envelope": FileFormat.PARQUET}
KEYS = 500  # the upsert table's keys per partition: rounds of many records update rows
DELTA = f"s3a://{BUCKET}/bench"  # the Delta table's root
EPOCH_MS = 1_767_225_600_000  # 2026-01-01, the records' Kafka timestamps start there


def parquet_body(partition: int, start: int, rows: int = ROWS) -> bytes:
    """The Parquet file of ``rows`` records of ``partition`` from offset ``start`` (``id``, ``offset``)."""
    offsets = range(start, start + rows)
    body = io.BytesIO()
    pq.write_table(
        pa.table({"id": [f"{partition}-{o}" for o in offsets], "offset": pa.array(offsets, pa.int64())}), body
    )
    return body.getvalue()


def envelope(partition: int, offset: int, new_keys: bool = False) -> dict[str, Any]:
    """One record in Aiven's envelope, as its JSON-lines writer writes it (ISO-8601 timestamp);
    its key one of :data:`KEYS` per partition (text), or with ``new_keys`` a number no earlier
    record had, above every earlier one (an identity column's inserts)."""
    key: str | int = offset * PARTITIONS + partition if new_keys else f"{partition}-{offset % KEYS}"
    at = datetime.fromtimestamp((EPOCH_MS + offset) / 1000, timezone.utc).isoformat(timespec="milliseconds")
    return {
        "key": key,
        "value": {"id": key, "amount": offset * 0.25, "n": offset, "note": f"record {offset}"},
        "offset": offset,
        "timestamp": at.replace("+00:00", "Z"),
    }


def body(kind: str, partition: int, start: int, rows: int, new_keys: bool = False) -> bytes:
    """A file of ``rows`` records of ``partition`` from offset ``start``, as ``kind`` is written."""
    if kind == "parquet":
        return parquet_body(partition, start, rows)
    records = [envelope(partition, o, new_keys) for o in range(start, start + rows)]
    if kind == "jsonl":
        return gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode())
    table = pa.table(
        {
            "key": [r["key"] for r in records],
            "value": [r["value"] for r in records],
            "offset": pa.array([r["offset"] for r in records], pa.int64()),
            "timestamp": pa.array([EPOCH_MS + r["offset"] for r in records], pa.timestamp("ms", tz="UTC")),
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def upload(client: object, i: int, kind: str = "parquet", rows: int = ROWS, new_keys: bool = False) -> DataFile:
    """File ``i``: partition i % 3, offsets continuing within the partition."""
    partition, start = i % PARTITIONS, (i // PARTITIONS) * rows
    data = body(kind, partition, start, rows, new_keys)
    key = f"landing/{TOPIC}-{partition}-{start:020d}"
    client.put_object(Bucket=BUCKET, Key=key, Body=data)  # type: ignore[attr-defined]
    return DataFile(f"s3a://{BUCKET}/{key}", TOPIC, partition, start, start + rows - 1, len(data), KINDS[kind], rows)


def table_committer(
    table_format: str, spark: Any, storage: StorageReader, facts: FactsCache, mode: str
) -> DeltaCommitter | IcebergCommitter:
    """The committer of the bench's table; the landing is outside the table's root, so Parquet
    files are added where they lie, never rewritten."""
    upsert = UpsertSpec(("id",)) if mode == "upsert" else None
    if table_format == "iceberg":
        return IcebergCommitter(
            lambda: spark,
            "bench.t",  # the namespace and table in the catalog
            CATALOG,
            f"s3a://{BUCKET}/iceberg/bench/t",
            storage,
            facts=facts,
            placement=Placement.IN_PLACE_ABSOLUTE,
            upsert=upsert,
        )
    return DeltaCommitter(
        spark,
        "bench",
        DELTA,
        storage,
        checkpoint_in_commit=False,
        facts=facts,
        placement=Placement.IN_PLACE_ABSOLUTE,
        upsert=upsert,
    )


def print_profile(profiler: cProfile.Profile) -> None:
    """The round's wall time by Lakegate's functions (cumulative: a call waiting on Spark's JVM
    counts the wait), the 40 largest."""
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(r"commit_service|lakegate_core", 40)
    print(out.getvalue(), flush=True)


def timed(label: str, work: object) -> float:
    started = time.perf_counter()
    work()  # type: ignore[operator]
    elapsed = time.perf_counter() - started
    print(f"{label}: {elapsed:.2f} s", flush=True)
    return elapsed


def compiled(spark: Any) -> tuple[int, int]:
    """The classes Spark's code generator has compiled (Janino; a query whose generated code is
    new, such as one whose literals changed, compiles its own), and the milliseconds the JVM's JIT
    compilers have spent, so far in this JVM."""
    jvm = spark._jvm
    classes = int(jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())
    return classes, int(jvm.java.lang.management.ManagementFactory.getCompilationMXBean().getTotalCompilationTime())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench-s3-commit", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--files", type=int, default=1000, help="files in each measured round (default 1000)")
    parser.add_argument("--rows", type=int, default=ROWS, help=f"records in each file (default {ROWS})")
    parser.add_argument("--kind", choices=tuple(KINDS), default="parquet", help="what the files are (default parquet)")
    parser.add_argument("--mode", choices=("append", "upsert"), default="append", help="the table (default append)")
    parser.add_argument("--rounds", type=int, default=1, help="measured rounds (default 1)")
    parser.add_argument("--store", choices=("moto", "seaweedfs"), default="moto", help="the S3 server (default moto)")
    parser.add_argument("--format", choices=("delta", "iceberg"), default="delta", help="the table (default delta)")
    parser.add_argument(
        "--keys",
        choices=("repeat", "new"),
        default="repeat",
        help=f"the envelope's keys: {KEYS} a partition, updated round after round (default), or new ones above "
        "every earlier key (an identity's inserts)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print where the last round's wall time went (cProfile, Lakegate's functions by cumulative time)",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark property for the session, as a service's spark.conf sets it (repeatable; e.g. "
        "spark.eventLog.enabled=true with spark.eventLog.dir to see each round's stages and tasks)",
    )
    parser.add_argument("--out", type=Path, default=Path(".lakegate/bench/s3-commit.json"))
    args = parser.parse_args(argv)
    bad = [kv for kv in args.spark_conf if "=" not in kv]
    if bad:
        parser.error(f"--spark-conf takes KEY=VALUE, got {', '.join(bad)}")
    work = work_dir("lakegate-bench-s3-commit-")
    if args.store == "seaweedfs":
        from lakegate_stack.seaweedfs import SeaweedS3Server

        server: Any = SeaweedS3Server(work / "s3").start()
    else:
        server = S3Server(work).start()
    try:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        total = PARTITIONS + args.files * args.rounds
        print(f"uploading {total} {args.kind} files of {args.rows} records to {server.endpoint} ...", flush=True)
        with ThreadPoolExecutor(8) as pool:
            files = list(pool.map(lambda i: upload(client, i, args.kind, args.rows, args.keys == "new"), range(total)))
        first = files[:PARTITIONS]
        rounds = [files[PARTITIONS + r * args.files : PARTITIONS + (r + 1) * args.files] for r in range(args.rounds)]
        settings = S3Settings(server.endpoint, REGION, True, ACCESS_KEY, SECRET_KEY)
        storage = StorageReader(settings, [f"s3a://{BUCKET}/landing/"])
        facts = FactsCache(storage_facts(storage), name="bench")
        read_ahead = timed(f"facts of {len(files)} files, {THREADS} threads", lambda: facts.get_all(files))
        parquet = KINDS[args.kind] is FileFormat.PARQUET
        serial = timed(
            "facts of 50 files, one at a time", lambda: [storage.facts(f.path, parquet=parquet) for f in files[:50]]
        )
        print("starting Spark (local[2]) ...", flush=True)
        catalogs = (bench_catalog(work, f"s3a://{BUCKET}/iceberg/"),) if args.format == "iceberg" else ()
        spark = create_session(
            SparkSettings(
                master="local[2]",
                ui_enabled=False,
                local_dir=work / "spark",
                s3=settings,
                catalogs=catalogs,
                conf=dict(kv.split("=", 1) for kv in args.spark_conf),
            )
        )
        committer = table_committer(args.format, spark, storage, facts, args.mode)
        state = TableState("bench")

        compiles: list[tuple[int, int]] = []  # each measured round's (classes generated, JIT ms)
        cpus: list[float] = []  # each round's CPU-s, this process and Spark's JVM

        def commit(batch: list[DataFile]) -> None:
            before, cpu = compiled(spark), cpu_seconds([os.getpid()])
            for f in batch:
                state.offer(PendingFile(f, "bench-sidecar", "bench-worker"), now=0)
            plan = state.plan(now=0, force=True)
            assert plan is not None and len(plan.files) == len(batch)
            record = committer.commit(plan)
            assert record.files == len(batch) and record.records == len(batch) * args.rows, record
            state.committed_plan(plan, record.version, now=0)
            after = compiled(spark)
            cpus.append(cpu_seconds([os.getpid()]) - cpu)
            compiles.append((after[0] - before[0], after[1] - before[1]))
            print(
                f"  {cpus[-1]:.2f} CPU-s; Spark compiled {compiles[-1][0]} classes, the JIT worked {compiles[-1][1]} ms",
                flush=True,
            )

        timed(f"creating the table ({PARTITIONS} files)", lambda: commit(first))
        what = f"{args.format} {args.mode} round of {args.files} {args.kind} files of {args.rows} records"
        times = [timed(f"{what}, facts read", lambda batch=batch: commit(batch)) for batch in rounds[:-1]]
        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()
        times.append(timed(f"{what}, facts read", lambda: commit(rounds[-1])))
        if profiler is not None:
            profiler.disable()
            print_profile(profiler)
        if args.format == "iceberg":
            row = spark.sql(f"SELECT count(*) FROM {CATALOG}.bench.t.files WHERE content = 0").first()
            table_files = int(row[0]) if row is not None else 0
        else:
            table_files = len(spark.read.format("delta").load(DELTA).inputFiles())
        print(f"the table's data files after {args.rounds + 1} rounds: {table_files}", flush=True)
    finally:
        server.stop()
    result = {
        "benchmark": "s3-commit",
        "store": args.store,
        "format": args.format,
        "kind": args.kind,
        "mode": args.mode,
        "keys": args.keys,
        "files": args.files,
        "rows_per_file": args.rows,
        "facts_read_ahead_s": round(read_ahead, 3),
        "facts_read_ahead_files": len(files),
        "facts_per_second_read_ahead": round(len(files) / read_ahead, 1),
        "facts_per_second_one_at_a_time": round(50 / serial, 1),
        "commit_s": round(times[0], 3),
        "rounds_s": [round(t, 3) for t in times],
        "median_round_s": round(statistics.median(times), 3),
        "table_files": table_files,
        "classes_compiled_by_round": [c for c, _ in compiles[1:]],  # Spark's generated code, the measured rounds
        "jit_ms_by_round": [ms for _, ms in compiles[1:]],
        "cpu_s_by_round": [round(c, 2) for c in cpus[1:]],  # the bench's process and Spark's JVM
    }
    report(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
