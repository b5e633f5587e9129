"""Named value types every part of Lakegate speaks: a Kafka partition and offsets per partition.

Standard library only. :class:`TopicPartition` is a named tuple (hashable, ordered, and equal to
the plain ``(topic, partition)`` tuple, so it keys dicts and sets); :class:`PartitionOffsets` is
the one immutable shape of "next offset per partition", with the one JSON form of it
(``{topic: {"<partition>": offset}}``: JSON object keys are strings).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from lakegate_core.errors import ProtocolError


class TopicPartition(NamedTuple):
    """One Kafka partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def as_tp(value: tuple[str, int]) -> TopicPartition:
    """A plain ``(topic, partition)`` pair as a :class:`TopicPartition` (no copy if it is one)."""
    return value if isinstance(value, TopicPartition) else TopicPartition(str(value[0]), int(value[1]))


OffsetsLike = Mapping[TopicPartition, int] | Mapping[tuple[str, int], int] | Iterable[tuple[tuple[str, int], int]]


class PartitionOffsets(Mapping[TopicPartition, int]):
    """Next offset per partition: a table's committed offsets, a plan's targets, a commit's record.

    Immutable; iterates in (topic, partition) order; equal to any mapping with the same items.
    """

    __slots__ = ("_items",)

    def __init__(self, items: OffsetsLike = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: dict[TopicPartition, int] = dict(sorted((as_tp(tp), int(o)) for tp, o in pairs))

    def __getitem__(self, tp: tuple[str, int]) -> int:
        return self._items[as_tp(tp)]

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"PartitionOffsets({self._items!r})"

    @staticmethod
    def json_schema() -> dict[str, Any]:
        """The JSON schema of :meth:`to_json`'s form (read by the OpenAPI generator)."""
        partition_offsets = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}
        return {
            "type": "object",
            "description": "topic -> partition -> next offset",
            "additionalProperties": partition_offsets,
        }

    def to_json(self) -> dict[str, dict[str, int]]:
        """``{topic: {"<partition>": offset}}``, topics and partitions in order."""
        out: dict[str, dict[str, int]] = {}
        for tp, offset in self._items.items():
            out.setdefault(tp.topic, {})[str(tp.partition)] = offset
        return out

    @classmethod
    def from_json(cls, raw: Any, where: str = "offsets") -> PartitionOffsets:
        """Parse :meth:`to_json`'s form; a malformed one raises :class:`ProtocolError` naming it."""
        if not isinstance(raw, dict):
            raise ProtocolError(where, f"must be a JSON object, got {type(raw).__name__}")
        pairs: list[tuple[TopicPartition, int]] = []
        for topic, parts in raw.items():
            if not isinstance(parts, dict):
                raise ProtocolError(f"{where}.{topic}", "must be an object of partition -> offset")
            for partition, offset in parts.items():
                if not str(partition).isdigit() or isinstance(offset, bool) or not isinstance(offset, int):
                    raise ProtocolError(f"{where}.{topic}.{partition}", "must map a partition number to an integer")
                pairs.append((TopicPartition(str(topic), int(partition)), offset))
        return cls(pairs)
