"""One table's side of the coordinator: its state, its committer, its commit rounds and maintenance.

Owned by :class:`~commit_service.coordination.coordinator.Coordinator` (one per configured table). Every
method takes the locks it needs and nothing outside reaches into the state: ``_lock`` guards the pure
:class:`~commit_service.domain.state.TableState` (held briefly); ``_commit_lock`` serialises the table's commit
rounds and maintenance runs, so intake continues while a commit runs and maintenance never overlaps a round.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace

from commit_service.config import TableConfig
from commit_service.coordination import round_log
from commit_service.coordination.quarantine import DeadLetters
from commit_service.coordination.table_maintenance import TableMaintenance
from commit_service.domain.epochs import Epochs, keyed, split
from commit_service.domain.failures import FailureTracker
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
from lakegate_core.protocol import MAX_HELD_RUNS, DataFile, FileStatus, OffsetSpan, Watermark
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
        self._state = TableState(config.name, policy=config.commit, now=clock(), start=config.start)
        # the state, the committer and the ledger key partitions by ledger key (domain.epochs);
        # everything this class answers or takes from outside is in Kafka's partitions
        self._epochs = Epochs()
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self.upkeep = TableMaintenance(config, committer, clock, self._commit_lock)
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
        self.upkeep.started()
        if snap.version >= 0:
            self.upkeep.register()
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
        round_log.start_found(
            self.config.name, self.config.start.timestamp, {tp: found[tp] for tp in need.values() if tp in found}
        )

    def held(self, tp: TopicPartition) -> tuple[int, tuple[OffsetSpan, ...]]:
        """``TableState.buffered_through`` and the runs buffered past it: for the lease answer,
        which tells the sidecar what it need not send again."""
        with self._lock:
            key = self._epochs.ledger(tp)
            return self._state.buffered_through(key), self._state.held_after(key, MAX_HELD_RUNS)

    def due_ms(self) -> int | None:
        """When the next round is due (epoch ms), for the lease answer (``LeaseGrant.due_ms``;
        ``RoundCadence.due_ms``)."""
        with self._lock:
            return self._state.cadence.due_ms(self.clock(), self.config.commit.catch_up_seconds)

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
        """Commit ``plan`` (under the commit lock); any failure is accounted, then raised as a CommitError.
        While it commits, lease answers name the next round's due time (``RoundCadence.began``)."""
        with self._lock:  # until it ends, the next round is due an interval after this one's base
            self._state.cadence.began(self.clock() if plan.planned_at is None else plan.planned_at)
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
            self.upkeep.register()
        self.upkeep.committed(record.version, record.files)
        self.history.append(record)
        self._failures.succeeded(plan)
        self._last_error = None
        round_log.committed(record, plan)
        return record

    def _refuse_content(self, exc: ContentRangeError) -> None:
        """A file's content runs past its claimed range: not a failure of the round (no backoff,
        no quarantine); the file and the orphans inside its span leave the buffer, and its sender
        learns the span from the receipt of its next claim (``FileReceipt.holds``)."""
        with self._lock:
            self._state.cadence.ended()
            dropped = self._state.refuse_content(exc.path, exc.holds)
        self._last_error = exc.message
        round_log.refused(self.config.name, exc, dropped)

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
        """Account for a failed round (the next round is the one it was): back off, and quarantine
        the file the failures condemn."""
        with self._lock:
            self._state.cadence.ended()
            if isinstance(exc, OffsetsMovedError):
                self._epochs.learn(exc.offsets)
                self._state.recovered(exc.offsets, exc.version)
        decision = self._failures.failed(exc, plan, self.clock())
        self._last_error = exc.message
        round_log.failed(self.config.name, exc, decision, cause)
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
        round_log.quarantined(self.config.name, letter, exc)

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
            round_log.epoch_opened(self.config.name, topic, epoch, record.version, new, dropped)
            return record

    def check_capacity(self, files: int, size: int) -> None:
        """Refuse (429) ``files`` more files of ``size`` bytes if the buffer would pass its cap."""
        policy = self.config.commit
        with self._lock:
            have_files, have_bytes = self._state.buffer.count, self._state.buffer.size
        if have_files + files > policy.max_pending_files or have_bytes + size > policy.max_pending_bytes:
            raise TooManyPendingError(
                f"table {self.config.name} buffers {have_files} files ({have_bytes} bytes), its limit is "
                f"{policy.max_pending_files} files / {policy.max_pending_bytes} bytes (commit.max_pending_*): "
                "send again after the next commit",
                retry_after=max(1, math.ceil(policy.interval_seconds)),
            )

    # -- maintenance (between commit rounds: under the commit lock; see table_maintenance) ---

    def maybe_maintain(self) -> list[MaintenanceRecord]:
        return self.upkeep.maybe_maintain(self._state.version)

    def maintain_now(self, kind: MaintenanceKind) -> MaintenanceRecord:
        return self.upkeep.maintain_now(kind, self._state.version)

    @property
    def maintenance_runs(self) -> deque[MaintenanceRecord]:
        return self.upkeep.runs

    def drain(self) -> None:
        self.upkeep.drain()

    # -- reads ----------------------------------------------------------------------------

    def summary(self) -> TableSummary:
        with self._lock:
            st = self._state
            return TableSummary(
                table=self.config.name,
                path=self.config.path,
                version=st.version,
                offsets=PartitionOffsets(self._epochs.to_kafka(st.committed)),
                pending_files=st.buffer.count,
                pending_bytes=st.buffer.size,
                pending_offsets=PartitionOffsets(self._epochs.to_kafka(st.buffer.ends())),
                last_error=self._last_error,
                dead_letters=self.letters.count_quarantined(),
                connect_offsets=PartitionOffsets(self._epochs.to_kafka(st.connect_at)),
                oldest_pending_ms=None if (oldest := st.buffer.oldest_arrival()) is None else int(oldest * 1000),
                format=self.config.format.value,
                starts=starts_json(self._epochs.to_kafka(st.starts)) or None,
                epochs=dict(self._epochs.by_topic) or None,
                partition_by=self.config.partition_by,
            )

    def offsets(self) -> PartitionOffsets:
        """The committed offsets of the topics' current epochs, by Kafka partition."""
        with self._lock:
            return PartitionOffsets(self._epochs.to_kafka(self._state.committed))

    def manifest(self, manifest_id: str) -> tuple[ManifestState, int | None, str | None] | None:
        with self._lock:
            return self._state.manifest(manifest_id)
