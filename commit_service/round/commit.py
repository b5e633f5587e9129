"""One round, one commit: the skeleton every table format's round runs through.

The skeleton does what a round is whatever the format (docs/design.md, "The commit layout"):

1. label the round's Spark jobs (the Spark UI's job group and description, the version once known);
2. the plan's files checked against their manifests, and the offsets their content holds;
3. open the format's transaction, which reads the table's offsets for the plan's partitions: the
   plan must start exactly there, else :class:`OffsetsMovedError` (the coordinator re-reads, re-plans);
4. the round's rows written by the format (files added where they lie, a frame written, or an upsert);
5. the commit record, and the format lands rows and offsets as one commit between the two crash points;
6. what the format or py4j raised becomes a :class:`CommitError` by the format's own classification.

A format supplies a :class:`TableFormat`: a narrow adapter of six calls, so that what a round
is (and what comes after it, such as where each file goes in a partitioned table) is written once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from commit_service.domain.content import Unwrap
from commit_service.domain.coverage import OffsetCheck
from commit_service.domain.plan import CommitPlan, PendingFile
from commit_service.errors import CommitError, OffsetsMovedError
from commit_service.faults import AFTER_COMMIT, BEFORE_COMMIT, crash_point
from commit_service.round.convert import FrameReader, kafka_timestamp
from commit_service.round.sources import FileSchemas, check_coverage, checked_facts
from commit_service.spark.session import job_group, job_ids, job_label
from commit_service.storage.prefetch import FactsCache, read_threads
from commit_service.storage.reader import FileFacts, StorageReader
from lakegate_core.status import CommitRecord
from lakegate_core.types import PartitionOffsets, TopicPartition

STAGING = "_lakegate/staging/"  # below a table's root: what a round stages (Delta ignores "_" folders)


@dataclass(frozen=True)
class Opened:
    """A round's transaction as the format opened it."""

    txn: Any  # the format's own handle (Delta's OptimisticTransaction, Iceberg's loaded table)
    read_version: int  # the version the round reads; it lands as read_version + 1 unless another writer lands first
    offsets: Mapping[TopicPartition, int]  # the table's next offset of each plan partition it holds
    schema: dict[str, Any] | None  # the table's Spark schema (JSON form); None: no table yet


@dataclass(frozen=True)
class RoundFiles:
    """What a round's write step is given."""

    files: Sequence[PendingFile]
    reader: FrameReader
    facts: dict[str, FileFacts]
    commit_id: str


@dataclass(frozen=True)
class Written:
    """What a round's write step made: what the format lands, and how the round's files went in."""

    changes: Any  # the format's own (Delta's file actions, Iceberg's data files)
    in_place: int  # files added where they lie (or copied): zero copy
    rewritten: int  # files whose rows Spark wrote anew (JSON lines, CSV, the envelope, upserts, splits)
    split: int = 0  # of those, Parquet files rewritten only because their rows span partitions


class TableFormat(Protocol):
    """One table format's half of a round (Delta's, Iceberg's)."""

    def session(self) -> Any:
        """The SparkSession the round's jobs run in (started on first need)."""
        ...

    def reading(self) -> tuple[Any, FileSchemas]:
        """The session a round's files are read and rewritten in, and the table's footer schemas."""
        ...

    def open_round(self, plan: CommitPlan) -> Opened:
        """Open a transaction on the table and read its offsets for ``plan``'s partitions."""
        ...

    def write_round(self, opened: Opened, round_files: RoundFiles) -> Written:
        """The round's rows written (added in place, rewritten, or merged by key): what to land."""
        ...

    def land(self, opened: Opened, written: Any, plan: CommitPlan, record: CommitRecord) -> Callable[[], int]:
        """The commit, staged: calling it lands ``written`` (:attr:`Written.changes`) and ``plan``'s offsets with ``record``
        as one commit and answers the version it landed as."""
        ...

    def translate(self, exc: Exception) -> CommitError:
        """A :class:`CommitError` for what the round raised, by the format's own classification."""
        ...


