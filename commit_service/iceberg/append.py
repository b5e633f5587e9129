"""What a round writes into an Iceberg append table: its files as Iceberg ``DataFile``s.

Called by :class:`~commit_service.iceberg.committer.IcebergCommitter` once per round of a table
without ``mode: upsert`` (:class:`~commit_service.iceberg.upsert.IcebergUpsert` serves those):

1. the round's schema is reconciled from each file's shape and the table's
   (``commit_service.domain.round_schema``; a conflicting file refuses the round for itself); the
   table is created with it (and ``partition_by``'s spec), or grows to it (a metadata commit of
   its own, no snapshot);
2. plain Parquet files whose columns and types fit the table's are added as they are (zero copy;
   ``copy_into_table`` copies them under the table's ``data/`` first), in a partitioned table
   only when their footer's bounds pin every row to one partition (its values go with them);
3. the other files' records are read as one frame of that schema
   (:class:`~commit_service.round.convert.FrameReader`) and written by Spark as Parquet under the
   table's ``data/lakegate-<commit id>/``, one directory per partition of the table's spec;
4. every file becomes an Iceberg ``DataFile`` with its footer's metrics
   (:mod:`commit_service.iceberg.datafiles`), and the round guard checks them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from commit_service.config import Placement
from commit_service.domain import round_guard
from commit_service.domain.partitioning import PartitionField
from commit_service.domain.plan import PendingFile
from commit_service.domain.round_schema import FileShape, Schema, fits, reconcile, resolved_schema
from commit_service.errors import SchemaMismatchError
from commit_service.iceberg import datafiles
from commit_service.iceberg.partitions import IcebergPartitioning, spec_of
from commit_service.iceberg.schema import addable_as_is, iceberg_schema, same_columns
from commit_service.iceberg.tables import IcebergTable
from commit_service.iceberg.upsert import RowChanges
from commit_service.round.commit import Written
from commit_service.round.convert import FrameReader
from commit_service.round.partitions import check_partitionable, column_types, pins_of
from commit_service.round.sources import FileSchemas
from commit_service.storage.reader import FileFacts, StorageReader
from lakegate_core.protocol import FileFormat


class IcebergAppend:
    """The append rounds of one table; owned by its :class:`~commit_service.iceberg.committer.IcebergCommitter`."""

    def __init__(
        self,
        table: str,
        catalog: str,
        storage: StorageReader,
        *,
        placement: Placement,
        partition_by: tuple[PartitionField, ...],
        parts: Callable[[], tuple[Any, Any, IcebergTable, FileSchemas, Any]],
    ) -> None:
        self.table = table
        self.catalog = catalog
        self.storage = storage
        self.placement = placement
        self.partition_by = partition_by  # the spec a table Lakegate creates gets
        self._parts = parts

    def round(
        self,
        table: Any | None,
        files: Sequence[PendingFile],
        reader: FrameReader,
        facts: dict[str, FileFacts],
        commit_id: str,
    ) -> Written:
        """The round's data files (in :class:`RowChanges`, with the table: created by the round when it had none)."""
        spark, _, tables, schemas, _ = self._parts()
        table_schema = tables.spark_schema(table) if table is not None else None
        shapes = {p.file.path: reader.shape(p, facts[p.file.path]) for p in files}
        joined = reconcile(table_schema, [FileShape(p.file.path, shapes[p.file.path]) for p in files], widen=False)
        if joined.refused:
            path, reason = next(iter(joined.refused.items()))
            raise SchemaMismatchError(path, reason)
        target = iceberg_schema(resolved_schema(joined.schema))
        types = column_types(target)
        if table is None:  # another writer may create it first: its schema is then checked below
            check_partitionable(self.table, self.partition_by, files, shapes, types)
            table = tables.create(target, self.partition_by)
            table_schema = tables.spark_schema(table)
        if table_schema is not None and not same_columns(target, table_schema):
            tables.grow(table, target)
        spec = spec_of(table, self.table)
        check_partitionable(self.table, spec.fields, files, shapes, types)

        candidates, rewritten = self._split(files, reader, facts, schemas, target)
        in_place: list[tuple[PendingFile, list[str] | None]] = []
        for p in candidates:
            values = self._values(spec, facts[p.file.path], types)
            if values is None:
                rewritten.append(p)
            else:
                in_place.append((p, values if spec.fields else None))
        split = len(candidates) - len(in_place)
        mapping = tables.name_mapping(table)
        added = datafiles.footer_files(
            spark,
            table,
            [
                (self._place(table, p), facts[p.file.path].size_bytes, values, facts[p.file.path].footer)
                for p, values in in_place
            ],
            mapping,
        )
        round_guard.check(
            self.table,
            [
                round_guard.Source(p.file.path, reader.rows(p, facts[p.file.path]), shapes[p.file.path])
                for p, _ in in_place
            ],
            added.rows,
            target,
        )
        rows = added.files
        if rewritten:
            frame = reader.frame(rewritten, facts, target)
            directory = f"{table.location().rstrip('/')}/data/lakegate-{commit_id}"
            columns = spec.split_columns(self.catalog)
            datafiles.write(frame, directory, columns)
            written = datafiles.data_files(spark, table, datafiles.parquet_files(spark, directory, columns), mapping)
            sources = [
                round_guard.Source(p.file.path, reader.rows(p, facts[p.file.path]), shapes[p.file.path])
                for p in rewritten
            ]
            round_guard.check(self.table, sources, written.rows, json.loads(frame.schema.json()))
            rows.addAll(written.files)
        return Written(RowChanges(table, rows, upsert=False), len(in_place), len(rewritten), split)

    @staticmethod
    def _values(spec: IcebergPartitioning, facts: FileFacts, types: dict[str, str]) -> list[str] | None:
        """A file's partition values ([] unpartitioned), or None when it must be split."""
        if not spec.fields:
            return []
        pins = pins_of(spec.fields, facts, types)
        return spec.values(pins) if pins is not None else None

    def _split(
        self,
        files: Sequence[PendingFile],
        reader: FrameReader,
        facts: dict[str, FileFacts],
        schemas: FileSchemas,
        target: Schema,
    ) -> tuple[list[PendingFile], list[PendingFile]]:
        """The files that may be added as they are (plain Parquet whose columns and types fit the
        table's and that every Iceberg reader reads: zero copy), and those rewritten by Spark
        (JSON lines, CSV, the sink's envelope, other types)."""
        in_place: list[PendingFile] = []
        rewritten: list[PendingFile] = []
        fitting: dict[str | None, bool] = {}  # footer schema -> whether files of it are added as they are
        for p in files:
            f = facts[p.file.path]
            if p.file.format is not FileFormat.PARQUET or reader.lifts(p, f):
                rewritten.append(p)
                continue
            if f.schema_key not in fitting:
                physical = schemas.get(p.file.path, f.schema_key)
                fitting[f.schema_key] = (
                    f.schema_key is not None and addable_as_is(f.schema_key) and fits(physical, target)
                )
            (in_place if fitting[f.schema_key] else rewritten).append(p)
        return in_place, rewritten

    def _place(self, table: Any, p: PendingFile) -> str:
        """Where a file added as it is lives in the table: where the sink wrote it (Iceberg names
        data files by absolute URI, so anywhere), or with ``copy_into_table`` a copy under the
        table's ``data/<topic>/<partition>/``."""
        if self.placement is not Placement.COPY_INTO_TABLE:
            return p.file.path
        target = (
            f"{table.location().rstrip('/')}/data/{p.file.topic}/{p.file.partition}/{p.file.path.rsplit('/', 1)[1]}"
        )
        self.storage.copy(p.file.path, target)
        return target
