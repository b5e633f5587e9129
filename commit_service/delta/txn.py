"""Lakegate's record inside a Delta table: the ``txn`` appId of each partition and the offsets read
back from the log.

Written by :class:`~commit_service.delta.committer.DeltaCommitter` (one ``SetTransaction`` per
partition, in the same commit as the round's files) and read at start-up by
:class:`~commit_service.delta.deferred.DeferredCommitter` (:func:`log_snapshot`, no Spark).
"""

from __future__ import annotations

from commit_service.delta.log import read_log
from commit_service.ports import TableSnapshot
from commit_service.storage.reader import StorageReader
from lakegate_core.types import PartitionOffsets, TopicPartition

APP_ID_PREFIX = "lakegate"


def app_id(table: str, tp: TopicPartition) -> str:
    """The Delta ``txn`` appId holding a partition's next offset (docs/design.md, "The commit layout")."""
    return f"{APP_ID_PREFIX}-{table}-{tp[0]}-{tp[1]}"


def parse_app_id(table: str, value: str) -> TopicPartition | None:
    prefix = f"{APP_ID_PREFIX}-{table}-"
    if not value.startswith(prefix):
        return None
    topic, sep, partition = value[len(prefix) :].rpartition("-")
    return TopicPartition(topic, int(partition)) if sep and topic and partition.isdigit() else None


def log_snapshot(storage: StorageReader, table: str, root: str) -> TableSnapshot:
    """The table's version and Lakegate offsets from its log files alone (no Spark); raises
    :class:`~commit_service.delta.log.LogReadError` when that reader cannot be sure."""
    state = read_log(storage, root)
    offsets = {tp: v for key, v in state.txns.items() if (tp := parse_app_id(table, key)) is not None}
    return TableSnapshot(state.version, PartitionOffsets(offsets))
