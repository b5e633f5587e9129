"""Per-table commit state: committed offsets, buffered files, and the decision what may commit.

Pure: no I/O, no clock, no threads. The coordinator owns one :class:`TableState` per table, feeds
it manifests (:meth:`TableState.offer`) and time, asks it for a :class:`CommitPlan`, and tells it
the outcome (:meth:`TableState.committed_plan` or nothing: a failed commit leaves every buffered
file in place for the next round).

Invariants (property-tested in ``tests/unit/service/domain/test_state.py``):
- a plan holds, per partition, one contiguous run of files starting exactly at the committed
  offset: it never commits a gap and never commits an offset twice;
- offering the same file again, in any order or number of times, changes nothing;
- a file overlapping a committed or buffered range, other than an exact duplicate, is rejected;
- once a file's content is known to hold a span of offsets (:meth:`TableState.refuse_content`),
  a claim of it that ends inside that span, or any other file starting inside it, is rejected.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from itertools import chain, islice

from commit_service.domain.buffer import FileBuffer, row_size
from commit_service.domain.cadence import RoundCadence
from commit_service.domain.manifests import ManifestBook
from commit_service.domain.plan import (
    ROW_END,
    ROW_MANIFEST,
    ROW_SIZE,
    CommitPlan,
    CommitPolicy,
    OnTimeout,
    PendingFile,
    Row,
    place,
    take_round_robin,
)
from commit_service.domain.spans import ContentSpans
from commit_service.domain.start import PartitionStart, StartReason, TableStart
from lakegate_core.protocol import DataFile, FileStatus, OffsetSpan
from lakegate_core.status import ManifestState
from lakegate_core.types import PartitionOffsets, TopicPartition


class TableState:
    """The state of one Delta table as the coordinator sees it; not thread-safe (callers lock)."""

    def __init__(
        self,
        name: str,
        committed: Mapping[TopicPartition, int] | None = None,
        policy: CommitPolicy | None = None,
        *,
        now: float = 0.0,
        start: TableStart | None = None,
    ) -> None:
        self.name = name
        self.policy = policy or CommitPolicy()
        self.start = start or TableStart()
        self.committed: dict[TopicPartition, int] = dict(committed or {})
        # where the ledger of each partition with no committed offset yet begins, once decided
        # (start.TableStart.decide); its first commit records it (CommitPlan.begins)
        self.starts: dict[TopicPartition, PartitionStart] = {}
        # under tables[].start.timestamp: per partition, the offset of its first record at or
        # after it, as Kafka answered (set_time_floor); a partition without one waits
        self.time_floors: dict[TopicPartition, int] = {}
        self.buffer = FileBuffer()  # the files accepted and not committed yet
        self.expected: set[TopicPartition] = set()
        self.reported_at: dict[TopicPartition, float] = {}
        self.connect_at: dict[TopicPartition, int] = {}  # Connect's committed offset, as a sidecar last read it
        # when the next round is due, and the log ends it waits for (up to catch_up_seconds)
        self.cadence = RoundCadence(self.policy.interval_seconds, now)
        self.version: int = -1
        self.round_started = now
        self.manifests = ManifestBook()  # what became of each manifest
        # per partition, file path -> the offsets its content holds, learnt from a refused claim;
        # forgotten once the committed offset passes the span
        self.spans = ContentSpans()

    # -- offsets --------------------------------------------------------------------------

    def next_offset(self, tp: TopicPartition) -> int:
        """Where the next file of ``tp`` must start: committed offset, else where its ledger was
        decided to begin, else 0 (undecided: files are buffered from any offset until it is)."""
        committed = self.committed.get(tp)
        if committed is not None:
            return committed
        start = self.starts.get(tp)
        return 0 if start is None else start.offset

    def undecided(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` has neither a committed offset nor a decided start."""
        return tp not in self.committed and tp not in self.starts

    def floor(self, tp: TopicPartition) -> int:
        """The offset below which ``tp``'s records are before the table: configured, or found by
        the start's timestamp (0 while not found, and under ``earliest``)."""
        return self.time_floors.get(tp, 0) if self.start.by_time(tp) else self.start.floor(tp)

    def needs_time_floor(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` waits for Kafka's offset at the start's timestamp (``set_time_floor``)."""
        return self.start.by_time(tp) and tp not in self.time_floors and self.undecided(tp)

    def set_time_floor(self, tp: TopicPartition, offset: int) -> None:
        """Kafka's answer for ``tp``: its first record at or after the start's timestamp is at
        ``offset`` (its log end when every record is older); buffered files ending below it go."""
        if not self.needs_time_floor(tp):
            return
        self.time_floors[tp] = offset
        for path in self.buffer.ending_below(tp, offset):
            self.drop_file(path, f"before the table's start: {tp} begins at or after {offset}")

    def _decide_start(self, tp: TopicPartition, first_file: int, connect_offset: int) -> None:
        """A watermark carried where the sink's first file of ``tp`` begins: decide where its
        ledger begins (``TableStart.decide``) and drop what is buffered before it."""
        if self.needs_time_floor(tp):
            return  # Kafka has not yet said where the start's timestamp falls
        floor, around = self.floor(tp), None
        if floor:
            found = self.buffer.at_or_below(tp, floor)
            if found is not None and found[1][ROW_END] >= floor:
                around = (found[0], found[1][ROW_END])
        decided = self.start.decide(tp, floor, first_file, connect_offset, around)
        if decided is None:
            return
        self.starts[tp] = decided
        for begin in self.buffer.starts_below(tp, decided.offset):
            pending = self.buffer.get(tp, begin)
            if pending is not None:
                self.drop_file(pending.file.path, f"before the table's start: {tp} begins at {decided.describe()}")

    # -- intake ---------------------------------------------------------------------------

    def offer(self, pending: PendingFile, now: float) -> tuple[FileStatus, str | None]:
        """Judge one file and buffer it if accepted; idempotent on (path, range)."""
        f, tp = pending.file, pending.tp
        base = self.next_offset(tp)
        if f.end_offset < base:
            return FileStatus.ALREADY_COMMITTED, None
        if f.end_offset < self.floor(tp) and self.undecided(tp):
            return (
                FileStatus.ALREADY_COMMITTED,
                f"before the table's start offset {self.floor(tp)} (tables[].start)",
            )
        if f.start_offset < base:
            return FileStatus.REJECTED, (
                f"offsets {f.start_offset}..{f.end_offset} overlap the committed range below {base}"
            )
        refused = self.spans.refusal(f)
        if refused is not None:
            return FileStatus.REJECTED, refused
        same = self.buffer.get(tp, f.start_offset)
        if same is not None:
            if same.file.path == f.path and same.file.end_offset == f.end_offset:
                self.manifests.follows(pending.manifest_id, place(tp, f.start_offset), same.manifest_id)
                return FileStatus.DUPLICATE, None
            return FileStatus.REJECTED, (
                f"offsets {f.start_offset}..{f.end_offset} of {f.path} overlap buffered file "
                f"{same.file.path} ({same.file.start_offset}..{same.file.end_offset})"
            )
        other = self.buffer.overlapping(f, tp)
        if other is not None:
            return FileStatus.REJECTED, (
                f"offsets {f.start_offset}..{f.end_offset} overlap buffered file "
                f"{other.file.path} ({other.file.start_offset}..{other.file.end_offset})"
            )
        self.buffer.add(replace(pending, arrived_at=now))
        self.manifests.holds(pending.manifest_id, place(tp, f.start_offset))
        return FileStatus.ACCEPTED, None

    def buffered(self, tp: TopicPartition) -> list[PendingFile]:
        """``tp``'s buffered files, in arrival order."""
        return self.buffer.files(tp)

    def span_of(self, f: DataFile) -> OffsetSpan | None:
        """What ``f``'s content was found to hold, if a claim of it was refused for that."""
        return self.spans.of(f)

    def refuse_content(self, path: str, holds: OffsetSpan) -> list[PendingFile]:
        """A commit found that the buffered file at ``path`` holds offsets ``holds``, past its
        claimed end: drop it, remember the span, and drop every buffered file of its partition
        starting inside the span (orphans). Returns the dropped files."""
        pending = self.find(path)
        if pending is None:
            return []
        f = pending.file
        reason = f"its content holds offsets {holds}, past the claimed {f.start_offset}..{f.end_offset}"
        self.drop_file(path, reason)
        dropped = [pending]
        if holds.first == f.start_offset:
            self.spans.learn(f.tp, path, holds)
            for other in self.buffered(f.tp):
                if holds.first < other.file.start_offset <= holds.last:
                    self.drop_file(other.file.path, f"an orphan inside offsets {holds} that {path} holds")
                    dropped.append(other)
        return dropped

    def settle_manifest(self, manifest_id: str, verdicts: Iterable[tuple[FileStatus, str | None]]) -> None:
        """After all files of a manifest were offered: with nothing left buffered it is either
        committed already (some file was in the table) or rejected (every file was)."""
        self.manifests.settle(manifest_id, verdicts, self.version)

    def manifest(self, manifest_id: str) -> tuple[ManifestState, int | None, str | None] | None:
        return self.manifests.state(manifest_id)

    # -- progress -------------------------------------------------------------------------

    def set_expected(self, partitions: Iterable[TopicPartition]) -> None:
        self.expected = set(partitions)

    def note_reported(self, tp: TopicPartition, now: float) -> None:
        """A sidecar said ``tp`` has nothing more to report up to Connect's committed offset."""
        self.reported_at[tp] = max(now, self.reported_at.get(tp, now))

    def buffered_through(self, tp: TopicPartition) -> int:
        """The next offset after the committed offset plus the contiguous buffered run: what a
        watermark must not pass to count, and what the lease answer tells the sidecar it need not
        send again (``LeaseGrant.held_next``)."""
        return self.buffer.through(tp, self.next_offset(tp))

    def held_after(self, tp: TopicPartition, most: int) -> tuple[OffsetSpan, ...]:
        """The runs of ``tp``'s files buffered past its gap (above :meth:`buffered_through`): the
        lease answer tells the sidecar it need not send them again while the gap waits."""
        return self.buffer.runs_after(tp, self.buffered_through(tp), most)

    def note_watermark(
        self,
        tp: TopicPartition,
        connect_offset: int,
        read_at: float,
        log_end: int | None = None,
        first_file: int | None = None,
    ) -> bool:
        """A sidecar read Connect's committed offset ``connect_offset`` at ``read_at`` and has sent
        every file below it: if the table holds or buffers all of that, ``tp`` counts as reported
        at ``read_at``. Returns whether it counted. ``first_file`` (where the sink's first file of
        ``tp`` begins, sent while the table has no offset of it) decides where its ledger begins.
        ``log_end`` read at or after the round was due
        (``read_at`` >= :meth:`due_at`) is what the round catches up with; the first one counts."""
        self.connect_at[tp] = connect_offset
        if first_file is not None and self.undecided(tp):
            self._decide_start(tp, first_file, connect_offset)
        if log_end is not None:
            self.cadence.note_log_end(tp, log_end, read_at)
        if self.buffered_through(tp) >= connect_offset:
            self.note_reported(tp, read_at)
            return True
        return False

    def caught_up(self) -> bool:
        """Whether the table holds or buffers, for every expected partition, every record below
        the log end its sidecar read once the round was due (a partition with no such read yet
        has not caught up)."""
        return self.cadence.caught_up(self.expected, self.buffered_through)

    # -- decisions ------------------------------------------------------------------------

    def contiguous(self, limits: Mapping[TopicPartition, int] | None = None) -> dict[TopicPartition, Iterator[Row]]:
        """Per partition, the run of buffered files starting at the committed offset (and, with
        ``limits``, ending at or below the limit: Connect's own committed offset), read lazily: a
        round takes at most ``max_files`` of them, and a backfill's buffer (100,000 files) walked
        and rebuilt whole took seconds of every round (the rows must not change while it is read)."""
        runs: dict[TopicPartition, Iterator[Row]] = {}
        for tp in self.buffer.partitions():
            if self.undecided(tp) and (self.floor(tp) or self.needs_time_floor(tp)):
                continue  # where a configured start falls between files is not known yet
            runs[tp] = self.buffer.run(tp, self.next_offset(tp), None if limits is None else limits.get(tp, 0))
        return runs

    def plan(
        self, now: float, *, force: bool = False, limits: Mapping[TopicPartition, int] | None = None
    ) -> CommitPlan | None:
        """The commit to make now, or None; see the module docstring for the guarantees.

        The coordinator's loop asks every pass; while no trigger can fire (the committable run is
        part of the buffer, so it holds no more files or bytes than the buffer's running totals)
        the answer comes without walking the buffer."""
        if not force and not self._trigger_possible(now):
            return None
        runs = self.contiguous(limits)
        policy = self.policy
        taken, over = take_round_robin(list(runs.values()), row_size, policy.max_files, policy.max_bytes)
        count = sum(len(rows) for rows in taken)
        if not count:
            return None
        size = sum(row[ROW_SIZE] for rows in taken for row in rows)
        # what the round's run holds, as far as the triggers ask: counted on past the round's
        # bounds only until max_files is reached (a bounded round's run passes max_bytes)
        run_files, run_size = count, size
        if over is not None:
            run_files += 1 + sum(
                1 for _ in islice(chain.from_iterable(runs.values()), max(0, policy.max_files - count - 1))
            )
            run_size = size + over[ROW_SIZE]
        reason = (
            "forced"
            if force
            else "max_files"
            if run_files >= policy.max_files
            else "max_bytes"
            if run_size >= policy.max_bytes
            else "interval"
            if now - self.cadence.last_commit >= policy.interval_seconds
            else None
        )
        if reason is None:
            return None
        planned_at, due, caught = now, None, None
        if reason == "interval":
            due, wait = self.cadence.due_at(), self.policy.catch_up_seconds
            if wait and self.expected and self.caught_up():
                caught = PartitionOffsets({tp: self.cadence.catch_up[tp] for tp in self.expected})
            elif wait and self.expected and now < due + wait:
                return None  # what Kafka held when the round was due is not all here yet
            planned_at = max(due, now - wait)  # the cadence counts from the due time, not the catch-up
            due = due if wait else None
        complete = bool(self.expected) and all(
            self.reported_at.get(tp, float("-inf")) >= self.round_started for tp in self.expected
        )
        if not complete and not force and reason == "interval":
            waited = now - self.round_started
            if self.expected and waited < self.policy.timeout_seconds:
                return None  # give lagging partitions until the timeout
            if self.expected and self.policy.on_timeout is OnTimeout.WAIT:
                return None
        bounded = [PendingFile.from_row(row) for rows in taken for row in rows]
        # files the round's bounds left in the buffer (at least the one that did not fit)
        left = 0 if over is None else max(1, self.buffer.count - count)
        vtts = self.round_started if complete and not left else None  # a bounded round is not all that reported
        plan = CommitPlan.of(bounded, vtts, reason, planned_at, due, caught)
        begins = self._begins(plan)
        return replace(plan, left=left, begins=begins) if left or begins else plan

    def _begins(self, plan: CommitPlan) -> tuple[tuple[TopicPartition, int, str], ...]:
        """The partitions whose ledger ``plan`` begins: where and why (``CommitPlan.begins``)."""
        out = []
        for tp in plan.offsets:
            if tp not in self.committed:
                start = self.starts.get(tp, PartitionStart(0, StartReason.FIRST_FILE))
                out.append((tp, start.offset, start.reason.value))
        return tuple(out)

    def _trigger_possible(self, now: float) -> bool:
        """Whether :meth:`plan` might find a trigger: O(1), from the buffer's running totals."""
        return (
            self.buffer.count >= self.policy.max_files
            or self.buffer.size >= self.policy.max_bytes
            or now - self.cadence.last_commit >= self.policy.interval_seconds
        )

    def next_round_at(self) -> float | None:
        """When :meth:`plan` may next fire on its own (the clock of ``cadence.last_commit``): None with
        nothing buffered, ``-inf`` once a size trigger fired. The coordinator's loop sleeps until
        then, and intake wakes it early only once this has passed."""
        if not self.buffer:
            return None
        if self.buffer.count >= self.policy.max_files or self.buffer.size >= self.policy.max_bytes:
            return float("-inf")
        return self.cadence.last_commit + self.policy.interval_seconds

    def find(self, path: str) -> PendingFile | None:
        """The buffered file at ``path``, if any."""
        found = self.buffer.where(path)
        return None if found is None else self.buffer.get(*found)

    def drop_file(self, path: str, reason: str) -> PendingFile | None:
        """Forget a buffered file that cannot be committed (missing, resized, bad schema).

        Its partition then waits at the gap until a correct file for that range is sent; the
        other partitions go on. The file's manifest is marked rejected with ``reason``.
        """
        found = self.buffer.where(path)
        row = None if found is None else self.buffer.remove(*found)
        if row is None:
            return None
        pending = PendingFile.from_row(row)
        self.manifests.left(
            place(pending.tp, pending.file.start_offset), pending.manifest_id, self.version, rejected=reason
        )
        return pending

    def committed_plan(self, plan: CommitPlan, version: int, now: float) -> None:
        """Apply a successful Delta commit of ``plan`` at table ``version``, finished at ``now``.

        The next interval counts from when the plan was made, so rounds keep their cadence
        however long a commit takes; partitions must report again after ``now``."""
        self.version = version
        for p in plan.files:
            self.buffer.remove(p.tp, p.file.start_offset)
            self.manifests.left(place(p.tp, p.file.start_offset), p.manifest_id, version)
        for tp, offset in plan.offsets.items():
            self.committed[tp] = max(self.committed.get(tp, 0), offset)
        self._drop_stale()
        self.cadence.committed(now if plan.planned_at is None else plan.planned_at)
        self.round_started = now

    def partitions(self) -> set[TopicPartition]:
        """Every partition the state knows of: committed, buffered, expected or reported."""
        return {*self.committed, *self.buffer.partitions(), *self.expected, *self.connect_at, *self.starts}

    def begin_epoch(
        self, superseded: Iterable[TopicPartition], begins: Mapping[TopicPartition, int], reason: str
    ) -> int:
        """A new ledger epoch (domain.epochs), committed with ``begins`` (each new partition key's
        first offset), superseded the keys ``superseded``: drop their buffered files (their
        manifests are rejected with ``reason``) and what sidecars reported of them; their committed
        offsets stay, the ledger of an epoch that is over. Returns the files dropped."""
        for tp, at in begins.items():
            self.starts[tp] = PartitionStart(at, StartReason.EPOCH)
        dropped = 0
        for tp in set(superseded):
            for pending in self.buffered(tp):
                if self.drop_file(pending.file.path, reason) is not None:
                    dropped += 1
            self.starts.pop(tp, None)
            self.time_floors.pop(tp, None)
            self.spans.forget(tp)
            self.connect_at.pop(tp, None)
            self.cadence.forget(tp)
            self.reported_at.pop(tp, None)
            self.expected.discard(tp)
        return dropped

    def recovered(self, committed: Mapping[TopicPartition, int], version: int) -> None:
        """Adopt offsets read back from the table (at start, or after a concurrent writer)."""
        for tp, offset in committed.items():
            self.committed[tp] = max(self.committed.get(tp, 0), offset)
        self.version = max(self.version, version)
        self._drop_stale()

    def _drop_stale(self) -> None:
        """Forget buffered files (and content spans) the committed offsets have passed."""
        self.spans.prune(self.next_offset)
        for tp in self.buffer.partitions():
            for start in self.buffer.starts_below(tp, self.next_offset(tp)):  # a start below base: passed
                row = self.buffer.remove(tp, start)
                if row is not None:  # its offsets are in the table (another writer's commit)
                    self.manifests.left(place(tp, start), row[ROW_MANIFEST], self.version)
