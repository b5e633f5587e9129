"""One upsert round of an Iceberg table as files for one row delta: the new rows as data files, the
replaced and deleted rows as position deletes (merge-on-read, format v2).

Called by :meth:`commit_service.iceberg.committer.IcebergCommitter._commit` for a ``mode: upsert``
table; the committer commits what this returns as one ``RowDelta`` snapshot with the offsets in
its summary. Why not Iceberg's own ``MERGE INTO``: its scan reads the table as it is when it runs,
not as the round was planned from, so a round a zombie landed in between would be merged again;
and its commit checks nothing about Lakegate's offsets. Here every step reads the snapshot the
round was planned from, and the commit is refused if the table moved (docs/iceberg.md, "Upserts").

The steps:

1. the round's changes (:class:`~commit_service.round.upsert_round.RoundChanges`, shared with
   Delta) against the table at the planned snapshot: the rows to write, the changed keys, the
   schema after the round (the table is created with it, or grows to it);
2. the rows are written by Spark as Parquet under ``data/lakegate-<commit id>/`` and described as
   data files (:mod:`commit_service.iceberg.datafiles`);
3. the table's rows of the changed keys at the planned snapshot are found by Iceberg's ``_file`` and
   ``_pos`` metadata columns and written by Spark, sorted, as position delete files under
   ``data/lakegate-<commit id>-deletes/`` (Parquet whose two columns carry the field ids
   Iceberg's spec reserves for ``file_path`` and ``pos``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from commit_service.domain import round_guard
from commit_service.domain.partitioning import PartitionField
from commit_service.domain.plan import PendingFile
from commit_service.domain.upsert import UpsertSpec
from commit_service.faults import MID_MERGE, crash_point
from commit_service.iceberg import datafiles
from commit_service.iceberg.partitions import SPLIT_COLUMN, marked, spec_of
from commit_service.iceberg.schema import iceberg_schema, same_columns
from commit_service.iceberg.tables import IcebergTable
from commit_service.round.conform import conform
from commit_service.round.convert import FrameReader
from commit_service.round.partitions import check_round_columns
from commit_service.round.upsert_round import RoundChanges
from commit_service.spark.jvm_classes import java_elements
from commit_service.storage.facts import FileFacts

# Field ids Iceberg's spec reserves for a position delete file's columns.
DELETE_FILE_PATH_ID = 2147483546
DELETE_POS_ID = 2147483545
FIELD_ID = "parquet.field.id"  # the Spark field metadata its Parquet writer stores as the field id


@dataclass(frozen=True)
class RowChanges:
    """The files of one round's snapshot (built by :meth:`IcebergUpsert.round` for an upsert
    table, by the committer for an append table)."""

    table: Any  # org.apache.iceberg.Table: the table the round lands in (created by it if new)
    rows: Any  # java.util.List<org.apache.iceberg.DataFile>: the rows written
    deletes: list[Any] = field(default_factory=list)  # org.apache.iceberg.DeleteFile: position deletes
    referenced: list[str] = field(default_factory=list)  # the data files the deletes point into
    planned_from: int | None = None  # the snapshot id the round read the table at (None: no snapshot)
    upsert: bool = True  # a row delta (an upsert round); False: an append


class IcebergUpsert:
    """Builds each upsert round's files for one Iceberg table (owned by its IcebergCommitter)."""

    def __init__(
        self, spark: Any, tables: IcebergTable, spec: UpsertSpec, partition_by: tuple[PartitionField, ...] = ()
    ) -> None:
        self.spark = spark
        self.tables = tables
        self.spec = spec
        self.partition_by = partition_by  # the spec a table Lakegate creates gets
        self._changes = RoundChanges(tables.location, spec)

    def round(
        self,
        table: Any | None,
        files: Sequence[PendingFile],
        reader: FrameReader,
        facts: Mapping[str, FileFacts],
        commit_id: str,
    ) -> RowChanges:
        """The round's row delta against ``table`` as loaded when the round was planned (None:
        no table yet; it is created here with the round's schema)."""
        head = table.currentSnapshot() if table is not None else None
        planned_from = int(head.snapshotId()) if head is not None else None
        table_schema = self.tables.spark_schema(table) if table is not None else None
        catalog, name = self.tables.catalog, self.tables.name
        scope = spec_of(table, name).key_parts(catalog, self.spec.key) if table is not None else []
        frame = self._at(planned_from, "*") if planned_from is not None else None
        changes = self._changes.read(files, reader, facts, table_schema, frame, scope)
        target = iceberg_schema(changes.schema)
        if table is None:  # another writer may create it first: its schema is then checked below
            check_round_columns(name, self.partition_by, target)
            table = self.tables.create(target, self.partition_by)
            table_schema = self.tables.spark_schema(table)
        if not same_columns(target, table_schema):
            self.tables.grow(table, target)
        spec = spec_of(table, name)
        check_round_columns(name, spec.fields, target)
        rows = conform(changes.rows, json.loads(changes.rows.schema.json()), target)
        written = self._write_rows(table, rows, commit_id, spec.split_columns(catalog))
        if planned_from is None or changes.keys is None:
            crash_point(MID_MERGE)
            return RowChanges(table, written)
        deletes, referenced = self._deletes(table, planned_from, changes.keys, commit_id, changes.scope, changes.bounds)
        crash_point(MID_MERGE)
        return RowChanges(table, written, deletes, referenced, planned_from)

    def _at(self, snapshot_id: int, *columns: str) -> Any:
        """The table's ``columns`` as of snapshot ``snapshot_id`` (its deletes applied)."""
        name = ".".join(f"`{part}`" for part in (self.tables.catalog, *self.tables.name.split(".")))
        return self.spark.sql(f"SELECT {', '.join(columns)} FROM {name} VERSION AS OF {snapshot_id}")

    def _write_rows(self, table: Any, rows: Any, commit_id: str, split: Sequence[tuple[str, str]]) -> Any:
        """``rows`` written under the table's ``data/lakegate-<commit_id>/`` as data files (one
        directory per partition of ``split``); the round guard checks that their footers hold every row."""
        expected = rows.count()
        directory = f"{table.location().rstrip('/')}/data/lakegate-{commit_id}"
        datafiles.write(rows, directory, split)
        written = datafiles.data_files(
            self.spark, table, datafiles.parquet_files(self.spark, directory, split), self.tables.name_mapping(table)
        )
        schema = json.loads(rows.schema.json())
        round_guard.check(
            self.tables.name, [round_guard.Source("the upserted rows", expected, schema)], written.rows, schema
        )
        return datafiles.round_data_files(self.spark).holdingRows(written.files)

    def _deletes(
        self, table: Any, snapshot_id: int, keys: Any, commit_id: str, scope: Any = None, bounds: Any = None
    ) -> tuple[list[Any], list[str]]:
        """Position delete files for the rows of ``keys`` in the table at ``snapshot_id`` (in the
        partitions ``scope`` keeps and the key range ``bounds``, when given: Iceberg plans only the
        files whose column bounds meet them), and the data files they point into. On a
        partitioned table each delete file lies in the partition (and spec) of the data files it
        points into, as Iceberg applies a position delete only within its partition."""
        from pyspark.sql import functions as F

        key = list(self.spec.key)
        partitioned = any(e.getValue().isPartitioned() for e in java_elements(table.specs().entrySet()))
        placed = ["_spec_id", "_partition"] if partitioned else []
        located = self._at(snapshot_id, *(f"`{k}`" for k in key), "_file", "_pos", *placed)
        for condition in (c for c in (scope, bounds) if c is not None):
            located = located.where(condition)
        located = located.join(keys, key, "left_semi")
        positions = located.select(
            F.col("_file").alias("file_path", metadata={FIELD_ID: DELETE_FILE_PATH_ID}),
            F.col("_pos").alias("pos", metadata={FIELD_ID: DELETE_POS_ID}),
            *(F.col(c).alias(f"_lakegate{c}") for c in placed),
        ).localCheckpoint()
        referenced = sorted(r[0] for r in positions.select("file_path").distinct().collect())
        if not referenced:
            return [], []
        directory = f"{table.location().rstrip('/')}/data/lakegate-{commit_id}-deletes"
        if not partitioned:  # the spec wants each delete file sorted by file_path, then pos
            datafiles.write(positions.repartition("file_path"), directory, order=("file_path", "pos"))
            return datafiles.delete_files(self.spark, table, datafiles.parquet_files(self.spark, directory)), referenced
        out = []
        for (spec_id,) in positions.select("_lakegate_spec_id").distinct().collect():
            spec = table.specs().get(spec_id)
            split = [
                (SPLIT_COLUMN.format(i), marked(f"`_lakegate_partition`.`{f.name()}`"))
                for i, f in enumerate(java_elements(spec.fields()))
            ]
            group = positions.where(F.col("_lakegate_spec_id") == spec_id).repartition("file_path")
            within = f"{directory}/spec-{spec_id}"
            datafiles.write(
                group, within, split, drop=("_lakegate_spec_id", "_lakegate_partition"), order=("file_path", "pos")
            )
            found = datafiles.parquet_files(self.spark, within, split)
            out.extend(datafiles.delete_files(self.spark, table, found, spec))
        return out, referenced
