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

import datetime as dt
import time
from typing import Any

from commit_service.domain.compaction import CompactionPlan, PartitionKey
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.iceberg.merge import IcebergArrowMerge
from commit_service.iceberg.summary import OFFSETS
from commit_service.iceberg.tables import IcebergTable
from commit_service.spark.jvm_classes import java_class, java_elements
from commit_service.spark.session import job_label
from lakegate_core.status import MaintenanceKind, MaintenanceRecord

HOUR_MS = 3_600_000
LARGEST = 2**63 - 1  # rewriteDataFiles' max-file-size-bytes: no file is split for being large
EPOCH = dt.date(1970, 1, 1)


class IcebergMaintainer:
    """Compacts and vacuums one Iceberg table."""

    def __init__(self, spark: Any, table: IcebergTable, arrow: IcebergArrowMerge | None) -> None:
        self.spark = spark
        self.table = table
        self._arrow = arrow  # merges a group of small files without Spark where it can (None: an upsert table's never)
        self._partitions: dict[PartitionKey, dict[str, Any]] = {}  # the last read's partition values, as typed
        self._small: dict[PartitionKey, list[tuple[str, int]]] = {}  # the last read's small files (path, size)

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
        """The sizes of the data files smaller than ``below`` bytes, by partition (a Spark query of
        the table's ``files`` metadata table)."""
        from pyspark.sql import functions as F  # noqa: N812 (Spark's own idiom)

        files = self.spark.table(f"{self.table.catalog}.{self.table.name}.files").where(
            (F.col("content") == 0) & (F.col("file_size_in_bytes") < below)
        )
        partitioned = "partition" in files.columns
        key = F.col("partition") if partitioned else F.lit(None)
        listed = F.collect_list(F.struct("file_path", "file_size_in_bytes")).alias("files")
        rows = files.groupBy(key.alias("p")).agg(listed).collect()
        self._partitions, self._small = {}, {}
        for row in rows:
            values = row["p"].asDict() if partitioned and row["p"] is not None else {}
            part = tuple((name, _text(v)) for name, v in values.items())
            self._partitions[part] = values
            self._small[part] = [(str(f["file_path"]), int(f["file_size_in_bytes"])) for f in row["files"]]
        return {part: [size for _, size in files] for part, files in self._small.items()}

    def compact_small(self, plan: CompactionPlan) -> MaintenanceRecord:
        """Each group merged by Arrow, or where Arrow leaves it, by one ``rewriteDataFiles``
        filtered to its partition, its candidates the files below the group's size; one ``replace``
        snapshot each, with no offsets."""
        started_ms, t0 = int(time.time() * 1000), time.monotonic()
        table = self._loaded()
        version_before, files_before = self._version(table), self._files(table)
        actions = java_class(self.spark._jvm, "org.apache.iceberg.spark.actions.SparkActions").get(
            self.spark._jsparkSession
        )
        rewritten = added = by_arrow = 0
        label = f"lakegate maintenance {self.table.name}: merge {plan.files} small files"
        with job_label(self.spark, f"lakegate-maintenance-{self.table.name}", label):
            for group in plan.groups:
                where = self._filter(table, self._partitions.get(group.partition, {}))
                paths = [path for path, size in self._small.get(group.partition, []) if size < group.below_bytes]
                arrow = self._arrow if len(paths) >= 2 else None
                merged = arrow.merge(table, where, paths, plan.target_bytes) if arrow is not None else None
                if merged is not None:  # else rewriteDataFiles merges them (storage.merge.refusal)
                    rewritten, added, by_arrow = rewritten + merged[0], added + merged[1], by_arrow + 1
                    table.refresh()
                    continue
                action = (
                    actions.rewriteDataFiles(table)
                    .option("min-file-size-bytes", str(group.below_bytes))
                    .option("target-file-size-bytes", str(plan.target_bytes))
                    .option("max-file-size-bytes", str(LARGEST))
                    .option("min-input-files", "2")
                    .option("remove-dangling-deletes", "true")
                )
                result = (action.filter(where) if where is not None else action).execute()
                rewritten += int(result.rewrittenDataFilesCount())
                added += int(result.addedDataFilesCount())
                table.refresh()  # the next group's rewrite starts from this one's snapshot
        detail = (
            f"merged {rewritten} small files of {len(plan.groups)} partition(s) into {added} "
            f"(target {plan.target_bytes} bytes; {by_arrow} of the {len(plan.groups)} by Arrow)"
        )
        return self._record(table, MaintenanceKind.COMPACT, started_ms, t0, version_before, files_before, detail)

    def _filter(self, table: Any, values: dict[str, Any]) -> Any | None:
        """Iceberg's expression for one partition (by the table's partition transforms); None for
        an unpartitioned table. A value this cannot express leaves its field out (more files are
        candidates: still only those below the group's size)."""
        exprs = java_class(self.spark._jvm, "org.apache.iceberg.expressions.Expressions")
        schema, where = table.schema(), None
        for field in java_elements(table.spec().fields()):
            if field.name() not in values:
                continue
            column = schema.findColumnName(field.sourceId())
            term = _term(exprs, str(field.transform()), column)
            value = values[field.name()]
            literal = _literal(value)
            if term is None or (value is not None and literal is None):
                continue
            one = exprs.isNull(term) if value is None else exprs.equal(term, literal)
            where = one if where is None else getattr(exprs, "and")(where, one)  # ``and``: a Python keyword
        return where

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


def _term(exprs: Any, transform: str, column: str) -> Any | None:
    """The term of ``transform`` (as Iceberg prints it: ``day``, ``bucket[16]``) over ``column``."""
    if transform == "identity":
        return exprs.ref(column)
    if transform in ("year", "month", "day", "hour"):
        return getattr(exprs, transform)(column)
    name, _, width = transform.partition("[")
    if name in ("bucket", "truncate") and width.endswith("]"):
        return getattr(exprs, name)(column, int(width[:-1]))
    return None  # void, or a transform this does not know


def _literal(value: Any) -> Any | None:
    """A partition value as read by Spark, in the form Iceberg's literals take (dates as days,
    timestamps as microseconds)."""
    if isinstance(value, dt.datetime):
        at = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return int(at.timestamp() * 1_000_000)
    if isinstance(value, dt.date):
        return (value - EPOCH).days
    if isinstance(value, (bool, int, str)):
        return value
    return None


def _text(value: Any) -> str | None:
    return None if value is None else value.isoformat() if isinstance(value, dt.date) else str(value)
