"""Maintenance of one Delta table through Spark SQL: compaction, vacuum, file count, catalog.

Owned by the table's :class:`~commit_service.delta.committer.DeltaCommitter` (which exposes it as
the :class:`~commit_service.ports.Committer` maintenance calls) and run by the coordinator
between the table's commit rounds, so it never races them. ``OPTIMIZE`` commits new files and
removes the small ones it replaced; it writes no ``txn`` action, so the Kafka offsets recorded by
the commits stay exactly as they were. Every run's Spark jobs are labelled
``lakegate maintenance <table>: <kind>`` in the Spark UI.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from commit_service.delta.merge import DeltaArrowMerge, SmallFile
from commit_service.domain.compaction import CompactionPlan, PartitionKey
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.spark.java_errors import java_summary
from commit_service.spark.jvm_classes import java_class
from commit_service.spark.session import job_label
from commit_service.spark.thread_priority import lower_jvm_peer
from lakegate_core.status import MaintenanceKind, MaintenanceRecord

logger = logging.getLogger(__name__)

RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
DELTA_DEFAULT_RETENTION_HOURS = 168.0
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
OPTIMIZE_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"  # OPTIMIZE's candidates: files below
OPTIMIZE_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"  # and the size it packs them to
CHECKPOINT_TASKS = 1  # a background checkpoint rebuilds its snapshot's state in this many tasks
CHECKPOINT_NICE_INCREMENT = 10  # how much lower than the commits' a checkpoint's CPU priority is


class DeltaMaintainer:
    """Compacts, vacuums, checkpoints and registers one table; ``delta_log`` gives its DeltaLog."""

    def __init__(
        self, spark: Any, table: str, location: str, delta_log: Callable[[], Any], arrow: DeltaArrowMerge | None
    ) -> None:
        self.spark = spark
        self._arrow = arrow  # merges a group of small files without Spark where it can (None: never)
        self._small: dict[PartitionKey, list[SmallFile]] = {}  # the last look's small files
        self.table = table
        self.location = location
        self._delta_log = delta_log
        self._none = java_class(spark._jvm, "scala.Option").empty()
        self._checkpoint_session: Any = None  # made by the first checkpoint Spark writes
        self._compaction_session: Any = None  # made by the first merge of small files
        self._kernel_engine: Any = None  # Delta Kernel's engine, made by the first checkpoint
        self._lowered = threading.local()  # set on a thread once its JVM peer's priority is lowered

    def _snapshot(self) -> Any:
        return self._delta_log().update(False, self._none, self._none)

    def checkpoint(self) -> MaintenanceRecord:
        """Write a Delta checkpoint of the version before the current one, from a background
        thread while commits go on (readers of a checkpoint only ever see a whole one), then
        delete the log files past ``delta.logRetentionDuration`` as Delta's own checkpoints do.

        Not the current version: its snapshot is the one the next commit starts from, and Delta
        builds a snapshot's state for a checkpoint while holding that snapshot's cache lock, the
        lock the next commit takes to drop the cache when it installs its own snapshot (a JFR
        recording showed that commit blocked 200-260 ms in ``StateCache.uncache``).

        Written by Delta Kernel (:meth:`_kernel_checkpoint`): a log replay and one Parquet write in
        this thread, no Spark job. Through Spark, a checkpoint of a small table cost 2.4-3.4
        CPU-seconds (10.8 for a process's first: code generation); through Kernel 0.15-0.24
        (1.0). When Kernel cannot write one (a table feature it does not support) Spark does
        (:meth:`_spark_checkpoint`).
        """
        started_ms, t0 = int(time.time() * 1000), time.monotonic()
        self._lower_priority()
        log = self._delta_log()
        newest = log.unsafeVolatileSnapshot()  # the one the last commit installed: no listing, no lock
        version = int(newest.version()) - 1
        files = self._files(newest)
        if version < 0:
            return MaintenanceRecord(
                self.table,
                MaintenanceKind.CHECKPOINT,
                started_ms,
                0,
                version,
                version,
                files,
                files,
                "nothing to checkpoint",
            )
        writer = "Delta Kernel"
        if not self._kernel_checkpoint(version):
            writer = "Spark"
            self._spark_checkpoint(log, version)  # Delta cleans the log up after it
        else:
            self._clean_up_log(log)
        duration_ms = int((time.monotonic() - t0) * 1000)
        logger.info(
            "maintenance table=%s kind=checkpoint version=%d writer=%s duration_ms=%d",
            self.table,
            version,
            writer,
            duration_ms,
        )
        return MaintenanceRecord(
            self.table,
            MaintenanceKind.CHECKPOINT,
            started_ms,
            duration_ms,
            version,
            version,
            files,
            files,
            f"checkpoint of version {version} ({writer})",
        )

    def _lower_priority(self) -> None:
        """Once per thread: lower the CPU priority of the JVM thread this thread's calls run on
        (nice +``CHECKPOINT_NICE_INCREMENT``), so a checkpoint written while a commit runs leaves
        the cores to the commit. Kernel writes the checkpoint on that thread."""
        if getattr(self._lowered, "done", False):
            return
        self._lowered.done = True
        nice = lower_jvm_peer(self.spark._jvm, CHECKPOINT_NICE_INCREMENT)
        if nice is not None:
            logger.info("table %s: checkpoints run at nice %d", self.table, nice)

    def _kernel_checkpoint(self, version: int) -> bool:
        """Write the checkpoint of ``version`` with Delta Kernel; False if Kernel cannot (then Spark
        must). One already there counts as written."""
        jvm = self.spark._jvm
        try:
            if self._kernel_engine is None:  # the live Hadoop configuration: storage credentials included
                self._kernel_engine = java_class(jvm, "io.delta.kernel.defaults.engine.DefaultEngine").create(
                    self.spark._jsc.hadoopConfiguration()
                )
            table = java_class(jvm, "io.delta.kernel.Table").forPath(self._kernel_engine, self.location)
            table.checkpoint(self._kernel_engine, version)
        except Exception as exc:
            if "CheckpointAlreadyExistsException" in java_summary(exc):
                return True
            logger.warning(
                "table %s: Delta Kernel could not write the checkpoint of version %d (%s); Spark writes it",
                self.table,
                version,
                java_summary(exc),
            )
            return False
        return True

    def _spark_checkpoint(self, log: Any, version: int) -> None:
        """The checkpoint of ``version`` through Delta on Spark, in a snapshot of its own whose state
        is rebuilt in ``CHECKPOINT_TASKS`` task(s) (a session active on this thread only, so a
        commit's jobs keep the other cores) and dropped afterwards."""
        sessions = java_class(self.spark._jvm, "org.apache.spark.sql.SparkSession")
        sessions.setActiveSession(self._narrow_session())  # Delta reads its settings from the active session
        try:
            snap = log.getSnapshotAt(version, self._none, self._none, False)
            try:
                with job_label(
                    self.spark, f"lakegate-{self.table}", f"lakegate maintenance {self.table}: checkpoint v{version}"
                ):
                    log.checkpoint(snap, self._none)
            finally:
                snap.uncache()
        finally:
            sessions.clearActiveSession()

    def _clean_up_log(self, log: Any) -> None:
        """Delete the log files Delta's retention lets go (what its own checkpoints do after
        writing one); a failure is logged, and the next checkpoint tries again."""
        try:
            log.doLogCleanup(log.unsafeVolatileSnapshot(), self._none)
        except Exception as exc:
            logger.warning("table %s: log clean-up after the checkpoint failed: %s", self.table, java_summary(exc))

    def _narrow_session(self) -> Any:
        """The JVM session checkpoints run in: the service's (same SparkContext, jars and storage
        credentials; made once) with Delta's state rebuilt in ``CHECKPOINT_TASKS`` task(s)."""
        if self._checkpoint_session is None:
            session = self.spark._jsparkSession.newSession()
            session.conf().set(SNAPSHOT_PARTITIONS, str(CHECKPOINT_TASKS))
            self._checkpoint_session = session
        return self._checkpoint_session

    def file_count(self) -> int:
        """Files in the table now: from the version checksum when there is one (no log replay)."""
        return self._files(self._snapshot())

    @staticmethod
    def _files(snap: Any) -> int:
        if snap.version() < 0:
            return 0
        crc = snap.checksumOpt()
        return int(crc.get().numFiles()) if crc.isDefined() else int(snap.numOfFiles())

    def maintain(self, kind: MaintenanceKind, policy: MaintenancePolicy) -> MaintenanceRecord:
        """Run one compaction or vacuum; raises what Spark/Delta raise (the caller translates)."""
        started_ms, t0 = int(time.time() * 1000), time.monotonic()
        before = self._snapshot()
        version_before, files_before = int(before.version()), self.file_count()
        target = f"delta.`{self.location}`"
        with job_label(self.spark, f"lakegate-{self.table}", f"lakegate maintenance {self.table}: {kind.value}"):
            if kind is MaintenanceKind.COMPACT:
                zorder = ", ".join(f"`{c}`" for c in policy.zorder_by)
                rows = self.spark.sql(f"OPTIMIZE {target}" + (f" ZORDER BY ({zorder})" if zorder else "")).collect()
                metrics = rows[0]["metrics"] if rows else None
                detail = (
                    f"{metrics['numFilesRemoved']} files rewritten into {metrics['numFilesAdded']}"
                    if metrics is not None
                    else "nothing to compact"
                )
            elif kind is MaintenanceKind.VACUUM:
                hours = policy.vacuum_retention_hours
                if hours < DELTA_DEFAULT_RETENTION_HOURS:  # Delta refuses a short retention unless told
                    self.spark.conf.set(RETENTION_CHECK, "false")
                self.spark.sql(f"VACUUM {target} RETAIN {hours:g} HOURS").collect()
                detail = f"retention {hours:g} h"
            else:
                raise ValueError(f"unsupported maintenance {kind.value}")
        after = self._snapshot()
        record = MaintenanceRecord(
            table=self.table,
            kind=kind,
            started_ms=started_ms,
            duration_ms=int((time.monotonic() - t0) * 1000),
            version_before=version_before,
            version_after=int(after.version()),
            files_before=files_before,
            files_after=self.file_count(),
            detail=detail,
        )
        logger.info(
            "maintenance table=%s kind=%s version=%d->%d files=%d->%d duration_ms=%d %s",
            self.table,
            kind.value,
            record.version_before,
            record.version_after,
            record.files_before,
            record.files_after,
            record.duration_ms,
            detail,
        )
        return record

    def small_files(self, below: int) -> dict[PartitionKey, list[int]]:
        """The sizes of the files smaller than ``below`` bytes, by partition (one Spark job over the
        snapshot's cached state); the files themselves are kept for :meth:`compact_small`."""
        from pyspark.sql import DataFrame  # noqa: N812 (Spark's own idiom)
        from pyspark.sql import functions as F

        log = self._delta_log()
        with self._in_compaction_session():
            snapshot = log.update(False, self._none, self._none)
            files = DataFrame(snapshot.allFiles().toDF(), self.spark)
            chosen = files.where(F.col("size") < below)
            vector = F.col("deletionVector").isNotNull() if "deletionVector" in chosen.columns else F.lit(False)
            rows = chosen.select("path", "size", "modificationTime", "partitionValues", vector.alias("dv")).collect()
        self._small = {}
        for row in rows:
            values = dict(row["partitionValues"] or {})
            small = SmallFile(row["path"], int(row["size"]), int(row["modificationTime"]), values, bool(row["dv"]))
            self._small.setdefault(tuple(sorted(values.items())), []).append(small)
        return {part: [f.size for f in files] for part, files in self._small.items()}

    def compact_small(self, plan: CompactionPlan) -> MaintenanceRecord:
        """Each group's files (those below its size, from the last :meth:`small_files`) merged by
        Arrow (:class:`~commit_service.delta.merge.DeltaArrowMerge`) into files of up to the plan's
        target, or where Arrow leaves them, ``OPTIMIZE ... WHERE <the partition>`` with the same
        candidates and target (in a session of its own, so the two sizes apply to these runs only).
        Each group is one commit with no ``txn`` action."""
        from pyspark.sql import DataFrame

        started_ms, t0 = int(time.time() * 1000), time.monotonic()
        version_before, files_before = int(self._snapshot().version()), self.file_count()
        session = self._compaction()
        session.conf().set(OPTIMIZE_MAX_FILE_SIZE, str(plan.target_bytes))
        removed = added = by_arrow = 0
        label = f"lakegate maintenance {self.table}: merge {plan.files} small files"
        with job_label(self.spark, f"lakegate-{self.table}", label), self._in_compaction_session():
            for group in plan.groups:
                candidates = [f for f in self._small.get(group.partition, []) if f.size < group.below_bytes]
                arrow = self._arrow if len(candidates) >= 2 and not any(f.deleted for f in candidates) else None
                merged = arrow.merge(candidates, plan.target_bytes) if arrow is not None else None
                if merged is not None:  # else Spark's OPTIMIZE merges them (storage.merge.refusal)
                    removed, added, by_arrow = removed + merged[0], added + merged[1], by_arrow + 1
                    continue
                session.conf().set(OPTIMIZE_MIN_FILE_SIZE, str(group.below_bytes))
                where = " AND ".join(_equals(c, v) for c, v in group.partition)
                sql = f"OPTIMIZE delta.`{self.location}`" + (f" WHERE {where}" if where else "")
                rows = DataFrame(session.sql(sql), self.spark).collect()
                metrics = rows[0]["metrics"] if rows else None
                if metrics is not None:
                    removed += int(metrics["numFilesRemoved"])
                    added += int(metrics["numFilesAdded"])
        detail = (
            f"merged {removed} small files of {len(plan.groups)} partition(s) into {added} "
            f"(target {plan.target_bytes} bytes; {by_arrow} of the {len(plan.groups)} by Arrow)"
        )
        return MaintenanceRecord(
            table=self.table,
            kind=MaintenanceKind.COMPACT,
            started_ms=started_ms,
            duration_ms=int((time.monotonic() - t0) * 1000),
            version_before=version_before,
            version_after=int(self._snapshot().version()),
            files_before=files_before,
            files_after=self.file_count(),
            detail=detail,
        )

    def _compaction(self) -> Any:
        """The JVM session small files are merged in: the service's (same SparkContext, jars and
        storage credentials), with OPTIMIZE's file sizes its own, and a snapshot's state rebuilt
        in ``CHECKPOINT_TASKS`` task(s): the state of the service's default 50 tasks made a look
        at a table of 300 small files cost 1.5 s (3 CPU-s) of the 2 cores."""
        if self._compaction_session is None:
            session = self.spark._jsparkSession.newSession()
            session.conf().set(SNAPSHOT_PARTITIONS, str(CHECKPOINT_TASKS))
            self._compaction_session = session
        return self._compaction_session

    @contextmanager
    def _in_compaction_session(self) -> Iterator[None]:
        """This thread's active session is the compaction session (Delta rebuilds a snapshot's
        state with the active session's settings), and the service's again afterwards."""
        sessions = java_class(self.spark._jvm, "org.apache.spark.sql.SparkSession")
        sessions.setActiveSession(self._compaction())
        try:
            yield
        finally:
            sessions.setActiveSession(self.spark._jsparkSession)

    def register(self, name: str) -> None:
        """``CREATE TABLE IF NOT EXISTS <name> USING delta LOCATION '<location>'`` in the session catalog."""
        location = self.location.replace("'", "\\'")
        parts = name.split(".")
        with job_label(self.spark, f"lakegate-{self.table}", f"lakegate register {self.table} as {name}"):
            if len(parts) == 2:  # database.table in the session's current catalog: make the database
                self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {parts[0]}")
            self.spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION '{location}'")
        logger.info("table %s registered in the catalog as %s", self.table, name)


def _equals(column: str, value: str | None) -> str:
    """A partition column's predicate for ``OPTIMIZE ... WHERE`` (Delta's partition values are text;
    Spark casts the literal to the column's type)."""
    name = "`" + column.replace("`", "``") + "`"
    if value is None:
        return f"{name} IS NULL"
    return f"{name} = '" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
