"""An Iceberg table's ledger for the audit: its history from the current snapshot's ancestry (each
snapshot's summary: ``lakegate.offsets``, ``lakegate.commit``; its added data files from its
manifests), its rows through Spark (:class:`~commit_service.spark.row_audit.RowAudit`, each row's
file from the ``_file`` metadata column).

Built by :meth:`IcebergCommitter.ledger <commit_service.iceberg.committer.IcebergCommitter.ledger>`,
read by the audit (:mod:`commit_service.audit`). Snapshots that expired are summed up by the
oldest kept Lakegate snapshot's starts (the history's ``base``).
"""

from __future__ import annotations

import json
from typing import Any

from commit_service.domain.history import LedgerCommit, TableHistory
from commit_service.iceberg.summary import COMMIT, OFFSETS, decode
from commit_service.iceberg.tables import IcebergTable
from commit_service.spark.jvm_classes import java_class
from commit_service.spark.row_audit import RowAudit
from lakegate_core.errors import ProtocolError
from lakegate_core.status import CommitRecord
from lakegate_core.types import PartitionOffsets

REWRITE = "replace"  # Iceberg's operation of a compaction: rows moved, none new


def snapshot_commit(table: Any, snapshot: Any, name: str) -> LedgerCommit:
    """One snapshot as a :class:`LedgerCommit` (reads its manifests for the files it added)."""
    version = int(snapshot.sequenceNumber())
    summary = snapshot.summary()
    text = summary.get(OFFSETS)
    record: CommitRecord | None = None
    if summary.get(COMMIT):
        try:
            record = CommitRecord.from_user_metadata(name, version, json.loads(summary.get(COMMIT)))
        except (ValueError, ProtocolError, KeyError, TypeError):
            record = None
    files = []
    it = snapshot.addedDataFiles(table.io()).iterator()
    while it.hasNext():
        files.append(str(it.next().location()))
    added = summary.get("added-records")
    operation = str(snapshot.operation() or "")
    return LedgerCommit(
        version,
        decode(text, name) if text is not None else None,
        record,
        int(added) if added is not None else (0 if not files else None),
        tuple(files),
        rewrite=operation == REWRITE,
        operation=operation,
    )


class IcebergLedger(RowAudit):
    """The :class:`~commit_service.ports.TableLedger` of one Iceberg table (its rows: :class:`RowAudit`'s)."""

    def __init__(self, spark: Any, table: IcebergTable) -> None:
        self.table = table
        ident = f"{table.catalog}.{table.name}"
        super().__init__(spark, lambda: spark.read.table(ident), lambda df: df["_file"])

    def history(self) -> TableHistory:
        table = self.table.load()
        if table is None or table.currentSnapshot() is None:
            return TableHistory(-1 if table is None else 0, ())
        ancestry = java_class(self.spark._jvm, "org.apache.iceberg.util.SnapshotUtil").currentAncestors(table)
        snapshots = []
        it = ancestry.iterator()
        while it.hasNext():
            snapshots.append(it.next())
        snapshots.reverse()
        commits = tuple(snapshot_commit(table, s, self.table.name) for s in snapshots)
        base = PartitionOffsets()
        if snapshots and snapshots[0].parentId() is not None:  # older snapshots expired
            first = next((c for c in commits if c.offsets is not None), None)
            if first is not None and first.offsets is not None:
                starts = first.record.starts if first.record is not None and first.record.starts else {}
                base = PartitionOffsets({tp: starts.get(tp, end) for tp, end in first.offsets.items()})
        return TableHistory(int(table.currentSnapshot().sequenceNumber()), commits, base)
