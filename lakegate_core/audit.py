"""The audit's report on the wire: what ``GET /v1/tables/{table}/audit`` answers and
``lakegate-audit`` prints.

Standard library only. Written by the service's audit (:mod:`commit_service.audit`), read by the
``lakegate-audit`` console script (:mod:`lakegate_ops.audit`), the status page and tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from lakegate_core.wire import WireModel, read_list, read_object


class Severity(str, Enum):
    """How much a finding weighs: a breach fails the audit (exit 1), the rest inform."""

    BREACH = "breach"  # exactly once does not hold here: lost, duplicated or altered records
    WARNING = "warning"  # may become a breach (records that may expire, a reset connector)
    GAP = "gap"  # offsets with no row, not proven to be records (transaction markers, compaction)
    INFO = "info"  # what the audit could not check, and why


class FindingKind(str, Enum):
    """What a finding is about; docs/operations.md says what each means and how to fix it."""

    OFFSETS_BACKWARDS = "offsets_backwards"  # a commit lowered a partition's offset
    RANGE_SKIPPED = "range_skipped"  # a commit started past where the table was
    RANGE_TWICE = "range_committed_twice"  # a commit started before where the table was
    FOREIGN_ROWS = "foreign_rows"  # rows added by a commit that is not Lakegate's
    ROW_COUNT = "row_count"  # a commit added another number of rows than it recorded
    FILE_OUTSIDE_RANGE = "file_outside_range"  # a data file's offsets lie outside its commit's ranges
    OFFSETS_HELD_TWICE = "offsets_held_twice"  # more rows at an offset than partitions committed it
    GAP = "gap"  # offsets committed with no row
    LOST = "lost"  # a gap Kafka holds records for
    RELEASED = "released"  # a range an admin released from the dead letters (skipped on purpose)
    AHEAD_OF_KAFKA = "ahead_of_kafka"  # the table's offset is past Kafka's log end
    AHEAD_OF_CONNECT = "ahead_of_connect"  # the table's offset is past Connect's committed offset
    EXPIRED = "expired_before_commit"  # Kafka deleted records the table never committed
    VALUE_DIFFERS = "value_differs"  # a sampled record's row holds other values
    RECORD_MISSING = "record_missing"  # a sampled record has no row
    NOT_CHECKED = "not_checked"  # a check the audit could not run here


@dataclass(frozen=True)
class Finding(WireModel):
    """One thing the audit found; ``partition`` is ``<topic>-<partition>`` when it is about one,
    ``offsets`` the half-open range ``[from, to)`` it is about."""

    kind: FindingKind
    severity: Severity
    message: str
    partition: str | None = None
    offsets: tuple[int, int] | None = None
    version: int | None = None  # the commit (Delta version, Iceberg sequence number) it is about
    details: dict[str, Any] | None = None


@dataclass(frozen=True)
class AuditCounts(WireModel):
    """What the audit looked at."""

    commits: int = 0  # Lakegate commits in the history it read
    rows: int = 0  # rows in the table
    offsets: int = 0  # offsets the ledger says are committed (over every partition)
    files: int = 0  # data files checked against their commit's ranges
    sampled: int = 0  # Kafka records compared field by field
    matched: int = 0  # of those, found with equal values


@dataclass(frozen=True)
class AuditReport(WireModel):
    """One audit of one table: ``ok`` unless some finding is a breach."""

    table: str
    format: str
    version: int
    started_at_ms: int
    duration_ms: int
    seed: int
    ok: bool
    counts: AuditCounts = field(default_factory=AuditCounts)
    findings: tuple[Finding, ...] = ()

    @classmethod
    def from_json(cls, raw: Any) -> AuditReport:
        """The report as the service answered it (the console script reads it so)."""
        d = read_object(raw, "audit")
        findings = tuple(
            Finding(
                kind=FindingKind(f["kind"]),
                severity=Severity(f["severity"]),
                message=str(f["message"]),
                partition=f.get("partition"),
                offsets=tuple(f["offsets"]) if f.get("offsets") else None,  # type: ignore[arg-type]
                version=f.get("version"),
                details=f.get("details"),
            )
            for f in read_list(d, "findings", "audit.", required=False)
        )
        return cls(
            table=str(d["table"]),
            format=str(d.get("format", "delta")),
            version=int(d.get("version", -1)),
            started_at_ms=int(d.get("started_at_ms", 0)),
            duration_ms=int(d.get("duration_ms", 0)),
            seed=int(d.get("seed", 0)),
            ok=bool(d["ok"]),
            counts=AuditCounts(**read_object(d.get("counts", {}), "audit.counts")),
            findings=findings,
        )

    def breaches(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.BREACH]
