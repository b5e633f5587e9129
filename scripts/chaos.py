"""The chaos run: the real pipeline under seeded faults, checked for exactly-once at quiesce.

Kafka, 3 Connect workers with the S3 sink, the S3 server, a sidecar per worker and the commit
service; exits 1 on any lost or duplicated record, 2 when the run itself could not finish.
Run through ``scripts/chaos`` (which installs what it needs). The harness is
``lakegate_stack.chaos``; this command adds the delta-spark read of the tables (a local
SparkSession with delta-spark, independent of the service's) and writes the JSON report.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from lakegate_stack.chaos import (
    ALL_FAULT_KINDS,
    FAULT_KINDS,
    PEER_FAULT_KINDS,
    ChaosError,
    ChaosRun,
    ChaosSettings,
    summary,
)
from lakegate_stack.chaos.settings import TableRef
from lakegate_stack.process import free_port


def check_catalog() -> Any:
    """A placeholder Iceberg catalog that puts Iceberg's jars and extensions in the check's Spark
    (the run's own REST catalog is registered when a table of it is read)."""
    from commit_service.config import CatalogType, IcebergCatalog

    return IcebergCatalog(name="unused", type=CatalogType.REST, uri="http://127.0.0.1:9")


class SparkReader:
    """Reads a table's ids through Spark (delta-spark, or Iceberg's runtime): a local SparkSession, started on first use (after
    the run's S3 server is up), independent of the service's."""

    def __init__(self, workdir: Path, run: ChaosRun) -> None:
        self.workdir, self.run = workdir, run
        self.session: Any = None

    def __call__(self, table: TableRef) -> list[int]:
        from commit_service.config import S3Settings, SparkSettings
        from commit_service.spark.session import create_session
        from lakegate_stack import s3 as s3mod

        if self.session is None:
            assert self.run.s3 is not None
            settings = SparkSettings(
                master="local[2]",
                app_name="lakegate-chaos-check",
                ui_enabled=False,
                ui_port=free_port(),
                driver_memory="2g",
                local_dir=self.workdir / "check-spark",
                s3=S3Settings(endpoint=self.run.s3.endpoint, access_key=s3mod.ACCESS_KEY, secret_key=s3mod.SECRET_KEY),
                catalogs=(check_catalog(),),  # Iceberg's jars and extensions; the run's catalog is set per read
            )
            self.session = create_session(settings)
        return table.spark_ids(self.session)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1, help="seeds where faults fall and which (default 1)")
    parser.add_argument("--records", type=int, default=50_000, help="records to produce, unique ids (50000)")
    parser.add_argument("--faults", type=int, default=10, help="faults to inject (10)")
    parser.add_argument(
        "--kinds",
        default=None,
        help=f"comma list of fault kinds, each used once before any repeats, of {','.join(ALL_FAULT_KINDS)} "
        f"(default: {','.join(FAULT_KINDS)})",
    )
    parser.add_argument("--rate", type=int, default=2_000, help="records per second the producer aims at (2000)")
    parser.add_argument("--workers", type=int, default=3, help="Connect workers, each with a sidecar (3)")
    parser.add_argument(
        "--offset-check",
        choices=("required", "auto", "off"),
        default="required",
        help="the tables' orphan guard (tables[].offset_check); 'off' shows the duplicates it prevents",
    )
    parser.add_argument(
        "--peer",
        action="store_true",
        help="also run Apache Iceberg's own Kafka Connect sink on topics a and b under the same faults, and "
        f"report what it lost and duplicated (default kinds then: {','.join(PEER_FAULT_KINDS)})",
    )
    parser.add_argument("--report", type=Path, default=Path(".lakegate/chaos/report.json"), help="JSON report path")
    parser.add_argument("--no-spark", action="store_true", help="skip the delta-spark read (delta-rs only)")
    parser.add_argument("--workdir", type=Path, help="where logs and data go (default: a temp dir, removed on success)")
    args = parser.parse_args(argv)
    kinds = args.kinds or ",".join(PEER_FAULT_KINDS if args.peer else FAULT_KINDS)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = ChaosSettings(
            seed=args.seed,
            records=args.records,
            faults=args.faults,
            kinds=tuple(k.strip() for k in kinds.split(",") if k.strip()),
            rate=args.rate,
            workers=args.workers,
            offset_check=args.offset_check,
            peer=args.peer,
        )
    except ValueError as exc:
        parser.error(str(exc))
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lakegate-chaos-"))
    print(f"chaos: logs and data under {workdir}", flush=True)
    run = ChaosRun(settings, workdir)
    if not args.no_spark:
        run.spark_check = SparkReader(workdir, run)
    try:
        report = run.run()
    except ChaosError as exc:
        print(f"chaos: the run could not finish: {exc} (logs under {workdir})", file=sys.stderr)
        return 2
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report.to_json(), indent=2, default=str))
    print(summary(report))
    print(f"report: {args.report}", flush=True)
    if report.ok and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not report.ok:
        print(f"logs kept under {workdir}", file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
