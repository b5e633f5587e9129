"""The read side of the wire model: what the service answers about manifests, tables and commits.

Standard library only, like :mod:`lakegate_core.protocol`. Written by the service's HTTP layer;
read by sidecars (``GET /v1/tables``), operators, tests and the OpenAPI generator.

- :class:`ManifestStatus` — ``GET /v1/manifests/{id}``.
- :class:`TableSummary` — one table in ``GET /v1/tables`` (:class:`TableList`) and
  ``GET /v1/tables/{table}``.
- :class:`CommitRecord` — one Delta commit, in ``GET /v1/commits`` (:class:`CommitList`) and, as
  JSON, the commit's ``userMetadata``; :class:`CommitOutcome` answers a forced commit.
- :class:`ErrorBody` — every error response, ``{"error": {"code", "message", "details"}}``.
- :class:`MaintenanceRecord` — one compaction or vacuum of a table (:class:`MaintenanceList`).
- :class:`DeadLetter` — a file quarantined out of a table's buffer (:class:`DeadLetterList`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from lakegate_core.errors import LakegateError, ProtocolError
from lakegate_core.protocol import DataFile
from lakegate_core.types import PartitionOffsets
from lakegate_core.wire import WireModel, read, read_count, read_list, read_object, read_text

KEEP_NULL = {"keep_null": True}  # field metadata: answer ``null`` rather than leave the key out


class ManifestState(str, Enum):
    """Where a manifest's files are."""

    ACCEPTED = "accepted"
    COMMITTED = "committed"
    REJECTED = "rejected"


@dataclass(frozen=True)
class ManifestStatus(WireModel):
    """``GET /v1/manifests/{id}``: where a manifest's files are now."""

    manifest_id: str
    status: ManifestState
    table: str | None = None
    version: int | None = None
    reason: str | None = None


# a commit record's fields the table's log does not keep: what the log holds already (table,
# version, time) and what only this process knows (its duration and phases, Spark jobs, the wait)
NOT_IN_USER_METADATA = (
    "table",
    "version",
    "duration_ms",
    "committed_at_ms",
    "spark_jobs",
    "due_ms",
    "caught_up",
    "phases_ms",
)


@dataclass(frozen=True)
class CommitRecord(WireModel):
    """One Delta commit made by the service; also the commit's ``userMetadata`` (as JSON)."""

    table: str
    version: int
    commit_id: str
    files: int
    records: int
    offsets: PartitionOffsets = field(default_factory=PartitionOffsets)
    vtts: int | None = field(default=None, metadata=KEEP_NULL)  # valid-through time (ms): every partition reported
    duration_ms: int | None = field(default=None, metadata=KEEP_NULL)
    sidecars: tuple[str, ...] = ()
    released: tuple[str, ...] | None = None  # dead letters whose ranges this commit skipped (admin release)
    committed_at_ms: int | None = None  # when this service made it (the status page's freshness plot)
    spark_jobs: tuple[int, ...] = ()  # the Spark UI's ids of the jobs this commit ran (this process's UI)
    # per partition, the offset this commit's range starts at (where the table was): with
    # ``offsets`` the half-open range it committed, which the audit checks (commit_service.audit)
    starts: PartitionOffsets | None = None
    # a table that catches up (commit.catch_up_seconds): when the round was due (ms), and if it
    # caught up, per partition the Kafka log end read once it was due, every record below which
    # this commit holds (None: the wait ran out); this process's only, not in userMetadata
    due_ms: int | None = None
    caught_up: PartitionOffsets | None = None
    # the partitions whose ledger this commit begins (their first commit): where, and why there
    # (``<topic>-<partition>`` -> first_file, connect_offset or configured: tables[].start)
    begins: PartitionOffsets | None = None
    begin_reasons: dict[str, str] | None = None
    left: int | None = None  # files the round's bounds left in the table's buffer for the next rounds
    # how the round's files went in: added where they lay (zero copy), or their rows rewritten by
    # Spark; ``split``, of those rewritten, Parquet files whose rows spanned partitions
    in_place: int | None = None
    rewritten: int | None = None
    split: int | None = None
    # where the commit's time went (ms): ``facts`` waiting for its files' facts (footers the
    # read-ahead had not read yet) and checking them, ``open`` the transaction opened, ``write`` its
    # rows written (files added, rewritten or merged), ``commit`` the commit landed; this process's
    # only, not in userMetadata
    phases_ms: dict[str, int] | None = None

    def user_metadata(self) -> dict[str, Any]:
        """What goes into the Delta commit's ``userMetadata``: all but what the log already holds
        (table, version, the commit's time) and what only this process knows (duration, Spark jobs)."""
        out = self.to_dict()
        for key in NOT_IN_USER_METADATA:
            out.pop(key, None)
        return out

    @classmethod
    def from_user_metadata(cls, table: str, version: int, raw: Any) -> CommitRecord:
        d = read_object(raw, "userMetadata")
        return cls(
            table=table,
            version=version,
            commit_id=str(d.get("commit_id", "")),
            files=int(d.get("files", 0)),
            records=int(d.get("records", 0)),
            offsets=PartitionOffsets.from_json(d.get("offsets", {}), "userMetadata.offsets"),
            vtts=d.get("vtts"),
            sidecars=tuple(d.get("sidecars", ())),
            released=tuple(d["released"]) if d.get("released") else None,
            starts=PartitionOffsets.from_json(d["starts"], "userMetadata.starts") if "starts" in d else None,
            begins=PartitionOffsets.from_json(d["begins"], "userMetadata.begins") if "begins" in d else None,
            begin_reasons={str(k): str(v) for k, v in read_object(d["begin_reasons"], "begin_reasons").items()}
            if "begin_reasons" in d
            else None,
            left=d.get("left"),
            in_place=d.get("in_place"),
            rewritten=d.get("rewritten"),
            split=d.get("split"),
        )


