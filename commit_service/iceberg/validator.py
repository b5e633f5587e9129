"""The check inside Iceberg's commit that a round lands only on the offsets it was planned from.

Made by :class:`~commit_service.iceberg.committer.IcebergCommitter` for each round and handed to
Iceberg as the append's ``validateWith`` (Iceberg's ``SnapshotAncestryValidator``, 1.11+). Iceberg
calls it from inside ``commit()`` through py4j's callback server, after it has re-read the table
and before it writes the new metadata, on every attempt of its own commit retries: the snapshots
it passes are the ancestry of the table's head as that attempt will commit onto it. The commit
itself is a compare-and-swap on that head (a REST catalog asserts the branch's snapshot id; a JDBC
catalog updates the metadata location only where it is still the one read). So a round lands
only if the table's offsets are still those it was planned from, whoever wrote in between (a
zombie service, a second writer): otherwise Iceberg throws ``ValidationException`` and the
committer re-reads the offsets and re-plans.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from commit_service.iceberg.summary import OFFSETS, moved, newest_offsets
from lakegate_core.types import PartitionOffsets, TopicPartition

logger = logging.getLogger(__name__)

_callbacks = threading.Lock()


def serve_callbacks(spark: Any) -> None:
    """Start py4j's callback server (once per process), through which the JVM calls Python objects."""
    from pyspark.java_gateway import ensure_callback_server_started

    with _callbacks:
        ensure_callback_server_started(spark.sparkContext._gateway)


def offset_texts(snapshots: Any) -> Iterator[str | None]:
    """The ``lakegate.offsets`` of each snapshot of a Java iterable, newest first (one py4j call each)."""
    it = snapshots.iterator()
    while it.hasNext():
        yield it.next().summary().get(OFFSETS)


class OffsetsValidator:
    """Accepts the table's head only if its offsets equal ``planned`` (Python behind a Java interface)."""

    def __init__(self, table: str, planned: PartitionOffsets) -> None:
        self.table = table
        self.planned = planned
        self.found: dict[TopicPartition, int] = {}
        self.failure: str | None = None

    def validate(self, base_snapshots: Any) -> bool:
        """Called by Iceberg (the JVM) inside ``commit()``; never raises (a Python error reaching
        the JVM would surface as a py4j error instead of Iceberg's ValidationException)."""
        try:
            now = newest_offsets(offset_texts(base_snapshots), self.table) or PartitionOffsets({})
            self.found = moved(self.planned, now)
            self.failure = None
            return not self.found
        except Exception as exc:  # the offsets could not be read: refuse, the committer re-reads
            logger.warning("table %s: cannot validate the offsets in the commit: %s", self.table, exc)
            self.failure = str(exc)
            return False

    def errorMessage(self) -> str:  # noqa: N802 (the Java interface's name)
        if self.failure is not None:
            return f"table {self.table}: its offsets could not be read ({self.failure})"
        return f"table {self.table}: offsets moved since the round was planned: " + ", ".join(
            f"{tp} at {o}" for tp, o in sorted(self.found.items())
        )

    class Java:
        implements = ["org.apache.iceberg.SnapshotAncestryValidator"]
