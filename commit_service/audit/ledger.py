"""A table's ledger from its history: which offsets of which partition each commit claimed, and
what in the history breaks exactly once. Pure.

Fed by :class:`~commit_service.audit.auditor.Auditor` with the :class:`TableHistory` a table format
reads (``delta.ledger``: the ``_delta_log``; ``iceberg.ledger``: the snapshots), and with what the
table's rows say (:class:`FileSpan`, :class:`OffsetRun`).

A commit of Lakegate's records, per partition, where its range starts (``starts``, since the audit
exists; before, the previous commit's end) and ends (the table's offsets after it). Per partition
the claims must be contiguous from the first one, none may start before the previous end (committed
twice), none past it (skipped) and no offset may go back. Rows carry no partition, only their
offset (``_kafka_offset``), so the rows are checked per offset: at each offset the table must hold
as many rows as partitions committed it. More is a breach; fewer is a gap, which only Kafka can
tell apart from offsets that hold no record (transaction markers, compacted records).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from commit_service.domain.history import FileSpan, OffsetRun, TableHistory
from lakegate_core.audit import Finding, FindingKind, Severity
from lakegate_core.types import PartitionOffsets, TopicPartition

SINK_NAME = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)-(?P<start>\d+)(?:\.[^/]*)?$")
MAX_FINDINGS_PER_KIND = 50  # a table broken everywhere is reported by its first findings and a count


@dataclass(frozen=True)
class Claim:
    """One commit's half-open range ``[start, end)`` of one partition."""

    tp: TopicPartition
    start: int
    end: int
    version: int
    released: bool = False  # the commit released dead letters: its range may hold no rows on purpose


@dataclass(frozen=True)
class Ledger:
    """What the history says: every claim, per partition its committed ranges, and the findings."""

    claims: tuple[Claim, ...]
    committed: dict[TopicPartition, list[tuple[int, int]]]
    findings: tuple[Finding, ...]
    commits: int

    def ranges(self) -> list[tuple[int, int]]:
        """Every partition's committed ranges together (an offset in two partitions' ranges counts twice)."""
        return [r for spans in self.committed.values() for r in spans]

    def offsets(self) -> int:
        return sum(end - start for start, end in self.ranges())

    def claims_of(self, version: int) -> list[Claim]:
        return [c for c in self.claims if c.version == version]


def merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open ranges, sorted, overlapping and touching ones joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def read_history(history: TableHistory, *, upsert: bool = False) -> Ledger:
    """The claims and findings of ``history`` (``upsert``: a MERGE's rows are not a count of its range)."""
    findings: list[Finding] = []
    ends: dict[TopicPartition, int] = dict(history.base)
    claims: list[Claim] = []
    ours = 0
    for commit in history.commits:
        if commit.offsets is None:
            if (commit.added_rows is None or commit.added_rows > 0) and commit.added_files and not commit.rewrite:
                findings.append(
                    Finding(
                        FindingKind.FOREIGN_ROWS,
                        Severity.BREACH,
                        f"commit {commit.version} ({commit.operation or 'unknown operation'}) added "
                        f"{len(commit.added_files)} data file(s) of {_rows(commit.added_rows)} without Lakegate's offsets: "
                        "another writer, whose rows "
                        "no Kafka range accounts for",
                        version=commit.version,
                    )
                )
            continue
        ours += 1
        record = commit.record
        starts = record.starts if record is not None and record.starts is not None else PartitionOffsets()
        released = bool(record is not None and record.released)
        for tp, end in commit.offsets.items():
            previous = ends.get(tp)
            start = starts.get(tp, previous if previous is not None else 0)
            if previous is not None and end == previous and tp not in starts:
                continue  # the whole map again (Iceberg): this partition did not move
            where = str(tp)
            if previous is not None and end < previous:
                findings.append(
                    Finding(
                        FindingKind.OFFSETS_BACKWARDS,
                        Severity.BREACH,
                        f"commit {commit.version} set {where} back from {previous} to {end}: the offsets "
                        "after it will be committed again",
                        where,
                        (end, previous),
                        commit.version,
                    )
                )
            elif previous is not None and start > previous:
                findings.append(
                    Finding(
                        FindingKind.RANGE_SKIPPED,
                        Severity.BREACH,
                        f"commit {commit.version} starts {where} at {start}, but the table held it up to "
                        f"{previous}: offsets {previous}..{start - 1} were never committed",
                        where,
                        (previous, start),
                        commit.version,
                    )
                )
            elif previous is not None and start < previous:
                findings.append(
                    Finding(
                        FindingKind.RANGE_TWICE,
                        Severity.BREACH,
                        f"commit {commit.version} starts {where} at {start}, but the table held it up to "
                        f"{previous}: offsets {start}..{previous - 1} are committed twice",
                        where,
                        (start, previous),
                        commit.version,
                    )
                )
            if end > start:
                claims.append(Claim(tp, start, end, commit.version, released))
            ends[tp] = end  # where the table says it is now
        span = sum(c.end - c.start for c in claims if c.version == commit.version)
        if record is not None and not upsert and not commit.rewrite and (commit.added_rows or 0) > span:
            findings.append(
                Finding(
                    FindingKind.ROW_COUNT,
                    Severity.BREACH,
                    f"commit {commit.version} added {commit.added_rows} rows for a range of {span} offsets",
                    version=commit.version,
                    details={"added_rows": commit.added_rows, "offsets": span, "recorded": record.records},
                )
            )
    committed: dict[TopicPartition, list[tuple[int, int]]] = {}
    for tp, start in history.base.items():  # before the history the audit reads: assumed from 0
        committed.setdefault(tp, []).append((0, start))
    for c in claims:
        committed.setdefault(c.tp, []).append((c.start, c.end))
    return Ledger(tuple(claims), {tp: merge(s) for tp, s in committed.items()}, tuple(findings), ours)


