"""One table's upkeep between its commit rounds: the small files of recent rounds merged as they
come, compaction and vacuum when due or asked, checkpoints written off the commit path, and the
table's entry in the session catalog.

Owned by the table's :class:`~commit_service.coordination.table_coordinator.TableCoordinator`.
Compaction and vacuum run under its commit lock (they never overlap a round). The merges of an
append table's small files run on a background thread of their own, beside the rounds: a merge
reads and writes as much as a partition's allowance of small files (36 s for 140 files on a loaded
S3 server, where a round takes well under a second), and under the lock every round meanwhile
would wait for it. It needs no lock: a merge's commit adds no data and carries no offsets, and
each format's commit resolves the two (Delta's conflict checker: an append never conflicts with a
compaction, which rewrites with ``dataChange=false``; Iceberg retries each commit on the new head,
a round's check that its offsets are unchanged passing over a merge's ``replace`` snapshot, a
merge's check that the files it replaces are still there passing over an append). An upsert
table's rounds read and delete from the files a merge replaces, so its merges stay under the lock.
Checkpoints run on one background thread of their own.
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
        self._merger: ThreadPoolExecutor | None = None  # an append table's merges, made on first use
        self._merge_running: Future[list[MaintenanceRecord]] | None = None
        self._watch_lock = threading.Lock()  # the watch: counted by rounds, reset by a merge's look

    def started(self) -> None:
        self._clock.started(self.clock())

    def committed(self, version: int, files: int) -> None:
        """A round made ``version``, adding ``files`` files (called under the commit lock): counted
        for the next merge of small files, and a checkpoint of it started when one is due."""
        with self._watch_lock:
            self._watch.committed(files)
        self.maybe_checkpoint(version)

    @property
    def merging(self) -> bool:
        """A merge of small files is running on the background thread."""
        return self._merge_running is not None and not self._merge_running.done()

    def maybe_maintain(self, version: int) -> list[MaintenanceRecord]:
        """Merge the small files of recent rounds when a partition holds too many
        (:mod:`commit_service.domain.compaction`): an append table's on the background thread
        (nothing returned for it here; its record is in :attr:`runs`), an upsert table's here. Then
        run the compaction / vacuum that is due (:mod:`commit_service.domain.maintenance`), unless
        a merge is still running (the next pass runs them: two rewrites of one file would conflict)."""
        if not self.config.maintenance.enabled or version < 0:  # no table yet: nothing to maintain
            return []
        beside_rounds = self.config.upsert is None
        if beside_rounds and self._merge_due():
            if self._merger is None:
                self._merger = ThreadPoolExecutor(1, thread_name_prefix=f"lakegate-merge-{self.config.name}")
            self._merge_running = self._merger.submit(self._merge_logged)
        if self.merging:
            return []
        with self._commit_lock:
            runs = self._merge_logged() if not beside_rounds and self._merge_due() else []
            kinds = due(self.config.maintenance, self._clock, self.clock(), self.committer.file_count)
            return runs + [self._maintain(kind) for kind in kinds]

    def _merge_due(self) -> bool:
        with self._watch_lock:
            return self.config.maintenance.compacts_with_rounds and not self.merging and self._watch.due()

    def _merge_logged(self) -> list[MaintenanceRecord]:
        try:
            return self._merge_small()
        except Exception as exc:  # logged; the next look is rounds later, and compaction and vacuum still run
            logger.warning("table %s: merging small files failed: %s", self.config.name, exc)
            return []

    def _merge_small(self) -> list[MaintenanceRecord]:
        policy = self.config.maintenance
        # Files rounds add from here on count for the next look; after a failure it waits a whole
        # allowance, not a round.
        with self._watch_lock:
            self._watch.looked(policy.small_files_allowed)
        small = self.committer.small_files(policy.target_file_size_bytes)
        plan = plan_compaction(small, policy.target_file_size_bytes, policy.small_files_allowed)
        record = self.committer.compact_small(plan) if plan.groups else None
        with self._watch_lock:
            self._watch.planned(plan.slack)
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
        """Run one maintenance now (admin), whether or not it is scheduled (after a merge running)."""
        if version < 0:
            raise ConflictError(f"table {self.config.name} has no commit yet: there is nothing to {kind.value}")
        self._wait_for_merge()
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

    def _wait_for_merge(self) -> None:
        running = self._merge_running
        if running is not None:
            running.result()

    def drain(self) -> None:
        """Wait for a background merge and checkpoint in progress (on stop: the session must outlive them)."""
        if self._merger is not None:
            self._merger.shutdown(wait=True)
            self._merger = None
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
