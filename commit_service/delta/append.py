"""What a round writes into an append table: its files as Delta ``AddFile`` actions.

Called by :class:`~commit_service.delta.committer.DeltaCommitter` once per round of a table
without ``mode: upsert`` (:class:`~commit_service.delta.upsert.UpsertWriter` serves those):

1. the round's schema is reconciled from each file's shape and the table's
   (``commit_service.domain.round_schema``); a file that conflicts refuses the round for itself;
2. Parquet files that fit that schema are added where they lie (``in_place``) or copied under
   ``<table>/data/`` first (``copy_into_table``), with their footers' statistics;
3. the others (JSON lines, CSV, enveloped Parquet) are read as one frame of that schema
   (:class:`~commit_service.round.convert.FrameReader`) and written by ``txn.writeFiles``;
4. the round guard (``commit_service.domain.round_guard``) checks what will be written against
   what the files hold, before anything commits.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from commit_service.config import Placement
from commit_service.delta import path_guard
from commit_service.delta.jvm_actions import ActionBuilder, ActionKind
from commit_service.delta.jvm_handles import JvmHandles
from commit_service.delta.partitions import UNPARTITIONED, DeltaPartitioning
from commit_service.domain import round_guard
from commit_service.domain.paths import delta_path
from commit_service.domain.plan import PendingFile
from commit_service.domain.round_schema import FileShape, Widening, fits, reconcile, resolved_schema
from commit_service.errors import SchemaMismatchError
from commit_service.round.commit import Written
from commit_service.round.convert import FrameReader
from commit_service.round.partitions import check_partitionable, column_types, pins_of
from commit_service.round.sources import FileSchemas
from commit_service.storage.reader import FileFacts, StorageReader
from lakegate_core.protocol import FileFormat

logger = logging.getLogger(__name__)

SetSchema = Callable[[dict[str, Any], Sequence[Widening]], None]  # the round's schema, the columns it widens


class AppendWriter:
    """The append rounds of one table; owned by its :class:`~commit_service.delta.committer.DeltaCommitter`."""

    def __init__(
        self,
        spark: Any,
        table: str,
        root: str,
        storage: StorageReader,
        actions: ActionBuilder,
        handles: JvmHandles,
        *,
        placement: Placement,
        type_widening: bool,
        partitioning: DeltaPartitioning = UNPARTITIONED,
    ) -> None:
        self.spark = spark
        self.table = table
        self.root = root
        self.storage = storage
        self.placement = placement
        self.type_widening = type_widening
        self.partitioning = partitioning
        self._actions = actions
        self._handles = handles
        self.parquet_schemas = FileSchemas(spark)
        self._said_outside_root = False

    def round(
        self,
        txn: Any,
        files: Sequence[PendingFile],
        reader: FrameReader,
        facts: dict[str, FileFacts],
        read_version: int,
        table_schema: dict[str, Any] | None,
        set_schema: SetSchema,
    ) -> Written:
        """An append round's file actions: the round's schema reconciled (a conflicting file is
        refused), Parquet files that fit it added in place, the others rewritten to it, and the
        round guard's check of what was written."""
        shapes = {p.file.path: reader.shape(p, facts[p.file.path]) for p in files}
        stripped = DeltaPartitioning.strip(table_schema) if table_schema is not None else None
        joined = reconcile(
            stripped, [FileShape(p.file.path, shapes[p.file.path]) for p in files], widen=self.type_widening
        )
        if joined.refused:
            path, reason = next(iter(joined.refused.items()))
            raise SchemaMismatchError(path, reason)
        target = resolved_schema(joined.schema)
        types = self._partitionable(files, shapes, target)
        fitting: dict[int, tuple[Any, bool]] = {}  # id of a footer schema -> it, and whether it fits
        in_place: list[tuple[PendingFile, dict[str, str | None]]] = []
        rewritten: list[PendingFile] = []
        split = 0
        for p in files:  # one pass: a membership test per file made 10,000-file rounds quadratic
            addable = self._adds_in_place(p, reader, facts[p.file.path], target, fitting)
            values = self._partition_values(p.file.path, facts[p.file.path], types) if addable else None
            if values is None:
                rewritten.append(p)
                split += addable
            else:
                in_place.append((p, values))
        placed = self._place([p for p, _ in in_place])
        set_schema(self.partitioning.with_generated(target), joined.widened)
        adds = self._actions.many(
            ActionKind.ADD,
            (self._add_file(placed[p.file.path], facts[p.file.path], values) for p, values in in_place),
        )
        written: list[Any] = [adds]
        in_place_sources = [round_guard.Source(p.file.path, 0, shapes[p.file.path]) for p, _ in in_place]
        round_guard.check(self.table, in_place_sources, 0, target)
        if rewritten:
            frame = reader.frame(rewritten, facts, target)
            try:
                new_adds = txn.writeFiles(path_guard.guarded(frame, self.partitioning)._jdf)
            except Exception as exc:  # py4j surfaces the write's failure as Py4JJavaError
                if path_guard.tripped(exc):
                    raise path_guard.culprit(
                        rewritten, lambda p: reader.frame([p], facts, target), self.partitioning
                    ) from None
                raise
            sources = [
                round_guard.Source(p.file.path, reader.rows(p, facts[p.file.path]), shapes[p.file.path])
                for p in rewritten
            ]
            rows = round_guard.written_rows(self._add_stats(new_adds))
            if rows < 0:  # a table that collects no statistics: count the frame (one Spark job)
                rows = int(frame.count())
            round_guard.check(self.table, sources, rows, json.loads(frame.schema.json()))
            written.append(self._handles.as_java(new_adds))
        return Written(written, len(in_place), len(rewritten), split)

    def _partitionable(
        self, files: Sequence[PendingFile], shapes: dict[str, dict[str, Any]], target: dict[str, Any]
    ) -> dict[str, str]:
        """The round's column types, once the table's partitioning is checked against them: every
        file must hold each column ``partition_by`` names (else that file is refused), and the
        round's schema must give it a type its transform takes (else nothing commits)."""
        types = column_types(target)
        check_partitionable(self.table, self.partitioning.fields, files, shapes, types)
        return types

    def _partition_values(self, path: str, facts: FileFacts, types: dict[str, str]) -> dict[str, str | None] | None:
        """The ``partitionValues`` a Parquet file (at ``path``) that may be added in place is
        committed with, or None when its rows may lie in more than one partition (it is then
        rewritten: split); a value Delta cannot hold refuses the file (:mod:`.path_guard`)."""
        if not self.partitioning.fields:
            return {}
        pins = pins_of(self.partitioning.fields, facts, types)
        values = None if pins is None else self.partitioning.values(pins)
        if values is not None:
            path_guard.check_values(path, values)
        return values

    def _adds_in_place(
        self,
        p: PendingFile,
        reader: FrameReader,
        facts: FileFacts,
        target: dict[str, Any],
        fitting: dict[int, tuple[Any, bool]],
    ) -> bool:
        """Whether Parquet file ``p`` may be committed where it lies (or copied): not in the envelope,
        of the table's types, and for ``in_place`` under the table root; else it is rewritten."""
        if p.file.format is not FileFormat.PARQUET or reader.lifts(p, facts):
            return False
        if self.placement is Placement.IN_PLACE and not p.file.path.startswith(self.root):
            if not self._said_outside_root:  # a rewrite costs what an add does not: say so, once
                logger.warning(
                    "table %s: Parquet file %s lies outside the table root %s, so it is rewritten into the table "
                    "(placement in_place adds only files under the root; copy_into_table copies them); said once",
                    self.table,
                    p.file.path,
                    self.root,
                )
                self._said_outside_root = True
            return False
        physical = self.parquet_schemas.get(p.file.path, facts.schema_key)
        if id(physical) not in fitting:  # the schema is kept with its answer: its id stays its own
            fitting[id(physical)] = (physical, fits(physical, target))
        return fitting[id(physical)][1]

    def _add_stats(self, adds: Any) -> list[dict[str, Any] | None]:
        """The statistics (``numRecords``, ...) of the AddFiles ``txn.writeFiles`` returned."""
        mapper = self._handles.json_mapper
        actions = json.loads(mapper.writeValueAsString(self._handles.as_java(adds)))
        return [json.loads(a["stats"]) if a.get("stats") else None for a in actions]

    def _place(self, files: list[PendingFile]) -> dict[str, str]:
        """Where each in-place file is committed from: copied under ``<table>/data/<topic>/<partition>/``
        first with ``copy_into_table``, else where it is (``in_place`` files lie under the root)."""
        if self.placement is not Placement.COPY_INTO_TABLE:
            return {p.file.path: p.file.path for p in files}
        placed = {}
        for p in files:
            target = f"{self.root}data/{p.file.topic}/{p.file.partition}/{p.file.path.rsplit('/', 1)[1]}"
            self.storage.copy(p.file.path, target)
            placed[p.file.path] = target
        return placed

    def _add_file(self, uri: str, facts: FileFacts, values: dict[str, str | None]) -> dict[str, Any]:
        """The ``AddFile`` (its fields) committing ``uri`` in place, in the partition of ``values``."""
        return {
            "path": delta_path(uri, self.root),
            "partitionValues": values,
            "size": facts.size_bytes,
            "modificationTime": facts.modification_time_ms,
            "dataChange": True,
            **({"stats": facts.stats_json} if facts.stats_json else {}),
        }