@dataclass(frozen=True)
class TableSummary(WireModel):
    """One table as the service sees it now: committed offsets, version, what is buffered."""

    table: str
    path: str
    version: int  # -1 until the table's first commit
    offsets: PartitionOffsets  # committed: the next offset per partition
    pending_files: int
    pending_bytes: int
    pending_offsets: PartitionOffsets  # per partition, the end of the buffered files + 1
    last_error: str | None  # the last failed commit round's message, until a round succeeds
    dead_letters: int = 0  # quarantined files still waiting for an admin (GET /v1/dead-letters)
    connect_offsets: PartitionOffsets = field(default_factory=PartitionOffsets)  # Connect's, as sidecars last said
    oldest_pending_ms: int | None = None  # when the oldest buffered file arrived (epoch ms); None: nothing buffered
    format: str = "delta"  # the table format: delta, or iceberg (version is then the snapshot's sequence number)
    # per partition whose ledger start this process decided (tables[].start): "<topic>-<partition>"
    # -> {offset, reason: first_file | connect_offset | configured, why}
    starts: dict[str, dict[str, Any]] | None = None
    # per topic made again since the table began: its ledger epoch (POST /v1/tables/{table}/epochs);
    # None while every topic is in its first
    epochs: dict[str, int] | None = None
    # the table's partition_by as configured (an Iceberg table adopted with a spec of its own holds that spec)
    partition_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableList(WireModel):
    """``GET /v1/tables``; a sidecar reads every table's committed offsets from it."""

    tables: tuple[TableSummary, ...]

    @classmethod
    def offsets_from_dict(cls, raw: Any) -> PartitionOffsets:
        """Every table's committed offsets, merged (a topic routes to one table)."""
        merged: dict[tuple[str, int], int] = {}
        for i, t in enumerate(read_list(read_object(raw, ""), "tables", "")):
            merged.update(PartitionOffsets.from_json(read_object(t, f"tables[{i}]").get("offsets", {})))
        return PartitionOffsets(merged)


@dataclass(frozen=True)
class CommitList(WireModel):
    """``GET /v1/commits``: recent commits, newest first."""

    commits: tuple[CommitRecord, ...]


@dataclass(frozen=True)
class CommitOutcome(WireModel):
    """``POST /v1/tables/{table}/commit``: the commit made (its fields inline), or why none was."""

    committed: bool
    table: str
    reason: str | None = None
    commit: CommitRecord | None = field(default=None, metadata={"flatten": True})


@dataclass(frozen=True)
class ErrorInfo(WireModel):
    """What went wrong: a stable ``code``, a message for people, and structured ``details``."""

    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ErrorBody(WireModel):
    """Every error response of the service, whatever the status."""

    error: ErrorInfo

    @classmethod
    def of(cls, exc: LakegateError) -> ErrorBody:
        """The answer to ``exc`` (sent with its ``status``)."""
        return cls(ErrorInfo(exc.code, exc.message, dict(exc.details)))


