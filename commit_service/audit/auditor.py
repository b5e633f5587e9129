"""One table's audit, put together: the ledger from the table's history, the rows against it,
Kafka against the table, and a seeded sample of records compared field by field.

Called by ``GET /v1/tables/{table}/audit`` (:mod:`commit_service.http.api`) with the table's
:class:`~commit_service.ports.TableLedger` and, when the service config has a ``kafka`` section,
a :class:`~commit_service.audit.kafka.KafkaLog`; the report (:class:`~lakegate_core.audit.AuditReport`)
goes back to the caller and onto the status page. Read-only: the audit never writes to a table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from commit_service.audit import ledger as ledgers
from commit_service.audit import sample as samples
from commit_service.audit.kafka import KafkaLog, KafkaReadError
from commit_service.audit.values import best_match, expected_row
from commit_service.domain.content import KAFKA_COLUMNS
from commit_service.domain.epochs import Epochs, current
from commit_service.domain.history import OFFSET_COLUMNS, OffsetRun
from commit_service.ports import TableLedger
from lakegate_core.audit import AuditCounts, AuditReport, Finding, FindingKind, Severity
from lakegate_core.types import TopicPartition

logger = logging.getLogger(__name__)

RUN_LIMIT = 1_000  # offset runs where rows and ledger disagree, read back at most
GAP_RECORDS = 10_000  # gap offsets the audit asks Kafka about, at most
SKIP = frozenset({KAFKA_COLUMNS["headers"], "headers"})  # compared nowhere: the sink writes them its own way


@dataclass(frozen=True)
class AuditRequest:
    """What ``GET /v1/tables/{table}/audit`` asked: how many records to read back, with which seed."""

    sample: int = 100
    seed: int = 0


class Auditor:
    """Audits one table: ``kafka`` makes a reader of Kafka for one audit (None: no ``kafka`` section)."""

    def __init__(
        self,
        table: str,
        table_format: str,
        ledger: TableLedger,
        *,
        upsert: bool = False,
        connect_offsets: Mapping[TopicPartition, int] | None = None,
        kafka: Callable[[], KafkaLog] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = table
        self.table_format = table_format
        self.ledger = ledger
        self.upsert = upsert
        self.connect_offsets = dict(connect_offsets or {})
        self.kafka = kafka
        self.clock = clock

    def audit(self, request: AuditRequest) -> AuditReport:
        started = self.clock()
        history = self.ledger.history()
        book = ledgers.read_history(history, upsert=self.upsert)
        if history.version < 0 or not history.commits:
            return AuditReport(
                self.table,
                self.table_format,
                history.version,
                int(started * 1000),
                0,
                request.seed,
                True,
                findings=(Finding(FindingKind.NOT_CHECKED, Severity.INFO, "the table has no commits yet"),),
            )
        findings = list(book.findings)
        tally = self.ledger.tally(book.ranges(), RUN_LIMIT)
        findings += ledgers.check_runs(book, tally.runs, upsert=self.upsert)
        if tally.more:
            findings.append(
                Finding(
                    FindingKind.NOT_CHECKED,
                    Severity.INFO,
                    f"{tally.more} more runs where rows and ledger disagree were not read back",
                )
            )
        spans = self.ledger.file_spans()
        if not self.upsert:  # a MERGE that copies a file's rows on writes older offsets anew
            findings += ledgers.check_files(book, history, spans)
        columns = self.ledger.columns()
        if not any(c in columns for c in OFFSET_COLUMNS):
            findings.append(
                Finding(
                    FindingKind.NOT_CHECKED,
                    Severity.INFO,
                    "the rows carry no offset column (the sink's format.output.fields lacks offset): "
                    "rows were checked by count only, no record was compared",
                )
            )
        sampled = matched = 0
        if self.kafka is None:
            findings.append(
                Finding(
                    FindingKind.NOT_CHECKED,
                    Severity.INFO,
                    "the service config has no kafka section: audited from the table alone",
                )
            )
        else:
            try:
                with self.kafka() as log:
                    kafka_findings, sampled, matched = self._against_kafka(log, book, tally.runs, columns, request)
                findings += kafka_findings
            except KafkaReadError as exc:
                findings.append(Finding(FindingKind.NOT_CHECKED, Severity.INFO, f"Kafka was not audited: {exc}"))
        findings = ledgers.capped(findings)
        return AuditReport(
            table=self.table,
            format=self.table_format,
            version=history.version,
            started_at_ms=int(started * 1000),
            duration_ms=int((self.clock() - started) * 1000),
            seed=request.seed,
            ok=not any(f.severity is Severity.BREACH for f in findings),
            counts=AuditCounts(
                commits=book.commits,
                rows=tally.rows,
                offsets=book.offsets(),
                files=len(spans),
                sampled=sampled,
                matched=matched,
            ),
            findings=tuple(findings),
        )

    def _against_kafka(
        self,
        log: KafkaLog,
        book: ledgers.Ledger,
        runs: tuple[OffsetRun, ...],
        columns: list[str],
        request: AuditRequest,
    ) -> tuple[list[Finding], int, int]:
        findings: list[Finding] = []
        log.epochs = Epochs(current(book.committed))
        over = log.epochs.superseded(book.committed)
        if over:
            findings.append(
                Finding(
                    FindingKind.NOT_CHECKED,
                    Severity.INFO,
                    f"{len(over)} partition(s) of an earlier ledger epoch ({', '.join(map(str, over[:5]))}): their "
                    "topic was made again since, so Kafka no longer holds their records; checked from the table alone",
                )
            )
        ends = {tp: spans[-1][1] for tp, spans in book.committed.items() if spans and tp not in over}
        bounds = log.bounds(ends)
        for tp, end in sorted(ends.items()):
            if tp not in bounds:
                continue
            start_k, end_k = bounds[tp]
            where = str(tp)
            if end > end_k:
                findings.append(
                    Finding(
                        FindingKind.AHEAD_OF_KAFKA,
                        Severity.BREACH,
                        f"the table holds {where} up to {end}, past Kafka's log end {end_k}: the topic was "
                        "recreated or the table fed from another cluster; new records at these offsets will "
                        "be refused as committed",
                        where,
                        (end_k, end),
                    )
                )
            if start_k > end:
                findings.append(
                    Finding(
                        FindingKind.EXPIRED,
                        Severity.BREACH,
                        f"Kafka deleted {where}'s offsets {end}..{start_k - 1} (retention) before the table "
                        "committed them",
                        where,
                        (end, start_k),
                    )
                )
            connect = self.connect_offsets.get(log.epochs.kafka(tp) or tp)
            if connect is not None and end > connect:
                findings.append(
                    Finding(
                        FindingKind.AHEAD_OF_CONNECT,
                        Severity.WARNING,
                        f"the table holds {where} up to {end}, Connect's committed offset is {connect}: the "
                        "connector was reset or its group offsets were moved back",
                        where,
                        (connect, end),
                    )
                )
        findings += self._lost(log, book, runs, bounds)
        if not any(c in columns for c in OFFSET_COLUMNS):
            return findings, 0, 0  # a record's row cannot be found without its offset (NOT_CHECKED above)
        picks = samples.choose(
            samples.reachable({tp: book.committed[tp] for tp in bounds}, {tp: b[0] for tp, b in bounds.items()}),
            request.sample,
            request.seed,
        )
        wanted = sorted({o for offsets in picks.values() for o in offsets})
        rows = self.ledger.rows_at(wanted) if wanted else {}
        sampled = matched = 0
        skip = SKIP | self.ledger.derived()
        for tp, offsets in sorted(picks.items()):
            records = log.records(tp, offsets, bounds[tp][1])
            for offset in offsets:
                record = records.get(offset)
                if record is None:
                    continue  # no record at this offset (a transaction marker, a compacted record)
                sampled += 1
                candidates = rows.get(offset, [])
                found = best_match(expected_row(record, columns), candidates, skip)
                if found is not None and not found[1]:
                    matched += 1
                elif found is None and not self.upsert:
                    findings.append(
                        Finding(
                            FindingKind.RECORD_MISSING,
                            Severity.BREACH,
                            f"{tp} offset {offset}: Kafka holds the record, the table has no row for it",
                            str(tp),
                            (offset, offset + 1),
                        )
                    )
                elif found is not None and not self.upsert:
                    findings.append(
                        Finding(
                            FindingKind.VALUE_DIFFERS,
                            Severity.BREACH,
                            f"{tp} offset {offset}: the table's row differs from Kafka's record in "
                            f"{', '.join(sorted(found[1]))}",
                            str(tp),
                            (offset, offset + 1),
                            details={"fields": found[1]},
                        )
                    )
        if self.upsert:
            findings.append(
                Finding(
                    FindingKind.NOT_CHECKED,
                    Severity.INFO,
                    f"an upsert table keeps the newest row per key: of {sampled} sampled records {matched} are "
                    "still rows with equal values; the others were replaced or deleted, which is not a breach",
                )
            )
        return findings, sampled, matched

    def _lost(
        self,
        log: KafkaLog,
        book: ledgers.Ledger,
        runs: tuple[OffsetRun, ...],
        bounds: Mapping[TopicPartition, tuple[int, int]],
    ) -> list[Finding]:
        """The gaps (fewer rows than committed) that Kafka holds records for: lost records."""
        if self.upsert:
            return []
        findings: list[Finding] = []
        asked = 0
        for run in runs:
            if run.held >= run.expected:
                continue
            if asked >= GAP_RECORDS:
                findings.append(
                    Finding(FindingKind.NOT_CHECKED, Severity.INFO, "more gaps than the audit asks Kafka about")
                )
                break
            offsets = list(range(run.start, min(run.end, run.start + GAP_RECORDS - asked)))
            asked += len(offsets)
            held_by_kafka = dict.fromkeys(offsets, 0)
            for tp, spans in book.committed.items():
                if tp not in bounds:
                    continue  # an earlier ledger epoch's: not in Kafka
                mine = [o for o in offsets if any(s <= o < e for s, e in spans) and o >= bounds[tp][0]]
                if mine:
                    for o in log.records(tp, mine, bounds[tp][1]):
                        held_by_kafka[o] += 1
            lost = [o for o, n in held_by_kafka.items() if n > run.held]
            if lost:
                findings.append(
                    Finding(
                        FindingKind.LOST,
                        Severity.BREACH,
                        f"offsets {lost[0]}..{lost[-1]}: Kafka holds records the table has no row for "
                        f"({len(lost)} offset(s); the ledger says they are committed)",
                        offsets=(lost[0], lost[-1] + 1),
                        details={"offsets": len(lost)},
                    )
                )
        return findings
