"""Benchmarks of the commit service's table side (real Spark + Delta, and Iceberg), in selectable parts.

Parts (``--parts``, default all but ``service``, ``upsert``, ``iceberg`` and ``iceberg-peer``):

- ``commit``: one commit of N Parquet files (1,000 rows x 10 columns each), N in ``--files``.
  The same files are committed three ways, each into its own table that already exists:
  Lakegate with the files' footers read ahead (what a commit finds after the files waited in the
  buffer: the service's own ``TableCoordinator`` path), Lakegate cold (nothing read ahead: a
  ``DeltaCommitter`` alone), and the rewrite a Spark job would do
  (``read.parquet(files).write.format("delta").mode("append")``).
- ``checkpoints``: ``--commits`` consecutive 10-file commits through the ``TableCoordinator``,
  once with Delta's checkpoints inside every 10th commit, once with no checkpoint at all (the
  control: how much the commit path varies by itself) and once with them in the background (the
  default): p50, p99, max and p99/p50 of the commit time.
- ``history``: commit time (p50/p99 of ``--window`` commits) once the table is at each version of
  ``--history`` (checkpoints in the background).
- ``jsonl``: one commit of N gzip JSON-lines files (``--rows`` lines each, N in ``--jsonl-files``),
  which the service rewrites as Parquet inside the commit (Spark parses them); ``json`` and
  ``avro`` the same records as gzip JSON arrays and snappy Avro container files; ``avro-gzip``
  those Avro files inside a gzip stream (Aiven's default), which the service unwraps and stages.
- ``intake``: ``lakegate_bench/intake.py`` (the HTTP handler in-process, no JVM).
- ``service``: one round of N Parquet files through the real service from the outside (N in
  ``--service-files``, over ``--service-partitions`` partitions, in manifests of ``--manifest-files``):
  the manifests' acceptance over HTTP, the commit forced at once or ``--settle-seconds`` later, the
  files in the page cache or evicted (``--cold-files``), the service's peak RSS
  (``lakegate_bench/service_commit.py``).
- ``partitions``: the coordinator's cost per round (a sidecar's claim of every partition, the
  intake of ``--round-files`` files, the loop's pass over every table) for each of ``--layouts``
  (tables x partitions per table), Delta replaced by an in-memory committer
  (``lakegate_bench/partitions.py``).
- ``pipeline``: end-to-end freshness and CPU-seconds per million records, Lakegate's whole
  pipeline (Connect sink, sidecar, service) beside a Spark Structured Streaming job on the same
  records, at each of ``--intervals``, after ``--warm-up-seconds`` at the rate that are not
  measured; each system's CPU and its JIT compilers' part of it (``lakegate_bench/pipeline.py``).
- ``http``: the real service (gunicorn, Spark started and idle) under ``wrk``: one-file manifests
  from ``--clients`` concurrent connections for ``--seconds`` each; manifests/s, p50/p90/p99.
- ``upsert``: one upsert round of each of ``--upsert-keys`` changed keys into a table of
  ``--upsert-rows`` rows, keys clustered, random and recent, with deletion vectors and copy-on-write,
  against Delta's own MERGE with deletion vectors on the same changes (``lakegate_bench/upsert.py``).
- ``iceberg``: one commit round of N Parquet files (N in ``--files``, added in place by both) and
  of N gzip JSON-lines files (N in ``--jsonl-files``, rewritten by both) into a Delta table and an
  Iceberg table (JDBC catalog on sqlite), each through its ``TableCoordinator``
  (``lakegate_bench/iceberg.py``).

- ``adopt``: an archive older than Lakegate committed from nothing on a real S3 server
  (SeaweedFS; ``--adopt-store moto`` for the local default): ``--adopt-partitions`` x
  ``--adopt-files`` one-record Parquet files, rounds of ``--adopt-max-files``; files per second
  caught up, the service's and sidecar's peak RSS, a steady round's listing against an empty
  bucket's and a full listing's (``lakegate_bench/adopt.py``).
- ``partitioned``: one round of N Parquet files (N in ``--files``) over 30 days into Delta and
  Iceberg tables, unpartitioned and ``day(ts)``, each file within a day, and one in 20 spanning
  midnight; the share added in place, each round's seconds, and a one-day query's time and files
  scanned on each 30-day table (``lakegate_bench/partitioned.py``).
- ``merge``: a stream of ``--merge-rounds`` rounds of ``--merge-files`` small Parquet files into
  a Delta and an Iceberg table with maintenance off and with the rounds' merging of small files
  (``--merge-allowed``): the rounds' seconds with the upkeep after them, the merges and the bytes
  they rewrote, the CPU seconds, the live files at the end and a full scan
  (``lakegate_bench/merge.py``).
- ``iceberg-peer``: end-to-end freshness, CPU-seconds per million records, data files per snapshot
  and S3 requests of Lakegate's pipeline into an Iceberg table beside Apache Iceberg's own Kafka
  Connect sink on the same records, at each of ``--peer-intervals``, ``--rate`` for
  ``--pipeline-seconds`` after ``--warm-up-seconds`` (``lakegate_bench/iceberg_peer.py``). With
  ``--long``: the two side by side for ``--long-seconds`` (default 30 minutes) at the first of
  ``--peer-intervals``, Lakegate's maintenance on, and the tables they leave: live data files and
  their sizes, a full scan and a one-minute range in Spark, CPU and S3 requests
  (``lakegate_bench/iceberg_peer_long.py``, ``iceberg-peer-long.json``).

Prints progress and tables, writes ``<part>.json`` and a PNG plot per part to ``--out-dir``
(default ``.lakegate/bench``). Run through ``scripts/bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lakegate_bench.commit_path import Bench
from lakegate_bench.http_load import part_http
from lakegate_bench.iceberg import part_iceberg
from lakegate_bench.lakegate_knobs import SIDECAR_POLL_SECONDS
from lakegate_bench.merge import part_merge
from lakegate_bench.partitioned import part_partitioned
from lakegate_bench.pipeline import pipeline_options
from lakegate_bench.report import plot, report
from lakegate_bench.result import work_dir

PARTS = (
    "commit",
    "checkpoints",
    "history",
    "jsonl",
    "json",
    "avro",
    "avro-gzip",
    "intake",
    "http",
    "service",
    "partitions",
    "pipeline",
    "upsert",
    "iceberg",
    "iceberg-peer",
    "adopt",
    "partitioned",
    "merge",
)
# parts that need no Spark session in this process (their own processes, or none at all)
OWN_PROCESSES = ("intake", "http", "service", "partitions", "pipeline", "iceberg-peer", "adopt")
DEFAULT_PARTS = ("commit", "checkpoints", "history", "jsonl", "intake", "http", "pipeline")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench", description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--parts",
        default=",".join(DEFAULT_PARTS),
        help=f"comma-separated, of {', '.join(PARTS)} (default: {','.join(DEFAULT_PARTS)})",
    )
    parser.add_argument(
        "--files",
        type=int,
        nargs="+",
        default=[10, 100, 1000, 10000],
        help="commit: files per commit (default 10 100 1000 10000)",
    )
    parser.add_argument("--rows", type=int, default=1000, help="rows per file (default 1000)")
    parser.add_argument(
        "--commits", type=int, default=200, help="checkpoints: consecutive commits per mode (default 200)"
    )
    parser.add_argument(
        "--history",
        type=int,
        nargs="+",
        default=[10, 1000, 5000],
        help="history: table versions (default 10 1000 5000)",
    )
    parser.add_argument("--window", type=int, default=20, help="history: commits timed at each version (default 20)")
    parser.add_argument(
        "--jsonl-files",
        type=int,
        nargs="+",
        default=[10, 100, 1000],
        help="jsonl: files per commit (default 10 100 1000)",
    )
    parser.add_argument(
        "--clients", type=int, nargs="+", default=[8, 32], help="http: concurrent connections (default 8 32)"
    )
    parser.add_argument("--seconds", type=int, default=20, help="http: seconds per run (default 20)")
    parser.add_argument(
        "--service-files",
        type=int,
        nargs="+",
        default=[10000, 100000],
        help="service: files of the one round each fresh service commits (default 10000 100000)",
    )
    parser.add_argument(
        "--layouts",
        nargs="+",
        default=["1x100", "100x1", "100x100"],
        help="partitions: tables x partitions per table (default 1x100 100x1 100x100)",
    )
    parser.add_argument(
        "--round-files", type=int, default=1000, help="partitions: files sent each round (default 1000)"
    )
    parser.add_argument("--rounds", type=int, default=10, help="partitions: rounds per layout (default 10)")
    parser.add_argument(
        "--partitioned-formats",
        nargs="+",
        choices=("delta", "iceberg"),
        default=["delta", "iceberg"],
        help="partitioned: the table formats measured (default both)",
    )
    parser.add_argument("--merge-rounds", type=int, default=180, help="merge: rounds of the stream (default 180)")
    parser.add_argument(
        "--merge-files", type=int, default=15, help="merge: files per round, one per partition (default 15)"
    )
    parser.add_argument(
        "--merge-rows", type=int, default=700, help="merge: rows per file (default 700: files of about 40 KB)"
    )
    parser.add_argument(
        "--merge-allowed", type=int, default=128, help="merge: maintenance.small_files_allowed (default 128)"
    )
    parser.add_argument(
        "--merge-formats",
        nargs="+",
        choices=("delta", "iceberg"),
        default=["delta", "iceberg"],
        help="merge: the table formats measured (default both)",
    )
    parser.add_argument(
        "--service-partitions", type=int, default=3, help="service: partitions the files are spread over (default 3)"
    )
    parser.add_argument(
        "--manifest-files",
        type=int,
        default=500,
        help="service: files per manifest (default 500, the sidecar's max_files_per_manifest; at most 10000)",
    )
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=0.0,
        help="service: seconds between the last manifest and the commit (default 0: at once)",
    )
    parser.add_argument(
        "--cold-files",
        action="store_true",
        help="service: evict the round's files from the page cache before sending them",
    )
    pipeline_options(parser)  # the pipeline part's own (lakegate_bench/pipeline.py)
    parser.add_argument(
        "--peer-intervals",
        type=int,
        nargs="+",
        default=[10, 60],
        help="iceberg-peer: commit intervals of both systems, s (default 10 60)",
    )
    parser.add_argument(
        "--long",
        action="store_true",
        help="iceberg-peer: both systems side by side for --long-seconds, Lakegate's maintenance on, "
        "and the tables they leave (files, sizes, scans in Spark)",
    )
    parser.add_argument(
        "--long-seconds", type=int, default=1800, help="iceberg-peer --long: seconds of producing (default 1800)"
    )
    parser.add_argument(
        "--catch-up-seconds",
        type=float,
        default=3.0,
        help="pipeline, iceberg-peer: Lakegate's commit.catch_up_seconds, at most half the interval (default 3; 0: off)",
    )
    parser.add_argument(
        "--sidecar-poll-seconds",
        type=float,
        default=SIDECAR_POLL_SECONDS,
        help="pipeline, iceberg-peer: the sidecar's poll_interval_seconds (default 5, the sidecar's own; "
        "the figures before 2026-12-06 ran it at 1)",
    )
    parser.add_argument(
        "--rate", type=int, default=5000, help="pipeline, iceberg-peer: records per second (default 5000)"
    )
    parser.add_argument(
        "--pipeline-seconds",
        type=int,
        default=120,
        help="pipeline, iceberg-peer: seconds of producing (default 120)",
    )
    parser.add_argument(
        "--warm-up-seconds",
        type=int,
        default=0,
        help="pipeline, iceberg-peer: seconds at --rate before each measured run, not measured (default 0)",
    )
    parser.add_argument(
        "--upsert-rows", type=int, default=10_000_000, help="upsert: rows of the table (default 10000000)"
    )
    parser.add_argument("--upsert-files", type=int, default=40, help="upsert: files of the table (default 40)")
    parser.add_argument(
        "--upsert-keys",
        type=int,
        nargs="+",
        default=[1000, 10000, 100000],
        help="upsert: changed keys per round (default 1000 10000 100000)",
    )
    parser.add_argument("--adopt-partitions", type=int, default=100, help="adopt: partitions (default 100)")
    parser.add_argument(
        "--adopt-files", type=int, default=10_000, help="adopt: archive files per partition (default 10,000)"
    )
    parser.add_argument("--adopt-max-files", type=int, default=1000, help="adopt: commit.max_files (default 1000)")
    parser.add_argument(
        "--adopt-store", choices=("seaweedfs", "moto"), default="seaweedfs", help="adopt: the S3 server"
    )
    parser.add_argument(
        "--service-conf",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="pipeline, iceberg-peer: a Spark property of Lakegate's service (its spark.conf), repeatable; e.g. "
        "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 (the service's JIT without its C2 compiler)",
    )
    parser.add_argument("--out-dir", type=Path, default=Path(".lakegate/bench"))
    parser.add_argument("--no-plot", action="store_true", help="write no PNG")
    parser.add_argument(
        "--report", action="store_true", help="print Markdown tables of the JSON in --out-dir; run nothing"
    )
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.out_dir))
        return 0
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}: choose from {', '.join(PARTS)}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    bad = [kv for kv in args.service_conf if "=" not in kv]
    if bad:
        parser.error(f"--service-conf takes KEY=VALUE, got {', '.join(bad)}")
    service_conf = dict(kv.split("=", 1) for kv in args.service_conf)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}

    if "intake" in parts:
        from lakegate_bench import intake as bench_intake

        print("== intake", flush=True)
        bench_intake.main(["--out", str(args.out_dir / "intake.json")])
    work = work_dir("lakegate-bench-")
    if "http" in parts:
        write_part("http", machine, lambda: part_http(work, args.clients, args.seconds), args)
    if "service" in parts:
        from lakegate_bench.service_commit import Delivery, part_service

        write_part(
            "service",
            machine,
            lambda: part_service(
                work,
                args.service_files,
                args.rows,
                args.service_partitions,
                Delivery(args.manifest_files, args.settle_seconds, args.cold_files),
            ),
            args,
        )
    if "partitions" in parts:
        from lakegate_bench.partitions import part_partitions

        write_part("partitions", machine, lambda: part_partitions(args.layouts, args.round_files, args.rounds), args)
    if "pipeline" in parts:
        from lakegate_bench import pipeline as bench_pipeline

        write_part(
            "pipeline",
            machine,
            lambda: bench_pipeline.run(
                work / "pipeline",
                args.intervals,
                args.rate,
                args.pipeline_seconds,
                args.warm_up_seconds,
                tuple(args.pipeline_systems),
                args.catch_up_seconds,
                args.pipeline_sink,
                args.pipeline_mode,
                service_conf,
                args.sidecar_poll_seconds,
            ),
            args,
        )
    if "iceberg-peer" in parts and args.long:
        from lakegate_bench import iceberg_peer_long

        write_part(
            "iceberg-peer-long",
            machine,
            lambda: iceberg_peer_long.run(
                work / "iceberg-peer-long",
                args.peer_intervals[0],
                args.rate,
                args.long_seconds,
                args.warm_up_seconds,
                args.catch_up_seconds,
                service_conf,
                args.sidecar_poll_seconds,
            ),
            args,
        )
    elif "iceberg-peer" in parts:
        from lakegate_bench import iceberg_peer as bench_peer

        write_part(
            "iceberg-peer",
            machine,
            lambda: bench_peer.run(
                work / "iceberg-peer",
                args.peer_intervals,
                args.rate,
                args.pipeline_seconds,
                args.warm_up_seconds,
                args.catch_up_seconds,
                service_conf,
                args.sidecar_poll_seconds,
            ),
            args,
        )
    if "adopt" in parts:
        from lakegate_bench import adopt as bench_adopt

        write_part(
            "adopt",
            machine,
            lambda: bench_adopt.run(
                work / "adopt", args.adopt_partitions, args.adopt_files, args.adopt_max_files, args.adopt_store
            ),
            args,
        )
    in_process = [p for p in parts if p not in OWN_PROCESSES]  # in the order of PARTS
    if not in_process:
        return 0
    bench = Bench(work, args.rows)
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "commit": lambda: bench.part_commit(args.files),
        "checkpoints": lambda: bench.part_checkpoints(args.commits),
        "history": lambda: bench.part_history(args.history, args.window),
        "jsonl": lambda: bench.part_jsonl(args.jsonl_files),
        "json": lambda: bench.part_jsonl(args.jsonl_files, "json"),
        "avro": lambda: bench.part_jsonl(args.jsonl_files, "avro"),
        "avro-gzip": lambda: bench.part_jsonl(args.jsonl_files, "avro-gzip"),
        "upsert": lambda: bench.part_upsert(args.upsert_rows, args.upsert_files, args.upsert_keys),
        "iceberg": lambda: part_iceberg(bench, args.files, args.jsonl_files),
        "partitioned": lambda: part_partitioned(bench, args.files, tuple(args.partitioned_formats)),
        "merge": lambda: part_merge(
            bench, args.merge_rounds, args.merge_files, args.merge_rows, args.merge_allowed, tuple(args.merge_formats)
        ),
    }
    for part in in_process:
        write_part(part, machine, runs[part], args)
    bench.spark.stop()
    return 0


def write_part(part: str, machine: dict[str, Any], run: Callable[[], dict[str, Any]], args: argparse.Namespace) -> None:
    """Run one part; write its JSON (and its plot)."""
    print(f"== {part}", flush=True)
    started = time.monotonic()
    data = {"benchmark": part, "machine": machine, **run(), "took_s": 0.0}
    data["took_s"] = round(time.monotonic() - started, 1)
    out = args.out_dir / f"{part}.json"
    out.write_text(json.dumps(data, indent=2))
    print(f"wrote {out}", flush=True)
    if not args.no_plot:
        plot(part, data, args.out_dir / f"{part}.png")
        print(f"wrote {args.out_dir / f'{part}.png'}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
