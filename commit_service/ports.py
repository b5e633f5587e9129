"""The ports: the seams the deciding core calls, and nothing else of the world it sees.

The coordinator (``commit_service.coordination``) depends only on these types, so it imports
(and is unit-tested) without py4j, pyspark, pyarrow, Kafka or Flask. Who implements each:

- :class:`Committer`, one table's writer: ``commit_service.delta.committer.DeltaCommitter``
  (behind ``commit_service.delta.deferred.DeferredCommitter``); built by the composition root
  ``commit_service.delta.spark_committer_factory``;
- :class:`TableSnapshot`, what a table's log says: returned by a committer;
- :class:`CommitListener`, told every outcome: ``commit_service.observe.metrics.ServiceMetrics``;
- :class:`DeadLetterStore`, the durable record of quarantined files:
  ``commit_service.storage.dead_letters.ObjectDeadLetterStore``;
- :class:`TableLedger`, a table's history and rows for the audit: from :meth:`Committer.ledger`;
- :class:`ConnectGroups`, the Connect groups as Kafka shows them: ``lakegate_core.connect_group.GroupReader``.

Unit tests pass fakes of each (``tests/unit/fakes.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from commit_service.domain.compaction import CompactionPlan, PartitionKey
from commit_service.domain.history import FileSpan, OffsetTally, Row, TableHistory
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import CommitPlan
from commit_service.errors import CommitError
from lakegate_core.connect_group import Assignment
from lakegate_core.protocol import DataFile
from lakegate_core.status import CommitRecord, DeadLetter, MaintenanceKind, MaintenanceRecord
from lakegate_core.types import PartitionOffsets, TopicPartition

if TYPE_CHECKING:
    from commit_service.config import TableConfig


@dataclass(frozen=True)
class TableSnapshot:
    """What a table's log says right now: its version and the Lakegate offsets in it."""

    version: int  # -1: the table does not exist yet
    offsets: PartitionOffsets


class Committer(Protocol):
    """One table's Delta writer, owned by that table's coordinator (one commit at a time)."""

    def snapshot(self) -> TableSnapshot:
        """Read the table's version and committed offsets from its log."""
        ...

    def warm(self) -> TableSnapshot:
        """Load what the first commit would otherwise load (after the service is ready, off the
        request path); returns the table's snapshot as the table format itself reads it."""
        ...

    def prefetch(self, files: list[DataFile]) -> None:
        """Start reading what committing these accepted files needs (their footers); returns at
        once (called from the HTTP thread that accepted them)."""
        ...

    def commit(self, plan: CommitPlan) -> CommitRecord:
        """Make ``plan`` one atomic commit, or raise a :class:`CommitError` having changed nothing."""
        ...

    def file_count(self) -> int:
        """How many data files the table holds now."""
        ...

    def maintain(self, kind: MaintenanceKind, policy: MaintenancePolicy) -> MaintenanceRecord:
        """Compact or vacuum the table (never touching its ``txn`` actions); a :class:`CommitError` if not."""
        ...

    def small_files(self, below: int) -> dict[PartitionKey, list[int]]:
        """The sizes of the table's data files smaller than ``below`` bytes, by table partition."""
        ...

    def compact_small(self, plan: CompactionPlan) -> MaintenanceRecord:
        """Bin-pack each of ``plan``'s groups (a partition's files below a size) into files of up to
        its target, in one commit per group that writes no offsets; a :class:`CommitError` if not."""
        ...

    def checkpoint(self) -> MaintenanceRecord:
        """Write a Delta checkpoint of the version before the current one. Called from the table's
        checkpoint thread only: the Delta committer lowers that thread's CPU priority for good."""
        ...

    def register(self, name: str) -> None:
        """Register the (existing) table in the session catalog as ``name``, if it is not there yet."""
        ...

    def ledger(self) -> TableLedger:
        """The table's history and rows, read-only, for the audit (called from an HTTP thread)."""
        ...


class TableLedger(Protocol):
    """One table as the audit reads it (``commit_service.audit``); each call reads it anew.

    Implemented by ``delta.ledger.DeltaLedger`` and ``iceberg.ledger.IcebergLedger``, both with the
    row queries of ``spark.row_audit``."""

    def history(self) -> TableHistory:
        """Every commit the table's format still lists, with what it recorded and added."""
        ...

    def columns(self) -> list[str]:
        """The table's top-level columns."""
        ...

    def derived(self) -> frozenset[str]:
        """Columns the table computes from others (a Delta table's generated partition columns),
        which no Kafka record holds: the value audit does not compare them."""
        ...

    def tally(self, ranges: list[tuple[int, int]], limit: int) -> OffsetTally:
        """The rows counted per offset against ``ranges`` (every partition's committed ranges: an
        offset in two of them is expected twice); the first ``limit`` runs where they disagree."""
        ...

    def file_spans(self) -> list[FileSpan]:
        """Each data file's rows and lowest and highest offset."""
        ...

    def rows_at(self, offsets: list[int]) -> dict[int, list[Row]]:
        """The rows at each of ``offsets`` (every partition's row at that offset)."""
        ...


class CommitListener(Protocol):
    """Told about every commit outcome (the service's metrics)."""

    def committed(self, record: CommitRecord) -> None: ...

    def failed(self, table: str, error: CommitError) -> None: ...

    def rejected(self, reason: str) -> None: ...


class CommitListeners:
    """Several :class:`CommitListener` told in turn (the metrics, the Spark UI's tab)."""

    def __init__(self, *listeners: CommitListener) -> None:
        self.listeners = listeners

    def committed(self, record: CommitRecord) -> None:
        for listener in self.listeners:
            listener.committed(record)

    def failed(self, table: str, error: CommitError) -> None:
        for listener in self.listeners:
            listener.failed(table, error)

    def rejected(self, reason: str) -> None:
        for listener in self.listeners:
            listener.rejected(reason)


class DeadLetterStore(Protocol):
    """The durable record of one table's dead letters."""

    def write(self, letter: DeadLetter) -> None:
        """Record ``letter`` (new, or its new state), whole."""
        ...

    def load(self) -> list[DeadLetter]:
        """Every dead letter recorded, in any state."""
        ...


class ConnectGroups(Protocol):
    """The Connect groups as Kafka shows them (``lakegate_core.connect_group.GroupReader``).

    Both calls raise :class:`~lakegate_core.connect_group.GroupReadError` when Kafka cannot be asked.
    """

    def assignments(self, connector: str) -> dict[TopicPartition, Assignment]: ...

    def committed(self, connector: str) -> PartitionOffsets: ...


CommitterFactory = Callable[["TableConfig"], Committer]
"""Builds a table's committer from its config: the production one is
``commit_service.delta.spark_committer_factory``; unit tests pass fakes."""
