"""What a round knows of each partition, and what a catch-up keeps between rounds: state, no I/O.

:class:`PartitionRound` is one owned partition as one round saw it (its lease, Connect's committed
offset, the table's, where its listing window was cut), gathered in the round's
:class:`RoundReport`. :class:`CatchUp` is a partition's part in a table round that catches up
(``LeaseGrant.due_ms``), kept by :class:`~sidecar.loop.SidecarLoop` until it is settled. The
functions decide from them, with the table's offsets, whether a partition may have a file the
service does not hold (:func:`may_have_new_files`), where its listing starts (:func:`listed_from`)
and where its first file begins (:func:`first_file`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakegate_core.protocol import FileFormat, OffsetSpan
from lakegate_core.types import PartitionOffsets, TopicPartition
from sidecar.storage import StoredFile
from sidecar.tracker import CompleteFile


@dataclass
class PartitionRound:
    """One owned partition as one round saw it."""

    connector: str
    format: FileFormat  # what the connector writes
    epoch: int | None = None  # the lease granted this round (None: fencing off)
    connect_committed: int | None = None  # Connect's committed offset, read at ``read_at_ms``
    read_at_ms: int = 0
    table_next: int = 0  # the table's committed offset
    rejected: bool = False  # the service rejected one of its files this round
    held_next: int | None = None  # the service holds every file ending below this (None: it did not say)
    held_after: tuple[OffsetSpan, ...] = ()  # runs of files the service buffers past a gap

    def holds(self, start: int, end: int) -> bool:
        """Whether the service said it holds the file ``start..end`` (below ``held_next``, or inside
        a run it buffers past a gap): sent once, not again until it is dropped or the service restarts."""
        if self.held_next is not None and end < self.held_next:
            return True
        return any(run.first <= start and end <= run.last for run in self.held_after)

    log_end: int | None = None  # the partition's log end, if read this round (its table's round came due)
    # where this round's listing window of the partition was cut (below Connect's offset), if it was
    listed_upto: int | None = None

    @property
    def complete_below(self) -> int | None:
        """The offset below which this round reports every complete file, and claims so in its
        watermark: Connect's committed offset, or where the listing's window stopped (the files
        past it are listed in later rounds)."""
        if self.connect_committed is None or self.listed_upto is None:
            return self.connect_committed
        return min(self.connect_committed, self.listed_upto)


def may_have_new_files(tp: TopicPartition, part: PartitionRound, table_next: PartitionOffsets) -> bool:
    """Whether ``tp`` may have a complete file the service does not hold: not when Connect's
    committed offset is at or below what the service holds (``held_next``, else the table's
    offset), so a caught-up partition costs no listing. A partition the table has no offset of
    is listed (its first file decides where its ledger begins)."""
    if tp not in table_next or part.connect_committed is None:
        return True
    return part.connect_committed > max(table_next[tp], part.held_next or 0)


def listed_from(tp: TopicPartition, part: PartitionRound, table_next: PartitionOffsets, first_seen: bool) -> int:
    """Where a partition's listing starts: past what the service holds (it buffers every file
    ending below ``held_next``, sent once), else the table's offset. A partition the table has no
    offset of is listed from its first name until a listing found its first file (that file
    decides where its ledger begins)."""
    if tp not in table_next:
        return (part.held_next or 0) if first_seen else 0
    return max(table_next[tp], part.held_next or 0)


def first_file(listed: list[StoredFile], part: PartitionRound) -> int:
    """Where the sink's first file of a partition the table has no offset of begins, as this
    round's listing (``listed``, sorted, every file of it) found it; Connect's committed offset if
    it holds none below that. The service decides from it where the partition's ledger begins."""
    assert part.connect_committed is not None
    return min(listed[0].start_offset, part.connect_committed) if listed else part.connect_committed


@dataclass
class CatchUp:
    """One partition's part in a table round that catches up (``LeaseGrant.due_ms``)."""

    connector: str  # whose task holds the partition
    due_ms: int  # when the round is due, in the service's clock
    log_end: int | None = None  # the partition's Kafka log end, read in a round at or after due_ms
    carried: bool = False  # a lease claim carried ``log_end`` to the service
    reached: bool = False  # Connect's committed offset reached ``log_end``, the files below it sent

    @property
    def settled(self) -> bool:
        """Nothing more to do for this due time."""
        return self.carried and self.reached


@dataclass
class RoundReport:
    """What one round saw and did (logged, and returned for tests)."""

    partitions: dict[TopicPartition, PartitionRound] = field(default_factory=dict)
    sent: list[CompleteFile] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def owned(self) -> list[TopicPartition]:
        return sorted(self.partitions)
