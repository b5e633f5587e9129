"""Benchmark: how long the commit service takes to be ready again after a SIGKILL.

Starts the real ``lakegate-service`` (gunicorn, Spark) on ``--tables`` local tables of
``--format`` (Delta; or Iceberg in a JDBC catalog on sqlite), makes ``--commits`` commit rounds of
one small Parquet file per partition in each (Delta checkpoints every 10 versions in the
background, as configured by default), then repeatedly: SIGKILL, remove each Delta table's newest
version checksum (``.crc``: a SIGKILL between a commit and its checksum leaves none, which is the
case that made Delta replay the log with Spark), restart, and time spawn -> ``/readyz`` 200, and
then one more round in every table (its first commit after the restart). Also checks that the
restarted service reports the offsets each table holds. Prints progress and a table, writes JSON
(default .lakegate/bench/recovery.json). With ``--catalog rest`` the Iceberg tables are in Iceberg's
REST catalog server, they and their files on the S3 server (moto). Run through ``scripts/bench-recovery``.
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

from deltalake import DeltaTable

from lakegate_bench.result import work_dir
from lakegate_stack import s3 as s3mod
from lakegate_stack.datafiles import write_parquet
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ServiceProcess

CATALOG, BUCKET = "lake", "lake-recovery"


def topic(table: int) -> str:
    return f"bench{table}"


class Lake:
    """Where the tables and their files live: local files (Delta; Iceberg in a JDBC catalog on
    sqlite), or with ``--catalog rest`` the S3 server (moto), the tables in Iceberg's REST catalog
    server with its warehouse there, and the files uploaded there."""

    def __init__(self, work: Path, args: Any) -> None:
        self.work = work
        self.args = args
        self.s3: S3Server | None = None
        self.rest: IcebergRestCatalog | None = None

    def __enter__(self) -> Lake:
        if self.args.catalog == "rest":
            self.s3 = S3Server(self.work / "s3").start()
            self.s3.create_bucket(BUCKET)
            self.rest = IcebergRestCatalog(self.work / "rest", f"s3a://{BUCKET}/warehouse", self.s3)
            self.rest.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self.rest is not None:
            self.rest.stop()
        if self.s3 is not None:
            self.s3.stop()

    def service(self, name: str) -> ServiceProcess:
        """A service (not started) on every table, as configured by :meth:`tables`."""
        if self.s3 is None:
            roots = [f"file://{self.work}/lake/", f"file://{self.work}/landing/"]
            return ServiceProcess(self.work, self.tables(), roots, name=name, catalogs=self.catalogs())
        s3 = {"endpoint": self.s3.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY}
        return ServiceProcess(
            self.work, self.tables(), [f"s3a://{BUCKET}/"], name=name, catalogs=self.catalogs(), s3=s3
        )

    def tables(self) -> list[dict[str, Any]]:
        """The service's ``tables``: their files added where the bench wrote them."""
        tables: list[dict[str, Any]]
        if self.args.format == "delta":
            tables = [{"name": f"bench{t}", "path": self.delta_path(t)} for t in range(self.args.tables)]
        else:
            base = f"s3a://{BUCKET}/tables" if self.s3 is not None else (self.work / "lake").as_uri()
            tables = [
                {"name": f"bench.t{t}", "format": "iceberg", "path": f"{base}/t{t}"} for t in range(self.args.tables)
            ]
        for t, table in enumerate(tables):
            table.update(topics=[topic(t)], commit={"interval_seconds": 3600}, placement="in_place_absolute")
        return tables

    def delta_path(self, table: int) -> str:
        return str(self.work / "lake" / f"bench{table}")

    def catalogs(self) -> list[dict[str, Any]] | None:
        if self.args.format == "delta":
            return None
        if self.rest is not None:
            return [{"name": CATALOG, "type": "rest", "uri": self.rest.uri}]
        return [
            {
                "name": CATALOG,
                "type": "jdbc",
                "uri": f"jdbc:sqlite:{self.work / 'catalog.db'}",
                "warehouse": (self.work / "lake").as_uri() + "/",
                "properties": {"jdbc.schema-version": "V1"},
            }
        ]

    def data_file(self, table: int, partition: int, start: int) -> dict[str, Any]:
        """A sink's file of ``--rows`` records, and its manifest entry."""
        name = topic(table)
        local = self.work / "landing" / name / f"{name}-{partition}-{start:020d}"
        entry = write_parquet(local, name, partition, start, self.args.rows)
        if self.s3 is None:
            return entry
        key = f"landing/{name}/{local.name}"
        self.s3.client().put_object(Bucket=BUCKET, Key=key, Body=local.read_bytes())
        return {**entry, "path": f"s3a://{BUCKET}/{key}"}

    def fill(self, svc: ServiceProcess, commits: int, first: int = 0) -> None:
        """``commits`` rounds of one file per partition in each table (in order)."""
        args = self.args
        for n in range(first, first + commits):
            for t, table in enumerate(self.tables()):
                files = [self.data_file(t, p, n * args.rows) for p in range(args.partitions)]
                body = {"manifest_id": f"m{t}-{n}", "sidecar": {"id": "bench", "worker": "w:1"}, "files": files}
                assert svc.call("POST", "/v1/manifests", json=body).status_code == 202
                assert svc.commit_now(table["name"])["committed"]
            if (n + 1 - first) % 50 == 0:
                print(f"  {n + 1 - first}/{commits} commits", flush=True)


