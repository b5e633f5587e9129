"""Maintenance of one Iceberg table through Iceberg's Spark actions: compaction, snapshot expiry
and orphan removal, on the same ``maintenance`` keys as a Delta table's.

Owned by the table's :class:`~commit_service.iceberg.committer.IcebergCommitter` and run by the
coordinator between the table's commit rounds, so it never races them:

- ``compact``: ``rewriteDataFiles`` (bin-packing) when the table holds at least
  ``compact_min_files`` files; its ``replace`` snapshot carries no offsets, so the offsets stay
  those of the newest Lakegate snapshot under it;
- merging the small files of recent rounds (planned by ``commit_service.domain.compaction``):
  each due partition's files below the group's size merged by Arrow into files of up to the
  target (:class:`~commit_service.iceberg.merge.IcebergArrowMerge`), or where Arrow leaves them,
  ``rewriteDataFiles`` filtered to the partition with the same candidates and target;
- ``vacuum``: ``expireSnapshots`` older than ``vacuum_retention_hours``, but never the newest
  snapshot that holds the offsets (the table's only record of them), then ``deleteOrphanFiles``
  under ``data/`` older than the retention (files of rounds that never landed).

Every run's Spark jobs are labelled ``lakegate maintenance <table>: <kind>`` in the Spark UI.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any

from commit_service.domain.compaction import CompactionPlan, PartitionKey
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.iceberg.merge import IcebergArrowMerge
from commit_service.iceberg.summary import OFFSETS
from commit_service.iceberg.tables import IcebergTable
from commit_service.spark.jvm_classes import java_class
from commit_service.spark.session import job_label
from lakegate_core.status import MaintenanceKind, MaintenanceRecord

HOUR_MS = 3_600_000
LARGEST = 2**63 - 1  # rewriteDataFiles' max-file-size-bytes: no file is split for being large


class IcebergMaintainer:
    """Compacts and vacuums one Iceberg table."""

    def __init__(self, spark: Any, table: IcebergTable, arrow: IcebergArrowMerge | None) -> None:
        self.spark = spark
        self.table = table
        self._arrow = arrow  # merges a group of small files without Spark where it can (None: an upsert table's never)
        self._look: Look | None = None  # the last read of the small files, for the merge that follows it

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
        actions = java_class(self.spark._jvm, "org.apache.iceberg.spark.actions.SparkActions").get(
            self.spark._jsparkSession
        )
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
        return self._record(table, kind, started_ms, t0, version_before, files_before, detail)

    def _record(
        self, table: Any, kind: MaintenanceKind, started_ms: int, t0: float, version: int, files: int, detail: str
    ) -> MaintenanceRecord:
        """The run's record, the table read again after it."""
        table.refresh()
        return MaintenanceRecord(
            self.table.name,
            kind,
            started_ms,
            int((time.monotonic() - t0) * 1000),
            version,
            self._version(table),
            files,
            self._files(table),
            detail,
        )

    def small_files(self, below: int) -> dict[PartitionKey, list[int]]:
        """The sizes of the data files smaller than ``below`` bytes, by partition: one scan of the
        current snapshot's manifests in the JVM (``io.lakegate.iceberg.SmallFiles``), kept for the
        merge that follows (:meth:`compact_small`)."""
        table = self._loaded()
        look = java_class(self.spark._jvm, "io.lakegate.iceberg.SmallFiles").of(table, below)
        self._look = Look(table, look, groups(bytes(look.listing())))
        return {part: [size for _, size in files] for part, (_, files) in self._look.groups.items()}

    def compact_small(self, plan: CompactionPlan) -> MaintenanceRecord:
        """Each group (of the last :meth:`small_files`) merged by Arrow, or where Arrow leaves it,
        by one ``rewriteDataFiles`` filtered to its partition, its candidates the files below the
        group's size; one ``replace`` snapshot each, with no offsets."""
        started_ms, t0 = int(time.time() * 1000), time.monotonic()
        if self._look is None:
            raise ValueError(f"table {self.table.name}: no small files were read to merge")
        table, look = self._look.table, self._look.look
        version_before, files_before = self._version(table), self._files(table)
        actions = java_class(self.spark._jvm, "org.apache.iceberg.spark.actions.SparkActions").get(
            self.spark._jsparkSession
        )
        rewritten = added = by_arrow = 0
        label = f"lakegate maintenance {self.table.name}: merge {plan.files} small files"
        with job_label(self.spark, f"lakegate-maintenance-{self.table.name}", label):
            for group in plan.groups:
                index, files = self._look.groups.get(group.partition, (-1, []))
                if index < 0:
                    continue
                chosen = [(path, size) for path, size in files if size < group.below_bytes]
                arrow = self._arrow if len(chosen) >= 2 else None
                merged = (
                    arrow.merge(table, look, index, chosen, group.below_bytes, plan.target_bytes) if arrow else None
                )
                if merged is not None:  # else rewriteDataFiles merges them (storage.merge.refusal)
                    rewritten, added, by_arrow = rewritten + merged[0], added + merged[1], by_arrow + 1
                    continue
                table.refresh()  # from the head a merge of another group may have made
                result = (
                    actions.rewriteDataFiles(table)
                    .filter(look.filter(index))
                    .option("min-file-size-bytes", str(group.below_bytes))
                    .option("target-file-size-bytes", str(plan.target_bytes))
                    .option("max-file-size-bytes", str(LARGEST))
                    .option("min-input-files", "2")
                    .option("remove-dangling-deletes", "true")
                    .execute()
                )
                rewritten += int(result.rewrittenDataFilesCount())
                added += int(result.addedDataFilesCount())
        self._look = None
        detail = (
            f"merged {rewritten} small files of {len(plan.groups)} partition(s) into {added} "
            f"(target {plan.target_bytes} bytes; {by_arrow} of the {len(plan.groups)} by Arrow)"
        )
        return self._record(table, MaintenanceKind.COMPACT, started_ms, t0, version_before, files_before, detail)

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


@dataclass(frozen=True)
class Look:
    """A read of a table's small files: the table as loaded, ``io.lakegate.iceberg.SmallFiles``
    (which keeps the files for the merges), and its groups as Python has them (each partition's
    index and files: location and size, in the order their rounds added them)."""

    table: Any
    look: Any
    groups: dict[PartitionKey, tuple[int, list[tuple[str, int]]]]


def groups(listing: bytes) -> dict[PartitionKey, tuple[int, list[tuple[str, int]]]]:
    """The groups of ``SmallFiles.listing`` (the layout its class comment gives)."""
    view, at = memoryview(listing), 0

    def number(fmt: str) -> int:
        nonlocal at
        (value,) = struct.unpack_from(fmt, view, at)
        at += struct.calcsize(fmt)
        return int(value)

    def text() -> str:
        nonlocal at
        size = number(">i")
        at += size
        return bytes(view[at - size : at]).decode()

    out: dict[PartitionKey, tuple[int, list[tuple[str, int]]]] = {}
    for index in range(number(">i")):
        spec = number(">i")
        key: PartitionKey = tuple((text(), text() if number(">b") else None) for _ in range(number(">i")))
        key = key if key not in out else (*key, ("spec_id", str(spec)))  # the same values in two specs
        files = []
        for _ in range(number(">i")):
            size = number(">q")
            files.append((text(), size))
        out[key] = (index, files)
    return out