class Phases:
    """Where a round's time goes: each phase's milliseconds, from the end of the one before."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last = clock()
        self.ms: dict[str, int] = {}

    def ended(self, name: str) -> None:
        now = self._clock()
        self.ms[name] = int((now - self._last) * 1000)
        self._last = now


class RoundCommit:
    """Commits plans into one table through its format; owned by that table's committer."""

    def __init__(
        self,
        table: str,
        table_format: TableFormat,
        storage: StorageReader,
        facts: FactsCache,
        *,
        unwrap: Unwrap,
        offset_check: OffsetCheck,
        root: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = table
        # where a round stages what Spark cannot read where it lies (Avro inside a compressed
        # stream): the table's own storage, which every Spark executor reads (None: not staged)
        self.staging = f"{root}{STAGING}" if root is not None else None
        self.read_threads = read_threads(root) if root is not None else 1  # a round's text and Avro files read at once
        self.format = table_format
        self.storage = storage
        self.facts = facts
        self.unwrap = unwrap
        self.offset_check = offset_check
        self.clock = clock

    def commit(self, plan: CommitPlan) -> CommitRecord:
        """Make ``plan`` one commit, or raise a :class:`CommitError` having changed nothing.

        Every step (footers, rewrites, the offset check, the commit) is inside the translation, so
        whatever the format, py4j or storage raise reaches the coordinator as a :class:`CommitError`
        (files a failed round wrote are in no commit).
        """
        started = time.monotonic()
        commit_id = str(uuid.uuid4())
        group = job_group(self.table, commit_id)
        try:
            spark = self.format.session()
            with job_label(spark, group, f"lakegate commit {self.table}: {plan.reason} [{commit_id[:8]}]"):
                record = self._commit(spark, plan, commit_id)
        except CommitError:
            raise
        except Exception as exc:  # py4j surfaces the formats' exceptions as Py4JJavaError
            raise self.format.translate(exc) from exc
        duration_ms = int((time.monotonic() - started) * 1000)
        jobs = job_ids(spark, group, job_group(self.table, commit_id, record.version))
        return replace(record, duration_ms=duration_ms, spark_jobs=jobs)

    def _commit(self, spark: Any, plan: CommitPlan, commit_id: str) -> CommitRecord:
        writer, schemas = self.format.reading()
        reader = FrameReader(writer, self.storage, self.unwrap, schemas.get, schemas.avro, staging=self.staging)
        try:
            return self._round(spark, plan, commit_id, reader)
        finally:
            reader.close()

    def _round(self, spark: Any, plan: CommitPlan, commit_id: str, reader: FrameReader) -> CommitRecord:
        phases = Phases()
        facts = checked_facts(self.facts, plan.files)
        reader.read_ahead(plan.files, self.read_threads)
        check_coverage(plan.files, facts, reader, self.offset_check)
        phases.ended("facts")

        opened = self.format.open_round(plan)
        self._check_offsets(plan, opened)
        phases.ended("open")
        version = opened.read_version + 1
        sc = spark.sparkContext
        sc.setLocalProperty(
            "spark.job.description",
            f"lakegate commit {self.table} v{version}: {len(plan.files)} files, {plan.records} records "
            f"[{commit_id[:8]}]",
        )
        sc.setLocalProperty("spark.jobGroup.id", job_group(self.table, commit_id, version))
        reader.timestamp = kafka_timestamp(opened.schema)
        written = self.format.write_round(opened, RoundFiles(plan.files, reader, facts, commit_id))
        phases.ended("write")

        record = replace(
            plan.record(self.table, version, commit_id, int(self.clock() * 1000)),
            in_place=written.in_place,
            rewritten=written.rewritten,
            split=written.split or None,
        )
        landing = self.format.land(opened, written.changes, plan, record)
        crash_point(BEFORE_COMMIT)
        landed = landing()
        phases.ended("commit")
        crash_point(AFTER_COMMIT)
        self.facts.forget(p.file for p in plan.files)
        return replace(record, version=landed, phases_ms=phases.ms)

    def _check_offsets(self, plan: CommitPlan, opened: Opened) -> None:
        """The plan must start where the table is: a partition the table holds starts at its offset
        (one it does not hold yet starts where the table's state says: its start point stands)."""
        starts = plan.starts()
        moved = {
            tp: opened.offsets[tp] for tp in plan.offsets if tp in opened.offsets and opened.offsets[tp] != starts[tp]
        }
        if moved:
            raise OffsetsMovedError(
                f"table {self.table} offsets moved: {moved}", opened.read_version, PartitionOffsets(moved)
            )
