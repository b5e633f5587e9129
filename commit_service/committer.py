"""The seam between the deciding core and Delta: what a table's writer must offer.

The coordinator depends only on these types, so it imports (and is unit-tested) without py4j,
pyspark or Flask. :class:`~commit_service.delta_commit.DeltaCommitter` is the production
:class:`Committer`; unit tests pass fakes. :class:`CommitListener` is told every outcome (the
metrics implement it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from commit_service.errors import CommitError
from commit_service.maintenance import MaintenancePolicy
from commit_service.state import CommitPlan
from lakegate_core.protocol import DataFile
from lakegate_core.status import CommitRecord, MaintenanceKind, MaintenanceRecord
from lakegate_core.types import PartitionOffsets


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

    def checkpoint(self) -> MaintenanceRecord:
        """Write a Delta checkpoint of the version before the current one. Called from the table's
        checkpoint thread only: the Delta committer lowers that thread's CPU priority for good."""
        ...

    def register(self, name: str) -> None:
        """Register the (existing) table in the session catalog as ``name``, if it is not there yet."""
        ...


class CommitListener(Protocol):
    """Told about every commit outcome (the service's metrics)."""

    def committed(self, record: CommitRecord) -> None: ...

    def failed(self, table: str, error: CommitError) -> None: ...

    def rejected(self, reason: str) -> None: ...
