"""The ``iceberg`` part of ``python -m lakegate_bench bench``: one commit round of the same sink
files into a Delta table and into an Iceberg table (a JDBC catalog on a sqlite file in the bench's
scratch directory), through each table's ``TableCoordinator`` as the service runs them, footers
read ahead. Parquet files are added where they lie by both formats (zero copy); gzip JSON-lines
files are rewritten by both. Each table exists before its measured round."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commit_service.config import CatalogType, IcebergCatalog, Placement, TableConfig, TableFormat
from commit_service.coordination.table_coordinator import TableCoordinator
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import CommitPolicy
from commit_service.iceberg.committer import IcebergCommitter
from commit_service.storage.prefetch import FactsCache, storage_facts
from lakegate_core.protocol import DataFile

if TYPE_CHECKING:
    from lakegate_bench.commit_path import Bench

CATALOG = "bench"


def bench_catalog(work: Path, warehouse: str | None = None) -> IcebergCatalog:
    """The bench's Iceberg catalog: JDBC on a sqlite file, tables under ``warehouse`` (default
    ``<work>/iceberg/``)."""
    return IcebergCatalog(
        name=CATALOG,
        type=CatalogType.JDBC,
        uri=f"jdbc:sqlite:{work / 'iceberg-catalog.db'}",
        warehouse=warehouse or (work / "iceberg").as_uri() + "/",
        properties={"jdbc.schema-version": "V1"},
    )


def iceberg_coordinator(
    bench: Bench, name: str, partition_by: tuple[str, ...] = (), policy: MaintenancePolicy | None = None
) -> TableCoordinator:
    """An Iceberg table (``bench.<name>``) as the service runs it."""
    table = f"{CATALOG}.{name}"
    config = TableConfig(
        table,
        f"file://{bench.work}/iceberg/{CATALOG}/{name}",
        topics=("bench",),
        placement=Placement.IN_PLACE_ABSOLUTE,
        commit=CommitPolicy(max_files=1_000_000, max_bytes=1 << 50, max_pending_files=1_000_000),
        format=TableFormat.ICEBERG,
        partition_by=partition_by,
        maintenance=policy or MaintenancePolicy(),
    )
    committer = IcebergCommitter(
        lambda: bench.spark,
        table,
        CATALOG,
        config.root.rstrip("/"),
        bench.storage,
        placement=config.placement,
        facts=FactsCache(
            storage_facts(bench.storage, footers=True), name=table
        ),  # as the service reads ahead for Iceberg
        partition_by=config.partition_spec,
    )
    coordinator = TableCoordinator(config, committer, time.time)
    coordinator.load()
    return coordinator


def part_iceberg(bench: Bench, parquet_sizes: list[int], jsonl_sizes: list[int]) -> dict[str, Any]:
    from lakegate_bench.commit_path import Landing

    rows = []
    print(f"{'files':>6} {'format':>8} {'Delta s':>9} {'Iceberg s':>10} {'Iceberg/Delta':>14}", flush=True)
    for kind, sizes in (("parquet", parquet_sizes), ("jsonl", jsonl_sizes)):
        for n in sizes:
            landing = Landing(bench.work / f"landing-iceberg-{kind}-{n}", bench.rows)

            def write(count: int, landing: Landing = landing, kind: str = kind) -> list[DataFile]:
                return landing.write(count) if kind == "parquet" else landing.write_jsonl(count)

            delta = bench.coordinator(f"vs-iceberg-{kind}{n}")
            iceberg = iceberg_coordinator(bench, f"{kind}{n}")
            first = write(1)
            bench.commit(delta, first)
            bench.commit(iceberg, first)
            files = write(n)
            delta_s = bench.commit(delta, files)
            iceberg_s = bench.commit(iceberg, files)
            rows.append(
                {
                    "files": n,
                    "format": kind,
                    "rows_per_file": bench.rows,
                    "delta_s": round(delta_s, 3),
                    "iceberg_s": round(iceberg_s, 3),
                    "iceberg_over_delta": round(iceberg_s / delta_s, 2),
                }
            )
            print(f"{n:>6} {kind:>8} {delta_s:>9.2f} {iceberg_s:>10.2f} {iceberg_s / delta_s:>13.2f}x", flush=True)
    return {"results": rows}