def measure(lake: Lake, args: Any) -> list[dict[str, Any]]:
    """Fill the tables, then SIGKILL and restart ``--crashes`` times (see the module docstring)."""
    where = "the S3 server, a REST catalog" if lake.s3 is not None else "local files"
    print(f"filling {args.tables} {args.format} table(s) on {where}: {args.commits} commits x {args.partitions} files")
    svc = lake.service("fill").start()
    try:
        lake.fill(svc, args.commits)
    finally:
        svc.kill()
    expected = {str(p): args.commits * args.rows for p in range(args.partitions)}
    names = [t["name"] for t in lake.tables()]
    runs = []
    for i in range(args.crashes):
        version = -1
        for t in range(args.tables) if args.format == "delta" else ():
            version = DeltaTable(lake.delta_path(t)).version()
            (Path(lake.delta_path(t)) / "_delta_log" / f"{version:020d}.crc").unlink(missing_ok=True)
        again = lake.service(f"restart-{i}")
        started = time.monotonic()
        again.spawn().wait_ready(timeout=600)
        ready_s = time.monotonic() - started
        for t, name in enumerate(names):
            offsets = again.call("GET", f"/v1/tables/{name}/offsets").json()
            assert offsets == {topic(t): expected}, offsets
        t0 = time.monotonic()
        lake.fill(again, 1, first=args.commits + i)  # one more round in each table, then crash
        first_commit_s = time.monotonic() - t0
        runs.append(
            {
                "ready_s": round(ready_s, 2),
                "first_commit_s": round(first_commit_s, 2),
                "committed_after_start_s": round(ready_s + first_commit_s, 2),
                "version": version,
            }
        )
        at = f" (at version {version}, no checksum)" if args.format == "delta" else ""
        print(
            f"restart {i + 1}: ready in {ready_s:.1f} s{at}; a round in each of {len(names)} table(s) after it "
            f"{first_commit_s:.1f} s, {ready_s + first_commit_s:.1f} s from the start",
            flush=True,
        )
        expected = {p: v + args.rows for p, v in expected.items()}
        again.kill()
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-recovery", description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=300, help="commit rounds before the first crash (300)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions, one file each per commit (4)")
    parser.add_argument("--rows", type=int, default=100, help="rows per file (100)")
    parser.add_argument("--crashes", type=int, default=3, help="SIGKILL + restart cycles to time (3)")
    parser.add_argument("--format", choices=("delta", "iceberg"), default="delta", help="the tables' format (delta)")
    parser.add_argument("--tables", type=int, default=1, help="tables, each of its own topic (1)")
    parser.add_argument(
        "--catalog",
        choices=("jdbc", "rest"),
        default="jdbc",
        help="iceberg: JDBC on sqlite, local files (jdbc); or the REST catalog server, tables and files on the S3 server",
    )
    parser.add_argument("--out", type=Path, default=Path(".lakegate/bench/recovery.json"), help="JSON output")
    args = parser.parse_args(argv)

    work = work_dir("lakegate-bench-recovery-")
    with Lake(work, args) as lake:
        runs = measure(lake, args)
    ready = [r["ready_s"] for r in runs]
    result = {
        "benchmark": "recovery",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "format": args.format,
        "catalog": args.catalog if args.format == "iceberg" else None,
        "tables": args.tables,
        "commits": args.commits,
        "partitions": args.partitions,
        "runs": runs,
        "ready_s_median": statistics.median(ready),
        "ready_s_max": max(ready),
        "first_commit_s_median": statistics.median(r["first_commit_s"] for r in runs),
        "committed_after_start_s_max": max(r["committed_after_start_s"] for r in runs),
    }
    print(
        f"\nready after SIGKILL: median {result['ready_s_median']:.1f} s, max {result['ready_s_max']:.1f} s; "
        f"every table's first round done {result['committed_after_start_s_max']:.1f} s after the start at most "
        f"({len(ready)} restarts, {args.tables} {args.format} table(s))"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
