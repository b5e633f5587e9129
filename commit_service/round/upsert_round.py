"""One upsert round's changes, ready for a table format to apply: the rows to write, the keys whose
rows the table must drop, and the table's schema after the round. Spark only; no table is written.

Called by both formats' upsert writers (:class:`~commit_service.delta.upsert.UpsertWriter` inside
Delta's transaction, :class:`~commit_service.iceberg.upsert.IcebergUpsert` before Iceberg's row
delta), each with the table as it was planned from (a Delta version, an Iceberg snapshot):

1. the round's files, read raw (the sink's envelope), become changes
   (:func:`commit_service.round.changes.changes`); each key keeps its last one
   (:func:`~commit_service.round.changes.latest`) unless the table's row is newer by
   ``ordering`` (:func:`~commit_service.round.changes.not_older`); the table is read only where
   the changed keys' range can be (:func:`~commit_service.round.changes.key_range`), and the
   formats' merges read it so too (:attr:`UpsertChanges.bounds`); the records read, the changes
   without a key and that range are measured in the pass that keeps each key's last change
   (:class:`~commit_service.round.changes.Measured`), not in a Spark job each;
2. the rows to write are the kept changes that are not deletes, shaped as the round's row image
   and the table's schema (a column no value has typed yet is left out, at any depth);
3. the round guard checks the rows read as changes, and that no column of any file is missing
   from the schema.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from commit_service.domain import round_guard
from commit_service.domain import upsert as spec_of
from commit_service.domain.partitioning import KeyPartition
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
from commit_service.round import changes as changes_of
from commit_service.round.conform import conform
from commit_service.round.convert import FrameReader
from commit_service.round.partitions import key_scope
from commit_service.storage.facts import FileFacts

logger = logging.getLogger(__name__)

# A round with at most this many changed keys sends them to every task joining them with the table
# (a broadcast join); more are joined by shuffling both sides, the table too.
BROADCAST_KEYS = 2_000_000
_EMPTY: Schema = {"type": "struct", "fields": []}


@dataclass(frozen=True)
class UpsertChanges:
    """What one upsert round does to a table (built by :class:`RoundChanges`)."""

    rows: Any  # DataFrame: each changed key's newest row, deletes left out, in ``schema``'s columns
    keys: Any | None  # DataFrame: the distinct changed keys (broadcast when few); None without a table
    schema: Schema  # the table's schema after this round (Spark's JSON form)
    widened: tuple[Widening, ...]  # the table columns this round widens (Delta's type widening)
    scope: str | None = None  # Spark SQL: the table's partitions the changed keys can be in (None: all)
    bounds: Any | None = None  # Column: the changed keys' range (changes.key_range; None: unbounded)
    limits: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)  # the same range as Python values


class RoundChanges:
    """Reads each upsert round of one table as :class:`UpsertChanges` (owned by the table's writer)."""

    def __init__(self, location: str, spec: UpsertSpec, type_widening: bool = False) -> None:
        self.location = location
        self.spec = spec
        self.type_widening = type_widening

    def read(
        self,
        files: Sequence[PendingFile],
        reader: FrameReader,
        facts: Mapping[str, FileFacts],
        table_schema: Schema | None,
        table: Any | None,
        scope: Sequence[KeyPartition] = (),
    ) -> UpsertChanges:
        """The round's changes against ``table`` (a DataFrame of the table as planned from; None:
        no rows yet) whose schema is ``table_schema`` (None: no table yet). With ``scope`` (the
        partition values the key decides), the table is read only in the partitions the changed
        keys are in, here and by the format's merge (:attr:`UpsertChanges.scope`)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        facts = dict(facts)
        table_type = StructType.fromJson(table_schema) if table_schema is not None else None
        # the records read, the changes without a key and the kept changes' count and key range
        # are measured in the one pass that reads the round (its checkpoint), not a job each
        read = changes_of.Measured("read", F.count(F.lit(1)).alias("n"))
        keyless = changes_of.Measured("keyless", F.count(F.when(changes_of.no_key(self.spec), 1)).alias("n"))
        raw = self._raw(files, reader, facts, table_schema)
        changed = keyless.on(self._changes(files, reader, facts, table_schema, table_type, raw, read))
        kept = changes_of.Measured("kept", *changes_of.key_measures(changed.schema, self.spec.key))
        last = kept.on(changes_of.latest(changed, self.spec)).localCheckpoint()  # read once, used several times
        expected = sum(reader.rows(p, facts.get(p.file.path)) for p in files)
        got = int(read.values()["n"])
        if got != expected:  # the round guard's row check, on the records read as changes
            round_guard.check(self.location, [round_guard.Source("the round", expected, _EMPTY)], got, _EMPTY)
        if keyless.values()["n"]:
            self._refuse(files, reader, facts, table_schema, table_type, changes_of.no_key_message(self.spec))
        small = True
        narrowed = key_scope(last.select(*self.spec.key).distinct(), scope) if table is not None else None
        if table is not None and narrowed is not None:
            logger.info("%s: the merge reads the partitions where %s", self.location, narrowed[1])
            table = table.where(narrowed[0])
        bounds: Any | None = None
        limits: dict[str, tuple[Any, Any]] = {}
        if table is not None:
            counted, bounds, limits = changes_of.key_range(kept.values(), changed.schema, self.spec.key)
            if bounds is not None:  # the table's rows of the changed keys lie in their range
                table = table.where(bounds)
            # few enough keys are broadcast to each task scanning the table: the table is never shuffled
            small = counted <= BROADCAST_KEYS
            if self.spec.orders_across_rounds:
                last = changes_of.not_older(last, table, self.spec, broadcast=small).localCheckpoint()
        rows = last.where(~F.col(spec_of.DELETE)).drop(*INTERNAL)
        image = spec_of.image_shape(
            spec_of.typed_raw(self._raw_schema(files, reader, facts), self.spec, table_schema, self.type_widening),
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
        keys = None
        if table is not None:
            keys = last.select(*self.spec.key).distinct()
            if small:
                # computed once, when first used, and held: a plan of the distinct keys is an
                # aggregate, which Spark's runtime bloom filter takes as worth filtering by the
                # table's side, so each join of them with the table scanned the table's files twice
                # (lazy: a Delta round the log shows touches no file never computes them)
                keys = F.broadcast(keys.localCheckpoint(eager=False))
        scoped = narrowed[0] if narrowed is not None else None
        return UpsertChanges(rows, keys, schema, tuple(widened), scoped, bounds, limits)

    def _changes(
        self,
        files: Sequence[PendingFile],
        reader: FrameReader,
        facts: dict[str, FileFacts],
        table_schema: Schema | None,
        table_type: Any,
        raw: Any,
        read: changes_of.Measured,
    ) -> Any:
        """The round's changes (their keys checked by the caller, :meth:`_refuse`); a file that
        cannot be read as changes is named (read alone)."""
        try:
            return changes_of.changes(raw, self.spec, table_type, check_keys=False, read=read)
        except ChangeError as exc:
            self._refuse(files, reader, facts, table_schema, table_type, str(exc))

    def _refuse(
        self,
        files: Sequence[PendingFile],
        reader: FrameReader,
        facts: dict[str, FileFacts],
        table_schema: Schema | None,
        table_type: Any,
        reason: str,
    ) -> NoReturn:
        """Raises DataFileError for the first of ``files`` that cannot be read as changes alone
        (a key checked too), else for the round's files together, for ``reason``."""
        for p in files:
            try:
                changes_of.changes(self._raw([p], reader, facts, table_schema), self.spec, table_type)
            except ChangeError as alone:
                raise DataFileError(p.file.path, str(alone)) from None
        raise DataFileError(files[0].file.path, f"{reason} (the round's files together)")

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
