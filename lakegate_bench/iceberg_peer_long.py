"""Benchmark ``iceberg-peer --long``: half an hour of Lakegate and Apache Iceberg's Kafka Connect
sink side by side, and the tables each leaves.

On one local stack (the S3 server, Kafka), the two systems run at the same time, each with a
Connect worker of its own (two worker groups: each system's Connect CPU is its own), a bucket, an
Iceberg REST catalog server and a 3-partition topic; one producer process sends every record to
both topics (the same key, value and partition), ``--rate`` per second for ``--long-seconds``:

- **Lakegate**: the Connect S3 sink (Parquet, no envelope) -> one sidecar -> the service
  (``format: iceberg``, the interval, ``maintenance.enabled``, every other key at its default: the
  rounds' merging of small files, ``small_files_allowed`` 128, target 128 MiB);
- **the peer**: ``IcebergSinkConnector`` as its documentation gives it, at the same interval.

A pyiceberg poller per table (every second) records each snapshot's live data files and the
records each appending snapshot added (freshness; a compaction's ``replace`` snapshot adds none).
At the end, with both systems stopped: each table's live data files and their sizes, the data
files a one-minute range of ``produced_ms`` plans (Iceberg's own pruning), and, in one Spark
session holding both catalogs, a full scan and that one-minute range query (median of three after
a warm-up); CPU seconds per million records of each system over the run (Lakegate's with its
maintenance; both with and without the catalog server) and the S3 requests to each bucket.
Writes ``iceberg-peer-long.json`` and a plot of live data files over the run.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakegate_bench.figures import figures
from lakegate_bench.freshness import produce_to, wait_for, warm_up
from lakegate_bench.iceberg_peer import NAMESPACE, READS, WRITES, IcebergPoller, PeerBench
from lakegate_bench.lakegate_knobs import SIDECAR_POLL_SECONDS
from lakegate_bench.pipeline import LakegateRun
from lakegate_bench.process_cpu import cpu_seconds, jit_seconds, jit_threads
from lakegate_bench.s3_requests import S3RequestLog
from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import SINK_PLUGIN_GROUP, ConnectWorker
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.iceberg_peer import PEER_PLUGIN_GROUP

SCANS = 3
MINUTE_MS = 60_000
SIZE_BUCKETS = ((64 << 10, "< 64 KiB"), (1 << 20, "64 KiB-1 MiB"), (16 << 20, "1-16 MiB"), (64 << 20, "16-64 MiB"))
PROGRESS_S = 60


@dataclass
class System:
    """One system of the run: what it is called, its processes by role, its table and poller."""

    name: str  # "lakegate" or "iceberg-kafka-connect"
    bucket: str
    catalog: IcebergRestCatalog
    poller: IcebergPoller
    pids: dict[str, int]

    @property
    def table(self) -> str:
        return f"{NAMESPACE}.{self.bucket}"


def size_figures(sizes: list[int]) -> dict[str, Any]:
    """Live data files by size: how many, total, median, mean, largest and a count per size bucket."""
    if not sizes:
        return {"data_files": 0}
    buckets: dict[str, int] = {label: 0 for _, label in SIZE_BUCKETS}
    buckets[">= 64 MiB"] = 0
    for size in sizes:
        label = next((label for bound, label in SIZE_BUCKETS if size < bound), ">= 64 MiB")
        buckets[label] += 1
    return {
        "data_files": len(sizes),
        "total_mib": round(sum(sizes) / 2**20, 1),
        "median_kib": round(statistics.median(sizes) / 1024, 1),
        "mean_kib": round(sum(sizes) / len(sizes) / 1024, 1),
        "largest_mib": round(max(sizes) / 2**20, 2),
        "by_size": buckets,
    }


class LongRun:
    """Both systems running side by side on one stack (:class:`PeerBench`'s, with a second worker)."""

    def __init__(self, bench: PeerBench, interval: int) -> None:
        self.bench = bench
        self.interval = interval
        assert bench.stack.kafka is not None and bench.stack.s3 is not None
        self.bootstrap = bench.stack.kafka.bootstrap_servers
        self.peer_worker = ConnectWorker(
            bench.work / "peer-connect", self.bootstrap, name="connect-peer", group_id="peer-connect",
            plugins=(PEER_PLUGIN_GROUP,),
        )  # fmt: skip
        self.lakegate_run: LakegateRun | None = None
        self.systems: list[System] = []
        self.cpu_over_run: dict[str, list[list[Any]]] = {}  # by system: [minute, CPU-s by process so far]

    def start(self) -> None:
        print("starting the peer's Connect worker (a group of its own) ...", flush=True)
        self.peer_worker.start()
        self.systems.append(self._start_lakegate())
        self.systems.append(self._start_peer())

    def _start_lakegate(self) -> System:
        name = f"lglong{self.interval}"
        catalog = self.bench.catalog(name)
        self.lakegate_run = self.bench.start_lakegate(name, self.interval, catalog, maintenance=True)
        assert catalog.process is not None and catalog.process.pid is not None
        poller = self.bench.poller(catalog, f"{NAMESPACE}.{name}")
        pids = {**self.lakegate_run.pids(), "catalog": catalog.process.pid}
        return System("lakegate", name, catalog, poller, pids)

    def _start_peer(self) -> System:
        name = f"peerlong{self.interval}"
        catalog = self.bench.catalog(name)
        self.bench.start_peer(self.peer_worker, name, self.interval, catalog)
        assert self.peer_worker.process is not None and self.peer_worker.process.pid is not None
        assert catalog.process is not None and catalog.process.pid is not None
        poller = self.bench.poller(catalog, f"{NAMESPACE}.{name}")
        pids = {"connect": self.peer_worker.process.pid, "catalog": catalog.process.pid}
        return System("iceberg-kafka-connect", name, catalog, poller, pids)

    def stop_systems(self) -> None:
        """Stop what writes the tables; their catalogs stay up for the reads at the end."""
        if self.lakegate_run is not None:
            self.lakegate_run.stop()
            self.lakegate_run = None
        if self.peer_worker.process is not None:
            self.peer_worker.stop()

    def stop(self) -> None:
        self.stop_systems()
        for system in self.systems:
            system.catalog.stop()

    def measure(self, rate: int, seconds: int, warm_up_seconds: int) -> dict[str, Any]:
        """Warm each system up, produce to both for ``seconds``, wait until each table holds every
        record; the CPU, S3 requests and snapshots of that window, by system."""
        for system in self.systems:
            system.poller.period_s = 1.0
            system.poller.start()
            print(f"  {system.name}: warming up ...", flush=True)
            warm_up(system.poller, self.bootstrap, system.bucket, rate, warm_up_seconds)
        s3_logs = {s.name: S3RequestLog(self.bench.s3_log, s.bucket) for s in self.systems}
        marks = {name: log.mark() for name, log in s3_logs.items()}
        before = {(s.name, role): cpu_seconds([pid]) for s in self.systems for role, pid in s.pids.items()}
        jit_before = {(s.name, role): jit_threads([pid]) for s in self.systems for role, pid in s.pids.items()}
        started_ms = int(time.time() * 1000)
        topics = tuple(s.bucket for s in self.systems)
        print(f"  both: producing {rate}/s to {', '.join(topics)} for {seconds} s ...", flush=True)
        spawn = multiprocessing.get_context("spawn")  # not a fork of a process running pollers
        with ProcessPoolExecutor(1, mp_context=spawn) as pool:
            producing = pool.submit(produce_to, self.bootstrap, topics, rate, seconds)
            while True:
                try:
                    produced = producing.result(timeout=PROGRESS_S)
                    break
                except FuturesTimeout:
                    self._progress(started_ms, before)
        for system in self.systems:
            wait_for(system.poller, produced, timeout=300)
        rows: dict[str, Any] = {}
        for system in self.systems:
            cpu = self._cpu_since(system, before)
            jit = {role: jit_seconds(jit_before[(system.name, role)], [pid]) for role, pid in system.pids.items()}
            requests = s3_logs[system.name].count_since(marks[system.name])
            rows[system.name] = self._row(system, produced, rate, cpu, jit, requests)
        rows["started_ms"] = started_ms
        return rows

    @staticmethod
    def _cpu_since(system: System, before: dict[tuple[str, str], float]) -> dict[str, float]:
        """Each of ``system``'s processes' CPU-seconds since ``before`` (by system name and role)."""
        return {role: cpu_seconds([pid]) - before[(system.name, role)] for role, pid in system.pids.items()}

    def _progress(self, started_ms: int, before: dict[tuple[str, str], float]) -> None:
        """A line a minute: each table's live files and records seen, and each process's CPU-seconds
        so far (kept by minute in the row's ``cpu_over_run_s``: whether a process's cost grows with the run)."""
        minutes = (time.time() * 1000 - started_ms) / MINUTE_MS
        parts = []
        for system in self.systems:
            live = system.poller.live[-1] if system.poller.live else (0, 0, 0, "")
            used = {role: round(seconds, 1) for role, seconds in self._cpu_since(system, before).items()}
            self.cpu_over_run.setdefault(system.name, []).append([round(minutes, 1), used])
            cpu = ", ".join(f"{role} {s}" for role, s in used.items())
            parts.append(
                f"{system.name} {live[1]} live files, {len(system.poller.seen_ms):,} records seen, CPU-s {cpu}"
            )
        print(f"    {minutes:.1f} min: " + "; ".join(parts), flush=True)

    def _row(
        self,
        system: System,
        produced: int,
        rate: int,
        cpu: dict[str, float],
        jit: dict[str, float],
        requests: dict[str, int],
    ) -> dict[str, Any]:
        poller = system.poller
        total = sum(cpu.values())
        per_million = 1e6 / produced
        replaced = [x for x in poller.live[poller.warm_up_versions :] if x[3] == "replace"]
        return {
            "system": system.name,
            "interval_s": self.interval,
            "cpu_by_process_s": {k: round(v, 1) for k, v in cpu.items()},
            "jit_by_process_s": {k: round(v, 1) for k, v in jit.items()},  # of cpu_by_process_s, the JIT compilers'
            **figures(poller, produced, total, None, rate, sum(jit.values())),
            "cpu_s_per_million_without_catalog": round((total - cpu["catalog"]) * per_million, 1),
            "rewrite_snapshots": len(replaced),
            "s3_requests": requests,
            "s3_writes_per_million": round(sum(requests.get(m, 0) for m in WRITES) * per_million),
            "s3_reads_per_million": round(sum(requests.get(m, 0) for m in READS) * per_million),
            "live_over_run": [[ms, files] for ms, files, _, _ in poller.live],
            "cpu_over_run_s": self.cpu_over_run.get(system.name, []),  # [minute, CPU-s by process so far]
        }

    def tables(self, minute_lo: int) -> dict[str, dict[str, Any]]:
        """Each table's live data files and their sizes, and the files a one-minute range plans."""
        out = {}
        minute = f"produced_ms >= {minute_lo} and produced_ms < {minute_lo + MINUTE_MS}"  # pyiceberg's filter syntax
        for system in self.systems:
            table = system.poller.catalog.load_table(system.table)
            sizes = [task.file.file_size_in_bytes for task in table.scan().plan_files()]
            planned = len(list(table.scan(row_filter=minute).plan_files()))
            out[system.name] = {**size_figures(sizes), "minute_range_files_planned": planned}
        return out

    def queries(self, minute_lo: int) -> dict[str, dict[str, Any]]:
        """A full scan and a one-minute range of each table in one Spark session (both catalogs)."""
        from commit_service.config import CatalogType, IcebergCatalog, S3Settings, SparkSettings
        from commit_service.spark.session import create_session

        assert self.bench.stack.s3 is not None
        catalogs = tuple(IcebergCatalog(s.bucket, CatalogType.REST, s.catalog.uri) for s in self.systems)
        settings = SparkSettings(
            master="local[2]",
            app_name="bench-iceberg-peer-long-scans",
            ui_enabled=False,
            driver_memory="2g",
            local_dir=self.bench.work / "scan-spark",
            s3=S3Settings(endpoint=self.bench.stack.s3.endpoint, access_key=s3mod.ACCESS_KEY,
                          secret_key=s3mod.SECRET_KEY),
            catalogs=catalogs,
        )  # fmt: skip
        spark = create_session(settings)
        out = {}
        try:
            for system in self.systems:
                name = f"{system.bucket}.{system.table}"
                # sum(amount) and length(note) read the data: a bare count(*) is answered from metadata
                select = f"SELECT count(*), sum(amount), sum(length(note)) FROM {name}"
                where = f" WHERE produced_ms >= {minute_lo} AND produced_ms < {minute_lo + MINUTE_MS}"
                full_s, full = _timed(spark, select)
                range_s, ranged = _timed(spark, select + where)
                out[system.name] = {
                    "full_scan_s": full_s,
                    "full_scan_rows": full[0],
                    "minute_range_s": range_s,
                    "minute_range_rows": ranged[0],
                    "sums": [full[1], ranged[1]],
                }
        finally:
            spark.stop()
        return out


def _timed(spark: Any, sql: str) -> tuple[float, list[Any]]:
    """The median seconds of ``SCANS`` runs of ``sql`` after a warm-up, and its one row."""
    row = list(spark.sql(sql).collect()[0])
    times = []
    for _ in range(SCANS):
        started = time.perf_counter()
        spark.sql(sql).collect()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3), row


