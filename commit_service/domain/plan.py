"""What a round is made of: a buffered file (:class:`PendingFile`, and its flat :data:`Row` form),
the table's commit policy (:class:`CommitPolicy`) and one round's plan (:class:`CommitPlan`).

Pure data, no I/O. Built by :class:`~commit_service.domain.state.TableState` (which buffers
``PendingFile``s as rows and plans rounds) and read by the committers, which make a plan one commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Final, TypeVar

from lakegate_core.protocol import CsvLayout, DataFile, FileFormat
from lakegate_core.status import CommitRecord
from lakegate_core.types import PartitionOffsets, TopicPartition

# The buffer keeps its files as plain tuples of atoms (str, int, float, None), which Python's
# garbage collector stops tracking after their first collection; a dataclass, a TopicPartition or
# an enum member inside would keep each one tracked. A full collection walks every tracked object
# while the request threads wait for it, so a buffer of 100,000 files must add none.
Place = tuple[str, int, int]  # where a buffered file sits: (topic, partition, start offset)
# A buffered file: PendingFile's fields, flat (PendingFile.row / PendingFile.from_row)
Row = tuple[str, str, int, int, int, int, str, "int | None", "int | None", str, str, float, "str | None"]
T = TypeVar("T")
ROW_PATH: Final = 0
ROW_END: Final = 4  # inclusive
ROW_SIZE: Final = 5
ROW_MANIFEST: Final = 9
ROW_ARRIVED: Final = 11


def place(tp: TopicPartition, start: int) -> Place:
    return (tp.topic, tp.partition, start)


class OnTimeout(str, Enum):
    """What a round does when some expected partition has not reported by the timeout."""

    PARTIAL = "partial"  # commit what is contiguous, without a VTTS
    WAIT = "wait"  # keep waiting (a forced commit still goes through)


@dataclass(frozen=True)
class CommitPolicy:
    """When a table commits: the ``tables[].commit`` config section (read by the config loader)."""

    interval_seconds: float = 10.0
    max_files: int = 1000
    max_bytes: int = 1 << 30
    timeout_seconds: float = 30.0
    on_timeout: OnTimeout = OnTimeout.PARTIAL
    # once a round is due, how long it may wait for every expected partition to catch up with the
    # Kafka log end its sidecar read after the due time (0: it commits what is buffered at once)
    catch_up_seconds: float = 0.0
    max_attempts: int = 4  # failures blamed on a plan before it is halved / its one file quarantined
    quarantine_after_seconds: float = 600.0  # an unreadable (not missing) file is quarantined after this
    max_pending_files: int = 100_000  # buffered files; past it manifests get 429 + Retry-After
    max_pending_bytes: int = 1 << 40

    def __post_init__(self) -> None:
        if self.interval_seconds <= 0 or self.timeout_seconds < 0:
            raise ValueError("commit.interval_seconds must be > 0 and commit.timeout_seconds >= 0")
        if not 0 <= self.catch_up_seconds < self.interval_seconds:
            raise ValueError("commit.catch_up_seconds must be >= 0 and below commit.interval_seconds")
        if self.max_files < 1 or self.max_bytes < 1:
            raise ValueError("commit.max_files and commit.max_bytes must be at least 1")
        if self.max_attempts < 1 or self.quarantine_after_seconds < 0:
            raise ValueError("commit.max_attempts must be >= 1 and commit.quarantine_after_seconds >= 0")
        if self.max_pending_files < 1 or self.max_pending_bytes < 1:
            raise ValueError("commit.max_pending_files and commit.max_pending_bytes must be at least 1")


@dataclass(frozen=True)
class PendingFile:
    """A buffered file and who sent it."""

    file: DataFile
    manifest_id: str
    sidecar_id: str
    arrived_at: float = 0.0  # when the table first buffered it (set by TableState.offer)

    @property
    def tp(self) -> TopicPartition:
        return self.file.tp

    def row(self) -> Row:
        """This file as the buffer keeps it (see ``Row``)."""
        f = self.file
        return (
            f.path,
            f.topic,
            f.partition,
            f.start_offset,
            f.end_offset,
            f.size_bytes,
            f.format.value,
            f.record_count,
            f.lease_epoch,
            self.manifest_id,
            self.sidecar_id,
            self.arrived_at,
            None if f.csv is None else f"{','.join(f.csv.fields)}|{f.csv.value_encoding}",
        )

    @classmethod
    def from_row(cls, row: Row) -> PendingFile:
        path, topic, partition, start, end, size, fmt, records, epoch, manifest_id, sidecar_id, arrived_at, csv = row
        layout = None
        if csv is not None:
            fields, _, encoding = csv.partition("|")
            layout = CsvLayout(tuple(fields.split(",")), encoding)
        f = DataFile(path, topic, partition, start, end, size, FileFormat(fmt), records, epoch, layout)
        return cls(f, manifest_id, sidecar_id, arrived_at)


def bound_run(run: Iterable[PendingFile], max_files: int, max_bytes: int) -> list[PendingFile]:
    """At most ``max_files`` files and ``max_bytes`` bytes of ``run`` (per partition a contiguous run
    from the committed offset, as :meth:`TableState.contiguous` gives), taken as
    :func:`take_round_robin` takes them. Kept in partition and offset order."""
    runs: dict[TopicPartition, list[PendingFile]] = {}
    for p in run:
        runs.setdefault(p.tp, []).append(p)
    taken, _ = take_round_robin(
        [iter(files) for files in runs.values()], lambda p: p.file.size_bytes, max_files, max_bytes
    )
    return [p for files in taken for p in files]


def take_round_robin(
    runs: list[Iterator[T]], size_of: Callable[[T], int], max_files: int, max_bytes: int
) -> tuple[list[list[T]], T | None]:
    """A round's files from each partition's run (an iterator, read no further than the round
    needs): at most ``max_files`` files and ``max_bytes`` bytes, taken one file of each partition
    at a time, oldest first, so a partition backfilling an archive does not starve the live ones,
    and what is left stays contiguous for the next round. One file is always taken (a file larger
    than ``max_bytes`` commits alone). Returns each run's prefix taken, and the first file that did
    not fit (read from its run, so no longer in it), or None when every run was taken whole."""
    taken: list[list[T]] = [[] for _ in runs]
    live = list(range(len(runs)))
    count = size = 0
    while live:
        still = []
        for i in live:
            item = next(runs[i], _END)
            if item is _END:
                continue
            n = size_of(item)  # type: ignore[arg-type]
            if count >= max_files or (count and size + n > max_bytes):
                return taken, item  # type: ignore[return-value]
            taken[i].append(item)  # type: ignore[arg-type]
            count += 1
            size += n
            still.append(i)
        live = still
    return taken, None


_END = object()  # an exhausted run's marker for take_round_robin


@dataclass(frozen=True)
class CommitPlan:
    """What one commit round adds: contiguous runs per partition and the offsets they reach."""

    files: tuple[PendingFile, ...]
    offsets: PartitionOffsets  # next offset per partition after the commit
    vtts: float | None  # the round's cut-off time when every expected partition reported
    reason: str  # which trigger fired: interval, max_files, max_bytes, forced, released
    released: tuple[str, ...] = ()  # an admin release: the dead letters whose ranges are skipped
    release_from: PartitionOffsets = field(default_factory=PartitionOffsets)  # their partitions' start
    # the next round is due an interval after this: when TableState.plan made it, or for an interval
    # round the time it was due if it waited at most catch_up_seconds (the cadence stays)
    planned_at: float | None = None
    due: float | None = None  # an interval round of a table that catches up: when it was due
    # ... and if it caught up, per expected partition the log end read once it was due (all of
    # the records below each is in this plan); None when the wait ran out
    caught_up: PartitionOffsets | None = None
    left: int = 0  # files ready to commit that this round's bounds (max_files, max_bytes) left for the next
    # partitions whose ledger this round begins: where (their first offset) and why
    begins: tuple[tuple[TopicPartition, int, str], ...] = ()

    @classmethod
    def of(
        cls,
        files: Iterable[PendingFile],
        vtts: float | None,
        reason: str,
        planned_at: float | None = None,
        due: float | None = None,
        caught_up: PartitionOffsets | None = None,
    ) -> CommitPlan:
        """A plan adding ``files`` (contiguous per partition); its offsets follow from them."""
        files = tuple(files)
        offsets: dict[TopicPartition, int] = {}
        for p in files:
            offsets[p.tp] = max(offsets.get(p.tp, 0), p.file.next_offset)
        return cls(files, PartitionOffsets(offsets), vtts, reason, planned_at=planned_at, due=due, caught_up=caught_up)

    def head(self, count: int) -> CommitPlan:
        """The plan's first ``count`` files (still contiguous per partition: files are in partition
        and offset order); a narrowed retry after repeated failures (:mod:`commit_service.domain.failures`)."""
        if count >= len(self.files):
            return self
        narrowed = CommitPlan.of(self.files[:count], None, self.reason, self.planned_at, self.due)
        begins = tuple(b for b in self.begins if b[0] in narrowed.offsets)
        return replace(narrowed, begins=begins, left=self.left + len(self.files) - count)

    def starts(self) -> dict[TopicPartition, int]:
        """Per partition, the offset the plan starts at (what the table must hold before it)."""
        out = dict(self.release_from)
        for p in self.files:
            out[p.tp] = min(out.get(p.tp, p.file.start_offset), p.file.start_offset)
        return out

    def record(self, table: str, version: int, commit_id: str, committed_at_ms: int) -> CommitRecord:
        """What a commit of this plan into ``table`` at ``version`` records (a committer fills in
        its duration and Spark jobs once it has landed)."""
        return CommitRecord(
            table=table,
            version=version,
            commit_id=commit_id,
            files=len(self.files),
            records=self.records,
            offsets=self.offsets,
            vtts=int(self.vtts * 1000) if self.vtts is not None else None,
            sidecars=tuple(sorted({p.sidecar_id for p in self.files})),
            released=self.released or None,
            committed_at_ms=committed_at_ms,
            starts=PartitionOffsets(self.starts()),
            begins=PartitionOffsets({tp: at for tp, at, _ in self.begins}) if self.begins else None,
            begin_reasons={str(tp): why for tp, _, why in self.begins} if self.begins else None,
            left=self.left or None,
        )

    @property
    def bytes(self) -> int:
        return sum(p.file.size_bytes for p in self.files)

    @property
    def records(self) -> int:
        return sum(p.file.record_count or (p.file.end_offset - p.file.start_offset + 1) for p in self.files)
