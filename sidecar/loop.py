"""The sidecar's round: who owns what, what Connect committed, which files are complete, send.

Run by ``lakegate-sidecar`` every ``poll_interval_seconds``; every source is an injected object
(:class:`ConnectRest`, :class:`GroupReader`, a storage :class:`Lister`, :class:`ServiceClient`), so
unit tests drive it with fakes. The only memory kept between rounds is which files were sent
recently (to avoid resending them every round); it is pruned as the table's offsets advance, so it
is bounded by the files in flight. Losing it (a restart) only means files are sent again, which
the service answers with ``duplicate`` / ``already_committed``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from commit_service.protocol import DataFile, FileFormat, FileStatus, LeaseRequest, Manifest, SidecarInfo
from sidecar.client import ServiceClient
from commit_service.connect_group import GroupReadError
from sidecar.connect import ConnectRest, GroupReader
from sidecar.errors import SourceError
from sidecar.metrics import SidecarMetrics
from sidecar.storage import Lister, NamePattern, list_files
from sidecar.tracker import CompleteFile, TopicPartition, complete_files

logger = logging.getLogger(__name__)


@dataclass
class RoundReport:
    """What one round saw and did (logged, and returned for tests)."""

    owned: dict[TopicPartition, str] = field(default_factory=dict)  # partition -> connector
    connect_committed: dict[TopicPartition, int] = field(default_factory=dict)
    table_next: dict[TopicPartition, int] = field(default_factory=dict)
    sent: list[CompleteFile] = field(default_factory=list)
    epochs: dict[TopicPartition, int | None] = field(default_factory=dict)  # leases granted this round
    read_at_ms: dict[TopicPartition, int] = field(default_factory=dict)  # when Connect's offset was read
    rejected: set[TopicPartition] = field(default_factory=set)  # partitions with a rejected file
    statuses: dict[str, int] = field(default_factory=dict)


class SidecarLoop:
    """One sidecar: follows the connectors on one Connect worker."""

    def __init__(self, *, worker_id: str, sidecar_id: str, connectors: tuple[str, ...], connectors_regex: str | None,
                 connect: ConnectRest, groups: GroupReader, lister: Lister, pattern: NamePattern,
                 service: ServiceClient, metrics: SidecarMetrics, file_format: FileFormat = FileFormat.PARQUET,
                 resend_after: float = 30.0, max_files: int = 500,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.worker_id = worker_id
        self.sidecar_id = sidecar_id
        self.connectors = connectors
        self.connectors_regex = connectors_regex
        self.connect = connect
        self.groups = groups
        self.lister = lister
        self.pattern = pattern
        self.service = service
        self.metrics = metrics
        self.file_format = file_format
        self.resend_after = resend_after
        self.max_files = max_files
        self.clock = clock
        self._sent: dict[tuple[str, int], float] = {}  # (key, end) -> when
        # per partition: (Connect's committed offset, when read, ms) whose files all went out last
        # round; sent with the next lease claim so the service can tell a complete round (VTTS)
        self._watermarks: dict[TopicPartition, tuple[int, int]] = {}

    def run_once(self) -> RoundReport:
        report = RoundReport()
        for name in self.connect.followed(self.connectors, self.connectors_regex):
            view = self.connect.view(name, self.worker_id)
            if view.state == "MISSING":
                logger.info("connector %s is gone; nothing to follow", name)
                continue
            if not view.my_tasks:
                continue  # no task of it runs here (or it is paused): another sidecar reports
            read_at_ms = int(time.time() * 1000)
            try:
                committed = self.groups.committed(name)  # read BEFORE listing: files below it exist
                owned = self.groups.owned(name, view.my_tasks)
            except GroupReadError as exc:
                raise SourceError(str(exc)) from exc
            if owned:
                self._claim(name, view.my_tasks, owned, report)
            for tp in owned:
                report.owned[tp] = name
                if tp in committed:
                    report.connect_committed[tp] = committed[tp]
                    report.read_at_ms[tp] = read_at_ms
        self.metrics.owned.set(len(report.owned))
        if not report.owned:
            self.metrics.rounds.inc()
            self.metrics.last_success = time.monotonic()
            return report
        report.table_next = self.service.table_offsets()
        listed = list_files(self.lister, self.pattern, {t for t, _ in report.owned})
        now = self.clock()
        due: list[CompleteFile] = []
        self.metrics.lag.clear()  # partitions that moved away must not keep a stale lag
        for tp in sorted(report.owned):
            table_next = report.table_next.get(tp, 0)
            connect_at = report.connect_committed.get(tp)
            if connect_at is not None:
                self.metrics.lag.labels(tp[0], str(tp[1])).set(max(0, connect_at - table_next))
            for c in complete_files(listed.get(tp, []), connect_at, table_next):
                sent_at = self._sent.get((c.file.key, c.end_offset))
                if sent_at is None or now - sent_at >= self.resend_after:
                    due.append(c)
        self._prune(report.table_next)
        for start in range(0, len(due), self.max_files):
            batch = due[start:start + self.max_files]
            self._send(batch, report)
            for c in batch:
                self._sent[(c.file.key, c.end_offset)] = now
        self._watermarks = {tp: (report.connect_committed[tp], report.read_at_ms[tp]) for tp in report.owned
                            if tp in report.connect_committed and tp not in report.rejected}  # fmt: skip
        self.metrics.rounds.inc()
        self.metrics.last_success = time.monotonic()
        if report.sent:
            logger.info("sent %d file(s): %s", len(report.sent), report.statuses)
        return report

    def _claim(self, connector: str, tasks: frozenset[int], owned: set[TopicPartition], report: RoundReport) -> None:
        """Lease the owned partitions (every round: cheap, and it follows rebalances at once)."""
        marks = tuple((tp[0], tp[1], offset, at) for tp, (offset, at) in sorted(self._watermarks.items()) if tp in owned)
        request = LeaseRequest(SidecarInfo(self.sidecar_id, self.worker_id), connector, tuple(sorted(tasks)),
                               tuple(sorted(owned)), marks)  # fmt: skip
        fencing, grants = self.service.claim(request)
        for g in grants:
            tp = (g.topic, g.partition)
            if g.granted:
                report.epochs[tp] = g.epoch if fencing else None
            else:
                owned.discard(tp)
                logger.warning("lease on %s-%d refused: %s", g.topic, g.partition, g.reason)

    def _send(self, batch: list[CompleteFile], report: RoundReport) -> None:
        manifest = Manifest(
            manifest_id=f"{self.sidecar_id}-{uuid.uuid4()}",
            sidecar=SidecarInfo(self.sidecar_id, self.worker_id),
            files=tuple(DataFile(self.lister.uri(c.file.key), c.file.topic, c.file.partition, c.file.start_offset,
                                 c.end_offset, c.file.size, self.file_format,
                                 lease_epoch=report.epochs.get(c.tp)) for c in batch),  # fmt: skip
        )
        try:
            receipt = self.service.send(manifest)
        except Exception:
            self.metrics.manifests.labels("error").inc()
            raise
        self.metrics.manifests.labels("ok").inc()
        self.metrics.files.inc(len(batch))
        report.sent.extend(batch)
        for c, r in zip(batch, receipt.files):
            report.statuses[r.status.value] = report.statuses.get(r.status.value, 0) + 1
            if r.status is FileStatus.REJECTED:
                report.rejected.add(c.tp)
                logger.warning("service rejected %s: %s", r.path, r.reason)

    def _prune(self, table_next: dict[TopicPartition, int]) -> None:
        """Forget sent files the table has passed (bounded memory)."""
        keep: dict[tuple[str, int], float] = {}
        for (key, end), when in self._sent.items():
            parsed = self.pattern.parse(key, 0)
            if parsed is None or end >= table_next.get((parsed.topic, parsed.partition), 0):
                keep[(key, end)] = when
        self._sent = keep
