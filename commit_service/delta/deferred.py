"""A table's committer whose Spark side is built on first need, so the service is ready before
its JVM is.

Made by the production committer factory (:func:`commit_service.http.app.spark_committer_factory`),
one per table, and used by that table's
:class:`~commit_service.coordination.table_coordinator.TableCoordinator`. At start a table needs only its
version and offsets, which :meth:`DeferredCommitter.snapshot` reads from the log files
(:mod:`commit_service.delta.log`: pyarrow, no Spark). Intake needs nothing more, so ``/readyz``
turns ready and sidecars resume sending while the SparkSession starts. Everything else (warming
up, commits, maintenance, catalog registration, and a snapshot the log reader cannot be sure of)
builds the real :class:`~commit_service.delta.committer.DeltaCommitter` once, then goes to it. Files
accepted meanwhile have their footers read ahead already (``prefetch``: storage only, no Spark).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from commit_service.delta.log import LogReadError
from commit_service.domain.compaction import CompactionPlan, PartitionKey
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import CommitPlan
from commit_service.ports import Committer, TableLedger, TableSnapshot
from lakegate_core.protocol import DataFile
from lakegate_core.status import CommitRecord, MaintenanceKind, MaintenanceRecord

logger = logging.getLogger(__name__)


class DeferredCommitter:
    """Reads the offsets without Spark; builds the real committer (``build``) on first need."""

    def __init__(
        self,
        table: str,
        read_offsets: Callable[[], TableSnapshot],
        build: Callable[[], Committer],
        prefetch: Callable[[list[DataFile]], None] | None = None,
    ) -> None:
        self.table = table
        self._prefetch = prefetch  # reads ahead without Spark; None: the real committer's own
        self._read_offsets = read_offsets  # raises LogReadError when it cannot be sure
        self._build = build
        self._real: Committer | None = None
        self._lock = threading.Lock()

    def real(self) -> Committer:
        """The table's Delta committer (built once: the first call may start the SparkSession)."""
        with self._lock:
            if self._real is None:
                self._real = self._build()
            return self._real

    def snapshot(self) -> TableSnapshot:
        if self._real is None:
            try:
                return self._read_offsets()
            except LogReadError as exc:
                logger.info("table %s: reading offsets through Delta (%s)", self.table, exc)
        return self.real().snapshot()

    def warm(self) -> TableSnapshot:
        return self.real().warm()

    def prefetch(self, files: list[DataFile]) -> None:
        if self._prefetch is not None:
            self._prefetch(files)
        elif self._real is not None:
            self._real.prefetch(files)

    def commit(self, plan: CommitPlan) -> CommitRecord:
        return self.real().commit(plan)

    def file_count(self) -> int:
        return self.real().file_count()

    def maintain(self, kind: MaintenanceKind, policy: MaintenancePolicy) -> MaintenanceRecord:
        return self.real().maintain(kind, policy)

    def small_files(self, below: int) -> dict[PartitionKey, list[int]]:
        return self.real().small_files(below)

    def compact_small(self, plan: CompactionPlan) -> MaintenanceRecord:
        return self.real().compact_small(plan)

    def checkpoint(self) -> MaintenanceRecord:
        return self.real().checkpoint()

    def register(self, name: str) -> None:
        self.real().register(name)

    def ledger(self) -> TableLedger:
        return self.real().ledger()
