"""A Delta table's ledger for the audit: its history read from the ``_delta_log`` JSON commits
(storage only, like :mod:`commit_service.delta.log`), its rows through Spark
(:class:`~commit_service.spark.row_audit.RowAudit`, each row's file from ``_metadata.file_path``).

Built by :meth:`DeltaCommitter.ledger <commit_service.delta.committer.DeltaCommitter.ledger>`,
read by the audit (:mod:`commit_service.audit`). Commits older than the log keeps (Delta removes
JSON commits past ``delta.logRetentionDuration`` once a checkpoint holds them) are summed up by
the table's offsets at the first commit still listed (the history's ``base``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from commit_service.delta.log import LOG_FOLDER, LogReadError, read_log
from commit_service.delta.txn import parse_app_id
from commit_service.domain.history import LedgerCommit, TableHistory
from commit_service.spark.row_audit import RowAudit
from commit_service.storage.reader import StorageReader
from lakegate_core.errors import ProtocolError
from lakegate_core.status import CommitRecord
from lakegate_core.types import PartitionOffsets

_COMMIT = re.compile(r"^(\d{20})\.json$")


def commit_of(table: str, version: int, text: str) -> LedgerCommit:
    """One JSON commit file as a :class:`LedgerCommit`."""
    offsets: dict[Any, int] = {}
    record: CommitRecord | None = None
    rows: int | None = 0
    files: list[str] = []
    rewrite, operation = True, ""
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "txn" in action:
            tp = parse_app_id(table, str(action["txn"]["appId"]))
            if tp is not None:
                offsets[tp] = int(action["txn"]["version"])
        elif "add" in action:
            add = action["add"]
            files.append(str(add["path"]))
            rewrite = rewrite and add.get("dataChange") is False
            if add.get("dataChange", True):
                stats = json.loads(add["stats"]) if add.get("stats") else {}
                count = stats.get("numRecords")
                rows = None if rows is None or count is None else rows + int(count)
        elif "commitInfo" in action:
            info = action["commitInfo"]
            operation = str(info.get("operation", ""))
            if info.get("userMetadata"):
                try:
                    record = CommitRecord.from_user_metadata(table, version, json.loads(info["userMetadata"]))
                except (ValueError, ProtocolError, KeyError, TypeError):
                    record = None
    return LedgerCommit(
        version,
        PartitionOffsets(offsets) if offsets else None,
        record,
        rows,
        tuple(files),
        rewrite=rewrite and bool(files),
        operation=operation,
    )


class DeltaLedger(RowAudit):
    """The :class:`~commit_service.ports.TableLedger` of one Delta table (its rows: :class:`RowAudit`'s)."""

    def __init__(
        self,
        spark: Any,
        storage: StorageReader,
        table: str,
        root: str,
        location: str,
        generated: frozenset[str] = frozenset(),
    ) -> None:
        self.table = table
        self.generated = generated  # the generated partition columns (partition_by's transforms)
        self.storage = storage
        self.root = root
        self.location = location
        super().__init__(spark, lambda: spark.read.format("delta").load(location), self._file_column)

    def derived(self) -> frozenset[str]:
        return self.generated

    @staticmethod
    def _file_column(df: Any) -> Any:
        return df["_metadata.file_path"]

    def history(self) -> TableHistory:
        folder = f"{self.root}{LOG_FOLDER}"
        names = {uri.rsplit("/", 1)[1]: uri for uri in self.storage.list_own(folder)}
        versions = sorted(int(m[1]) for name in names if (m := _COMMIT.match(name)))
        if not versions:
            return TableHistory(-1, ())
        base = PartitionOffsets()
        if versions[0] > 0:  # the older commits are gone: the table's offsets before the first kept one
            try:
                state = read_log(self.storage, self.root, versions[0] - 1)
            except LogReadError:
                state = None
            if state is not None:
                base = PartitionOffsets(
                    {tp: v for key, v in state.txns.items() if (tp := parse_app_id(self.table, key)) is not None}
                )
        commits = tuple(
            commit_of(self.table, v, self.storage.read_own(names[f"{v:020d}.json"]).decode("utf-8")) for v in versions
        )
        return TableHistory(versions[-1], commits, base)
