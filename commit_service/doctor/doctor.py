"""The doctor of one service: remembers the connectors its sidecars reported, gathers each one's
facts (the tables, Kafka, the offsets) and runs every check on them.

Built once by the HTTP app (:mod:`commit_service.http.doctor`) with the service's config and two
offset readers injected, and called by ``GET /v1/doctor`` and ``POST /v1/doctor`` on the asking
thread. Only :mod:`.kafka` does I/O of its own; the checks are pure.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from commit_service.config import ServiceConfig
from lakegate_core.connect_group import KafkaSettings
from lakegate_core.doctor import (
    Check,
    ConnectorSpec,
    ConnectorVerdict,
    DoctorFinding,
    DoctorReport,
    DoctorRequest,
    DoctorSeverity,
    Listing,
)
from lakegate_core.types import PartitionOffsets

from .facts import CheckFn, ConnectorFacts, TopicFacts
from .kafka import DoctorKafkaError, TopicInspector
from .sink_checks import SINK_CHECKS
from .table_checks import TABLE_CHECKS

logger = logging.getLogger(__name__)

CHECKS: dict[Check, CheckFn] = {**SINK_CHECKS, **TABLE_CHECKS}
REMEMBERED_MAX = 1000  # connectors remembered from sidecars' reports


@dataclass(frozen=True)
class ConnectorStatus:
    """A connector's last check (the status page shows it): its verdict and the checks it failed."""

    verdict: ConnectorVerdict
    blocking: tuple[str, ...]  # the checks with a blocking finding
    warnings: tuple[str, ...]  # the checks with a warning
    checked_at_ms: int

    @property
    def ok(self) -> bool:
        return not self.blocking


@dataclass(frozen=True)
class Reported:
    """A connector's config as a sidecar last reported it."""

    spec: ConnectorSpec
    listing: Listing | None
    source: str


