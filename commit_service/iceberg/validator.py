"""The check inside Iceberg's commit that a round lands only on the offsets it was planned from.

Made by :class:`~commit_service.iceberg.committer.IcebergCommitter` for each round and handed to
Iceberg as the append's ``validateWith`` (Iceberg's ``SnapshotAncestryValidator``, 1.11+). The
check itself is Java, ``io.lakegate.iceberg.OffsetsUnchanged`` (``iceberg-commit/``, on Spark's
class path with Iceberg's runtime): Iceberg calls it inside ``commit()``, after it has re-read the
table and before it swaps the table's metadata, on every attempt of its own commit retries, with
the ancestry of the head that attempt commits onto. The commit itself is a compare-and-swap on
that head (a REST catalog asserts the branch's snapshot id; a JDBC catalog updates the metadata
location only where it is still the one read). So a round lands only if the table's offsets are
still those it was planned from, whoever wrote in between (a zombie service, a second writer):
otherwise Iceberg throws ``ValidationException``, and the committer re-reads the offsets and
re-plans.

(A Python object behind py4j's callback server would do the same, but starting that server on a
session other threads already use crossed py4j's answers between threads: a whole test session
failed on it. The check runs in the JVM; Python only reads its verdict.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from commit_service.iceberg.summary import OFFSETS
from commit_service.spark.jvm_classes import java_class


def offsets_unchanged(jvm: Any, expected: str | None) -> Any:
    """The validator of one round: accepts a head whose newest ``lakegate.offsets`` is exactly
    ``expected`` (the text the round was planned from; None: no snapshot had offsets)."""
    return java_class(jvm, "io.lakegate.iceberg.OffsetsUnchanged")(OFFSETS, expected)


def offset_texts(snapshots: Any) -> Iterator[str | None]:
    """The ``lakegate.offsets`` of each snapshot of a Java iterable, newest first (one py4j call each)."""
    it = snapshots.iterator()
    while it.hasNext():
        yield it.next().summary().get(OFFSETS)
