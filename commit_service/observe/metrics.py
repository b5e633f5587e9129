"""Prometheus metrics of the service, served at ``GET /metrics``; fed by the coordinator.

Counters and the duration histogram are updated as commits happen (:class:`ServiceMetrics` is the
coordinator's ``CommitListener``); pending files/bytes, table versions and committed offsets are
read from the coordinator at scrape time, so they are never stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from commit_service.errors import CommitError
from lakegate_core.status import CommitRecord, TableSummary

Summaries = Callable[[], list[TableSummary]]
# per connector the doctor checked: its name, the checks with a blocking finding, those with a warning
ConnectorChecks = Callable[[], Iterable[tuple[str, tuple[str, ...], tuple[str, ...]]]]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServiceMetrics:
    """One registry per app (tests create several apps in one process)."""

    def __init__(self, summaries: Summaries) -> None:
        self.registry = CollectorRegistry()
        self.commits = Counter(
            "lakegate_commits", "Delta commit rounds by outcome", ["table", "result"], registry=self.registry
        )
        self.duration = Histogram(
            "lakegate_commit_duration_seconds",
            "Duration of successful Delta commits",
            ["table"],
            registry=self.registry,
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        self.files = Counter("lakegate_files_committed", "Data files committed", ["table"], registry=self.registry)
        self.records = Counter("lakegate_records_committed", "Records committed", ["table"], registry=self.registry)
        self.rejected_files = Counter(
            "lakegate_manifest_files_rejected", "Manifest files rejected, by reason", ["reason"], registry=self.registry
        )
        self.registry.register(_StateCollector(summaries))

    def watch_connectors(self, checks: ConnectorChecks) -> None:
        """Export the doctor's last check of each connector (read at scrape time): whether it is
        blocked, and whether it is stopped (its connector or a task not running, as the sidecars
        report each change)."""
        self.registry.register(_ConnectorCollector(checks))

    def committed(self, record: CommitRecord) -> None:
        self.commits.labels(record.table, "ok").inc()
        self.duration.labels(record.table).observe((record.duration_ms or 0) / 1000)
        self.files.labels(record.table).inc(record.files)
        self.records.labels(record.table).inc(record.records)

    def failed(self, table: str, error: CommitError) -> None:
        self.commits.labels(table, "retryable_error" if error.retryable else "error").inc()

    def rejected(self, reason: str) -> None:
        self.rejected_files.labels(reason).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector(Collector):
    def __init__(self, summaries: Summaries) -> None:
        self._summaries = summaries

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pending_files = GaugeMetricFamily(
            "lakegate_pending_files", "Files buffered, not yet committed", labels=["table"]
        )
        pending_bytes = GaugeMetricFamily(
            "lakegate_pending_bytes", "Bytes buffered, not yet committed", labels=["table"]
        )
        version = GaugeMetricFamily(
            "lakegate_table_version",
            "Table version (Delta: its version; Iceberg: its head snapshot's sequence number)",
            labels=["table"],
        )
        info = GaugeMetricFamily("lakegate_table_info", "A table and its format (always 1)", labels=["table", "format"])
        dead = GaugeMetricFamily(
            "lakegate_dead_letters", "Files quarantined out of the buffer, awaiting an admin", labels=["table"]
        )
        offset = GaugeMetricFamily(
            "lakegate_committed_offset", "Next offset committed to the table", labels=["table", "topic", "partition"]
        )
        for s in self._summaries():
            pending_files.add_metric([s.table], s.pending_files)
            pending_bytes.add_metric([s.table], s.pending_bytes)
            version.add_metric([s.table], s.version)
            info.add_metric([s.table, s.format], 1)
            dead.add_metric([s.table], s.dead_letters)
            for tp, value in s.offsets.items():
                offset.add_metric([s.table, tp.topic, str(tp.partition)], value)
        yield from (pending_files, pending_bytes, version, info, dead, offset)


class _ConnectorCollector(Collector):
    def __init__(self, checks: ConnectorChecks) -> None:
        self._checks = checks

    def collect(self) -> Iterator[GaugeMetricFamily]:
        blocked = GaugeMetricFamily(
            "lakegate_connector_blocked", "1 if the doctor's last check of the connector found a blocking finding",
            labels=["connector"],
        )  # fmt: skip
        stopped = GaugeMetricFamily(
            "lakegate_connector_stopped",
            "1 if the connector or one of its tasks does not run (FAILED, PAUSED, missing), as last reported",
            labels=["connector"],
        )
        for name, blocking, warnings in self._checks():
            blocked.add_metric([name], 1 if blocking else 0)
            stopped.add_metric([name], 1 if "connector_state" in (*blocking, *warnings) else 0)
        yield from (blocked, stopped)
