"""A Delta table's writer (the :class:`~commit_service.ports.Committer` port): read its Lakegate
offsets, make each round one atomic commit.

Called by the table's coordinator (one thread per table at a time, never from request threads).
Delta's half of the round skeleton (:mod:`commit_service.round.commit`, which checks the plan's
offsets, labels the Spark jobs and places the crash points). Through py4j it drives Delta's own
``OptimisticTransaction`` (docs/design.md, "The commit layout"), its actions built from protocol
JSON (:mod:`commit_service.delta.jvm_actions`):

1. ``txnVersion(appId)`` for every partition of the plan, inside the transaction (a concurrent
   writer on the same partition then fails this commit instead of duplicating);
2. the plan must start exactly at those versions, else :class:`OffsetsMovedError` (re-read, retry);
3. the round's files: :class:`~commit_service.delta.append.AppendWriter` (Parquet added in place,
   the rest rewritten by ``txn.writeFiles``) or :class:`~commit_service.delta.upsert.UpsertWriter`;
4. one ``SetTransaction(appId="lakegate-<table>-<topic>-<partition>", version=next offset)`` each;
5. commit as ``STREAMING UPDATE`` (queryId ``lakegate-<table>``) with ``userMetadata`` =
   :meth:`CommitRecord.user_metadata`.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from py4j.protocol import Py4JError

from commit_service.config import Placement
from commit_service.delta.append import AppendWriter
from commit_service.delta.jvm_actions import ActionBuilder, ActionKind
from commit_service.delta.jvm_handles import JvmHandles
from commit_service.delta.key_ranges import KeyRangeLog
from commit_service.delta.ledger import DeltaLedger
from commit_service.delta.log import LogReadError, read_log
from commit_service.delta.maintenance import DeltaMaintainer
from commit_service.delta.merge import DeltaArrowMerge
from commit_service.delta.partitions import UNPARTITIONED, DeltaPartitioning
from commit_service.delta.txn import app_id, log_snapshot, parse_app_id
from commit_service.delta.upsert import UpsertWriter
from commit_service.domain.compaction import CompactionPlan, PartitionKey
from commit_service.domain.content import Unwrap
from commit_service.domain.coverage import OffsetCheck
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.paths import root_prefix, table_location
from commit_service.domain.plan import CommitPlan
from commit_service.domain.round_schema import Widening
from commit_service.domain.upsert import UpsertSpec
from commit_service.errors import (
    CommitError,
    OffsetsMovedError,
    TableLayoutError,
    TableUnavailableError,
    TableWriteError,
    UnexpectedCommitError,
)
from commit_service.ports import TableSnapshot
from commit_service.round.commit import Opened, RoundCommit, RoundFiles, Written
from commit_service.round.sources import FileSchemas
from commit_service.spark.java_errors import Failure, classify, java_summary
from commit_service.spark.jvm_classes import java_class
from commit_service.storage.prefetch import FactsCache, storage_facts
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile
from lakegate_core.status import CommitRecord, MaintenanceKind, MaintenanceRecord
from lakegate_core.types import PartitionOffsets, TopicPartition

logger = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
NO_CHECKPOINT_IN_COMMIT = str(2**31 - 1)  # Delta checkpoints every N commits inside the commit: never
TYPE_WIDENING = "delta.enableTypeWidening"  # a column widened (int -> long, ...) by a round
ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"  # upsert tables: MERGE-style deletes without rewrites


class DeltaCommitter:
    """Commits plans into one Delta table; owned by that table's coordinator."""

    def __init__(
        self,
        spark: Any,
        table: str,
        path: str,
        storage: StorageReader,
        clock: Callable[[], float] = time.time,
        *,
        placement: Placement = Placement.IN_PLACE,
        unwrap: Unwrap = Unwrap.AUTO,
        offset_check: OffsetCheck = OffsetCheck.AUTO,
        checkpoint_in_commit: bool = True,
        facts: FactsCache | None = None,
        upsert: UpsertSpec | None = None,
        type_widening: bool = False,
        partitioning: DeltaPartitioning = UNPARTITIONED,
    ) -> None:
        self.spark = spark
        self.partitioning = partitioning
        self.table = table
        self.location = table_location(path)
        self.root = root_prefix(path)
        self.storage = storage
        self.clock = clock
        self.unwrap = unwrap
        self.offset_check = offset_check
        self.checkpoint_in_commit = checkpoint_in_commit  # False: the service writes them (see checkpoint)
        self._handles = JvmHandles.resolve(spark._jvm)
        self._actions = ActionBuilder(spark._jvm, self._handles)
        self._maintainer = DeltaMaintainer(
            spark,
            table,
            self.location,
            self._log,
            # an upsert table's files carry deletion vectors, which a merge by Arrow would not apply
            DeltaArrowMerge(spark._jvm, spark.conf, self.root, storage, self._log) if upsert is None else None,
        )
        self.facts = facts if facts is not None else FactsCache(storage_facts(storage), name=table)
        self._append = AppendWriter(
            spark,
            table,
            self.root,
            storage,
            self._actions,
            self._handles,
            placement=placement,
            type_widening=type_widening,
            partitioning=partitioning,
        )
        self._upsert = (
            UpsertWriter(
                spark, self.location, upsert, type_widening, partitioning, KeyRangeLog(storage, self.root, upsert.key)
            )
            if upsert is not None
            else None
        )
        self._round = RoundCommit(
            table, self, storage, self.facts, unwrap=unwrap, offset_check=offset_check, root=self.root, clock=clock
        )

    # -- reading --------------------------------------------------------------------------

    def _log(self) -> Any:
        """The table's DeltaLog, with this thread's active SparkSession set first: Delta asks for the
        active session (a JVM thread-local) and the service's threads (HTTP, commit loop) start without one."""
        self._handles.set_active_session(self.spark._jsparkSession)
        return self._handles.delta_log_for_table(self.spark._jsparkSession, self.location)

    def _fresh_snapshot(self) -> Any:
        return self._log().update(False, self._handles.none, self._handles.none)

    # -- maintenance (between commit rounds; see delta_maintenance) ------------------------

    def ledger(self) -> DeltaLedger:
        return DeltaLedger(
            self.spark, self.storage, self.table, self.root, self.location, frozenset(self.partitioning.generated_names)
        )

    def file_count(self) -> int:
        return self._maintainer.file_count()

    def maintain(self, kind: MaintenanceKind, policy: MaintenancePolicy) -> MaintenanceRecord:
        try:
            return self._maintainer.maintain(kind, policy)
        except Exception as exc:  # py4j surfaces Delta's exceptions as Py4JJavaError
            raise self.translate(exc) from exc

    def small_files(self, below: int) -> dict[PartitionKey, list[int]]:
        try:
            return self._maintainer.small_files(below)
        except Exception as exc:  # py4j surfaces Delta's exceptions as Py4JJavaError
            raise self.translate(exc) from exc

    def compact_small(self, plan: CompactionPlan) -> MaintenanceRecord:
        try:
            return self._maintainer.compact_small(plan)
        except Exception as exc:
            raise self.translate(exc) from exc

    def register(self, name: str) -> None:
        self._maintainer.register(name)

    def checkpoint(self) -> MaintenanceRecord:
        try:
            return self._maintainer.checkpoint()
        except Exception as exc:  # py4j surfaces Delta's exceptions as Py4JJavaError
            raise self.translate(exc) from exc

    def snapshot(self) -> TableSnapshot:
        """The table's version and offsets from its log (the service's only durable state).

        Read from the log files directly (:mod:`commit_service.delta.log`: no Spark job, so a
        restart after a crash is ready in seconds); through Delta when that reader cannot be sure.
        """
        try:
            return log_snapshot(self.storage, self.table, self.root)
        except LogReadError as exc:
            logger.info("table %s: reading offsets through Delta (%s)", self.table, exc)
            return self._delta_snapshot()

    def warm(self) -> TableSnapshot:
        """Build Delta's own snapshot and its state (the work the first commit after a start would
        do: 13 s after a crash measured, most of it Spark replaying the log without a checksum)."""
        return self._delta_snapshot()

    def _delta_snapshot(self) -> TableSnapshot:
        """:meth:`snapshot` through Delta's own snapshot (its checksum, else a log replay by Spark)."""
        snap = self._fresh_snapshot()
        offsets: dict[TopicPartition, int] = {}
        if snap.version() >= 0:
            known = self._crc_set_transactions(snap)  # from the CRC when it lists them: no log replay
            for app, version in self._versions(known if known is not None else snap.setTransactions()).items():
                tp = parse_app_id(self.table, app)
                if tp is not None:
                    offsets[tp] = version
        return TableSnapshot(int(snap.version()), PartitionOffsets(offsets))

    # -- committing (the round's skeleton is commit_service.round.commit; this is Delta's half) --

    def commit(self, plan: CommitPlan) -> CommitRecord:
        """Make ``plan`` one Delta commit, or raise a :class:`CommitError` having changed nothing."""
        return self._round.commit(plan)

    def session(self) -> Any:
        return self.spark

    def reading(self) -> tuple[Any, FileSchemas]:
        return self.spark, self._append.parquet_schemas

    def open_round(self, plan: CommitPlan) -> Opened:
        """A Delta transaction, with ``txnVersion`` of every partition of the plan read inside it
        (a concurrent writer on the same partition then fails this commit instead of duplicating)."""
        txn = self._log().startTransaction()
        read_version = int(txn.readVersion())
        ids = {tp: app_id(self.table, tp) for tp in plan.offsets}
        versions = self._txn_versions(txn, list(ids.values()))
        held = {tp: versions[i] for tp, i in ids.items() if versions[i] >= 0}
        schema = None
        if read_version >= 0:
            meta = json.loads(txn.metadata().json())["metaData"]
            schema = json.loads(meta["schemaString"])
            wrong = self.partitioning.mismatch(meta.get("partitionColumns") or [], schema)
            if wrong is not None:
                raise TableLayoutError(
                    f"table {self.table} {wrong}: Lakegate does not repartition a table (a file added without "
                    "its partition values would be hidden from queries that filter on them); set "
                    "tables[].partition_by to the table's layout; nothing was committed"
                )
        return Opened(txn, read_version, held, schema)

    def write_round(self, opened: Opened, round_files: RoundFiles) -> Written:
        """The round's file actions: appended (:class:`AppendWriter`) or merged by key (:class:`UpsertWriter`)."""
        txn, read_version, schema = opened.txn, opened.read_version, opened.schema
        files, reader, facts = round_files.files, round_files.reader, round_files.facts

        def set_schema(new: dict[str, Any], widened: Sequence[Widening]) -> None:
            self._set_schema(txn, read_version, schema, new, widened)

        if self._upsert is not None:  # every file is read as changes and merged by key
            return Written(self._upsert.round(txn, files, reader, facts, read_version, set_schema), 0, len(files))
        return self._append.round(txn, files, reader, facts, read_version, schema, set_schema)

    def land(self, opened: Opened, written: list[Any], plan: CommitPlan, record: CommitRecord) -> Callable[[], int]:
        """One ``SetTransaction(appId="lakegate-<table>-<topic>-<partition>", version=next offset)``
        per partition beside the round's actions, committed as ``STREAMING UPDATE`` (queryId
        ``lakegate-<table>``) with ``userMetadata`` = :meth:`CommitRecord.user_metadata`."""
        millis = record.committed_at_ms
        txns = self._actions.many(
            ActionKind.TXN,
            [
                {"appId": app_id(self.table, tp), "version": offset, "lastUpdated": millis}
                for tp, offset in sorted(plan.offsets.items())
            ],
        )
        op = self._handles.streaming_update(
            self._handles.append_mode,
            f"lakegate-{self.table}",
            record.version,
            self._handles.some(json.dumps(record.user_metadata())),
        )
        actions = self._actions.seq(*written, txns)
        return lambda: int(opened.txn.commit(actions, op))

    def _set_schema(
        self,
        txn: Any,
        read_version: int,
        table_schema: dict[str, Any] | None,
        new_schema: dict[str, Any],
        widened: Sequence[Widening] = (),
    ) -> None:
        """Create the table's metadata, or grow it to ``new_schema``; a column whose type widens
        turns on Delta's type widening and is recorded as Delta records a type change. A round
        whose every column would be a partition column is refused (nothing committed)."""
        problem = self.partitioning.data_problem(new_schema)
        if problem is not None:
            raise TableLayoutError(f"table {self.table}: this round {problem}; nothing was committed")
        if read_version < 0:
            txn.updateMetadataForNewTable(self._metadata_action(new_schema, created=int(self.clock() * 1000)))
            return
        extra = {TYPE_WIDENING: "true"} if widened else {}
        if widened and table_schema is not None:
            new_schema = self._with_type_changes(txn, new_schema, table_schema)
        if new_schema != table_schema or not self._configured(txn.metadata(), extra):
            txn.updateMetadata(self._metadata_action(new_schema, like=txn.metadata(), extra=extra), False)

    def _with_type_changes(self, txn: Any, schema: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
        """``schema`` with Delta's record of each widened column (``delta.typeChanges``), made by
        Delta's own ``TypeWideningMetadata``."""
        types = java_class(self.spark._jvm, "org.apache.spark.sql.types.DataType")
        # the object's static forwarders
        helper = java_class(self.spark._jvm, "org.apache.spark.sql.delta.TypeWideningMetadata")
        marked = helper.addTypeWideningMetadata(
            txn, types.fromJson(json.dumps(schema)), types.fromJson(json.dumps(old))
        )
        result: dict[str, Any] = json.loads(marked.json())
        return result

    def prefetch(self, files: list[DataFile]) -> None:
        self.facts.prefetch(files)

    def _txn_versions(self, txn: Any, ids: list[str]) -> dict[str, int]:
        """``txnVersion`` for each appId, registering each read with the transaction.

        ``txn.txnVersion`` replays the whole log with Spark jobs (seconds per commit; 13 s for the
        first commit after a crash measured) even when the version checksum (CRC) already lists
        the SetTransactions. So we register the reads in ``readTxn`` exactly as ``txnVersion`` does
        (keeping Delta's conflict detection) and take the versions from the CRC, or without one
        from the log files at the transaction's read version (:mod:`commit_service.delta.log`);
        if neither works, or this Delta release lacks those members, we fall back to ``txnVersion``.
        """
        try:
            known = self._crc_set_transactions(txn.snapshot())
            if known is not None:
                versions = self._versions(known)
            else:  # no checksum (e.g. the last commit before a crash): the log files, read directly
                versions = read_log(self.storage, self.root, int(txn.readVersion())).txns
            reads = txn.readTxn()
            for i in ids:
                getattr(reads, "$plus$eq")(i)
            return {i: versions.get(i, -1) for i in ids}
        except (Py4JError, LogReadError) as exc:
            logger.debug("no fast path for txn versions: %s", exc)
        return {i: int(txn.txnVersion(i)) for i in ids}

    @staticmethod
    def _crc_set_transactions(snap: Any) -> Any:
        """The SetTransactions listed in the snapshot's version checksum, or None.

        (``Snapshot.setTransactionsIfKnown`` would also do, but it recomputes the state with Spark
        jobs in Delta 4.4 before answering; the checksum read is a file already loaded.)
        """
        crc = snap.checksumOpt()
        if not crc.isDefined():
            return None
        txns = crc.get().setTransactions()
        return txns.get() if txns.isDefined() else None

    def _versions(self, set_transactions: Any) -> dict[str, int]:
        """appId -> version of a Scala sequence of SetTransactions, in one py4j call (written as
        JSON by Delta's own mapper) however many partitions the table has: iterating the sequence
        took three round trips per partition, and a py4j exception to end the iteration."""
        mapper = self._handles.json_mapper
        return {t["appId"]: int(t["version"]) for t in json.loads(mapper.writeValueAsString(set_transactions))}

    def _table_properties(self) -> dict[str, str]:
        """Table properties this committer needs: with background checkpoints, none in the commit;
        for an upsert table with deletion vectors, the feature (Delta upgrades the protocol)."""
        props = {} if self.checkpoint_in_commit else {CHECKPOINT_INTERVAL: NO_CHECKPOINT_IN_COMMIT}
        if self._upsert is not None and self._upsert.spec.deletion_vectors:
            props[ENABLE_DELETION_VECTORS] = "true"
        return props

    def _configured(self, metadata: Any, extra: dict[str, str]) -> bool:
        have = json.loads(metadata.json())["metaData"].get("configuration") or {}
        return all(have.get(k) == v for k, v in {**self._table_properties(), **extra}.items())

    def _metadata_action(
        self,
        schema: dict[str, Any],
        *,
        created: int | None = None,
        like: Any = None,
        extra: dict[str, str] | None = None,
    ) -> Any:
        if like is not None:
            meta = json.loads(like.json())["metaData"]
            meta["schemaString"] = json.dumps(schema)
            meta["configuration"] = {**(meta.get("configuration") or {}), **self._table_properties(), **(extra or {})}
            return self._actions.one({"metaData": meta})
        return self._actions.one(
            {
                "metaData": {
                    "id": str(uuid.uuid4()),
                    "name": self.table,
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(schema),
                    "partitionColumns": self.partitioning.columns,
                    "configuration": self._table_properties(),
                    "createdTime": created,
                }
            }
        )

    def translate(self, exc: Exception) -> CommitError:
        """A :class:`CommitError` for what the commit path raised, by the JVM exception's class
        (and its causes' and their superclasses'), never by message text."""
        kind = classify(exc)
        if kind is Failure.CONCURRENT:
            snap = self.snapshot()
            return OffsetsMovedError(
                f"table {self.table}: concurrent commit, offsets re-read", snap.version, snap.offsets
            )
        summary = f"table {self.table}: Delta commit failed: {java_summary(exc)}"
        if kind is Failure.UNAVAILABLE:
            return TableUnavailableError(summary)
        if kind is Failure.DELTA:
            return TableWriteError(summary)
        return UnexpectedCommitError(f"table {self.table}: unexpected {type(exc).__name__} in the commit path")