class MaintenanceKind(str, Enum):
    """What a maintenance run did to a table."""

    COMPACT = "compact"  # OPTIMIZE (optionally ZORDER BY): small files rewritten into fewer large ones
    VACUUM = "vacuum"  # files no longer in the table (and orphans under its root) older than the retention
    CHECKPOINT = "checkpoint"  # a Delta checkpoint of the current version


@dataclass(frozen=True)
class MaintenanceRecord(WireModel):
    """One maintenance run of one table, made by the service between commit rounds."""

    table: str
    kind: MaintenanceKind
    started_ms: int
    duration_ms: int
    version_before: int
    version_after: int  # OPTIMIZE commits once; VACUUM records its start and end as two commits
    files_before: int  # files in the table
    files_after: int
    detail: str | None = None  # e.g. how many files OPTIMIZE rewrote into how many, VACUUM's retention


@dataclass(frozen=True)
class MaintenanceList(WireModel):
    """``GET /v1/tables/{table}/maintenance``: recent maintenance runs of a table, newest first."""

    table: str
    enabled: bool
    runs: tuple[MaintenanceRecord, ...]


class DeadLetterState(str, Enum):
    """Where a dead-lettered file stands."""

    QUARANTINED = "quarantined"  # out of the buffer; its partition waits at the gap
    RETRIED = "retried"  # an admin put it back into the buffer
    RELEASED = "released"  # an admin committed the partition past its range without it


@dataclass(frozen=True)
class DeadLetter(WireModel):
    """A file taken out of a table's buffer because it could not be committed.

    Written by the table's coordinator when it quarantines the file (one JSON object under the
    table's ``_lakegate/dead-letters/``, so it outlives restarts); listed by ``GET
    /v1/dead-letters`` and counted in ``GET /v1/tables/{table}``; an admin retries or releases it.
    """

    id: str
    table: str
    file: DataFile  # as the manifest described it (path canonical): an admin's retry offers it again
    manifest_id: str
    sidecar_id: str
    code: str  # the error code that condemned it, e.g. bad_data_file, commit_failed
    reason: str
    attempts: int  # failed commit attempts before it was quarantined
    at_ms: int
    state: DeadLetterState = DeadLetterState.QUARANTINED
    resolved_at_ms: int | None = None

    @classmethod
    def from_dict(cls, raw: Any) -> DeadLetter:
        d = read_object(raw, "dead_letter")
        try:
            state = DeadLetterState(d.get("state", DeadLetterState.QUARANTINED.value))
        except ValueError:
            raise ProtocolError("state", f"must be one of {[s.value for s in DeadLetterState]}") from None
        return cls(
            id=read_text(d, "id", ""),
            table=read_text(d, "table", ""),
            file=DataFile.from_dict(d.get("file"), "file."),
            manifest_id=read_text(d, "manifest_id", ""),
            sidecar_id=read_text(d, "sidecar_id", ""),
            code=read_text(d, "code", ""),
            reason=read_text(d, "reason", "", max_len=1 << 16),
            attempts=read_count(d, "attempts", ""),
            at_ms=read_count(d, "at_ms", ""),
            state=state,
            resolved_at_ms=read_count(d, "resolved_at_ms", "", required=False),
        )


@dataclass(frozen=True)
class EpochRequest(WireModel):
    """``POST /v1/tables/{table}/epochs``: ``topic`` was deleted and made again, so its partitions
    begin a new ledger epoch; ``force`` passes the check that it looks made again (Kafka holds
    less of each partition than the table committed)."""

    topic: str
    force: bool = False

    @classmethod
    def from_dict(cls, d: Any) -> EpochRequest:
        d = read_object(d, "body")
        unknown = sorted(set(d) - {"topic", "force"})
        if unknown:
            raise ProtocolError(unknown[0], "is not a field of this request (send topic and, optionally, force)")
        return cls(read_text(d, "topic", "", max_len=249), bool(read(d, "force", "", bool, required=False)))


@dataclass(frozen=True)
class DeadLetterList(WireModel):
    """``GET /v1/dead-letters``: every table's dead letters (or one table's), newest first."""

    dead_letters: tuple[DeadLetter, ...]