def run(
    work: Path,
    interval: int,
    rate: int,
    seconds: int,
    warm_up_seconds: int = 0,
    catch_up_seconds: float = 0.0,
    service_conf: dict[str, str] | None = None,
    sidecar_poll: float = SIDECAR_POLL_SECONDS,
) -> dict[str, Any]:
    bench = PeerBench(work, warm_up_seconds, catch_up_seconds, plugins=(SINK_PLUGIN_GROUP,), service_conf=service_conf,
                       sidecar_poll=sidecar_poll)  # fmt: skip
    with bench:
        run = LongRun(bench, interval)
        try:
            run.start()
            measured = run.measure(rate, seconds, warm_up_seconds)
            run.stop_systems()
            minute_lo = measured["started_ms"] + (seconds * 1000) // 2 // MINUTE_MS * MINUTE_MS
            tables = run.tables(minute_lo)
            queries = run.queries(minute_lo)
        finally:
            run.stop()
    rows = []
    for system in ("lakegate", "iceberg-kafka-connect"):
        row = {**measured[system], "table": tables[system], **queries[system]}
        rows.append(row)
        t = row["table"]
        print(
            f"  {system:>22}: {t['data_files']} live data files (median {t.get('median_kib')} KiB, "
            f"{t.get('by_size')}); full scan {row['full_scan_s']} s, one-minute range {row['minute_range_s']} s "
            f"({t['minute_range_files_planned']} files planned); {row['cpu_s_per_million']} CPU-s per million "
            f"records ({row['cpu_s_per_million_without_catalog']} without the catalog); "
            f"freshness p50 {row['freshness_p50_s']} s, p99 {row['freshness_p99_s']} s; "
            f"S3 writes {row['s3_writes_per_million']}/M",
            flush=True,
        )
    lakegate, peer = rows
    if lakegate["minute_range_rows"] != peer["minute_range_rows"] or lakegate["sums"] != peer["sums"]:
        print("  warning: the two tables' one-minute ranges differ: not the same records", flush=True)
    return {
        "rate": rate,
        "seconds": seconds,
        "interval_s": interval,
        "warm_up_seconds": warm_up_seconds,
        "minute_range_ms": [minute_lo, minute_lo + MINUTE_MS],
        "cpu_ratio": round(lakegate["cpu_s_per_million"] / peer["cpu_s_per_million"], 2),
        "service_conf": dict(service_conf or {}),
        "sidecar_poll_seconds": sidecar_poll,
        "results": rows,
    }
