"""One upsert round inside the committer's Delta transaction: a copy-on-write MERGE by key.

Called by :meth:`commit_service.delta_commit.DeltaCommitter._commit` for a ``mode: upsert`` table,
between ``startTransaction`` and ``txn.commit``, so the round's removed files, its new files and
the partitions' ``txn`` actions are one Delta commit. Why not Delta's ``MERGE``: its command opens
and commits its own transaction, which carries at most one ``txn`` action (``txnAppId`` /
``txnVersion``), not one per Kafka partition (``docs/design.md``, "Upserts").

The steps, all in Spark:

1. the round's files, read raw (the sink's envelope), become changes
   (:func:`commit_service.upsert.changes`), and each key keeps its last one (:func:`~commit_service.upsert.latest`);
2. the table at the transaction's read version is joined with the changed keys to find the files
   holding any of them (``_metadata.file_path``); the transaction reads every file first
   (``txn.filterFiles``), so a concurrent writer touching them would fail our commit;
3. those files' rows without a changed key, plus every upserted row, are written by
   ``txn.writeFiles``; the files are removed (``AddFile.remove``).

Files not holding a changed key are not touched, so a round costs the files it touches, not the
table's size.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from commit_service import faults
from commit_service import upsert as changes_of
from commit_service.convert import FrameReader
from commit_service.errors import DataFileError
from commit_service.schema import merge_schema
from commit_service.state import PendingFile
from commit_service.upsert import INTERNAL, ChangeError, UpsertSpec
from lakegate_core.protocol import FileFormat

FILE_COLUMN = "__lakegate_file"


class UpsertWriter:
    """Builds each upsert round's actions for one table (owned by its DeltaCommitter)."""

    def __init__(self, spark: Any, location: str, spec: UpsertSpec) -> None:
        self.spark = spark
        self.location = location
        self.spec = spec
        self._jvm = spark._jvm

    def round(
        self,
        txn: Any,
        files: Sequence[PendingFile],
        reader: FrameReader,
        read_version: int,
        set_schema: Callable[[dict[str, Any]], None],
    ) -> list[Any]:
        """The round's actions (Java lists: the RemoveFiles, then the AddFiles); ``set_schema`` puts the table's new schema into ``txn`` before any
        file is written (``txn.writeFiles`` collects statistics by the transaction's schema)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        table_schema = json.loads(txn.metadata().schemaString()) if read_version >= 0 else None
        table_type = StructType.fromJson(table_schema) if table_schema is not None else None
        changed = self._changes(files, reader, table_type)
        last = changes_of.latest(changed, self.spec).localCheckpoint()  # read once, used three times
        rows = last.where(~F.col(changes_of.DELETE)).drop(*INTERNAL)
        schema: dict[str, Any] = json.loads(rows.schema.json())
        if table_schema is not None:
            schema = merge_schema(table_schema, schema, f"this round's {len(files)} files")
        set_schema(schema)
        keys = last.select(*self.spec.key).distinct()
        removes = self._jvm.java.util.ArrayList()
        out = rows
        touched: list[str] = []
        if read_version >= 0:
            txn.filterFiles()  # the transaction read every file: a writer changing one makes ours conflict
            table = (
                self.spark.read.format("delta")
                .option("versionAsOf", read_version)
                .load(self.location)
                .withColumn(FILE_COLUMN, F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1))
            )
            touched = [
                r[0]
                for r in table.join(keys, list(self.spec.key), "left_semi").select(FILE_COLUMN).distinct().collect()
            ]
            if touched:
                kept = (
                    table.where(F.col(FILE_COLUMN).isin(touched))
                    .join(keys, list(self.spec.key), "left_anti")
                    .drop(FILE_COLUMN)
                )
                out = kept.unionByName(rows, allowMissingColumns=True)
                adds = txn.snapshot().allFiles().filter(F.element_at(F.split(F.col("path"), "/"), -1).isin(touched)._jc)
                for add in adds.collectAsList():
                    removes.add(add.remove())
        out = out.coalesce(max(1, len(touched)))  # no more files than it replaces (one for new keys only)
        written = self._jvm.scala.jdk.javaapi.CollectionConverters.asJava(txn.writeFiles(out._jdf))
        faults.point(faults.MID_MERGE)
        return [removes, written]

    def _changes(self, files: Sequence[PendingFile], reader: FrameReader, table_type: Any) -> Any:
        """The round's changes; a file that cannot be read as changes is named (read alone)."""
        try:
            return changes_of.changes(self._raw(files, reader), self.spec, table_type)
        except ChangeError as exc:
            for p in files:
                try:
                    changes_of.changes(self._raw([p], reader), self.spec, table_type)
                except ChangeError as alone:
                    raise DataFileError(p.file.path, str(alone)) from None
            raise DataFileError(files[0].file.path, f"{exc} (the round's files together)") from None

    @staticmethod
    def _raw(files: Sequence[PendingFile], reader: FrameReader) -> Any:
        """The files as the sink wrote them (envelope kept), one frame per format, unioned."""
        groups = [[p for p in files if p.file.format is fmt] for fmt in FileFormat]
        frames = [reader.raw_frame(group) for group in groups if group]
        return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