def _rows(count: int | None) -> str:
    return "uncounted rows" if count is None else f"{count} rows"


def sink_partition(name: str) -> tuple[str, int, int] | None:
    """The topic, partition and start offset a sink's file name carries (``<topic>-<partition>-<start>``)."""
    m = SINK_NAME.match(unquote(name.rsplit("/", 1)[-1]))
    return (m["topic"], int(m["partition"]), int(m["start"])) if m else None


def check_files(ledger: Ledger, history: TableHistory, spans: Sequence[FileSpan]) -> list[Finding]:
    """Every data file whose commit is known: its offsets inside that commit's ranges (inside its
    partition's range when its name is a sink's and names a partition the commit claimed)."""
    added: dict[str, int] = {}
    for commit in history.commits:
        if commit.offsets is not None and not commit.rewrite:
            for name in commit.added_files:
                added[_base(name)] = commit.version
    findings: list[Finding] = []
    for span in spans:
        version = added.get(_base(span.name))
        if version is None or span.low is None or span.high is None:
            continue
        claims = ledger.claims_of(version)
        if not claims:
            continue
        named = sink_partition(span.name)
        own = [c for c in claims if named is not None and (c.tp.topic, c.tp.partition) == named[:2]]
        low, high = (own[0].start, own[0].end) if own else (min(c.start for c in claims), max(c.end for c in claims))
        if span.low < low or span.high >= high:
            which = f"{own[0].tp}'s range" if own else "ranges"
            findings.append(
                Finding(
                    FindingKind.FILE_OUTSIDE_RANGE,
                    Severity.BREACH,
                    f"data file {span.name} holds offsets {span.low}..{span.high}; commit {version} claimed "
                    f"{which} {low}..{high - 1}",
                    str(own[0].tp) if own else None,
                    (span.low, span.high + 1),
                    version,
                )
            )
    return findings


def _base(name: str) -> str:
    return unquote(name.rsplit("/", 1)[-1])


def check_runs(ledger: Ledger, runs: Sequence[OffsetRun], *, upsert: bool = False) -> list[Finding]:
    """The offsets where the rows and the ledger disagree: held more often than committed is a
    breach; fewer is a gap (an upsert table keeps one row per key: fewer is what it does)."""
    released = [c for c in ledger.claims if c.released]
    findings: list[Finding] = []
    for run in runs:
        if run.held > run.expected:
            findings.append(
                Finding(
                    FindingKind.OFFSETS_HELD_TWICE,
                    Severity.BREACH,
                    f"offsets {run.start}..{run.end - 1}: {run.held} rows each, but "
                    f"{run.expected} partition(s) committed them",
                    offsets=(run.start, run.end),
                    details={"held": run.held, "expected": run.expected},
                )
            )
        elif not upsert:
            inside_release = any(c.start <= run.start and run.end <= c.end for c in released)
            findings.append(
                Finding(
                    FindingKind.RELEASED if inside_release else FindingKind.GAP,
                    Severity.WARNING if inside_release else Severity.GAP,
                    f"offsets {run.start}..{run.end - 1}: {run.held} rows each, "
                    f"{run.expected} partition(s) committed them"
                    + (" (a dead letter's range an admin released)" if inside_release else ""),
                    offsets=(run.start, run.end),
                    details={"held": run.held, "expected": run.expected},
                )
            )
    return findings


def capped(findings: Iterable[Finding]) -> list[Finding]:
    """At most :data:`MAX_FINDINGS_PER_KIND` findings of each kind, and one saying how many more."""
    out: list[Finding] = []
    counts: dict[FindingKind, int] = {}
    for f in findings:
        counts[f.kind] = counts.get(f.kind, 0) + 1
        if counts[f.kind] <= MAX_FINDINGS_PER_KIND:
            out.append(f)
    for kind, n in counts.items():
        if n > MAX_FINDINGS_PER_KIND:
            worst = next(f.severity for f in out if f.kind is kind)
            out.append(Finding(kind, worst, f"{n - MAX_FINDINGS_PER_KIND} more {kind.value} findings left out"))
    return out
