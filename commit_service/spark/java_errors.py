"""Classify what the JVM threw during a commit, by exception class, never by message text.

Used by both table formats' committers (:class:`~commit_service.delta.committer.DeltaCommitter`,
:class:`~commit_service.iceberg.committer.IcebergCommitter`) to turn a py4j error into the right
:class:`~commit_service.errors.CommitError`. The class of the Java exception, its superclasses
and (for a concurrent commit) its causes decide; the message is only summarised, one line, for
the log and the API (no stack trace ever leaves the service).
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Any

from py4j.protocol import Py4JJavaError, Py4JNetworkError

# A concurrent writer committed first (Delta's conflict checker; Iceberg's compare-and-swap of the
# table's metadata, after its own retries), or the commit's outcome is unknown (Iceberg could not
# tell whether its metadata swap landed): re-read the offsets from the table and plan again.
CONCURRENT = frozenset(
    {
        "java.util.ConcurrentModificationException",
        "org.apache.spark.sql.delta.DeltaConcurrentModificationException",
        "org.apache.iceberg.exceptions.CommitFailedException",
        "org.apache.iceberg.exceptions.CommitStateUnknownException",
    }
)
# The table's storage could not be reached when Delta wrote or read its log: an outage.
UNAVAILABLE = frozenset(
    {
        "java.io.IOException",
        "java.io.UncheckedIOException",
        "java.net.SocketException",
        "java.util.concurrent.TimeoutException",
        "software.amazon.awssdk.core.exception.SdkClientException",
        "org.apache.iceberg.exceptions.RuntimeIOException",
        "org.apache.iceberg.exceptions.ServiceUnavailableException",
        "org.apache.iceberg.exceptions.ServiceFailureException",
    }
)
# Iceberg refused a snapshot in its commit: a check of ours (the offsets moved) or Iceberg's own.
ICEBERG_VALIDATION = frozenset({"org.apache.iceberg.exceptions.ValidationException"})
# The catalog holds no table of that name (asked by loading it: one request, where asking first
# whether it exists was two).
ICEBERG_NO_TABLE = frozenset({"org.apache.iceberg.exceptions.NoSuchTableException"})
# delta-spark's Python package, once imported (``delta.tables``), turns Delta's conflict exceptions
# into Python classes of its own (``delta.exceptions.captured``) that carry no Java throwable; every
# class of this module among their bases is a concurrent commit.
DELTA_PYTHON_CONFLICTS = "delta.exceptions.base"
MAX_CAUSES = 8
MAX_SUMMARY = 300


class Failure(str, Enum):
    CONCURRENT = "concurrent"  # another writer moved the table: retry at once
    UNAVAILABLE = "unavailable"  # storage or the JVM unreachable: transient
    DELTA = "delta"  # the table format (Delta or Iceberg) or Spark refused this plan: retried, then narrowed
    UNEXPECTED = "unexpected"  # not from the JVM at all: a bug on our side


def java_exception(exc: BaseException) -> Any | None:
    """The Java throwable behind a py4j error or a PySpark captured exception, if any."""
    if isinstance(exc, Py4JJavaError):
        return exc.java_exception
    return getattr(exc, "_origin", None)


def _lineage(throwable: Any) -> Iterator[str]:
    """The class names of ``throwable`` and of its superclasses."""
    cls = throwable.getClass()
    while cls is not None:
        yield str(cls.getName())
        cls = cls.getSuperclass()


def _causes(throwable: Any) -> Iterator[Any]:
    for _ in range(MAX_CAUSES):
        if throwable is None:
            return
        yield throwable
        cause = throwable.getCause()
        throwable = None if cause is None or cause.equals(throwable) else cause


def classify(exc: BaseException) -> Failure:
    """What kind of failure ``exc`` is (see :class:`Failure`)."""
    if isinstance(exc, Py4JNetworkError):
        return Failure.UNAVAILABLE  # the JVM did not answer
    if any(c.__module__ == DELTA_PYTHON_CONFLICTS for c in type(exc).__mro__):
        return Failure.CONCURRENT
    throwable = java_exception(exc)
    if throwable is None:
        return Failure.UNEXPECTED
    try:
        if any(CONCURRENT.intersection(_lineage(t)) for t in _causes(throwable)):
            return Failure.CONCURRENT
        if UNAVAILABLE.intersection(_lineage(throwable)):  # thrown by the log store itself, not a task
            return Failure.UNAVAILABLE
    except Exception:  # the JVM went away while we asked
        return Failure.UNAVAILABLE
    return Failure.DELTA


def thrown(exc: BaseException, classes: frozenset[str]) -> bool:
    """Whether the JVM threw one of ``classes`` (or a subclass), itself or as a cause."""
    throwable = java_exception(exc)
    if throwable is None:
        return False
    try:
        return any(classes.intersection(_lineage(t)) for t in _causes(throwable))
    except Exception:  # the JVM went away while we asked
        return False


def java_summary(exc: BaseException) -> str:
    """One line: the Java class (simple name) and the first line of its message, or the Python type."""
    throwable = java_exception(exc)
    try:
        if throwable is not None:
            name = str(throwable.getClass().getSimpleName())
            message = str(throwable.getMessage() or "").strip().splitlines()
            return f"{name}: {message[0][:MAX_SUMMARY] if message else ''}".rstrip(": ")
    except Exception:
        pass
    return type(exc).__name__
