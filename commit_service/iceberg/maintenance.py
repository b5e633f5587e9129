"""Maintenance of one Iceberg table through Iceberg's Spark actions: compaction, snapshot expiry
and orphan removal, on the same ``maintenance`` keys as a Delta table's.

Owned by the table's :class:`~commit_service.iceberg.committer.IcebergCommitter` and run by the
coordinator between the table's commit rounds, so it never races them:

- ``compact``: ``rewriteDataFiles`` (bin-packing) when the table holds at least
  ``compact_min_files`` files; its ``replace`` snapshot carries no offsets, so the offsets stay
  those of the newest Lakegate snapshot under it;
- ``vacuum``: ``expireSnapshots`` older than ``vacuum_retention_hours``, but never the newest
  snapshot that holds the offsets (the table's only record of them), then ``deleteOrphanFiles``
  under ``data/`` older than the retention (files of rounds that never landed).

Every run's Spark jobs are labelled ``lakegate maintenance <table>: <kind>`` in the Spark UI.
"""

from __future__ import annotations

import time
from typing import Any

from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.iceberg.summary import OFFSETS
from commit_service.iceberg.tables import IcebergTable
from commit_service.spark.session import job_label
from lakegate_core.status import MaintenanceKind, MaintenanceRecord

HOUR_MS = 3_600_000


class IcebergMaintainer:
    """Compacts and vacuums one Iceberg table."""

    def __init__(self, spark: Any, table: IcebergTable) -> None:
        self.spark = spark
        self.table = table

    def _loaded(self) -> Any:
        table = self.table.load()
        if table is None:
            raise ValueError(f"table {self.table.name} does not exist yet")
        return table

    @staticmethod
    def _files(table: Any) -> int:
        head = table.currentSnapshot()
        return 0 if head is None else int(head.summary().get("total-data-files") or 0)

    @staticmethod
    def _version(table: Any) -> int:
        head = table.currentSnapshot()
        return 0 if head is None else int(head.sequenceNumber())

    def file_count(self) -> int:
        table = self.table.load()
        return 0 if table is None else self._files(table)

    def maintain(self, kind: MaintenanceKind, policy: MaintenancePolicy) -> MaintenanceRecord:
        started_ms, t0 = int(time.time() * 1000), time.monotonic()
        table = self._loaded()
        version_before, files_before = self._version(table), self._files(table)
        actions = self.spark._jvm.org.apache.iceberg.spark.actions.SparkActions.get(self.spark._jsparkSession)
        with job_label(
            self.spark,
            f"lakegate-maintenance-{self.table.name}",
            f"lakegate maintenance {self.table.name}: {kind.value}",
        ):
            if kind is MaintenanceKind.COMPACT:
                result = (
                    actions.rewriteDataFiles(table)
                    .option("min-input-files", str(max(2, policy.compact_min_files)))
                    .option("remove-dangling-deletes", "true")  # an upsert table's deletes of rewritten files
                    .execute()
                )
                detail = (
                    f"rewrote {result.rewrittenDataFilesCount()} files into {result.addedDataFilesCount()}, "
                    f"removed {result.removedDeleteFilesCount()} delete files"
                )
            elif kind is MaintenanceKind.VACUUM:
                detail = self._vacuum(actions, table, started_ms - int(policy.vacuum_retention_hours * HOUR_MS))
            else:
                raise ValueError(f"an Iceberg table has no {kind.value}")
        table.refresh()
        return MaintenanceRecord(
            self.table.name,
            kind,
            started_ms,
            int((time.monotonic() - t0) * 1000),
            version_before,
            self._version(table),
            files_before,
            self._files(table),
            detail,
        )

    def _vacuum(self, actions: Any, table: Any, cutoff_ms: int) -> str:
        keep_from = cutoff_ms
        snap = table.currentSnapshot()
        while snap is not None:  # the newest snapshot holding the offsets is never expired
            if snap.summary().get(OFFSETS) is not None:
                keep_from = min(keep_from, int(snap.timestampMillis()))
                break
            parent = snap.parentId()
            snap = table.snapshot(parent) if parent is not None else None
        expired = actions.expireSnapshots(table).expireOlderThan(keep_from).retainLast(1).execute()
        orphans = (
            actions.deleteOrphanFiles(table)
            .location(f"{table.location().rstrip('/')}/data")
            .olderThan(cutoff_ms)
            .execute()
        )
        removed = sum(1 for _ in orphans.orphanFileLocations())
        return (
            f"expired snapshots before {keep_from} ms: {expired.deletedDataFilesCount()} data files, "
            f"{expired.deletedManifestsCount()} manifests deleted; {removed} orphan files deleted"
        )
