"""Partition values a Delta table cannot hold: text with a NUL character (U+0000) in it.

Spark names the files of a partitioned Delta table ``<column>=<value>/part-...``. It escapes
U+0001-U+001F and a few signs in the value, but not NUL: NUL goes into the object key raw. A local
file system refuses such a path. S3 stores the object, but its XML listing cannot return the key,
and S3A then retries the listing for minutes, within the round. So a round whose rows would put
NUL in a partition's value is refused, naming the file that holds them (a :class:`DataFileError`:
that file is quarantined, the table's other files go on):

- a Parquet file added where it lies carries its value in the commit, not in a path, but a later
  compaction would write it into one: :func:`check_values` refuses it, no Spark job;
- rows Spark writes (a rewrite, a split, an upsert) have each text partition's source column
  guarded in the written frame (:func:`guarded`): the first such row fails the write in the pass
  that writes it, with no job of its own; :func:`culprit` then reads each file alone (jobs only
  on that failure) to name the one.

Iceberg needs none of this: it escapes a partition's value in its paths (URL encoding).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from commit_service.delta.partitions import DeltaPartitioning
from commit_service.domain.plan import PendingFile
from commit_service.errors import DataFileError
from commit_service.round.partitions import column_types

NUL = "\x00"
MARK = "lakegate: a NUL character in partition "  # the raised error's text, found in the JVM's trace


def check_values(path: str, values: Mapping[str, str | None]) -> None:
    """Refuse the file at ``path`` if a partition value it would be committed with holds NUL."""
    for name, value in values.items():
        if value is not None and NUL in value:
            raise _refusal(path, name)


def guarded(frame: Any, partitioning: DeltaPartitioning) -> Any:
    """``frame`` (rows Spark is to write) whose text partitions' source columns raise an error
    naming the partition when a row's value holds NUL: nothing is read twice."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's own idiom)

    if not partitioning.fields:
        return frame
    guarded_columns: dict[str, Any] = {}  # source column -> its value, or an error where one partition of it holds NUL
    for f, value in partitioning.text_values(column_types(json.loads(frame.schema.json()))):
        holds_nul, error = F.instr(F.expr(value), NUL) > 0, F.raise_error(F.lit(MARK + f.name))
        before = guarded_columns.get(f.column)
        guarded_columns[f.column] = F.when(holds_nul, error) if before is None else before.when(holds_nul, error)
    for column, cases in guarded_columns.items():
        frame = frame.withColumn(column, cases.otherwise(F.col(f"`{column}`")))
    return frame


def tripped(exc: BaseException) -> bool:
    """Whether ``exc`` (what a write raised) is :func:`guarded`'s error."""
    try:
        return MARK in str(exc)
    except Exception:  # the JVM went away while its trace was read
        return False


def culprit(
    files: Sequence[PendingFile], frame_of: Callable[[PendingFile], Any], partitioning: DeltaPartitioning
) -> DataFileError:
    """The refusal of the first of ``files`` whose rows alone (``frame_of`` it) put NUL in a text
    partition's value (one Spark job a file), else of the round's files together."""
    from pyspark.sql import functions as F  # noqa: N812

    for p in files:
        frame = frame_of(p)
        for f, value in partitioning.text_values(column_types(json.loads(frame.schema.json()))):
            if frame.where(F.instr(F.expr(value), NUL) > 0).limit(1).count():
                return _refusal(p.file.path, f.name)
    return _refusal(files[0].file.path, "values (the round's files together)")


def _refusal(path: str, name: str) -> DataFileError:
    return DataFileError(
        path,
        f"holds a record whose partition {name} has a NUL character (U+0000), which Delta would write raw "
        "into a file's path (no file system or S3 listing can hold it); the file was not committed",
    )
