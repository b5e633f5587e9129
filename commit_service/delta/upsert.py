"""One upsert round inside the committer's Delta transaction: a MERGE by key.

Called by :meth:`commit_service.delta.committer.DeltaCommitter._commit` for a ``mode: upsert`` table,
between ``startTransaction`` and ``txn.commit``, so the round's file actions and the partitions'
``txn`` actions are one Delta commit. Why not Delta's ``MERGE``: its command opens and commits its
own transaction, which carries at most one ``txn`` action (``txnAppId`` / ``txnVersion``), not one
per Kafka partition (``docs/design.md``, "Upserts").

The steps, all in Spark:

1. the round's changes (:class:`~commit_service.round.upsert_round.RoundChanges`, shared with
   Iceberg): the rows to write, the changed keys, the table's schema after the round;
2. the transaction reads every file a changed key can be in (``txn.filterFiles``), so a concurrent
   writer touching one fails our commit; those files alone, at the transaction's read version, are
   joined with the changed keys (:meth:`UpsertWriter._candidates_scan`);
3. with deletion vectors, the matching rows' file and row index become one vector per touched
   file (Delta's DML helpers write them) and the file is re-added with it; copy-on-write instead
   rewrites the touched files' other rows and removes the files;
4. every upserted row is written by ``txn.writeFiles``.

Files not holding a changed key are not touched, and files whose statistics put their keys outside
the round's range (:func:`commit_service.round.changes.key_range`) are not read: a round of keys
above the table's reads no file and marks nothing. On a partitioned table whose partitions the key
decides (``bucket(8, id)`` with key ``id``), steps 2 and 3 read only the partitions the changed keys
are in (:func:`commit_service.round.partitions.key_scope`); partitions another column decides
(``day(ts)``) are read whole, as a key's old row may be in any of them: it is deleted there and its
new row written where its new values put it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from commit_service.delta import path_guard
from commit_service.delta.key_ranges import KeyRangeLog
from commit_service.delta.log import LogReadError
from commit_service.delta.partitions import UNPARTITIONED, DeltaPartitioning
from commit_service.domain.plan import PendingFile
from commit_service.domain.round_schema import Widening
from commit_service.domain.upsert import UpsertSpec
from commit_service.faults import MID_MERGE, crash_point
from commit_service.round.convert import FrameReader
from commit_service.round.partitions import check_round_columns, column_types
from commit_service.round.upsert_round import RoundChanges
from commit_service.spark.jvm_classes import java_class
from commit_service.storage.facts import FileFacts

logger = logging.getLogger(__name__)

FILE_COLUMN = "__lakegate_file"
ROW_COLUMN = "__lakegate_row_index"
METADATA_COLUMN = "_metadata"  # a scan's file path and row index (Spark's file metadata column)


def _has_vectors(snapshot: Any) -> bool:
    """Whether the table's protocol has deletion vectors: a table that turns them on in this
    round (created, or written copy-on-write before) rewrites once more, as its scan has no row
    indexes yet."""
    protocol = json.loads(snapshot.protocol().json())["protocol"]
    return "deletionVectors" in (protocol.get("readerFeatures") or [])


def _condition(frame: Any) -> Any | None:
    """The condition of ``frame``'s last filter resolved against the table and with its literals
    folded to their types, as Delta's data skipping needs them (an unresolved column or a cast
    literal skips nothing). Only the analyzer and Spark's constant folding run: the whole
    optimizer would run Delta's ``PrepareDeltaScan``, which skips files by statistics itself (a
    Spark job over the snapshot's state), 0.13-0.9 s for nothing before the transaction skips them
    again. None: the plan holds no filter."""
    jvm = frame.sparkSession._jvm
    folding = java_class(jvm, "org.apache.spark.sql.catalyst.optimizer.ConstantFolding$").__getattr__("MODULE$")
    plan = folding.apply(frame._jdf.queryExecution().analyzed())
    while plan.nodeName() != "Filter":
        if plan.children().isEmpty():
            return None
        plan = plan.children().head()
    return plan.condition()


class UpsertWriter:
    """Builds each upsert round's actions for one table (owned by its DeltaCommitter)."""

    def __init__(
        self,
        spark: Any,
        location: str,
        spec: UpsertSpec,
        type_widening: bool = False,
        partitioning: DeltaPartitioning = UNPARTITIONED,
        key_ranges: KeyRangeLog | None = None,
    ) -> None:
        self.spark = spark
        self.location = location
        self.spec = spec
        self.key_ranges = key_ranges
        self.type_widening = type_widening
        self.partitioning = partitioning
        self._jvm = spark._jvm
        self._changes = RoundChanges(location, spec, type_widening)

    def round(
        self,
        txn: Any,
        files: Sequence[PendingFile],
        reader: FrameReader,
        facts: Mapping[str, FileFacts],
        read_version: int,
        set_schema: Callable[[dict[str, Any], Sequence[Widening]], None],
    ) -> list[Any]:
        """The round's actions as Java lists: the changes to existing files (re-added with deletion
        vectors, or removed), then the written rows' AddFiles. ``set_schema`` puts the table's new
        schema into ``txn`` before any file is written (``txn.writeFiles`` collects statistics by
        the transaction's schema). A row whose text partition value would hold NUL refuses the
        file holding it (:mod:`.path_guard`)."""
        table_schema = json.loads(txn.metadata().schemaString()) if read_version >= 0 else None
        try:
            return self._round(txn, files, reader, facts, read_version, table_schema, set_schema)
        except Exception as exc:  # py4j surfaces the write's failure as Py4JJavaError
            if not path_guard.tripped(exc):
                raise

            def alone(p: PendingFile) -> Any:  # one file's rows, as the round would write them
                return self._changes.read([p], reader, facts, table_schema, None).rows

            raise path_guard.culprit(files, alone, self.partitioning) from None

    def _round(
        self,
        txn: Any,
        files: Sequence[PendingFile],
        reader: FrameReader,
        facts: Mapping[str, FileFacts],
        read_version: int,
        table_schema: dict[str, Any] | None,
        set_schema: Callable[[dict[str, Any], Sequence[Widening]], None],
    ) -> list[Any]:
        table = None
        if read_version >= 0:
            table = self.spark.read.format("delta").option("versionAsOf", read_version).load(self.location)
        scope = self.partitioning.key_parts(self.spec.key, column_types(table_schema)) if table_schema else []
        changes = self._changes.read(files, reader, facts, table_schema, table, scope)
        check_round_columns(self.location, self.partitioning.fields, changes.schema)
        # the generated partition columns come last, computed by txn.writeFiles (no row holds them)
        set_schema(self.partitioning.with_generated(DeltaPartitioning.strip(changes.schema)), changes.widened)
        if table is None or changes.keys is None:  # a new table: every row is new
            return [self._write(txn, changes.rows, 1)]
        filters = java_class(self._jvm, "java.util.ArrayList")()
        if changes.scope is not None:  # only the partitions the changed keys are in
            table = table.where(changes.scope)
            filters.add(self.spark._jsparkSession.sessionState().sqlParser().parseExpression(changes.scope))
        bounded = _condition(table.where(changes.bounds)) if changes.bounds is not None else None
        if bounded is not None:  # only the files whose statistics hold keys in the round's range
            filters.add(bounded)
        if filters.isEmpty():
            candidates = txn.filterFiles()  # the transaction read every file: a writer changing one conflicts
        else:  # read, and registered as read: a writer adding or changing a file they match conflicts
            seq = java_class(self._jvm, "scala.jdk.javaapi.CollectionConverters").asScala(filters).toList()
            if bounded is not None and self._none_hold(txn, read_version, changes.limits):
                # what filterFiles registers when it finds no file, without its Spark jobs:
                # (filters, partitionOnly, shouldRewriteFilter) as filterFiles passes them
                txn.trackReadPredicates(seq, False, True)
                return [self._write(txn, changes.rows, 1)]
            candidates = txn.filterFiles(seq, False)  # (filters, keepNumRecords): the one-argument form takes files
        if candidates.isEmpty():  # no file can hold a changed key: nothing to mark or rewrite
            return [self._write(txn, changes.rows, 1)]
        # every row of the files a round may touch (a rewrite keeps those outside the key range),
        # and those the key range holds, where the changed keys' rows are found
        whole = self._candidates_scan(txn, table, candidates)
        table = whole.where(changes.bounds) if changes.bounds is not None else whole
        if self.spec.deletion_vectors and _has_vectors(txn.snapshot()):
            applied = self._mark_deleted(txn, table, changes.keys, candidates)
            rows, touched = changes.rows, 0
        else:
            applied, rows, touched = self._rewrite(txn, table, whole, changes.keys, changes.rows)
        return [applied, self._write(txn, rows, max(1, touched))]

    def _none_hold(self, txn: Any, read_version: int, limits: Mapping[str, tuple[Any, Any]]) -> bool:
        """Whether the table's log shows that no file at ``read_version`` can hold a key within
        ``limits`` (False when it cannot tell: Delta is asked)."""
        if self.key_ranges is None or not limits:
            return False
        try:
            ranges = self.key_ranges.at(read_version, str(txn.metadata().id()))
        except LogReadError as exc:
            logger.info("%s: the key ranges from the log: %s; Delta filters the files", self.location, exc)
            return False
        return not ranges.may_hold(limits)

    def _write(self, txn: Any, rows: Any, files: int) -> Any:
        """The AddFiles of ``rows`` written by the transaction, in at most ``files`` files (the
        generated partition columns computed by Delta, in the partitions they name)."""
        rows = path_guard.guarded(rows.drop(*self.partitioning.generated_names), self.partitioning).coalesce(files)
        written = java_class(self._jvm, "scala.jdk.javaapi.CollectionConverters").asJava(txn.writeFiles(rows._jdf))
        crash_point(MID_MERGE)
        return written

    def _candidates_scan(self, txn: Any, table: Any, candidates: Any) -> Any:
        """``table`` (the transaction's read version, with the round's partition filter) read from
        ``candidates`` alone, the files ``txn.filterFiles`` found, with each row's ``_metadata``. As
        Delta's own DELETE and UPDATE scan their candidates: the scan's file index holds those files,
        so planning it runs no Spark job to skip files again (the table's own index ran one each
        time the plan was optimized, 5 of a round's 21 jobs, and its ``numOfFiles`` one more)."""
        from pyspark.sql import DataFrame

        jvm, session = self._jvm, self.spark._jsparkSession
        index = java_class(jvm, "org.apache.spark.sql.delta.files.TahoeBatchFileIndex")(
            session, "merge", candidates, txn.deltaLog(), txn.deltaLog().dataPath(), txn.snapshot(), False
        )
        helper = java_class(jvm, "org.apache.spark.sql.delta.commands.DMLWithDeletionVectorsHelper")
        scan = helper.createTargetDfForScanningForMatches(session, table._jdf.queryExecution().analyzed(), index)
        return DataFrame(scan, self.spark)

    def _mark_deleted(self, txn: Any, table: Any, keys: Any, candidates: Any) -> Any:
        """The file actions marking the table's rows of ``keys`` deleted: per touched file a new
        deletion vector (merged with the one it had) and the file re-added with it, the old
        entry removed. Delta's own DML helpers (those its DELETE, UPDATE and MERGE use) aggregate
        the row indexes into bitmaps and write the vectors in Spark tasks; only the actions
        reach the driver."""
        from pyspark.sql import functions as F

        jvm = self._jvm
        generator = java_class(jvm, "org.apache.spark.sql.delta.commands.DeletionVectorBitmapGenerator")
        helper = java_class(jvm, "org.apache.spark.sql.delta.commands.DMLWithDeletionVectorsHelper")
        session = self.spark._jsparkSession
        matched = table.select(
            *self.spec.key,
            F.col(f"{METADATA_COLUMN}.file_path").alias(FILE_COLUMN),
            F.col(f"{METADATA_COLUMN}.row_index").alias(ROW_COLUMN),
        ).join(keys, list(self.spec.key), "left_semi")
        vectors = generator.buildRowIndexSetsForFilesMatchingCondition(
            session,
            txn,
            True,  # files may have vectors already: the new rows are merged into them
            matched._jdf,
            candidates,
            java_class(jvm, "org.apache.spark.sql.catalyst.expressions.Literal").TrueLiteral(),
            java_class(jvm, "scala.Option").apply(F.col(FILE_COLUMN)._jc),
            java_class(jvm, "scala.Option").apply(F.col(ROW_COLUMN)._jc),
        )
        data_path = txn.deltaLog().dataPath()
        touched = helper.findFilesWithMatchingRows(txn, helper.generateCandidateFileMap(data_path, candidates), vectors)
        prefix = java_class(
            jvm, "org.apache.spark.sql.delta.stats.StatsCollectionUtils"
        ).getDataSkippingStringPrefixLength(session, txn.metadata())
        actions = helper.processUnmodifiedData(session, touched, txn.snapshot(), prefix)
        return java_class(jvm, "scala.jdk.javaapi.CollectionConverters").asJava(actions._1())

    def _rewrite(self, txn: Any, table: Any, whole: Any, keys: Any, rows: Any) -> tuple[Any, Any, int]:
        """Copy-on-write: the RemoveFiles of the files holding ``keys`` (found in ``table``, read
        under the round's key range), the rows to write (those files' other rows, every one of them
        read from ``whole``, and ``rows``), and how many files were touched."""
        from pyspark.sql import functions as F

        file_name = F.element_at(F.split(F.col(f"{METADATA_COLUMN}.file_path"), "/"), -1)
        removes = java_class(self._jvm, "java.util.ArrayList")()
        touched = [
            r[0]
            for r in table.withColumn(FILE_COLUMN, file_name)
            .join(keys, list(self.spec.key), "left_semi")
            .select(FILE_COLUMN)
            .distinct()
            .collect()
        ]
        if not touched:
            return removes, rows, 0
        kept = (
            whole.withColumn(FILE_COLUMN, file_name)
            .where(F.col(FILE_COLUMN).isin(touched))
            .join(keys, list(self.spec.key), "left_anti")
            .drop(FILE_COLUMN, METADATA_COLUMN)
        )
        adds = txn.snapshot().allFiles().filter(F.element_at(F.split(F.col("path"), "/"), -1).isin(touched)._jc)
        for add in adds.collectAsList():
            removes.add(add.remove())
        return removes, kept.unionByName(rows, allowMissingColumns=True), len(touched)
