"""The sidecar's round: who owns what, what Connect committed, which files are complete, send.

Run by ``lakegate-sidecar`` every ``poll_interval_seconds``, and at the times
:meth:`SidecarLoop.next_round_at` names while a table's round catches up. Every source is a seam
typed as a ``Protocol`` (:mod:`sidecar.ports`, and the storage :class:`~sidecar.storage.Lister`),
so unit tests drive the loop with fakes; what a round saw of each partition is plain state
(:mod:`sidecar.round_state`), the connectors' states are followed in :mod:`sidecar.health`. The
only memory kept between rounds is which files were sent recently (to avoid resending them every
round), the last round's watermarks and each partition's :class:`~sidecar.round_state.CatchUp`;
the first is pruned as the table's offsets advance, so it is bounded by the files in flight.
Losing it (a restart) only means files are sent again, which the service answers with
``duplicate`` / ``already_committed``.

Catching up: a table with ``commit.catch_up_seconds`` says in each lease answer when its next
round is due (``LeaseGrant.due_ms``). The sidecar runs a round at that time, reads the partition's
Kafka log end in it, sends that with its watermarks, and runs a round every
``catch_up_poll_seconds`` until Connect's committed offset has reached it (the files below it are
out) and a claim has carried it: the table's round commits soon after Connect's first flush past
its due time, not an interval later.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from lakegate_core.connect_group import GroupReadError
from lakegate_core.protocol import (
    CsvLayout,
    DataFile,
    FileFormat,
    FileStatus,
    LeaseRequest,
    LeaseResponse,
    Manifest,
    OffsetSpan,
    SidecarInfo,
    Watermark,
)
from lakegate_core.types import PartitionOffsets, TopicPartition
from sidecar.claims import claim_batches
from sidecar.config import LoopSettings
from sidecar.errors import SourceError
from sidecar.health import ConnectorHealth
from sidecar.listing import ListingPlan
from sidecar.metrics import SidecarMetrics
from sidecar.ports import CommitService, ConnectSource, GroupSource
from sidecar.round_state import CatchUp, PartitionRound, RoundReport, first_file, listed_from, may_have_new_files
from sidecar.storage import Lister, NamePattern, StoredFile
from sidecar.tracker import CompleteFile, complete_files

logger = logging.getLogger(__name__)


class SidecarLoop:
    """One sidecar: follows the connectors on one Connect worker."""

    def __init__(
        self,
        settings: LoopSettings,
        *,
        connect: ConnectSource,
        groups: GroupSource,
        lister: Lister,
        pattern: NamePattern,
        service: CommitService,
        metrics: SidecarMetrics,
        clock: Callable[[], float] = time.monotonic,
        on_health_change: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.settings = settings
        self.connect = connect
        self.groups = groups
        self.lister = lister
        self.pattern = pattern
        self.service = service
        self.metrics = metrics
        self.clock = clock
        # per partition, (key, end) -> when sent: pruned by each partition's table offset, no name parsed
        self._sent: dict[TopicPartition, dict[tuple[str, int], float]] = {}
        # per partition: Connect's committed offset (and when read) whose files all went out last
        # round; sent with the next lease claim so the service can tell a complete round (VTTS)
        self._watermarks: dict[TopicPartition, Watermark] = {}
        self._layouts: dict[str, CsvLayout] = {}  # connector -> how its CSV lines are laid out
        self._warned: set[str] = set()  # connectors already reported as writing an unusable format
        # (key, size) -> the offsets the service found in the file's content (orphan guard)
        self._holds: dict[tuple[str, int], OffsetSpan] = {}
        # per partition the table has no offset of yet, where a listing from its first name found
        # its first file: its watermark's first_file, so later rounds list from what the service
        # holds instead of from the partition's first name again (an archive's first window)
        self._first_seen: dict[TopicPartition, int] = {}
        self._catch_up: dict[TopicPartition, CatchUp] = {}  # partitions whose table's round catches up
        self._service_ahead = 0.0  # the service's clock (s) minus ours, from the last lease answer
        self._last_round: float | None = None  # when the last full round started (clock())
        self._listing = ListingPlan(pattern, metrics=metrics)  # whole topics, or partitions from their offsets
        # each followed connector's state and failed tasks as last seen: a change is reported to the
        # service's doctor (on_health_change), so a task failing after the start shows there
        self._health = ConnectorHealth(clock)
        self.on_health_change = on_health_change

    @property
    def worker_id(self) -> str:
        return self.settings.worker_id

    def step(self) -> RoundReport | None:
        """A round, unless all it could do now is find Connect's committed offsets short of the log
        ends its partitions catch up with (:meth:`_catching_up_only`): then, within a poll
        interval of the last round, those offsets alone are read (one request per connector) and
        the round runs only once one of them has reached its log end. None when skipped."""
        now = self.clock()
        if self._last_round is not None and now < self._last_round + self.settings.poll_interval:
            waiting = self._catching_up_only()
            if waiting and not self._reached(waiting):
                return None
        return self.run_once()

    def _catching_up_only(self) -> dict[TopicPartition, CatchUp]:
        """The unsettled catch-ups if each has had its log end carried to the service and waits
        only for Connect's committed offset to reach it; else (or with none) empty."""
        waiting = {tp: c for tp, c in self._catch_up.items() if not c.settled}
        if any(c.log_end is None or not c.carried for c in waiting.values()):
            return {}
        return waiting

    def _reached(self, waiting: dict[TopicPartition, CatchUp]) -> bool:
        """Whether Connect's committed offset of one of ``waiting`` has reached its log end (a
        failed read says yes: the round will tell)."""
        for connector in sorted({c.connector for c in waiting.values()}):
            try:
                committed = self.groups.committed(connector)
            except GroupReadError:
                return True
            for tp, c in waiting.items():
                if c.connector == connector and c.log_end is not None and committed.get(tp, -1) >= c.log_end:
                    return True
        return False

    def run_once(self) -> RoundReport:
        self._last_round = self.clock()
        report = RoundReport()
        s = self.settings
        changed: list[str] = []
        for view in self.connect.views(s.connectors, s.connectors_regex, s.worker_id):
            name = view.name
            if self._health.saw(name, view.health):
                changed.append(name)
            if view.state == "MISSING":
                logger.info("connector %s is gone; nothing to follow", name)
                continue
            self.pattern.follow(view.topics, view.confluent)
            self._listing.follow(view.topics, view.offset_width)
            if not view.my_tasks:
                continue  # no task of it runs here (or it is paused): another sidecar reports
            fmt = s.formats.get(name, view.output_format)
            self._layouts[name] = view.csv or CsvLayout()
            if fmt is None:
                self._unsupported(name, view.format_source)
                continue
            try:
                owned = self.groups.owned(name, view.my_tasks)
            except GroupReadError as exc:
                raise SourceError(str(exc)) from exc
            if not owned:
                continue
            read_at_ms = self._claim(name, fmt, view.my_tasks, owned, report)
            try:
                # read AFTER the service stamped the claim's answer (so that stamp is no later than
                # this read, in the service's clock) and BEFORE listing (files below it exist)
                committed = self.groups.committed(name)
            except GroupReadError as exc:
                raise SourceError(str(exc)) from exc
            for tp, part in report.partitions.items():
                if part.connector == name and tp in committed:
                    part.connect_committed, part.read_at_ms = committed[tp], read_at_ms
            self._read_log_ends(name, read_at_ms, report)
        self._health.report(changed, self.on_health_change)
        for tp in set(self._catch_up) - set(report.partitions):
            del self._catch_up[tp]  # no longer ours
        self.metrics.owned.set(len(report.partitions))
        if report.partitions:
            self._report_files(report)
        self.metrics.rounds.inc()
        self.metrics.last_success = time.monotonic()
        if report.sent:
            logger.info("sent %d file(s): %s", len(report.sent), report.statuses)
        return report

    def _report_files(self, report: RoundReport) -> None:
        """Send every complete file of the owned partitions that the service does not hold and that
        was not sent recently; note watermarks."""
        table_next = self.service.table_offsets()
        since = {
            tp: listed_from(tp, part, table_next, tp in self._first_seen)
            for tp, part in report.partitions.items()
            if may_have_new_files(tp, part, table_next)
        }
        upto = {tp: p.connect_committed for tp, p in report.partitions.items() if p.connect_committed is not None}
        listed = self._listing.files(self.lister, since, self._holds, upto)
        for tp, offset in since.items():
            if tp not in table_next and offset == 0 and listed.get(tp):
                self._first_seen[tp] = listed[tp][0].start_offset
        for tp, cut in self._listing.cut.items():  # a window cut short: the round goes as far as it
            part = report.partitions[tp]
            if part.connect_committed is not None and cut < part.connect_committed:
                part.listed_upto = cut
        now = self.clock()
        due: list[CompleteFile] = []
        self.metrics.lag.clear()  # partitions that moved away must not keep a stale lag
        for tp, part in sorted(report.partitions.items()):
            part.table_next = table_next.get(tp, 0)
            if part.connect_committed is not None:
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(
                    max(0, part.connect_committed - part.table_next)
                )
            for c in complete_files(listed.get(tp, []), part.complete_below, part.table_next, self._holds):
                if part.holds(c.file.start_offset, c.end_offset):
                    continue  # the service holds it: sent once, not again until it is dropped or restarts
                sent_at = self._sent.get(tp, {}).get((c.file.key, c.end_offset))
                if sent_at is None or now - sent_at >= self.settings.resend_after:
                    due.append(c)
        self._prune(table_next)
        step = self.settings.max_files
        for start in range(0, len(due), step):
            batch = due[start : start + step]
            self._send(batch, report)
            for c in batch:
                self._sent.setdefault(c.file.tp, {})[(c.file.key, c.end_offset)] = now
        self._watermarks = {
            tp: Watermark(
                tp.topic,
                tp.partition,
                below,
                part.read_at_ms,
                self._log_end(tp, part),
                self._first_file(tp, listed.get(tp, []), part) if tp not in table_next else None,
            )
            for tp, part in report.partitions.items()
            if (below := part.complete_below) is not None and not part.rejected
        }

    def _read_log_ends(self, connector: str, read_at_ms: int, report: RoundReport) -> None:
        """Read the log end of each of ``connector``'s partitions whose round came due by
        ``read_at_ms`` (the service's answer to this round's claim, so the read is no earlier)."""
        due = sorted(
            tp
            for tp, part in report.partitions.items()
            if part.connector == connector
            and (c := self._catch_up.get(tp)) is not None
            and c.log_end is None
            and c.due_ms <= read_at_ms
        )
        if not due:
            return
        try:
            ends = self.groups.log_ends(due)
        except GroupReadError as exc:
            raise SourceError(str(exc)) from exc
        for tp in due:
            if tp in ends:
                self._catch_up[tp].log_end = report.partitions[tp].log_end = ends[tp]

    def _log_end(self, tp: TopicPartition, part: PartitionRound) -> int | None:
        """The log end this partition's watermark carries: the one read this round, whose read
        time is the watermark's (None in any other round); notes whether Connect's committed
        offset has reached the partition's log end."""
        c = self._catch_up.get(tp)
        if c is not None and c.log_end is not None and (part.complete_below or 0) >= c.log_end:
            c.reached = True
        return part.log_end

    def next_round_at(self, started: float) -> float:
        """When (``clock()``) the round after one started at ``started`` should start: a poll
        interval later, earlier when a partition's round comes due (a round then reads its log
        end), and every ``catch_up_poll`` while a partition catching up is not settled."""
        s = self.settings
        at = started + s.poll_interval
        for c in self._catch_up.values():
            if c.log_end is None:
                at = min(at, max(started + s.catch_up_poll, c.due_ms / 1000 - self._service_ahead))
            elif not c.settled:
                at = min(at, started + s.catch_up_poll)
        return at

    def _unsupported(self, connector: str, why: str) -> None:
        """A connector whose files the service cannot commit: say so once, count it every round."""
        self.metrics.errors.labels("unsupported_format").inc()
        if connector not in self._warned:
            self._warned.add(connector)
            logger.error(
                "connector %s writes files the service cannot commit (%s): its files are not reported. "
                "Use format.output.type jsonl, parquet, csv or avro, or set connect.formats.%s in sidecar.yaml",
                connector,
                why,
                connector,
            )

    def _claim(
        self, connector: str, fmt: FileFormat, tasks: frozenset[int], owned: set[TopicPartition], report: RoundReport
    ) -> int:
        """Lease the owned partitions (every round: cheap, and it follows rebalances at once), in
        claims of at most ``CLAIM_BYTES`` (:func:`~sidecar.claims.claim_batches`). Returns the time
        to stamp this round's watermarks with: the service's clock from its last answer, which is no
        later than the reads that follow (a service without ``now_ms`` leaves the sidecar's own
        clock, read before the claims)."""
        sent_at_ms = int(time.time() * 1000)
        info = SidecarInfo(self.settings.sidecar_id, self.settings.worker_id)
        answers: list[LeaseResponse] = []
        for chunk in claim_batches(sorted(owned)):
            marks = tuple(self._watermarks[tp] for tp in chunk if tp in self._watermarks)
            answers.append(self.service.claim(LeaseRequest(info, connector, tuple(sorted(tasks)), chunk, marks)))
            for w in marks:
                c = self._catch_up.get(w.tp)
                if c is not None and w.log_end is not None and w.log_end == c.log_end:
                    c.carried = True
        for tp, c in self._catch_up.items():
            if c.connector == connector and tp in owned and c.log_end is not None and not c.carried:
                c.log_end, c.reached = None, False  # its round made no watermark: read it again
        refused = set()
        for answer in answers:
            for g in answer.leases:
                if g.granted:
                    epoch = g.epoch if answer.fencing else None
                    report.partitions[g.tp] = PartitionRound(
                        connector, fmt, epoch, held_next=g.held_next, held_after=g.held_after or ()
                    )
                    self._follow_due(connector, g.tp, g.due_ms)
                else:
                    refused.add(g.tp)
                    logger.warning("lease on %s refused: %s", g.tp, g.reason)
        for tp in owned - refused - set(report.partitions):  # a service that answered no grant for it
            report.partitions[tp] = PartitionRound(connector, fmt)
        now_ms = answers[-1].now_ms if answers else None
        if now_ms is None:
            return sent_at_ms
        self._service_ahead = now_ms / 1000 - self.clock()
        return now_ms

    def _follow_due(self, connector: str, tp: TopicPartition, due_ms: int | None) -> None:
        """A new due time starts a new catch-up; none (the table does not catch up) ends it."""
        if due_ms is None:
            self._catch_up.pop(tp, None)
        elif tp not in self._catch_up or self._catch_up[tp].due_ms != due_ms:
            self._catch_up[tp] = CatchUp(connector, due_ms)

    def _csv_layout(self, p: PartitionRound) -> CsvLayout | None:
        """The layout sent with a CSV file: its connector's (Aiven's defaults if unknown)."""
        return self._layouts.get(p.connector, CsvLayout()) if p.format is FileFormat.CSV else None

    def _send(self, batch: list[CompleteFile], report: RoundReport) -> None:
        s = self.settings
        files = tuple(
            DataFile(
                self.lister.uri(c.file.key),
                c.file.topic,
                c.file.partition,
                c.file.start_offset,
                c.end_offset,
                c.file.size,
                report.partitions[c.tp].format,
                lease_epoch=report.partitions[c.tp].epoch,
                csv=self._csv_layout(report.partitions[c.tp]),
                modified_ms=c.file.modified_ms,
            )
            for c in batch
        )
        manifest = Manifest(f"{s.sidecar_id}-{uuid.uuid4()}", SidecarInfo(s.sidecar_id, s.worker_id), files)
        try:
            receipt = self.service.send(manifest)
        except Exception:
            self.metrics.manifests.labels("error").inc()
            raise
        self.metrics.manifests.labels("ok").inc()
        self.metrics.files.inc(len(batch))
        report.sent.extend(batch)
        for c, r in zip(batch, receipt.files, strict=False):
            report.statuses[r.status.value] = report.statuses.get(r.status.value, 0) + 1
            self.metrics.receipts.labels(r.status.value).inc()
            if r.status is FileStatus.REJECTED:
                report.partitions[c.tp].rejected = True
                logger.warning("service rejected %s: %s", r.path, r.reason)
            if r.holds is not None:  # the content says where the file ends: claim that next round
                self._holds[(c.file.key, c.file.size)] = r.holds

    def _first_file(self, tp: TopicPartition, listed: list[StoredFile], part: PartitionRound) -> int:
        """The partition's first file as a listing from its first name found it (this round's, or
        an earlier one's while this round listed from what the service holds)."""
        seen = self._first_seen.get(tp)
        if seen is not None and part.connect_committed is not None:
            return min(seen, part.connect_committed)
        return first_file(listed, part)

    def _prune(self, table_next: PartitionOffsets) -> None:
        """Forget sent files the table has passed (bounded memory)."""
        self._first_seen = {tp: at for tp, at in self._first_seen.items() if tp not in table_next}
        for tp, sent in list(self._sent.items()):  # a catch-up keeps ~100,000 sent: no regex each
            below = table_next.get(tp, 0)
            kept = {k: when for k, when in sent.items() if k[1] >= below}
            if kept:
                self._sent[tp] = kept
            else:
                del self._sent[tp]
        held: dict[tuple[str, int], OffsetSpan] = {}
        for (key, size), span in self._holds.items():
            parsed = self.pattern.parse(key, size)
            if parsed is None or span.last >= table_next.get(parsed.tp, 0):
                held[(key, size)] = span
        self._holds = held
