"""A table's history and rows as the audit reads them: plain data. Pure.

Made by each table format's :class:`~commit_service.ports.TableLedger` (``delta.ledger`` from the
``_delta_log``, ``iceberg.ledger`` from the snapshots; the rows through ``spark.row_audit``) and
read by the audit (:mod:`commit_service.audit.ledger`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from commit_service.domain.content import KAFKA_COLUMNS
from lakegate_core.status import CommitRecord
from lakegate_core.types import PartitionOffsets


@dataclass(frozen=True)
class LedgerCommit:
    """One commit of the table's history, as its format records it.

    ``offsets``: the partitions' offsets after the commit as it records them (Delta's ``txn``
    actions, Iceberg's ``lakegate.offsets``); None for a commit that is not Lakegate's.
    ``added_rows``: the rows of the data files it added as new data (a compaction's rewritten files
    are not new data: ``rewrite``). ``added_files``: the names of the data files it added."""

    version: int
    offsets: PartitionOffsets | None
    record: CommitRecord | None
    added_rows: int | None  # None: some added file's row count is not recorded
    added_files: tuple[str, ...] = ()
    rewrite: bool = False
    operation: str = ""


@dataclass(frozen=True)
class TableHistory:
    """The commits a table's format still lists, oldest first. ``base``: the offsets before the
    first of them when older ones are gone (a Delta checkpoint's, expired Iceberg snapshots')."""

    version: int
    commits: tuple[LedgerCommit, ...]
    base: PartitionOffsets = field(default_factory=PartitionOffsets)


@dataclass(frozen=True)
class FileSpan:
    """One data file of the table: its rows and the lowest and highest offset they hold (None when
    the rows carry no offset)."""

    name: str
    rows: int
    low: int | None
    high: int | None


@dataclass(frozen=True)
class OffsetRun:
    """Consecutive offsets ``[start, end)`` where the table holds ``held`` rows each and the ledger
    says ``expected`` (the number of partitions that committed each offset)."""

    start: int
    end: int
    expected: int
    held: int


@dataclass(frozen=True)
class OffsetTally:
    """The rows against the ledger: how many rows the table holds, and the runs of offsets where
    they disagree (the first ``limit`` of them, in offset order; ``more``: how many runs were left out)."""

    rows: int
    runs: tuple[OffsetRun, ...]
    more: int = 0


# the column holding each row's Kafka offset: unwrapped tables', then tables keeping the envelope
OFFSET_COLUMNS = (KAFKA_COLUMNS["offset"], "offset")

Row = dict[str, Any]  # one table row as plain data: structs as dicts, timestamps as epoch millis
