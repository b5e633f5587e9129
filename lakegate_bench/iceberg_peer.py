"""Benchmark ``iceberg-peer``: Lakegate's pipeline into an Iceberg table beside Apache Iceberg's own
Kafka Connect sink, on the same records, stack and machine, at equal commit intervals.

On one local stack (the S3 server, Kafka, one Connect worker with both plugins), for each commit
interval in ``--intervals``, each system gets a new 3-partition topic, a bucket of its own and an
Iceberg REST catalog server of its own (Apache Iceberg's, warehouse in that bucket), and records
are produced at ``--rate`` per second for ``--seconds`` (each carries ``produced_ms``):

- **Lakegate**: the Connect S3 sink (Parquet, no envelope) -> one sidecar -> the service
  (``format: iceberg``, ``commit.interval_seconds`` = the interval), files added in place;
- **the peer**: ``org.apache.iceberg.connect.IcebergSinkConnector`` (3 tasks), configured as its
  documentation gives it (:mod:`lakegate_stack.iceberg_peer`), ``iceberg.control.commit.interval-ms``
  = the interval, table auto-created.

One poller (:class:`IcebergPoller`) loads each table through its REST catalog with pyiceberg every
0.25 s; a record's freshness is the time its snapshot was first seen minus ``produced_ms``. Also:
CPU seconds per million records of each system's processes (each with its descendants: Connect,
the catalog server, and for Lakegate the sidecar and the service with its JVM), data files per
snapshot and their mean size, and the S3 requests to the system's bucket (the S3 server's log:
writes are the pipeline's alone, reads include the poller's). Writes ``iceberg-peer.json``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.manifest import ManifestContent, ManifestEntryStatus
from pyiceberg.table.snapshots import Operation

from lakegate_bench.figures import figures
from lakegate_bench.freshness import PARTITIONS, FreshnessPoller
from lakegate_bench.lakegate_knobs import SIDECAR_POLL_SECONDS, catch_up_by_interval, catch_up_for
from lakegate_bench.pipeline import (
    LakegateRun,
    Measured,
    lakegate_row,
    measure,
    start_lakegate,
)
from lakegate_bench.process_cpu import by_process
from lakegate_bench.s3_requests import S3RequestLog
from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import SINK_PLUGIN_GROUP, ConnectWorker
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.iceberg_peer import PEER_PLUGIN_GROUP, create_control_topic, create_namespace, peer_sink_config
from lakegate_stack.kafka import create_topic
from lakegate_stack.stack import LocalStack

NAMESPACE = "bench"
WRITES = ("PUT", "POST", "DELETE")
READS = ("GET", "HEAD")


@dataclass(eq=False, kw_only=True)
class IcebergPoller(FreshnessPoller):
    """Loads ``table`` through a REST catalog; a new snapshot's added data files are read for their
    ``produced_ms``. ``snapshots`` keeps ``(data files, bytes)`` of each snapshot seen that added
    records; a ``replace`` snapshot (compaction rewriting records already seen) adds none.
    ``live`` keeps ``(snapshot ms, live data files, their bytes, operation)`` of every snapshot seen."""

    catalog: Catalog
    table: str
    fs: pafs.S3FileSystem
    snapshots: list[tuple[int, int]] = field(default_factory=list)
    live: list[tuple[int, int, int, str]] = field(default_factory=list)

    def poll(self) -> None:
        now_ms = int(time.time() * 1000)
        try:
            table = self.catalog.load_table(self.table)
        except NoSuchTableError:  # made by the first commit
            return
        for snapshot in table.snapshots():
            key = str(snapshot.snapshot_id)
            if key in self.versions:
                continue
            self.versions.add(key)
            summary = snapshot.summary
            if summary is not None:
                live = (int(summary["total-data-files"] or 0), int(summary["total-files-size"] or 0))
                self.live.append((snapshot.timestamp_ms, *live, summary.operation.value))
            if summary is not None and summary.operation == Operation.REPLACE:
                continue
            files, size = 0, 0
            for manifest in snapshot.manifests(table.io):
                if manifest.added_snapshot_id != snapshot.snapshot_id or manifest.content != ManifestContent.DATA:
                    continue
                for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                    if entry.status != ManifestEntryStatus.ADDED:
                        continue
                    files, size = files + 1, size + entry.data_file.file_size_in_bytes
                    path = entry.data_file.file_path.split("://", 1)[1]
                    column = pq.read_table(path, columns=["produced_ms"], filesystem=self.fs).column(0)
                    self.seen_ms.extend((int(p), now_ms) for p in column.to_pylist())
            self.snapshots.append((files, size))


def snapshot_figures(poller: IcebergPoller, seen: Measured) -> dict[str, Any]:
    """Files per snapshot, their size, and S3 requests per million records, of the measured run."""
    measured = [s for s in poller.snapshots[poller.warm_up_versions :] if s[0]]
    files = sum(n for n, _ in measured)
    requests = seen.s3_requests or {}
    per_million = 1e6 / seen.produced
    return {
        "data_files": files,
        "files_per_snapshot": round(files / len(measured), 1) if measured else 0,
        "mean_file_kb": round(sum(b for _, b in measured) / files / 1024, 1) if files else 0,
        "median_snapshot_files": statistics.median(n for n, _ in measured) if measured else 0,
        "s3_requests": requests,
        "s3_writes_per_million": round(sum(requests.get(m, 0) for m in WRITES) * per_million),
        "s3_reads_per_million": round(sum(requests.get(m, 0) for m in READS) * per_million),
    }


class PeerBench:
    """The shared stack, and one run of either system per interval."""

    def __init__(
        self,
        work: Path,
        warm_up_seconds: int = 0,
        catch_up_seconds: float = 0.0,
        plugins: tuple[str, ...] = (SINK_PLUGIN_GROUP, PEER_PLUGIN_GROUP),
        service_conf: dict[str, str] | None = None,
        sidecar_poll: float = SIDECAR_POLL_SECONDS,
    ) -> None:
        """``service_conf``: Spark properties of Lakegate's service (its ``spark.conf``);
        ``sidecar_poll``: its sidecar's ``poll_interval_seconds``."""
        self.work = work
        self.service_conf = dict(service_conf or {})
        self.sidecar_poll = sidecar_poll
        self.warm_up_seconds = warm_up_seconds
        self.catch_up_seconds = catch_up_seconds
        self.stack = LocalStack(work / "stack", buckets=(), plugins=plugins)

    def __enter__(self) -> PeerBench:
        sinks = "both sinks" if len(self.stack.plugins) > 1 else "the storage sink"
        print(f"starting the S3 server, Kafka and a Connect worker with {sinks} ...", flush=True)
        self.stack.start()
        assert self.stack.s3 is not None
        self.s3_log = self.stack.s3.workdir / "s3.log"
        self.fs = pafs.S3FileSystem(
            endpoint_override=self.stack.s3.endpoint.split("://", 1)[1],
            scheme="http",
            access_key=s3mod.ACCESS_KEY,
            secret_key=s3mod.SECRET_KEY,
            region=s3mod.REGION,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.stop()

    def catalog(self, bucket: str) -> IcebergRestCatalog:
        """A bucket and a REST catalog server whose warehouse is in it, started."""
        assert self.stack.s3 is not None
        self.stack.s3.create_bucket(bucket)
        return IcebergRestCatalog(self.work / f"{bucket}-catalog", f"s3a://{bucket}/warehouse", self.stack.s3).start()

    def poller(self, catalog: IcebergRestCatalog, table: str) -> IcebergPoller:
        assert self.stack.s3 is not None
        reader = load_catalog(
            f"poller-{table}",
            type="rest",
            uri=catalog.uri,
            **{
                "s3.endpoint": self.stack.s3.endpoint,
                "s3.access-key-id": s3mod.ACCESS_KEY,
                "s3.secret-access-key": s3mod.SECRET_KEY,
                "s3.region": s3mod.REGION,
            },  # fmt: skip
        )
        return IcebergPoller(catalog=reader, table=table, fs=self.fs)

    def start_lakegate(
        self, name: str, interval: int, catalog: IcebergRestCatalog, maintenance: bool = False
    ) -> LakegateRun:
        """Lakegate's pipeline into the Iceberg table ``bench.<name>`` of ``catalog`` (in bucket
        ``name``, from topic ``name``) at ``interval``; ``maintenance``: ``maintenance.enabled``."""
        table: dict[str, Any] = {
            "name": f"{NAMESPACE}.{name}",
            "format": "iceberg",
            "path": f"s3a://{name}/warehouse/{NAMESPACE}/{name}",
            "topics": [name],
            "commit": {
                "interval_seconds": interval,
                "timeout_seconds": interval,
                "catch_up_seconds": catch_up_for(self.catch_up_seconds, interval),
            },
        }
        if maintenance:
            table["maintenance"] = {"enabled": True}
        catalogs = [{"name": "lake", "type": "rest", "uri": catalog.uri}]
        return start_lakegate(
            self.stack, self.work / name, name, name, table, catalogs, self.service_conf, sidecar_poll=self.sidecar_poll
        )

    def start_peer(self, worker: ConnectWorker, name: str, interval: int, catalog: IcebergRestCatalog) -> None:
        """Iceberg's sink on ``worker``, running: topic ``name`` (made here, with its control topic
        and the namespace) into ``bench.<name>`` of ``catalog``, committing every ``interval``."""
        assert self.stack.s3 is not None and self.stack.kafka is not None
        bootstrap = self.stack.kafka.bootstrap_servers
        create_topic(bootstrap, name, PARTITIONS)
        create_control_topic(bootstrap, f"{name}-control")
        create_namespace(catalog.uri, NAMESPACE)
        config = peer_sink_config(
            [name],
            f"{NAMESPACE}.{name}",
            catalog.uri,
            self.stack.s3.endpoint,
            control_topic=f"{name}-control",
            commit_interval_ms=interval * 1000,
            tasks=PARTITIONS,
        )
        connect = worker.client()
        connect.put_connector(name, config)
        connect.wait_running(name, PARTITIONS)

    def lakegate(self, interval: int, rate: int, seconds: int) -> dict[str, Any]:
        name = f"lg{interval}"
        catalog = self.catalog(name)
        poller = self.poller(catalog, f"{NAMESPACE}.{name}")
        try:
            run = self.start_lakegate(name, interval, catalog)
            try:
                assert catalog.process is not None and catalog.process.pid is not None
                seen = measure(
                    {**run.pids(), "catalog": catalog.process.pid}, poller, self.stack, name, rate, seconds,
                    self.warm_up_seconds, f"lakegate, commit interval {interval} s", S3RequestLog(self.s3_log, name),
                )  # fmt: skip
            finally:
                run.stop()
        finally:
            catalog.stop()
        return {**lakegate_row(interval, rate, poller, seen), **snapshot_figures(poller, seen)}

    def peer(self, interval: int, rate: int, seconds: int) -> dict[str, Any]:
        name = f"peer{interval}"
        catalog = self.catalog(name)
        worker = self.stack.workers[0]
        connect = worker.client()
        poller = self.poller(catalog, f"{NAMESPACE}.{name}")
        try:
            self.start_peer(worker, name, interval, catalog)
            try:
                assert worker.process is not None and worker.process.pid is not None
                assert catalog.process is not None and catalog.process.pid is not None
                seen = measure(
                    {"connect": worker.process.pid, "catalog": catalog.process.pid}, poller, self.stack, name,
                    rate, seconds, self.warm_up_seconds, f"iceberg kafka connect sink, commit interval {interval} s",
                    S3RequestLog(self.s3_log, name),
                )  # fmt: skip
            finally:
                connect.delete_connector(name)
        finally:
            catalog.stop()
        used = seen.cpu_by_process
        return {
            "system": "iceberg-kafka-connect",
            "interval_s": interval,
            "cpu_by_process_s": {k: round(v, 1) for k, v in used.items()},
            "jit_by_process_s": {k: round(v, 1) for k, v in seen.jit_by_process.items()},
            **figures(poller, seen.produced, sum(used.values()), None, rate, seen.jit_cpu),
            **snapshot_figures(poller, seen),
        }


def run(
    work: Path,
    intervals: list[int],
    rate: int,
    seconds: int,
    warm_up_seconds: int = 0,
    catch_up_seconds: float = 0.0,
    service_conf: dict[str, str] | None = None,
    sidecar_poll: float = SIDECAR_POLL_SECONDS,
) -> dict[str, Any]:
    rows = []
    with PeerBench(
        work, warm_up_seconds, catch_up_seconds, service_conf=service_conf, sidecar_poll=sidecar_poll
    ) as bench:
        for interval in intervals:
            for system in (bench.lakegate, bench.peer):
                row = system(interval, rate, seconds)
                rows.append(row)
                print(
                    f"  {row['system']:>22} {interval:>3} s: freshness p50 {row['freshness_p50_s']} s, "
                    f"p99 {row['freshness_p99_s']} s; {row['cpu_s_per_million']} CPU-s per million records; "
                    f"{row['files_per_snapshot']} files of {row['mean_file_kb']} KB per snapshot; "
                    f"S3 writes {row['s3_writes_per_million']}/M records",
                    flush=True,
                )
                print(f"  {'':>22} {by_process(row)}", flush=True)
    return {
        "rate": rate,
        "seconds": seconds,
        "warm_up_seconds": warm_up_seconds,
        "catch_up_seconds": catch_up_by_interval(catch_up_seconds, intervals),
        "service_conf": dict(service_conf or {}),
        "sidecar_poll_seconds": sidecar_poll,
        "results": rows,
    }
