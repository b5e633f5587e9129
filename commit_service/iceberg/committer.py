"""An Iceberg table's writer (the :class:`~commit_service.ports.Committer` port): read its Lakegate
offsets from its snapshots, make each round one snapshot.

Called by the table's coordinator (one thread per table at a time, never from request threads).
Iceberg's half of the round skeleton (:mod:`commit_service.round.commit`, which checks the
plan's offsets, labels the Spark jobs and places the crash points). A round (docs/iceberg.md,
"How a round commits"):

1. the table as the last round left it (read afresh from its catalog after a failed round, a
   maintenance run or a start), and its offsets from its newest Lakegate snapshot
   (:mod:`commit_service.iceberg.summary`); the plan must start exactly there, else
   :class:`OffsetsMovedError` (re-read, re-plan);
2. the round's schema is reconciled from each file's shape and the table's
   (``commit_service.domain.round_schema``; a conflicting file refuses the round for itself); the
   table is created with it, or grows to it (a metadata commit of its own, no snapshot);
3. plain Parquet files whose columns and types fit the table's are added as they are (zero copy;
   ``copy_into_table`` copies them under the table's ``data/`` first); the other files' records
   are read as one frame of that schema (:class:`~commit_service.round.convert.FrameReader`) and
   written by Spark as Parquet under the table's ``data/lakegate-<commit id>/``; every file becomes
   an Iceberg ``DataFile`` with its footer's metrics (:mod:`commit_service.iceberg.datafiles`),
   and the round guard checks them;
4. one append holds those files and, in its snapshot summary, the next offset of every partition
   of the table and the commit's record; it lands only if the table's offsets are still those of
   step 1 (``io.lakegate.iceberg.OffsetsUnchanged``, :mod:`commit_service.iceberg.validator`, inside
   Iceberg's commit).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from commit_service.config import Placement
from commit_service.domain.compaction import CompactionPlan, PartitionKey
from commit_service.domain.content import Unwrap
from commit_service.domain.coverage import OffsetCheck
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.partitioning import PartitionField
from commit_service.domain.paths import root_prefix
from commit_service.domain.plan import CommitPlan
from commit_service.domain.upsert import UpsertSpec
from commit_service.errors import (
    CommitError,
    OffsetsMovedError,
    TableUnavailableError,
    TableWriteError,
    UnexpectedCommitError,
)
from commit_service.iceberg import datafiles
from commit_service.iceberg.append import IcebergAppend
from commit_service.iceberg.catalog_read import CatalogReader
from commit_service.iceberg.ledger import IcebergLedger
from commit_service.iceberg.maintenance import IcebergMaintainer
from commit_service.iceberg.merge import IcebergArrowMerge
from commit_service.iceberg.summary import COMMIT, COMMIT_ID, OFFSETS, encode
from commit_service.iceberg.tables import IcebergTable
from commit_service.iceberg.upsert import IcebergUpsert, RowChanges
from commit_service.iceberg.validator import offsets_unchanged
from commit_service.ports import TableSnapshot
from commit_service.round.commit import Opened, RoundCommit, RoundFiles, Written
from commit_service.round.sources import FileSchemas
from commit_service.spark.java_errors import ICEBERG_VALIDATION, Failure, classify, java_summary, thrown
from commit_service.storage.prefetch import FactsCache, storage_facts
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile
from lakegate_core.status import CommitRecord, MaintenanceKind, MaintenanceRecord
from lakegate_core.types import PartitionOffsets

logger = logging.getLogger(__name__)

# Spark writes timestamps as INT96 by default, a type Iceberg's spec does not have: the round's
# writer session writes them as the int64 microseconds Iceberg's timestamps are.
WRITER_CONF = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}


@dataclass(frozen=True)
class _Base:
    """What a round read of its table: the table, its offsets, and its metadata as stored."""

    table: Any | None
    snapshot: TableSnapshot
    text: str | None


class IcebergCommitter:
    """Commits plans into one Iceberg table; owned by that table's coordinator."""

    def __init__(
        self,
        spark: Callable[[], Any],
        table: str,
        catalog: str,
        path: str,
        storage: StorageReader,
        clock: Callable[[], float] = time.time,
        *,
        unwrap: Unwrap = Unwrap.AUTO,
        offset_check: OffsetCheck = OffsetCheck.AUTO,
        facts: FactsCache | None = None,
        placement: Placement = Placement.IN_PLACE,
        upsert: UpsertSpec | None = None,
        partition_by: tuple[PartitionField, ...] = (),
        catalog_reader: CatalogReader | None = None,
    ) -> None:
        self._spark_factory = spark  # the process's session, started on first need
        self._catalog_reader = catalog_reader  # the start-up's read without Spark (None: Spark's)
        self.table = table
        self.catalog = catalog
        self.path = path
        self.storage = storage
        self.clock = clock
        self.unwrap = unwrap
        self.offset_check = offset_check
        self.placement = placement
        self.facts = facts if facts is not None else FactsCache(storage_facts(storage, footers=True), name=table)
        self._ready: tuple[Any, Any, IcebergTable, FileSchemas, IcebergMaintainer] | None = None
        self.upsert = upsert
        self.partition_by = partition_by
        self._validator: Any = None  # the round's io.lakegate.iceberg.OffsetsUnchanged
        self._upsert: IcebergUpsert | None = None  # built with the session (upsert tables)
        self._append = IcebergAppend(
            table, catalog, storage, placement=placement, partition_by=partition_by, parts=self._parts
        )
        self._round = RoundCommit(
            table,
            self,
            storage,
            self.facts,
            unwrap=unwrap,
            offset_check=offset_check,
            root=root_prefix(path),
            clock=clock,
        )

    def _parts(self) -> tuple[Any, Any, IcebergTable, FileSchemas, IcebergMaintainer]:
        """The session, the round writer's session, the table, footer schemas, the maintainer: built once."""
        if self._ready is None:
            spark = self._spark_factory()
            writer = spark.newSession()  # shares the SparkContext; SQL settings of its own
            catalog = f"spark.sql.catalog.{self.catalog}"  # set at run time: a new session lacks it
            settings = {k: v for k, v in spark.conf.getAll.items() if k == catalog or k.startswith(f"{catalog}.")}
            for key, value in {**settings, **WRITER_CONF}.items():  # the catalog: Iceberg's functions split rewrites
                writer.conf.set(key, value)
            table = IcebergTable(spark, self.catalog, self.table, self.path)
            if self.upsert is not None:
                self._upsert = IcebergUpsert(spark, table, self.upsert, self.partition_by)
            self._ready = (
                spark,
                writer,
                table,
                FileSchemas(writer),
                IcebergMaintainer(
                    spark, table, IcebergArrowMerge(spark, table, self.storage) if self.upsert is None else None
                ),
            )
        return self._ready

    # -- reading --------------------------------------------------------------------------

    def snapshot(self) -> TableSnapshot:
        """The table's version and offsets, from its catalog: before the session is up, read
        without Spark where the catalog allows (:mod:`commit_service.iceberg.catalog_read`); else,
        and once it is up, through Spark (which starts first if it has not)."""
        if self._ready is None and self._catalog_reader is not None:
            started = time.monotonic()
            try:
                snap = self._catalog_reader.read(self.table)[0]
            except CommitError:  # the table's offsets are not Lakegate's: Spark would say the same
                raise
            except Exception as exc:  # pyiceberg's or the store's: Spark reads it instead
                logger.warning(
                    "table %s: catalog %s could not be read without Spark (%s: %s); reading it through Spark",
                    self.table,
                    self.catalog,
                    type(exc).__name__,
                    str(exc).splitlines()[0][:300] if str(exc) else "",
                )
            else:
                logger.info(
                    "table %s: version %d read from catalog %s without Spark in %.2f s",
                    self.table,
                    snap.version,
                    self.catalog,
                    time.monotonic() - started,
                )
                return snap
        return self._spark_snapshot()

    def _spark_snapshot(self) -> TableSnapshot:
        try:
            _, _, table, _, _ = self._parts()
            return table.snapshot(table.load())
        except CommitError:
            raise
        except Exception as exc:  # py4j surfaces Iceberg's exceptions as Py4JJavaError
            raise self.translate(exc, reread=False) from exc

    def warm(self) -> TableSnapshot:
        """Start the session, load the table through it and read its offsets there (what the
        coordinator cross-checks with the start-up's read)."""
        return self._spark_snapshot()

    def prefetch(self, files: list[DataFile]) -> None:
        self.facts.prefetch(files)

    def file_count(self) -> int:
        return self._parts()[4].file_count()

    def maintain(self, kind: MaintenanceKind, policy: MaintenancePolicy) -> MaintenanceRecord:
        try:
            return self._parts()[4].maintain(kind, policy)
        except CommitError:
            raise
        except Exception as exc:  # py4j surfaces Iceberg's exceptions as Py4JJavaError
            raise self.translate(exc, reread=False) from exc
        finally:  # it commits through a table of its own: the next round reads afresh
            self._forget()

    def small_files(self, below: int) -> dict[PartitionKey, list[int]]:
        try:
            return self._parts()[4].small_files(below)
        except CommitError:
            raise
        except Exception as exc:  # py4j surfaces Iceberg's exceptions as Py4JJavaError
            raise self.translate(exc, reread=False) from exc

    def compact_small(self, plan: CompactionPlan) -> MaintenanceRecord:
        try:
            return self._parts()[4].compact_small(plan)
        except CommitError:
            raise
        except Exception as exc:
            raise self.translate(exc, reread=False) from exc
        finally:
            self._forget()

    def checkpoint(self) -> MaintenanceRecord:
        raise TableWriteError(f"table {self.table}: an Iceberg table has no checkpoints")

    def register(self, name: str) -> None:
        """An Iceberg table is in its catalog already: Spark SQL reads it as ``<catalog>.<name>``."""

    def ledger(self) -> IcebergLedger:
        spark, _, table, _, _ = self._parts()
        return IcebergLedger(spark, table)

    # -- committing (the round's skeleton is commit_service.round.commit; this is Iceberg's half) --

    def commit(self, plan: CommitPlan) -> CommitRecord:
        """Make ``plan`` one Iceberg snapshot, or raise a :class:`CommitError` having changed nothing
        (files a failed round wrote under ``data/`` are in no snapshot)."""
        try:
            return self._round.commit(plan)
        except BaseException:
            self._forget()
            raise

    def _forget(self) -> None:
        if self._ready is not None:
            self._ready[2].forget()

    def session(self) -> Any:
        return self._parts()[0]

    def reading(self) -> tuple[Any, FileSchemas]:
        _, writer, _, schemas, _ = self._parts()
        return writer, schemas

    def open_round(self, plan: CommitPlan) -> Opened:
        """The table as the last round left it (else read afresh from its catalog: see
        :meth:`IcebergTable.current`), and its offsets from its newest Lakegate snapshot."""
        self._validator = None
        tables = self._parts()[2]
        table = tables.current()
        base, base_text = tables.read(table)  # base_text: what the round lands on, as stored
        schema = tables.spark_schema(table) if table is not None else None
        return Opened(_Base(table, base, base_text), base.version, base.offsets, schema)

    def write_round(self, opened: Opened, round_files: RoundFiles) -> Written:
        """The round's data files: appended, or for an upsert table its rows and delete files."""
        table = opened.txn.table
        r = round_files
        if self._upsert is not None:  # every file is read as changes and merged by key
            return Written(self._upsert.round(table, r.files, r.reader, r.facts, r.commit_id), 0, len(r.files))
        return self._append.round(table, r.files, r.reader, r.facts, r.commit_id)

    def land(self, opened: Opened, written: RowChanges, plan: CommitPlan, record: CommitRecord) -> Callable[[], int]:
        """One append (or row delta) holding the round's files and, in its snapshot summary, the
        next offset of every partition of the table and the commit's record; it lands only if the
        table's offsets are still those the round read (``OffsetsUnchanged``, inside Iceberg's commit)."""
        base: _Base = opened.txn
        update = self._snapshot_update(written)
        offsets = PartitionOffsets({**base.snapshot.offsets, **plan.offsets})
        update.set(OFFSETS, encode(offsets))
        update.set(COMMIT_ID, record.commit_id)
        update.set(COMMIT, json.dumps(record.user_metadata(), separators=(",", ":")))
        self._validator = offsets_unchanged(self._parts()[0]._jvm, base.text)
        update.validateWith(self._validator)

        def landing() -> int:
            update.commit()
            return self._landed_version(written.table, record.commit_id, record.version)

        return landing

    def _snapshot_update(self, changes: RowChanges) -> Any:
        """The round's snapshot: an append, or for an upsert round a row delta that also lands
        only if the data files its deletes point into are still there and no data was added
        since the snapshot it read (a row of a changed key added meanwhile would survive)."""
        table = changes.table
        files = datafiles.round_data_files(self._parts()[0])
        if not changes.upsert:
            append = table.newAppend()
            files.append(append, changes.rows)
            return append
        delta = table.newRowDelta()
        files.addRows(delta, changes.rows)
        for delete_file in changes.deletes:
            delta.addDeletes(delete_file)
        if changes.planned_from is not None:
            delta.validateFromSnapshot(changes.planned_from)
            delta.validateNoConflictingDataFiles()
            if changes.referenced:
                delta.validateDataFilesExist(changes.referenced)
                delta.validateDeletedFiles()
        return delta

    def _landed_version(self, table: Any, commit_id: str, planned: int) -> int:
        """The sequence number of the snapshot that holds ``commit_id``, from the metadata the
        commit left in ``table`` (a REST catalog's commit answers with it; a JDBC or Hive
        catalog's table reads it again on this first use by itself), not from another load."""
        snap = table.currentSnapshot()
        for _ in range(100):
            if snap is None:
                break
            if snap.summary().get(COMMIT_ID) == commit_id:
                return int(snap.sequenceNumber())
            parent = snap.parentId()
            snap = table.snapshot(parent) if parent is not None else None
        return planned

    def translate(self, exc: Exception, *, reread: bool = True) -> CommitError:
        """A :class:`CommitError` for what the commit path raised, by the JVM exception's class,
        and for a refused snapshot by what the offsets check saw."""
        summary = f"table {self.table}: Iceberg commit failed: {java_summary(exc)}"
        if reread and thrown(exc, ICEBERG_VALIDATION):
            validator = self._validator
            if validator is not None and validator.moved():
                return self._moved("offsets moved before the snapshot landed")
            if self.upsert is not None:  # a data file the round deletes from went, or rows came
                return self._moved("the table changed under the round's deletes")
            return TableWriteError(summary)
        kind = classify(exc)
        if kind is Failure.CONCURRENT and reread:
            return self._moved("concurrent commit")
        if kind in (Failure.UNAVAILABLE, Failure.CONCURRENT):
            return TableUnavailableError(summary)
        if kind is Failure.DELTA:
            return TableWriteError(summary)
        return UnexpectedCommitError(f"table {self.table}: unexpected {type(exc).__name__} in the commit path")

    def _moved(self, why: str) -> CommitError:
        try:
            snap = self.snapshot()
        except CommitError as exc:
            return exc
        return OffsetsMovedError(f"table {self.table}: {why}, offsets re-read", snap.version, snap.offsets)
