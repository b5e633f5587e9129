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

import bisect
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import chain, islice

from commit_service.domain.plan import (
    ROW_ARRIVED,
    ROW_END,
    ROW_MANIFEST,
    ROW_PATH,
    ROW_SIZE,
    CommitPlan,
    CommitPolicy,
    OnTimeout,
    PendingFile,
    Place,
    Row,
    place,
    take_round_robin,
)
from commit_service.domain.start import PartitionStart, StartReason, TableStart
from lakegate_core.protocol import DataFile, FileStatus, OffsetSpan
from lakegate_core.status import ManifestState
from lakegate_core.types import PartitionOffsets, TopicPartition

MAX_TRACKED_MANIFESTS = 10_000


@dataclass
class _ManifestTrack:
    pending: set[Place] = field(default_factory=set)
    state: ManifestState = ManifestState.ACCEPTED
    version: int | None = None
    reason: str | None = None


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
        # per partition, start offset -> the buffered file (see Row); changed by _add/_remove only
        self._rows: dict[TopicPartition, dict[int, Row]] = {}
        self._starts: dict[TopicPartition, list[int]] = {}  # each partition's buffered starts, sorted
        self._by_path: dict[str, tuple[Place, ...]] = {}  # where each path is buffered
        self._pending_bytes = 0  # the sum of the buffered files' sizes, kept as files come and go
        self._pending_count = 0  # how many files are buffered, kept likewise (read per manifest)
        self.expected: set[TopicPartition] = set()
        self.reported_at: dict[TopicPartition, float] = {}
        self.connect_at: dict[TopicPartition, int] = {}  # Connect's committed offset, as a sidecar last read it
        # per expected partition, the Kafka log end its sidecar first read at or after the round
        # was due: what the round waits, up to catch_up_seconds, for the table to hold (cleared by
        # each commit, whose next round has a new due time)
        self.catch_up: dict[TopicPartition, int] = {}
        self.version: int = -1
        self.round_started = now
        self.last_commit = now
        self._manifests: OrderedDict[str, _ManifestTrack] = OrderedDict()
        # a buffered file's place -> the other manifests that named it (a sender's retry under a
        # new manifest id): their status follows the file as its own manifest's does
        self._followers: dict[Place, tuple[str, ...]] = {}
        # per partition, file path -> the offsets its content holds, learnt from a refused claim;
        # forgotten once the committed offset passes the span
        self.spans: dict[TopicPartition, dict[str, OffsetSpan]] = {}

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
        for begin in [s for s in self._starts.get(tp, []) if self._rows[tp][s][ROW_END] < offset]:
            self.drop_file(
                self._rows[tp][begin][ROW_PATH], f"before the table's start: {tp} begins at or after {offset}"
            )

    def _decide_start(self, tp: TopicPartition, first_file: int, connect_offset: int) -> None:
        """A watermark carried where the sink's first file of ``tp`` begins: decide where its
        ledger begins (``TableStart.decide``) and drop what is buffered before it."""
        if self.needs_time_floor(tp):
            return  # Kafka has not yet said where the start's timestamp falls
        floor, around = self.floor(tp), None
        if floor:
            starts = self._starts.get(tp, [])
            i = bisect.bisect_right(starts, floor)
            if i:
                row = self._rows[tp][starts[i - 1]]
                around = (starts[i - 1], row[ROW_END]) if row[ROW_END] >= floor else None
        decided = self.start.decide(tp, floor, first_file, connect_offset, around)
        if decided is None:
            return
        self.starts[tp] = decided
        for begin in [s for s in self._starts.get(tp, []) if s < decided.offset]:
            row = self._rows[tp][begin]
            self.drop_file(row[ROW_PATH], f"before the table's start: {tp} begins at {decided.describe()}")

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
        refused = self._against_spans(f)
        if refused is not None:
            return FileStatus.REJECTED, refused
        same = self._get(tp, f.start_offset)
        if same is not None:
            if same.file.path == f.path and same.file.end_offset == f.end_offset:
                here = place(tp, f.start_offset)
                self._track(pending.manifest_id).pending.add(here)
                if pending.manifest_id != same.manifest_id:
                    followers = self._followers.get(here, ())
                    if pending.manifest_id not in followers:
                        self._followers[here] = (*followers, pending.manifest_id)
                return FileStatus.DUPLICATE, None
            return FileStatus.REJECTED, (
                f"offsets {f.start_offset}..{f.end_offset} of {f.path} overlap buffered file "
                f"{same.file.path} ({same.file.start_offset}..{same.file.end_offset})"
            )
        other = self._overlapping(f, tp)
        if other is not None:
            return FileStatus.REJECTED, (
                f"offsets {f.start_offset}..{f.end_offset} overlap buffered file "
                f"{other.file.path} ({other.file.start_offset}..{other.file.end_offset})"
            )
        self._add(replace(pending, arrived_at=now))
        self._track(pending.manifest_id).pending.add(place(tp, f.start_offset))
        return FileStatus.ACCEPTED, None

    def _overlapping(self, f: DataFile, tp: TopicPartition) -> PendingFile | None:
        """A buffered file of ``f``'s partition overlapping ``f``, found in O(log n): buffered files
        never overlap each other, so only the one with the greatest start at or below ``f``'s end
        can (any earlier one ends before that one starts)."""
        starts = self._starts.get(tp, [])
        i = bisect.bisect_right(starts, f.end_offset)
        if i == 0:
            return None
        row = self._rows[tp][starts[i - 1]]
        return PendingFile.from_row(row) if row[ROW_END] >= f.start_offset else None

    def _get(self, tp: TopicPartition, start: int) -> PendingFile | None:
        row = self._rows.get(tp, {}).get(start)
        return None if row is None else PendingFile.from_row(row)

    def buffered(self, tp: TopicPartition) -> list[PendingFile]:
        """``tp``'s buffered files, in arrival order."""
        return [PendingFile.from_row(row) for row in self._rows.get(tp, {}).values()]

    def _add(self, pending: PendingFile) -> None:
        tp, start = pending.tp, pending.file.start_offset
        self._rows.setdefault(tp, {})[start] = pending.row()
        bisect.insort(self._starts.setdefault(tp, []), start)
        self._by_path[pending.file.path] = (*self._by_path.get(pending.file.path, ()), place(tp, start))
        self._pending_bytes += pending.file.size_bytes
        self._pending_count += 1

    def _remove(self, tp: TopicPartition, start: int) -> Row | None:
        files = self._rows.get(tp)
        row = None if files is None else files.pop(start, None)
        if files is None or row is None:
            return None
        starts = self._starts[tp]
        del starts[bisect.bisect_left(starts, start)]
        path, here = row[ROW_PATH], place(tp, start)
        places = tuple(p for p in self._by_path[path] if p != here)
        if places:
            self._by_path[path] = places
        else:
            del self._by_path[path]
        self._pending_bytes -= row[ROW_SIZE]
        self._pending_count -= 1
        if not files:
            del self._rows[tp], self._starts[tp]
        return row

    def _against_spans(self, f: DataFile) -> str | None:
        """Why ``f`` contradicts what a file's content was found to hold, or None."""
        for path, span in self.spans.get(f.tp, {}).items():
            if path == f.path and f.end_offset < span.last:
                return f"its content holds offsets {span}: claim {f.start_offset}..{span.last}, not ..{f.end_offset}"
            if path != f.path and span.first < f.start_offset <= span.last:
                return (
                    f"an orphan of a re-written range: it starts inside offsets {span}, which {path} holds "
                    "(a sink task wrote this range twice)"
                )
        return None

    def span_of(self, f: DataFile) -> OffsetSpan | None:
        """What ``f``'s content was found to hold, if a claim of it was refused for that."""
        return self.spans.get(f.tp, {}).get(f.path)

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
            self.spans.setdefault(f.tp, {})[path] = holds
            for other in self.buffered(f.tp):
                if holds.first < other.file.start_offset <= holds.last:
                    self.drop_file(other.file.path, f"an orphan inside offsets {holds} that {path} holds")
                    dropped.append(other)
        return dropped

    def settle_manifest(self, manifest_id: str, verdicts: Iterable[tuple[FileStatus, str | None]]) -> None:
        """After all files of a manifest were offered: with nothing left buffered it is either
        committed already (some file was in the table) or rejected (every file was)."""
        track = self._track(manifest_id)
        if track.pending:
            return
        verdicts = list(verdicts)
        if verdicts and all(status is FileStatus.REJECTED for status, _ in verdicts):
            track.state, track.reason = ManifestState.REJECTED, verdicts[0][1]
        elif track.state is ManifestState.ACCEPTED:
            track.state, track.version = ManifestState.COMMITTED, self.version

    def _file_left(self, here: Place, owner: str, *, rejected: str | None = None) -> None:
        """The buffered file at ``here``, brought by manifest ``owner``, left the buffer: its
        offsets are in the table (at ``self.version``), or it was dropped for ``rejected``. Every
        manifest that named it follows: committed once none of its files is still buffered."""
        for manifest_id in (owner, *self._followers.pop(here, ())):
            track = self._manifests.get(manifest_id)
            if track is None:
                continue
            track.pending.discard(here)
            if rejected is not None:
                track.state, track.reason = ManifestState.REJECTED, rejected
            elif not track.pending:
                track.state, track.version = ManifestState.COMMITTED, self.version

    def _track(self, manifest_id: str) -> _ManifestTrack:
        track = self._manifests.get(manifest_id)
        if track is None:
            track = self._manifests[manifest_id] = _ManifestTrack()
            while len(self._manifests) > MAX_TRACKED_MANIFESTS:
                self._manifests.popitem(last=False)
        return track

    def manifest(self, manifest_id: str) -> tuple[ManifestState, int | None, str | None] | None:
        track = self._manifests.get(manifest_id)
        return None if track is None else (track.state, track.version, track.reason)

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
        cursor, files = self.next_offset(tp), self._rows.get(tp, {})
        while cursor in files:
            cursor = files[cursor][ROW_END] + 1
        return cursor

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
        if log_end is not None and read_at >= self.due_at():
            self.catch_up.setdefault(tp, log_end)
        if self.buffered_through(tp) >= connect_offset:
            self.note_reported(tp, read_at)
            return True
        return False

    def due_at(self) -> float:
        """When the next round is due on the interval: ``interval_seconds`` after the previous
        round's base (``committed_plan``)."""
        return self.last_commit + self.policy.interval_seconds

    def caught_up(self) -> bool:
        """Whether the table holds or buffers, for every expected partition, every record below
        the log end its sidecar read once the round was due (a partition with no such read yet
        has not caught up)."""
        return all(tp in self.catch_up and self.buffered_through(tp) >= self.catch_up[tp] for tp in self.expected)

    # -- decisions ------------------------------------------------------------------------

    def contiguous(self, limits: Mapping[TopicPartition, int] | None = None) -> dict[TopicPartition, Iterator[Row]]:
        """Per partition, the run of buffered files starting at the committed offset (and, with
        ``limits``, ending at or below the limit: Connect's own committed offset), read lazily: a
        round takes at most ``max_files`` of them, and a backfill's buffer (100,000 files) walked
        and rebuilt whole took seconds of every round (the rows must not change while it is read)."""
        runs: dict[TopicPartition, Iterator[Row]] = {}
        for tp in sorted(self._rows):
            if self.undecided(tp) and (self.floor(tp) or self.needs_time_floor(tp)):
                continue  # where a configured start falls between files is not known yet
            runs[tp] = _walk(self._rows[tp], self.next_offset(tp), None if limits is None else limits.get(tp, 0))
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
        taken, over = take_round_robin(list(runs.values()), _row_size, policy.max_files, policy.max_bytes)
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
            if now - self.last_commit >= policy.interval_seconds
            else None
        )
        if reason is None:
            return None
        planned_at, due, caught = now, None, None
        if reason == "interval":
            due, wait = self.due_at(), self.policy.catch_up_seconds
            if wait and self.expected and self.caught_up():
                caught = PartitionOffsets({tp: self.catch_up[tp] for tp in self.expected})
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
        left = 0 if over is None else max(1, self._pending_count - count)
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
            self._pending_count >= self.policy.max_files
            or self._pending_bytes >= self.policy.max_bytes
            or now - self.last_commit >= self.policy.interval_seconds
        )

    def next_round_at(self) -> float | None:
        """When :meth:`plan` may next fire on its own (the clock of ``last_commit``): None with
        nothing buffered, ``-inf`` once a size trigger fired. The coordinator's loop sleeps until
        then, and intake wakes it early only once this has passed."""
        if not self._rows:
            return None
        if self._pending_count >= self.policy.max_files or self._pending_bytes >= self.policy.max_bytes:
            return float("-inf")
        return self.last_commit + self.policy.interval_seconds

    def find(self, path: str) -> PendingFile | None:
        """The buffered file at ``path``, if any."""
        places = self._by_path.get(path)
        if not places:
            return None
        topic, partition, start = places[0]
        return self._get(TopicPartition(topic, partition), start)

    def drop_file(self, path: str, reason: str) -> PendingFile | None:
        """Forget a buffered file that cannot be committed (missing, resized, bad schema).

        Its partition then waits at the gap until a correct file for that range is sent; the
        other partitions go on. The file's manifest is marked rejected with ``reason``.
        """
        places = self._by_path.get(path)
        if not places:
            return None
        topic, partition, start = places[0]
        row = self._remove(TopicPartition(topic, partition), start)
        if row is None:
            return None
        pending = PendingFile.from_row(row)
        self._file_left(place(pending.tp, start), pending.manifest_id, rejected=reason)
        return pending

    def committed_plan(self, plan: CommitPlan, version: int, now: float) -> None:
        """Apply a successful Delta commit of ``plan`` at table ``version``, finished at ``now``.

        The next interval counts from when the plan was made, so rounds keep their cadence
        however long a commit takes; partitions must report again after ``now``."""
        self.version = version
        for p in plan.files:
            self._remove(p.tp, p.file.start_offset)
            self._file_left(place(p.tp, p.file.start_offset), p.manifest_id)
        for tp, offset in plan.offsets.items():
            self.committed[tp] = max(self.committed.get(tp, 0), offset)
        self._drop_stale()
        self.last_commit = now if plan.planned_at is None else plan.planned_at
        self.round_started = now
        self.catch_up.clear()

    def partitions(self) -> set[TopicPartition]:
        """Every partition the state knows of: committed, buffered, expected or reported."""
        return {*self.committed, *self._rows, *self.expected, *self.connect_at, *self.starts}

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
            self.spans.pop(tp, None)
            self.connect_at.pop(tp, None)
            self.catch_up.pop(tp, None)
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
        for tp, spans in list(self.spans.items()):
            base = self.next_offset(tp)
            self.spans[tp] = {path: span for path, span in spans.items() if span.last >= base}
            if not self.spans[tp]:
                del self.spans[tp]
        for tp in list(self._rows):
            base = self.next_offset(tp)
            for start in [s for s in self._starts[tp] if s < base]:  # a start below base: passed
                row = self._remove(tp, start)
                if row is not None:  # its offsets are in the table (another writer's commit)
                    self._file_left(place(tp, start), row[ROW_MANIFEST])

    # -- reporting ------------------------------------------------------------------------

    def pending_files(self) -> int:
        return self._pending_count

    def pending_bytes(self) -> int:
        return self._pending_bytes

    def oldest_arrival(self) -> float | None:
        """When the longest-waiting buffered file arrived; None with nothing buffered. A partition's
        files are kept in arrival order (a dict), so its first is its oldest: O(partitions)."""
        return min((next(iter(fs.values()))[ROW_ARRIVED] for fs in self._rows.values() if fs), default=None)

    def pending_offsets(self) -> PartitionOffsets:
        """Per partition with buffered files, the end of the furthest one + 1: the file with the
        greatest start (buffered files never overlap), O(partitions)."""
        return PartitionOffsets(
            {tp: self._rows[tp][starts[-1]][ROW_END] + 1 for tp, starts in self._starts.items() if starts}
        )


def _walk(files: Mapping[int, Row], cursor: int, limit: int | None) -> Iterator[Row]:
    """A partition's buffered rows from ``cursor`` on while each starts where the last ended
    (and, with ``limit``, ends below it)."""
    while cursor in files:
        row = files[cursor]
        if limit is not None and row[ROW_END] + 1 > limit:
            return
        yield row
        cursor = row[ROW_END] + 1


def _row_size(row: Row) -> int:
    return row[ROW_SIZE]
