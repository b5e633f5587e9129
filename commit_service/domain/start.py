"""Where a partition's ledger begins: the ``tables[].start`` rule and the decision it makes. Pure.

A table adopts topics that are older than it: retention removed their head, a connector started
at ``latest``, a lifecycle rule removed the oldest files. Until a partition has a committed offset
its first file is not known to be at 0, so the table cannot wait for offset 0. The rule:

- ``earliest`` (the default): the ledger begins where the sink's first file of the partition
  begins, or at Connect's committed offset when the sink holds no file below it;
- ``offsets``: per partition, an offset; the ledger begins at the first file that starts at or
  after it (a file straddling it is not split: its records count as before the table);
- ``timestamp``: for every partition ``offsets`` does not name, the offset of its first record
  written at or after that time (Kafka's ``ListOffsets`` by timestamp; the log end when every
  record is older), then as an offset. The table coordinator asks Kafka once per partition
  (:meth:`~commit_service.domain.state.TableState.set_time_floor`); until then the partition waits.

The decision is made once per partition, by :class:`~commit_service.domain.state.TableState`, from
a sidecar's watermark that carries the start of the sink's first file of the partition as its
listing found it (``Watermark.first_file``): a fact of the bucket, not of what the service happens
to buffer (a restart empties the buffer; a quarantined first file must leave a gap, not move the
start). The partition's first commit records it (``CommitRecord.begins``); after that the
committed offset rules, and a restart reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from lakegate_core.types import TopicPartition


class StartReason(str, Enum):
    """Why a partition's ledger begins where it does (the status page and the commit record)."""

    FIRST_FILE = "first_file"  # the sink's first file of the partition begins there
    CONNECT = "connect_offset"  # the sink wrote no file below Connect's committed offset
    CONFIGURED = "configured"  # tables[].start.offsets, at the first file at or after it
    TIMESTAMP = "timestamp"  # tables[].start.timestamp: the first file at or after its first record since
    EPOCH = "epoch"  # a new ledger epoch of a recreated topic, at Kafka's log start (domain.epochs)


@dataclass(frozen=True)
class PartitionStart:
    """Where one partition's ledger begins and why (``requested``: the configured offset, if any)."""

    offset: int
    reason: StartReason
    requested: int | None = None

    def describe(self) -> str:
        if self.reason is StartReason.CONNECT:
            return f"offset {self.offset}: Connect's committed offset, the sink held no file below it"
        if self.reason is StartReason.EPOCH:
            return f"offset {self.offset}: a new ledger epoch of a recreated topic, at Kafka's log start"
        if self.reason is StartReason.TIMESTAMP:
            return (
                f"offset {self.offset}: the first file at or after offset {self.requested}, the first record "
                "at or after the configured start timestamp"
            )
        if self.reason is StartReason.CONFIGURED:
            return f"offset {self.offset}: the first file at or after the configured start {self.requested}"
        return f"offset {self.offset}: the sink's first file of the partition"


@dataclass(frozen=True)
class TableStart:
    """``tables[].start``: where each partition's ledger begins (docs/configuration.md).

    ``offsets`` maps ``<topic>-<partition>`` to an offset; partitions it does not name start at
    ``earliest``. Read by the config loader; its values arrive as strings and are checked here."""

    offsets: Mapping[str, int] = field(default_factory=dict)
    timestamp: str | None = None  # ISO 8601 with a zone, e.g. 2026-11-01T00:00:00Z
    at_ms: int | None = field(default=None, init=False, compare=False)  # timestamp in epoch ms, set from it

    def __post_init__(self) -> None:
        at_ms = None
        if self.timestamp is not None:
            try:
                when = datetime.fromisoformat(str(self.timestamp))
            except ValueError:
                raise ValueError(
                    f"start.timestamp: {self.timestamp!r} is not an ISO 8601 time (e.g. 2026-11-01T00:00:00Z)"
                ) from None
            if when.tzinfo is None:
                raise ValueError(f"start.timestamp: {self.timestamp!r} needs a zone (Z or +hh:mm)")
            at_ms = int(when.timestamp() * 1000)
            if at_ms < 0:
                raise ValueError(f"start.timestamp: {self.timestamp!r} is before 1970")
        object.__setattr__(self, "at_ms", at_ms)
        parsed: dict[TopicPartition, int] = {}
        for name, raw in self.offsets.items():
            topic, sep, partition = str(name).rpartition("-")
            if not sep or not topic or not partition.isdigit():
                raise ValueError(f"start.offsets: {name!r} is not <topic>-<partition>")
            try:
                offset = int(raw)
            except (TypeError, ValueError):
                raise ValueError(f"start.offsets.{name}: {raw!r} is not an offset") from None
            if offset < 0:
                raise ValueError(f"start.offsets.{name}: an offset is >= 0, got {offset}")
            parsed[TopicPartition(topic, int(partition))] = offset
        object.__setattr__(self, "_floors", parsed)

    @classmethod
    def from_text(cls, text: str) -> TableStart:
        """``start: earliest`` (the default) or ``start: <ISO 8601 time>`` (``timestamp``)."""
        if text == "earliest":
            return cls()
        if text[:1].isdigit():
            return cls(timestamp=text)
        raise ValueError(
            "must be earliest, an ISO 8601 time, {offsets: {<topic>-<partition>: <offset>}} or "
            f"{{timestamp: <ISO 8601 time>}}, got {text!r}"
        )

    def by_time(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s floor comes from ``timestamp`` (it is set and ``offsets`` does not name ``tp``)."""
        floors: dict[TopicPartition, int] = self._floors  # type: ignore[attr-defined]
        return self.at_ms is not None and tp not in floors

    def floor(self, tp: TopicPartition) -> int:
        """The offset below which ``tp``'s records are before the table (0 under ``earliest``)."""
        floors: dict[TopicPartition, int] = self._floors  # type: ignore[attr-defined]
        return floors.get(tp, 0)

    def decide(
        self,
        tp: TopicPartition,
        floor: int,
        first_file: int,
        connect_offset: int,
        around: tuple[int, int] | None,
    ) -> PartitionStart | None:
        """Where ``tp``'s ledger begins, from what a sidecar's listing said: ``first_file``, the
        start of the sink's first file of ``tp`` (Connect's committed offset when it holds none
        below it). ``floor`` is the partition's start offset (:meth:`floor`, or the one its
        ``timestamp`` was found at). Below it, ``around`` is the buffered file holding it (its first
        and last offset), if any: the ledger begins at the floor if that file begins there, else
        right after it. None while that file is not buffered (it waits, as at a gap)."""
        requested = floor if floor else None
        chosen = StartReason.TIMESTAMP if self.by_time(tp) else StartReason.CONFIGURED
        if first_file >= floor:
            reason = StartReason.CONNECT if first_file >= connect_offset else StartReason.FIRST_FILE
            return PartitionStart(first_file, chosen if floor and first_file == floor else reason, requested)
        if around is None:
            return None
        first, last = around
        return PartitionStart(floor if first == floor else last + 1, chosen, requested)


def starts_json(starts: Mapping[TopicPartition, PartitionStart]) -> dict[str, dict[str, object]]:
    """``{"<topic>-<partition>": {"offset", "reason"}}``: the status page's and the summary's form."""
    return {
        str(tp): {"offset": s.offset, "reason": s.reason.value, "why": s.describe()} for tp, s in sorted(starts.items())
    }
