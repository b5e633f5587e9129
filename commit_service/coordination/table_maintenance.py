"""One table's upkeep between its commit rounds: the small files of recent rounds merged as they
come, compaction and vacuum when due or asked, checkpoints written off the commit path, and the
table's entry in the session catalog.

Owned by the table's :class:`~commit_service.coordination.table_coordinator.TableCoordinator`,
whose commit lock it runs under (maintenance never overlaps a round); checkpoints run on one
background thread of their own.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from commit_service.config import TableConfig
from commit_service.domain.compaction import CompactionWatch, plan_compaction
from commit_service.domain.maintenance import MaintenanceClock, due
from commit_service.errors import ConflictError
from commit_service.ports import Committer
from lakegate_core.status import MaintenanceKind, MaintenanceRecord

logger = logging.getLogger(__name__)

HISTORY = 1000


class TableMaintenance:
    """The maintenance of one table; ``commit_lock`` is its coordinator's."""

    def __init__(
        self, config: TableConfig, committer: Committer, clock: Callable[[], float], commit_lock: threading.Lock
    ) -> None:
        self.config = config
        self.committer = committer
        self.clock = clock
        self.runs: deque[MaintenanceRecord] = deque(maxlen=HISTORY)
        self._commit_lock = commit_lock
        self._clock = MaintenanceClock()
        self._watch = CompactionWatch()
        self._checkpointer: ThreadPoolExecutor | None = None  # one background thread, made on first use
        self._checkpoint_running: Future[None] | None = None

    def started(self) -> None:
        self._clock.started(self.clock())

    def committed(self, version: int, files: int) -> None:
        """A round made ``version``, adding ``files`` files (called under the commit lock): counted
        for the next merge of small files, and a checkpoint of it started when one is due."""
        self._watch.committed(files)
        self.maybe_checkpoint(version)

    def maybe_maintain(self, version: int) -> list[MaintenanceRecord]:
        """Merge the small files of recent rounds when a partition holds too many
        (:mod:`commit_service.domain.compaction`), then run the compaction / vacuum that is due
        (:mod:`commit_service.domain.maintenance`)."""
        if not self.config.maintenance.enabled or version < 0:  # no table yet: nothing to maintain
            return []
        with self._commit_lock:
            try:
                runs = self._merge_small()
            except Exception as exc:  # logged; the interval's compaction and vacuum still run
                logger.warning("table %s: merging small files failed: %s", self.config.name, exc)
                runs = []
            kinds = due(self.config.maintenance, self._clock, self.clock(), self.committer.file_count)
            return runs + [self._maintain(kind) for kind in kinds]

    def _merge_small(self) -> list[MaintenanceRecord]:
        policy = self.config.maintenance
        if not policy.compacts_with_rounds or not self._watch.due():
            return []
        try:
            small = self.committer.small_files(policy.target_file_size_bytes)
            plan = plan_compaction(small, policy.target_file_size_bytes, policy.small_files_allowed)
            record = self.committer.compact_small(plan) if plan.groups else None
        except Exception:
            self._watch.looked(policy.small_files_allowed)  # a failure looks again rounds later, not every round
            raise
        self._watch.looked(plan.slack)
        if record is None:
            return []
        logger.info(
            "maintenance table=%s kind=merge version=%d->%d files=%d->%d duration_ms=%d %s",
            self.config.name,
            record.version_before,
            record.version_after,
            record.files_before,
            record.files_after,
            record.duration_ms,
            record.detail,
        )
        self.runs.append(record)
        return [record]

    def maintain_now(self, kind: MaintenanceKind, version: int) -> MaintenanceRecord:
        """Run one maintenance now (admin), whether or not it is scheduled."""
        if version < 0:
            raise ConflictError(f"table {self.config.name} has no commit yet: there is nothing to {kind.value}")
        with self._commit_lock:
            return self._maintain(kind)

    def _maintain(self, kind: MaintenanceKind) -> MaintenanceRecord:
        try:
            record = self.committer.maintain(kind, self.config.maintenance)
        finally:  # a failed run waits an interval too, rather than retrying every tick
            self._clock.ran(kind, self.clock())
        self.runs.append(record)
        return record

    def maybe_checkpoint(self, version: int) -> Future[None] | None:
        """After every ``checkpoint_interval_commits``-th version, write a checkpoint off the commit
        path (one background thread per table: checkpoints never overlap, and while one is still
        being written the next is skipped: the one after it covers those commits too)."""
        policy = self.config.maintenance
        if not self.config.background_checkpoints or version <= 0 or version % policy.checkpoint_interval_commits:
            return None
        if self._checkpoint_running is not None and not self._checkpoint_running.done():
            logger.info(
                "table %s: checkpoint still being written; skipping the one after v%d", self.config.name, version
            )
            return None
        if self._checkpointer is None:
            self._checkpointer = ThreadPoolExecutor(1, thread_name_prefix=f"lakegate-checkpoint-{self.config.name}")
        self._checkpoint_running = self._checkpointer.submit(self._checkpoint)
        return self._checkpoint_running

    def drain(self) -> None:
        """Wait for a background checkpoint in progress (on stop: the session must outlive it)."""
        if self._checkpointer is not None:
            self._checkpointer.shutdown(wait=True)
            self._checkpointer = None

    def _checkpoint(self) -> None:
        try:
            self.runs.append(self.committer.checkpoint())
        except Exception as exc:  # the next interval writes a newer one; readers replay a few more commits
            logger.warning("table %s: background checkpoint failed: %s", self.config.name, exc)

    def register(self) -> None:
        """Register the table in the session catalog when its config asks (a failure is logged:
        committing matters more than the catalog entry, which the next start retries)."""
        if self.config.catalog is None:
            return
        try:
            self.committer.register(self.config.catalog.name)
        except Exception as exc:
            logger.warning("table %s: cannot register it as %s: %s", self.config.name, self.config.catalog.name, exc)
