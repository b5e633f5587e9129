"""One upsert round inside the committer's Delta transaction: a MERGE by key.

Called by :meth:`commit_service.delta.committer.DeltaCommitter._commit` for a ``mode: upsert`` table,
between ``startTransaction`` and ``txn.commit``, so the round's file actions and the partitions'
``txn`` actions are one Delta commit. Why not Delta's ``MERGE``: its command opens and commits its
own transaction, which carries at most one ``txn`` action (``txnAppId`` / ``txnVersion``), not one
per Kafka partition (``docs/design.md``, "Upserts").

The steps, all in Spark:

1. the round's files, read raw (the sink's envelope), become changes
   (:func:`commit_service.domain.upsert.changes`), and each key keeps its last one (:func:`~commit_service.domain.upsert.latest`)
   unless the table's row is newer by ``ordering`` (:func:`~commit_service.domain.upsert.not_older`);
2. the transaction reads every file (``txn.filterFiles``), so a concurrent writer touching one
   fails our commit; the table at the transaction's read version is joined with the changed keys;
3. with deletion vectors, the matching rows' file and row index become one vector per touched
   file (Delta's DML helpers write them) and the file is re-added with it; copy-on-write instead
   rewrites the touched files' other rows and removes the files;
4. every upserted row is written by ``txn.writeFiles``.

Files not holding a changed key are not touched.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from commit_service.delta import changes as changes_of
from commit_service.delta import faults
from commit_service.domain import round_guard
from commit_service.domain import upsert as spec_of
from commit_service.domain.plan import PendingFile
from commit_service.domain.round_schema import (
    Conflict,
    FileShape,
    Schema,
    Widening,
    merge_struct,
    reconcile,
    resolved_schema,
    widenings,
)
from commit_service.domain.upsert import INTERNAL, ChangeError, UpsertSpec
from commit_service.errors import DataFileError, SchemaMismatchError
from commit_service.spark.conform import conform
from commit_service.spark.convert import FrameReader
from commit_service.storage.facts import FileFacts

FILE_COLUMN = "__lakegate_file"
ROW_COLUMN = "__lakegate_row_index"
# A round with at most this many changed keys sends them to every task joining them with the table
# (a broadcast join); more are joined by shuffling both sides, the table too.
BROADCAST_KEYS = 2_000_000
_EMPTY: Schema = {"type": "struct", "fields": []}


def _has_vectors(snapshot: Any) -> bool:
    """Whether the table's protocol has deletion vectors: a table that turns them on in this
    round (created, or written copy-on-write before) rewrites once more, as its scan has no row
    indexes yet."""
    protocol = json.loads(snapshot.protocol().json())["protocol"]
    return "deletionVectors" in (protocol.get("readerFeatures") or [])


class UpsertWriter:
    """Builds each upsert round's actions for one table (owned by its DeltaCommitter)."""

    def __init__(self, spark: Any, location: str, spec: UpsertSpec, type_widening: bool = False) -> None:
        self.spark = spark
        self.location = location
        self.spec = spec
        self.type_widening = type_widening
        self._jvm = spark._jvm

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
        the transaction's schema)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        table_schema = json.loads(txn.metadata().schemaString()) if read_version >= 0 else None
        table_type = StructType.fromJson(table_schema) if table_schema is not None else None
        raw = self._raw(files, reader, dict(facts), table_schema)
        expected = sum(reader.rows(p, facts.get(p.file.path)) for p in files)
        read = raw.count()
        if read != expected:  # the round guard's row check, on the records read as changes
            round_guard.check(self.location, [round_guard.Source("the round", expected, _EMPTY)], read, _EMPTY)
        changed = self._changes(files, reader, dict(facts), table_schema, table_type, raw)
        last = changes_of.latest(changed, self.spec).localCheckpoint()  # read once, used several times
        table = None
        if read_version >= 0:
            table = self.spark.read.format("delta").option("versionAsOf", read_version).load(self.location)
            # few enough keys are broadcast to each task scanning the table: the table is never shuffled
            small = last.count() <= BROADCAST_KEYS
            if self.spec.orders_across_rounds:
                last = changes_of.not_older(last, table, self.spec, broadcast=small).localCheckpoint()
        rows = last.where(~F.col(spec_of.DELETE)).drop(*INTERNAL)
        image = spec_of.image_shape(
            spec_of.typed_raw(
                self._raw_schema(files, reader, dict(facts)), self.spec, table_schema, self.type_widening
            ),
            self.spec,
        )
        if image is not None:  # columns and fields no value has typed yet are left out, at any depth
            kafka = [
                f
                for f in json.loads(rows.schema.json())["fields"]
                if f["name"] not in {g["name"] for g in image["fields"]}
            ]
            shape = {"type": "struct", "fields": [*image["fields"], *kafka]}
            rows = conform(rows, shape, resolved_schema(shape))
        schema: dict[str, Any] = json.loads(rows.schema.json())
        widened: list[Widening] = []
        if table_schema is not None:
            try:
                merged = merge_struct(table_schema, schema, "", table_schema, self.type_widening)
            except Conflict as exc:
                raise DataFileError(files[0].file.path, f"this round's {len(files)} files: {exc}") from None
            widened, schema = widenings(table_schema, merged), merged
        shapes = [spec_of.image_shape(reader.raw_shape(p, facts.get(p.file.path)), self.spec) for p in files]
        sources = [round_guard.Source(p.file.path, 0, shape) for p, shape in zip(files, shapes, strict=True) if shape]
        round_guard.check(self.location, sources, 0, schema)
        set_schema(schema, widened)
        if table is None:  # a new table: every row is new
            return [self._write(txn, rows, 1)]
        keys = last.select(*self.spec.key).distinct()
        if small:
            keys = F.broadcast(keys)
        candidates = txn.filterFiles()  # the transaction read every file: a writer changing one conflicts
        if self.spec.deletion_vectors and _has_vectors(txn.snapshot()):
            applied = self._mark_deleted(txn, table, keys, candidates)
            touched = 0
        else:
            applied, rows, touched = self._rewrite(txn, table, keys, rows)
        return [applied, self._write(txn, rows, max(1, touched))]

    def _write(self, txn: Any, rows: Any, files: int) -> Any:
        """The AddFiles of ``rows`` written by the transaction, in at most ``files`` files."""
        written = self._jvm.scala.jdk.javaapi.CollectionConverters.asJava(txn.writeFiles(rows.coalesce(files)._jdf))
        faults.point(faults.MID_MERGE)
        return written

    def _mark_deleted(self, txn: Any, table: Any, keys: Any, candidates: Any) -> Any:
        """The file actions marking the table's rows of ``keys`` deleted: per touched file a new
        deletion vector (merged with the one it had) and the file re-added with it, the old
        entry removed. Delta's own DML helpers (those its DELETE, UPDATE and MERGE use) aggregate
        the row indexes into bitmaps and write the vectors in Spark tasks; only the actions
        reach the driver."""
        from pyspark.sql import functions as F

        jvm, commands = self._jvm, self._jvm.org.apache.spark.sql.delta.commands
        session = self.spark._jsparkSession
        matched = table.select(
            *self.spec.key,
            F.col("_metadata.file_path").alias(FILE_COLUMN),
            F.col("_metadata.row_index").alias(ROW_COLUMN),
        ).join(keys, list(self.spec.key), "left_semi")
        vectors = commands.DeletionVectorBitmapGenerator.buildRowIndexSetsForFilesMatchingCondition(
            session,
            txn,
            True,  # files may have vectors already: the new rows are merged into them
            matched._jdf,
            candidates,
            jvm.org.apache.spark.sql.catalyst.expressions.Literal.TrueLiteral(),
            jvm.scala.Option.apply(F.col(FILE_COLUMN)._jc),
            jvm.scala.Option.apply(F.col(ROW_COLUMN)._jc),
        )
        data_path = txn.deltaLog().dataPath()
        touched = commands.DMLWithDeletionVectorsHelper.findFilesWithMatchingRows(
            txn, commands.DMLWithDeletionVectorsHelper.generateCandidateFileMap(data_path, candidates), vectors
        )
        prefix = jvm.org.apache.spark.sql.delta.stats.StatsCollectionUtils.getDataSkippingStringPrefixLength(
            session, txn.metadata()
        )
        actions = commands.DMLWithDeletionVectorsHelper.processUnmodifiedData(session, touched, txn.snapshot(), prefix)
        return jvm.scala.jdk.javaapi.CollectionConverters.asJava(actions._1())

    def _rewrite(self, txn: Any, table: Any, keys: Any, rows: Any) -> tuple[Any, Any, int]:
        """Copy-on-write: the RemoveFiles of the files holding ``keys``, the rows to write (those
        files' other rows and ``rows``), and how many files were touched."""
        from pyspark.sql import functions as F

        table = table.withColumn(FILE_COLUMN, F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1))
        removes = self._jvm.java.util.ArrayList()
        touched = [
            r[0] for r in table.join(keys, list(self.spec.key), "left_semi").select(FILE_COLUMN).distinct().collect()
        ]
        if not touched:
            return removes, rows, 0
        kept = (
            table.where(F.col(FILE_COLUMN).isin(touched)).join(keys, list(self.spec.key), "left_anti").drop(FILE_COLUMN)
        )
        adds = txn.snapshot().allFiles().filter(F.element_at(F.split(F.col("path"), "/"), -1).isin(touched)._jc)
        for add in adds.collectAsList():
            removes.add(add.remove())
        return removes, kept.unionByName(rows, allowMissingColumns=True), len(touched)

    def _changes(
        self,
        files: Sequence[PendingFile],
        reader: FrameReader,
        facts: dict[str, FileFacts],
        table_schema: dict[str, Any] | None,
        table_type: Any,
        raw: Any,
    ) -> Any:
        """The round's changes; a file that cannot be read as changes is named (read alone)."""
        try:
            return changes_of.changes(raw, self.spec, table_type)
        except ChangeError as exc:
            for p in files:
                try:
                    changes_of.changes(self._raw([p], reader, facts, table_schema), self.spec, table_type)
                except ChangeError as alone:
                    raise DataFileError(p.file.path, str(alone)) from None
            raise DataFileError(files[0].file.path, f"{exc} (the round's files together)") from None

    def _raw_schema(self, files: Sequence[PendingFile], reader: FrameReader, facts: dict[str, FileFacts]) -> Schema:
        """The round's envelope schema: the files' raw schemas reconciled (voids kept); a file
        whose shape conflicts with the others' is refused."""
        joined = reconcile(
            None, [FileShape(p.file.path, reader.envelope_shape(p, facts.get(p.file.path))) for p in files]
        )
        if joined.refused:
            path, reason = next(iter(joined.refused.items()))
            raise SchemaMismatchError(path, reason)
        return joined.schema

    def _raw(
        self, files: Sequence[PendingFile], reader: FrameReader, facts: dict[str, FileFacts], table: Schema | None
    ) -> Any:
        """The files as the sink wrote them (envelope kept) as one frame: their schemas reconciled,
        the row image typed by the table where the round's values are all null
        (:func:`commit_service.domain.upsert.typed_raw`)."""
        raw = self._raw_schema(files, reader, facts)
        try:
            target = spec_of.typed_raw(raw, self.spec, table, self.type_widening)
        except Conflict as exc:
            for p in files:  # name the file whose values the table's columns refuse
                try:
                    spec_of.typed_raw(
                        reader.envelope_shape(p, facts.get(p.file.path)), self.spec, table, self.type_widening
                    )
                except Conflict as alone:
                    raise SchemaMismatchError(p.file.path, f"cannot join the table's schema: {alone}") from None
            raise SchemaMismatchError(files[0].file.path, f"cannot join the table's schema: {exc}") from None
        return reader.frame(files, facts, target, raw=True)
