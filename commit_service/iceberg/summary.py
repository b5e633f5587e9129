"""What a Lakegate snapshot says in its summary, and how it is read back: pure.

Written by :class:`~commit_service.iceberg.committer.IcebergCommitter` into every snapshot it
commits, read back by it (and compared, as text, inside Iceberg's commit by the check of
:mod:`commit_service.iceberg.validator`) to learn a table's offsets; documented in docs/iceberg.md, "What a snapshot holds":

- ``lakegate.offsets``: the next offset of *every* partition the table holds, after this snapshot,
  as JSON ``{"<topic>": {"<partition>": <next offset>, ...}, ...}``. Every Lakegate snapshot carries
  the whole map, so the newest one alone says where the table is, whatever snapshots expired;
- ``lakegate.commit-id``: the round's commit id (the service's log and status page name it);
- ``lakegate.commit``: the round's record (files, records, sidecars, the vtts), as Delta's
  ``userMetadata`` holds it.

Snapshots without ``lakegate.offsets`` (a compaction, another engine's write) are skipped: the
table's offsets are those of its newest snapshot that has them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from commit_service.errors import TableWriteError
from lakegate_core.types import PartitionOffsets, TopicPartition

OFFSETS = "lakegate.offsets"
COMMIT_ID = "lakegate.commit-id"
COMMIT = "lakegate.commit"


def encode(offsets: Mapping[TopicPartition, int]) -> str:
    """``offsets`` as the ``lakegate.offsets`` property (sorted: equal maps, equal text)."""
    topics: dict[str, dict[str, int]] = {}
    for tp, offset in sorted(offsets.items()):
        topics.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return json.dumps(topics, separators=(",", ":"), sort_keys=True)


def decode(text: str, table: str) -> PartitionOffsets:
    """The offsets of a ``lakegate.offsets`` property; a :class:`TableWriteError` when it is not one
    (someone wrote the property by hand: the table's offsets cannot be trusted)."""
    try:
        topics = json.loads(text)
        out = {
            TopicPartition(str(topic), int(partition)): int(offset)
            for topic, partitions in topics.items()
            for partition, offset in partitions.items()
        }
    except (ValueError, TypeError, AttributeError) as exc:
        raise TableWriteError(f"table {table}: its snapshot's {OFFSETS} is not Lakegate's offsets: {exc}") from None
    if any(o < 0 for o in out.values()):
        raise TableWriteError(f"table {table}: its snapshot's {OFFSETS} holds a negative offset")
    return PartitionOffsets(out)