class Doctor:
    """One service's doctor (thread-safe: sidecars report while operators ask)."""

    def __init__(
        self,
        config: ServiceConfig,
        table_offsets: Callable[[], PartitionOffsets],
        connect_offsets: Callable[[str], PartitionOffsets] | None,
        inspector: Callable[[KafkaSettings], TopicInspector] = TopicInspector,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.table_offsets = table_offsets
        self.connect_offsets = connect_offsets
        self.inspector = inspector
        self.clock = clock
        self._reported: dict[str, Reported] = {}
        self._last: dict[str, ConnectorStatus] = {}
        self._lock = threading.Lock()  # the remembered reports and last checks
        self._running = threading.Lock()  # one examination at a time: they share one Kafka group reader

    def remember(self, request: DoctorRequest) -> None:
        """Keep a sidecar's connectors for ``GET /v1/doctor`` (the last report of each name wins)."""
        source = f"sidecar {request.sidecar}" if request.sidecar else "request"
        with self._lock:
            for spec in request.connectors:
                self._reported.pop(spec.name, None)
                self._reported[spec.name] = Reported(spec, request.listing, source)
            while len(self._reported) > REMEMBERED_MAX:
                self._reported.pop(next(iter(self._reported)))

    def last(self) -> list[ConnectorStatus]:
        """Each connector's last check since the service started, by name."""
        with self._lock:
            return sorted(self._last.values(), key=lambda c: c.verdict.name)

    def reported(self) -> list[Reported]:
        with self._lock:
            return sorted(self._reported.values(), key=lambda r: r.spec.name)

    def examine(self, request: DoctorRequest | None = None, only: frozenset[str] = frozenset()) -> DoctorReport:
        """Check ``request``'s connectors (default: every connector the sidecars reported; ``only``:
        those of these names)."""
        with self._running:
            return self._examine(request, only)

    def _examine(self, request: DoctorRequest | None, only: frozenset[str]) -> DoctorReport:
        started = self.clock()
        if request is not None:
            source = f"sidecar {request.sidecar}" if request.sidecar else "request"
            subjects = [Reported(s, request.listing, source) for s in request.connectors]
        else:
            subjects = self.reported()
        if only:
            subjects = [r for r in subjects if r.spec.name in only]
        if not subjects:  # nothing to check: Kafka is not asked
            return DoctorReport(True, int(started * 1000), 0)
        kafka, note, names = self._kafka(subjects)
        committed = self.table_offsets()
        findings: list[DoctorFinding] = []
        verdicts = []
        for r in subjects:
            facts = self._facts(r, kafka, note, names, committed)
            found: list[DoctorFinding] = []
            passed = []
            for check, fn in CHECKS.items():
                out = fn(facts)
                found.extend(out)
                if check is not Check.NOT_CHECKED and not any(f.severity is not DoctorSeverity.INFO for f in out):
                    passed.append(check)
            findings.extend(found)
            tables = tuple(sorted({t.name for t in facts.tables.values() if t is not None}))
            verdicts.append(ConnectorVerdict(r.spec.name, facts.topics, tables, tuple(passed), r.source))
        report = DoctorReport(
            ok=not any(f.severity is DoctorSeverity.BLOCKING for f in findings),
            checked_at_ms=int(started * 1000),
            duration_ms=int((self.clock() - started) * 1000),
            connectors=tuple(verdicts),
            findings=tuple(findings),
        )
        with self._lock:
            for v in verdicts:
                mine = [f for f in findings if f.connector == v.name]
                self._last.pop(v.name, None)  # the newest check last: the oldest is dropped first
                self._last[v.name] = ConnectorStatus(
                    v,
                    tuple(sorted({f.check.value for f in mine if f.severity is DoctorSeverity.BLOCKING})),
                    tuple(sorted({f.check.value for f in mine if f.severity is DoctorSeverity.WARNING})),
                    report.checked_at_ms,
                )
                while len(self._last) > REMEMBERED_MAX:
                    self._last.pop(next(iter(self._last)))
        logger.info(
            "doctor: %d connectors, %s (%d blocking, %d warnings)",
            len(verdicts),
            "ok" if report.ok else "BLOCKED",
            len(report.blocking()),
            sum(1 for f in findings if f.severity is DoctorSeverity.WARNING),
        )
        return report

    def _topics(self, spec: ConnectorSpec, names: list[str] | None) -> tuple[str, ...]:
        listed = tuple(t.strip() for t in spec.config.get("topics", "").split(",") if t.strip())
        regex = spec.config.get("topics.regex")
        if listed or not regex or names is None:
            return listed
        try:
            pattern = re.compile(regex)
        except re.error:
            return ()
        return tuple(n for n in names if pattern.fullmatch(n) and not n.startswith("__"))

    def _kafka(self, subjects: list[Reported]) -> tuple[dict[str, TopicFacts] | None, str | None, list[str] | None]:
        """Every topic the subjects read, as Kafka describes it (None, and why, when it cannot be read)."""
        settings = self.config.kafka
        if settings is None:
            return None, "the service config has no kafka section", None
        try:
            with self.inspector(settings) as kafka:
                names = kafka.topic_names()
                topics = {t for r in subjects for t in self._topics(r.spec, names)}
                return kafka.describe(topics), None, names
        except DoctorKafkaError as exc:
            logger.warning("doctor: Kafka not read: %s", exc)
            return None, str(exc), None

    def _facts(
        self,
        r: Reported,
        kafka: dict[str, TopicFacts] | None,
        note: str | None,
        names: list[str] | None,
        committed: PartitionOffsets,
    ) -> ConnectorFacts:
        topics = self._topics(r.spec, names)
        if not topics and r.spec.config.get("topics.regex") and note is None:
            note = f"topics.regex={r.spec.config['topics.regex']} matches no topic in Kafka"
        connect: PartitionOffsets | None = None
        connect_note = None if self.connect_offsets else "the service config has no kafka section"
        if self.connect_offsets is not None:
            try:
                connect = self.connect_offsets(r.spec.name)
            except Exception as exc:  # kafka-python raises many types: reported as not checked
                connect_note = f"{type(exc).__name__}: {exc}"
        return ConnectorFacts(
            spec=r.spec,
            source=r.source,
            listing=r.listing,
            topics=topics,
            tables={t: self.config.table_for(t) for t in topics},
            allowed_roots=self.config.storage.allowed_roots,
            kafka={t: kafka[t] for t in topics if t in kafka} if kafka is not None else None,
            kafka_note=note,
            table_offsets=PartitionOffsets((tp, v) for tp, v in committed.items() if tp.topic in topics),
            connect_offsets=connect,
            connect_note=connect_note,
        )
