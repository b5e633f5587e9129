"""One table's side of the coordinator: its state, its committer, its commit rounds and maintenance.

Owned by :class:`~commit_service.coordination.coordinator.Coordinator` (one per configured table). Every method
takes the locks it needs and nothing outside reaches into the state: ``_lock`` guards the pure
:class:`~commit_service.domain.state.TableState` (held briefly); ``_commit_lock`` serialises the table's
commit rounds and maintenance runs, so intake continues while a commit runs and maintenance never
overlaps a round.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from commit_service.config import TableConfig
from commit_service.coordination.quarantine import DeadLetters
from commit_service.domain.epochs import Epochs, keyed, split
from commit_service.domain.failures import FailureTracker
from commit_service.domain.maintenance import MaintenanceClock, due
from commit_service.domain.plan import CommitPlan, PendingFile
from commit_service.domain.start import StartReason, starts_json
from commit_service.domain.state import TableState
from commit_service.errors import (
    CommitError,
    ConflictError,
    ConnectCheckError,
    ContentRangeError,
    OffsetsMovedError,
    TooManyPendingError,
    UnexpectedCommitError,
)
from commit_service.ports import Committer, DeadLetterStore
from lakegate_core.connect_group import GroupReadError
from lakegate_core.protocol import DataFile, FileStatus, OffsetSpan, Watermark
from lakegate_core.status import (
    CommitRecord,
    DeadLetter,
    DeadLetterState,
    MaintenanceKind,
    MaintenanceRecord,
    ManifestState,
    TableSummary,
)
from lakegate_core.types import PartitionOffsets, TopicPartition

logger = logging.getLogger(__name__)

HISTORY = 1000
Limits = Callable[[Iterable[TopicPartition]], PartitionOffsets]
# per partition, the offset of its first record at or after a time (epoch ms): GroupReader.offsets_at
TimeOffsets = Callable[[Iterable[TopicPartition], int], PartitionOffsets]


class TableCoordinator:
    """One table: its state, its committer, its recent commits. Every method takes the locks it
    needs; nothing outside reaches into the state."""

    def __init__(
        self,
        config: TableConfig,
        committer: Committer,
        clock: Callable[[], float],
        limits: Limits | None = None,
        dead_letter_store: DeadLetterStore | None = None,
        time_offsets: TimeOffsets | None = None,
    ) -> None:
        self.config = config
        self.committer = committer
        self.clock = clock
        self.limits = limits  # Connect's committed offsets, when fencing is on
        self.time_offsets = time_offsets  # where tables[].start.timestamp falls, with a kafka section
        self.history: deque[CommitRecord] = deque(maxlen=HISTORY)
        self.maintenance_runs: deque[MaintenanceRecord] = deque(maxlen=HISTORY)
        self._maintenance_clock = MaintenanceClock()
        self._checkpointer: ThreadPoolExecutor | None = None  # one background thread, made on first use
        self._checkpoint_running: Future[None] | None = None
        self._state = TableState(config.name, policy=config.commit, now=clock(), start=config.start)
        # the state, the committer and the ledger key partitions by ledger key (domain.epochs);
        # everything this class answers or takes from outside is in Kafka's partitions
        self._epochs = Epochs()
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self.letters = DeadLetters(config.name, dead_letter_store, clock)
        self._failures = FailureTracker(config.commit)
        self._last_error: str | None = None

    def load(self) -> None:
        """Recover the committed offsets from the table's log (the only durable state) and the
        table's dead letters from their store."""
        snap = self.committer.snapshot()
        with self._lock:
            self._epochs.learn(snap.offsets)
            self._state.recovered(snap.offsets, snap.version)
        self.letters.load()
        self._maintenance_clock.started(self.clock())
        if snap.version >= 0:
            self._register()
        logger.info(
            "table %s at version %d with %d partitions' offsets", self.config.name, snap.version, len(snap.offsets)
        )

    def warm(self) -> None:
        """After the service is ready: let the committer load what its first commit needs (under
        the commit lock, so no round waits twice), and cross-check the offsets read at start."""
        with self._commit_lock:
            try:
                snap = self.committer.warm()
            except Exception as exc:  # the first commit loads it instead
                logger.warning("table %s: warming up failed: %s", self.config.name, exc)
                return
        with self._lock:
            mismatch = {tp: v for tp, v in snap.offsets.items() if self._state.committed.get(tp, 0) < v}
            self._epochs.learn(snap.offsets)
            self._state.recovered(snap.offsets, snap.version)
        if mismatch:
            logger.error("table %s: offsets read at start were behind the table's: %s", self.config.name, mismatch)

    # -- intake ---------------------------------------------------------------------------

    def offer(self, files: list[PendingFile], manifest_id: str) -> list[tuple[FileStatus, str | None]]:
        now = self.clock()
        with self._lock:
            files = [replace(p, file=self._ledger_file(p.file)) for p in files]
            verdicts = [self._state.offer(f, now) for f in files]
            self._state.settle_manifest(manifest_id, verdicts)
        accepted = [f.file for f, (status, _) in zip(files, verdicts, strict=True) if status is FileStatus.ACCEPTED]
        if accepted:
            self.committer.prefetch(accepted)
        return verdicts

    def expect(self, leased: set[TopicPartition]) -> set[TopicPartition]:
        """The live-leased partitions of this table's topics become the ones a complete round waits
        for; returns them."""
        expected = {tp for tp in leased if self.config.routes(tp.topic)}
        with self._lock:
            self._state.set_expected({self._epochs.ledger(tp) for tp in expected})
        return expected

    def claim(self, leased: set[TopicPartition], watermarks: Iterable[Watermark]) -> None:
        """:meth:`expect` the leased partitions; each watermark of a granted partition counts as
        that partition's report."""
        expected = self.expect(leased)
        self._find_time_floors(expected)
        with self._lock:
            for w in watermarks:
                if w.tp in expected:
                    key = self._epochs.ledger(w.tp)
                    self._state.note_watermark(key, w.connect_offset, w.read_at_ms / 1000, w.log_end, w.first_file)

    def _find_time_floors(self, partitions: set[TopicPartition]) -> None:
        """Under ``tables[].start.timestamp``: ask Kafka where the time falls in each of
        ``partitions`` that waits for it (``TableState.needs_time_floor``); asked again at the next
        claim if Kafka cannot answer now."""
        at_ms = self.config.start.at_ms
        if at_ms is None or self.time_offsets is None:
            return
        with self._lock:
            need = {key: tp for tp in partitions if self._state.needs_time_floor(key := self._epochs.ledger(tp))}
        if not need:
            return
        try:
            found = self.time_offsets(need.values(), at_ms)
        except GroupReadError as exc:
            logger.warning("table %s: cannot find where start.timestamp falls in Kafka yet: %s", self.config.name, exc)
            return
        with self._lock:
            for key, tp in need.items():
                if tp in found:
                    self._state.set_time_floor(key, found[tp])
        logger.info(
            "table %s: start.timestamp %s falls at %s",
            self.config.name,
            self.config.start.timestamp,
            ", ".join(f"{tp}@{found[tp]}" for tp in sorted(need.values()) if tp in found),
        )

    def held_next(self, tp: TopicPartition) -> int:
        """``TableState.buffered_through``: for the lease answer, which tells the sidecar what it
        need not send again."""
        with self._lock:
            return self._state.buffered_through(self._epochs.ledger(tp))

    def due_ms(self) -> int | None:
        """When the next round is due (epoch ms), for the lease answer (``LeaseGrant.due_ms``);
        None unless the table catches up (``commit.catch_up_seconds``) and the round may still
        wait to (a round long due, an idle table's, no longer does: sidecars then need not
        follow it closely)."""
        wait = self.config.commit.catch_up_seconds
        if not wait:
            return None
        with self._lock:
            due = self._state.due_at()
        if self.clock() >= due + wait:
            return None
        return math.ceil(due * 1000)  # rounded up: a read at or after it is at or after the due time

    # -- commit rounds --------------------------------------------------------------------

    def next_round_at(self) -> float | None:
        """When a round may next fire without a force (``TableState.next_round_at``, no earlier
        than a failure's backoff); None with nothing buffered. Read by the coordinator's loop."""
        with self._lock:
            at = self._state.next_round_at()
        return None if at is None else max(at, self._failures.not_before)

    def maybe_commit(self, *, force: bool = False) -> CommitRecord | None:
        """Run one commit round if a trigger fired (or ``force``); None if nothing to commit."""
        with self._commit_lock:
            now = self.clock()
            if not force and now < self._failures.not_before:
                return None
            plan = self._plan(now, force)
            if plan is None:
                return None
            return self._attempt(self._failures.cap(plan))

    def _attempt(self, plan: CommitPlan) -> CommitRecord:
        """Commit ``plan`` (under the commit lock); any failure is accounted, then raised as a CommitError."""
        try:
            record = self.committer.commit(plan)
        except ContentRangeError as exc:
            self._refuse_content(exc)
            raise
        except CommitError as exc:
            self._failed(exc, plan)
            raise
        except Exception as exc:  # a bug or a surprise below: still backed off, never a hot loop
            err = UnexpectedCommitError(f"table {self.config.name}: unexpected {type(exc).__name__} in the commit path")
            self._failed(err, plan, cause=exc)
            raise err from exc
        now = self.clock()
        if record.committed_at_ms is None:
            record = replace(record, committed_at_ms=int(now * 1000))
        if plan.due is not None:
            record = replace(record, due_ms=math.ceil(plan.due * 1000), caught_up=plan.caught_up)
        with self._lock:
            self._state.committed_plan(plan, record.version, now)
        if record.version == 0:  # the commit created the table
            self._register()
        self._maybe_checkpoint(record.version)
        self.history.append(record)
        self._failures.succeeded(plan)
        self._last_error = None
        logger.info(
            "commit table=%s version=%d commit_id=%s files=%d records=%d offsets=%s vtts=%s duration_ms=%s "
            "spark_jobs=%s reason=%s",
            record.table,
            record.version,
            record.commit_id,
            record.files,
            record.records,
            record.offsets.to_json(),
            record.vtts,
            record.duration_ms,
            list(record.spark_jobs),
            plan.reason,
        )
        if plan.begins:
            logger.info(
                "table %s: the ledger of %s begins here (tables[].start)",
                record.table,
                ", ".join(f"{tp} at {at} ({why})" for tp, at, why in plan.begins),
            )
        if plan.left:
            pace = len(plan.files) / max(record.duration_ms or 1, 1) * 1000
            logger.info(
                "table %s: round bounded by commit.max_files/max_bytes: %d buffered file(s) left for the next rounds "
                "(~%.0f s at this round's %.0f files/s)",
                record.table,
                plan.left,
                plan.left / pace,
                pace,
            )
        return record

    def _refuse_content(self, exc: ContentRangeError) -> None:
        """A file's content runs past its claimed range: not a failure of the round (no backoff,
        no quarantine); the file and the orphans inside its span leave the buffer, and its sender
        learns the span from the receipt of its next claim (``FileReceipt.holds``)."""
        with self._lock:
            dropped = self._state.refuse_content(exc.path, exc.holds)
        self._last_error = exc.message
        logger.warning(
            "table %s: %s; dropped it and %d orphan(s) starting inside that span: %s",
            self.config.name,
            exc.message,
            len(dropped) - 1 if dropped else 0,
            [p.file.path for p in dropped[1:]],
        )

    def holds(self, f: DataFile) -> OffsetSpan | None:
        """The offsets ``f``'s content was found to hold (for its receipt), if known."""
        with self._lock:
            return self._state.span_of(self._ledger_file(f))

    def _ledger_file(self, f: DataFile) -> DataFile:
        """A file from a sidecar (Kafka's partition) as the state keys it (its ledger key); under the lock."""
        epoch = self._epochs.of(f.topic)
        return f if epoch == 1 else replace(f, topic=keyed(f.topic, epoch))

    def _plan(self, now: float, force: bool) -> CommitPlan | None:
        """The state's plan, capped at Connect's committed offsets when fencing is on."""
        with self._lock:
            plan = self._state.plan(now, force=force)
        if plan is None or self.limits is None:
            return plan
        try:
            with self._lock:
                kafka = {key: tp for key in plan.offsets if (tp := self._epochs.kafka(key)) is not None}
            read = self.limits(kafka.values())
            limits = PartitionOffsets({key: read[tp] for key, tp in kafka.items() if tp in read})
        except GroupReadError as exc:
            err = ConnectCheckError(f"table {self.config.name}: cannot check Connect's offsets: {exc}")
            self._failed(err, None)
            raise err from exc
        with self._lock:  # never commit past what Connect itself has committed
            return self._state.plan(now, force=force, limits=limits)

    def _failed(self, exc: CommitError, plan: CommitPlan | None, cause: BaseException | None = None) -> None:
        """Account for a failed round: back off, and quarantine the file the failures condemn."""
        if isinstance(exc, OffsetsMovedError):
            with self._lock:
                self._epochs.learn(exc.offsets)
                self._state.recovered(exc.offsets, exc.version)
        decision = self._failures.failed(exc, plan, self.clock())
        self._last_error = exc.message
        if cause is not None and decision.first:  # the trace once per streak, not every retry
            logger.error("commit of table %s failed unexpectedly", self.config.name, exc_info=cause)
        logger.warning(
            "commit of table %s failed (%s, retry in %.1fs): %s",
            self.config.name,
            "transient" if exc.transient else "retryable" if exc.retryable else "bad file",
            decision.delay,
            exc.message,
        )
        if decision.quarantine is not None:
            self._quarantine(decision.quarantine, exc, decision.attempts)

    # -- dead letters ---------------------------------------------------------------------

    def _quarantine(self, path: str, exc: CommitError, attempts: int) -> None:
        """Take ``path`` out of the buffer, once its dead letter is durably recorded (if that
        fails the file stays buffered and the next failing round tries again)."""
        with self._lock:
            pending = self._state.find(path)
        if pending is None:
            return
        try:
            letter = self.letters.record(pending, exc, attempts)
        except Exception as err:
            logger.error(
                "table %s: cannot record the dead letter of %s, keeping it buffered: %s", self.config.name, path, err
            )
            return
        with self._lock:
            self._state.drop_file(path, f"quarantined: {exc.message}")
        f = pending.file
        logger.error(
            "table %s: QUARANTINED %s (%s-%d offsets %d..%d) after %d attempt(s): %s; its partition waits at this gap "
            "until a correct file is sent, or an admin retries (POST /v1/dead-letters/%s/retry) or releases it",
            self.config.name,
            path,
            f.topic,
            f.partition,
            f.start_offset,
            f.end_offset,
            letter.attempts,
            exc.message,
            letter.id,
        )

    def dead_letters(self) -> list[DeadLetter]:
        return self.letters.all()

    def dead_letter(self, letter_id: str) -> DeadLetter | None:
        return self.letters.get(letter_id)

    def retry_dead_letter(self, letter_id: str) -> DeadLetter:
        """Offer a quarantined file to the buffer again (an admin fixed what condemned it)."""
        with self._commit_lock:
            letter = self.letters.quarantined(letter_id)
            pending = PendingFile(letter.file, letter.manifest_id, letter.sidecar_id)
            with self._lock:
                status, reason = self._state.offer(pending, self.clock())
            if status not in (FileStatus.ACCEPTED, FileStatus.DUPLICATE):
                raise ConflictError(f"dead letter {letter_id} cannot be retried: {reason or status.value}")
            return self.letters.resolve(letter, DeadLetterState.RETRIED)

    def release_dead_letter(self, letter_id: str) -> CommitRecord:
        """Commit the dead letter's partition past its range without the file (an admin accepts the
        loss of those offsets); the commit's metadata names the dead letter."""
        with self._commit_lock:
            letter = self.letters.quarantined(letter_id)
            f = letter.file
            with self._lock:
                at = self._state.next_offset(f.tp)
            if at != f.start_offset:
                where = "already past it" if at > f.start_offset else f"still at offset {at}: release that range first"
                raise ConflictError(
                    f"dead letter {letter_id} starts at offset {f.start_offset}; the partition is {where}"
                )
            plan = CommitPlan(
                files=(),
                offsets=PartitionOffsets({f.tp: f.next_offset}),
                vtts=None,
                reason="released",
                released=(letter_id,),
                release_from=PartitionOffsets({f.tp: f.start_offset}),
            )
            record = self._attempt(plan)
            self.letters.resolve(letter, DeadLetterState.RELEASED)
            return record

    def topic_offsets(self, topic: str) -> dict[int, int]:
        """Per partition, the committed offset of ``topic`` in its current epoch."""
        with self._lock:
            return {
                tp.partition: v for tp, v in self._epochs.to_kafka(self._state.committed).items() if tp.topic == topic
            }

    def open_epoch(self, topic: str, starts: dict[int, int]) -> CommitRecord:
        """Start a new ledger epoch of ``topic`` (it was deleted and made again; domain.epochs):
        one commit, with no files, records each partition's first offset ``starts`` under the new
        ledger key. The old epoch's offsets stay in the table; its buffered files are dropped."""
        with self._commit_lock:
            with self._lock:
                epoch = self._epochs.of(topic) + 1
                new = {TopicPartition(keyed(topic, epoch), p): at for p, at in sorted(starts.items())}
            plan = CommitPlan(
                files=(),
                offsets=PartitionOffsets(new),
                vtts=None,
                reason="epoch",
                release_from=PartitionOffsets(new),
                begins=tuple((tp, at, StartReason.EPOCH.value) for tp, at in new.items()),
            )
            record = self._attempt(plan)
            with self._lock:
                self._epochs.learn(new)
                over = [
                    k for k in self._state.partitions() if split(k.topic)[0] == topic and self._epochs.kafka(k) is None
                ]
                dropped = self._state.begin_epoch(
                    over, new, f"topic {topic} was made again: ledger epoch {epoch} began at version {record.version}"
                )
            logger.warning(
                "table %s: topic %s begins ledger epoch %d at version %d (%s); %d buffered file(s) of the old "
                "epoch dropped",
                self.config.name,
                topic,
                epoch,
                record.version,
                ", ".join(f"{tp.partition}@{at}" for tp, at in new.items()),
                dropped,
            )
            return record

    def check_capacity(self, files: int, size: int) -> None:
        """Refuse (429) ``files`` more files of ``size`` bytes if the buffer would pass its cap."""
        policy = self.config.commit
        with self._lock:
            have_files, have_bytes = self._state.pending_files(), self._state.pending_bytes()
        if have_files + files > policy.max_pending_files or have_bytes + size > policy.max_pending_bytes:
            raise TooManyPendingError(
                f"table {self.config.name} buffers {have_files} files ({have_bytes} bytes), its limit is "
                f"{policy.max_pending_files} files / {policy.max_pending_bytes} bytes (commit.max_pending_*): "
                "send again after the next commit",
                retry_after=max(1, math.ceil(policy.interval_seconds)),
            )

    # -- maintenance (between commit rounds: under the commit lock) ------------------------

    def maybe_maintain(self) -> list[MaintenanceRecord]:
        """Run the compaction / vacuum that is due (see :mod:`commit_service.domain.maintenance`)."""
        if not self.config.maintenance.enabled or self._state.version < 0:  # no table yet: nothing to maintain
            return []
        with self._commit_lock:
            kinds = due(self.config.maintenance, self._maintenance_clock, self.clock(), self.committer.file_count)
            return [self._maintain(kind) for kind in kinds]

    def maintain_now(self, kind: MaintenanceKind) -> MaintenanceRecord:
        """Run one maintenance now (admin), whether or not it is scheduled."""
        if self._state.version < 0:
            raise ConflictError(f"table {self.config.name} has no commit yet: there is nothing to {kind.value}")
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
                offsets=PartitionOffsets(self._epochs.to_kafka(st.committed)),
                pending_files=st.pending_files(),
                pending_bytes=st.pending_bytes(),
                pending_offsets=PartitionOffsets(self._epochs.to_kafka(st.pending_offsets())),
                last_error=self._last_error,
                dead_letters=self.letters.count_quarantined(),
                connect_offsets=PartitionOffsets(self._epochs.to_kafka(st.connect_at)),
                oldest_pending_ms=None if (oldest := st.oldest_arrival()) is None else int(oldest * 1000),
                format=self.config.format.value,
                starts=starts_json(self._epochs.to_kafka(st.starts)) or None,
                epochs=dict(self._epochs.by_topic) or None,
            )

    def offsets(self) -> PartitionOffsets:
        """The committed offsets of the topics' current epochs, by Kafka partition."""
        with self._lock:
            return PartitionOffsets(self._epochs.to_kafka(self._state.committed))

    def manifest(self, manifest_id: str) -> tuple[ManifestState, int | None, str | None] | None:
        with self._lock:
            return self._state.manifest(manifest_id)
