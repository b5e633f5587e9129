"""One table's side of the coordinator: its state, its committer, its commit rounds and maintenance.

Owned by :class:`~commit_service.coordinator.Coordinator` (one per configured table). Every method
takes the locks it needs and nothing outside reaches into the state: ``_lock`` guards the pure
:class:`~commit_service.state.TableState` (held briefly); ``_commit_lock`` serialises the table's
commit rounds and maintenance runs, so intake continues while a commit runs and maintenance never
overlaps a round.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from commit_service.committer import Committer
from commit_service.config import TableConfig
from commit_service.errors import CommitError, ConnectCheckError, DataFileError, OffsetsMovedError
from commit_service.maintenance import MaintenanceClock, due
from commit_service.state import CommitPlan, PendingFile, TableState
from lakegate_core.connect_group import GroupReadError
from lakegate_core.protocol import FileStatus, Watermark
from lakegate_core.status import CommitRecord, MaintenanceKind, MaintenanceRecord, ManifestState, TableSummary
from lakegate_core.types import PartitionOffsets, TopicPartition

logger = logging.getLogger(__name__)

HISTORY = 1000
MAX_BACKOFF = 30.0
Limits = Callable[[Iterable[TopicPartition]], PartitionOffsets]


@dataclass
class _Retry:
    failures: int = 0
    not_before: float = 0.0


class TableCoordinator:
    """One table: its state, its committer, its recent commits. Every method takes the locks it
    needs; nothing outside reaches into the state."""

    def __init__(
        self, config: TableConfig, committer: Committer, clock: Callable[[], float], limits: Limits | None = None
    ) -> None:
        self.config = config
        self.committer = committer
        self.clock = clock
        self.limits = limits  # Connect's committed offsets, when fencing is on
        self.history: deque[CommitRecord] = deque(maxlen=HISTORY)
        self.maintenance_runs: deque[MaintenanceRecord] = deque(maxlen=HISTORY)
        self._maintenance_clock = MaintenanceClock()
        self._checkpointer: ThreadPoolExecutor | None = None  # one background thread, made on first use
        self._state = TableState(config.name, policy=config.commit, now=clock())
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self._retry = _Retry()
        self._last_error: str | None = None

    def load(self) -> None:
        """Recover the committed offsets from the table's log (the only durable state)."""
        snap = self.committer.snapshot()
        with self._lock:
            self._state.recovered(snap.offsets, snap.version)
        self._maintenance_clock.started(self.clock())
        if snap.version >= 0:
            self._register()
        logger.info(
            "table %s at version %d with %d partitions' offsets", self.config.name, snap.version, len(snap.offsets)
        )

    # -- intake ---------------------------------------------------------------------------

    def offer(self, files: list[PendingFile], manifest_id: str) -> list[tuple[FileStatus, str | None]]:
        now = self.clock()
        with self._lock:
            verdicts = [self._state.offer(f, now) for f in files]
            self._state.settle_manifest(manifest_id, verdicts)
        return verdicts

    def claim(self, leased: set[TopicPartition], watermarks: Iterable[Watermark]) -> None:
        """The leased partitions of this table's topics become the ones a complete round waits
        for; each watermark of a granted partition counts as that partition's report."""
        expected = {tp for tp in leased if self.config.routes(tp.topic)}
        with self._lock:
            self._state.set_expected(expected)
            for w in watermarks:
                if w.tp in expected:
                    self._state.note_watermark(w.tp, w.connect_offset, w.read_at_ms / 1000)

    # -- commit rounds --------------------------------------------------------------------

    def maybe_commit(self, *, force: bool = False) -> CommitRecord | None:
        """Run one commit round if a trigger fired (or ``force``); None if nothing to commit."""
        with self._commit_lock:
            now = self.clock()
            if not force and now < self._retry.not_before:
                return None
            plan = self._plan(now, force)
            if plan is None:
                return None
            try:
                record = self.committer.commit(plan)
            except OffsetsMovedError as exc:
                with self._lock:
                    self._state.recovered(exc.offsets, exc.version)
                self._failed(exc)
                raise
            except DataFileError as exc:
                if not exc.retryable:
                    with self._lock:
                        self._state.drop_file(exc.path, str(exc))
                    logger.error(
                        "table %s: dropped %s from the buffer: %s (its partition waits for a "
                        "correct file for that range)",
                        self.config.name,
                        exc.path,
                        exc,
                    )
                self._failed(exc, backoff=exc.retryable)
                raise
            except CommitError as exc:
                self._failed(exc)
                raise
            with self._lock:
                self._state.committed_plan(plan, record.version, self.clock())
            if record.version == 0:  # the commit created the table
                self._register()
            self._maybe_checkpoint(record.version)
            self.history.append(record)
            self._retry = _Retry()
            self._last_error = None
            logger.info(
                "commit table=%s version=%d commit_id=%s files=%d records=%d offsets=%s vtts=%s duration_ms=%s reason=%s",
                record.table,
                record.version,
                record.commit_id,
                record.files,
                record.records,
                record.offsets.to_json(),
                record.vtts,
                record.duration_ms,
                plan.reason,
            )
            return record

    def _plan(self, now: float, force: bool) -> CommitPlan | None:
        """The state's plan, capped at Connect's committed offsets when fencing is on."""
        with self._lock:
            plan = self._state.plan(now, force=force)
        if plan is None or self.limits is None:
            return plan
        try:
            limits = self.limits(plan.offsets)
        except GroupReadError as exc:
            err = ConnectCheckError(f"table {self.config.name}: cannot check Connect's offsets: {exc}")
            self._failed(err)
            raise err from exc
        with self._lock:  # never commit past what Connect itself has committed
            return self._state.plan(now, force=force, limits=limits)

    def _failed(self, exc: CommitError, *, backoff: bool = True) -> None:
        self._retry.failures += 1
        delay = (
            0.0 if not backoff or isinstance(exc, OffsetsMovedError) else min(MAX_BACKOFF, 2**self._retry.failures / 2)
        )
        self._retry.not_before = self.clock() + delay
        self._last_error = str(exc)
        logger.warning(
            "commit of table %s failed (%s, retry in %.1fs): %s",
            self.config.name,
            "retryable" if exc.retryable else "fatal",
            delay,
            exc,
        )

    # -- maintenance (between commit rounds: under the commit lock) ------------------------

    def maybe_maintain(self) -> list[MaintenanceRecord]:
        """Run the compaction / vacuum that is due (see :mod:`commit_service.maintenance`)."""
        if not self.config.maintenance.enabled:
            return []
        with self._commit_lock:
            kinds = due(self.config.maintenance, self._maintenance_clock, self.clock(), self.committer.file_count)
            return [self._maintain(kind) for kind in kinds]

    def maintain_now(self, kind: MaintenanceKind) -> MaintenanceRecord:
        """Run one maintenance now (admin), whether or not it is scheduled."""
        with self._commit_lock:
            return self._maintain(kind)

    def _maintain(self, kind: MaintenanceKind) -> MaintenanceRecord:
        try:
            record = self.committer.maintain(kind, self.config.maintenance)
        finally:  # a failed run waits an interval too, rather than retrying every tick
            self._maintenance_clock.ran(kind, self.clock())
        self.maintenance_runs.append(record)
        return record

    def _maybe_checkpoint(self, version: int) -> Future[None] | None:
        """After every ``checkpoint_interval_commits``-th version, write a checkpoint off the commit
        path (one background thread per table: checkpoints never pile up or overlap)."""
        policy = self.config.maintenance
        if not policy.background_checkpoints or version <= 0 or version % policy.checkpoint_interval_commits:
            return None
        if self._checkpointer is None:
            self._checkpointer = ThreadPoolExecutor(1, thread_name_prefix=f"lakegate-checkpoint-{self.config.name}")
        return self._checkpointer.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        try:
            self.maintenance_runs.append(self.committer.checkpoint())
        except Exception as exc:  # the next interval writes a newer one; readers replay a few more commits
            logger.warning("table %s: background checkpoint failed: %s", self.config.name, exc)

    def _register(self) -> None:
        """Register the table in the session catalog when its config asks (a failure is logged:
        committing matters more than the catalog entry, which the next start retries)."""
        if self.config.catalog is None:
            return
        try:
            self.committer.register(self.config.catalog.name)
        except Exception as exc:
            logger.warning("table %s: cannot register it as %s: %s", self.config.name, self.config.catalog.name, exc)

    # -- reads ----------------------------------------------------------------------------

    def summary(self) -> TableSummary:
        with self._lock:
            st = self._state
            return TableSummary(
                table=self.config.name,
                path=self.config.path,
                version=st.version,
                offsets=PartitionOffsets(st.committed),
                pending_files=st.pending_files(),
                pending_bytes=st.pending_bytes(),
                pending_offsets=st.pending_offsets(),
                last_error=self._last_error,
            )

    def offsets(self) -> PartitionOffsets:
        with self._lock:
            return PartitionOffsets(self._state.committed)

    def manifest(self, manifest_id: str) -> tuple[ManifestState, int | None, str | None] | None:
        with self._lock:
            return self._state.manifest(manifest_id)
