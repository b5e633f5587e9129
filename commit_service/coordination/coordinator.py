"""The coordinator: routes manifests to tables and runs each table's commit rounds.

Owned by the service runtime (one per process; the service runs ONE gunicorn worker so there is
one writer). HTTP threads call :meth:`Coordinator.submit`, :meth:`Coordinator.claim`, the status
reads and :meth:`Coordinator.commit_now`; a background thread calls :meth:`Coordinator.tick`
when the next table's interval ends, when a manifest or a lease claim arrives for a table whose
interval has ended (its round may be waiting for just that), and at least twice a second.
Decisions are made by the pure :class:`~commit_service.domain.state.TableState`; Delta is touched
only through the injected :class:`~commit_service.ports.Committer`, and Kafka only through
:class:`~commit_service.coordination.fencing.Fencing`, so this module imports neither.

Each table's state, commit rounds and maintenance are a :class:`TableCoordinator`, which takes its
own locks (:mod:`commit_service.coordination.table_coordinator`); after each round the tick runs the table's
maintenance that is due.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from commit_service.config import ServiceConfig, TableConfig
from commit_service.coordination.fencing import Fencing
from commit_service.coordination.sidecars_seen import SidecarSeen, SidecarsSeen
from commit_service.coordination.table_coordinator import TableCoordinator, TimeOffsets
from commit_service.domain.manifests import MAX_TRACKED_MANIFESTS
from commit_service.domain.paths import UnsafePathError, is_under, normalize_uri
from commit_service.domain.plan import PendingFile
from commit_service.errors import (
    BadRequestError,
    CommitError,
    ConflictError,
    NotFoundError,
    TooManyPendingError,
)
from commit_service.ports import CommitListener, Committer, ConnectGroups, DeadLetterStore
from lakegate_core.protocol import (
    DataFile,
    FileReceipt,
    FileStatus,
    LeaseGrant,
    LeaseRequest,
    Manifest,
    ManifestReceipt,
    Watermark,
)
from lakegate_core.status import (
    CommitRecord,
    DeadLetter,
    DeadLetterState,
    MaintenanceKind,
    MaintenanceList,
    MaintenanceRecord,
    ManifestState,
    ManifestStatus,
    TableSummary,
)
from lakegate_core.types import PartitionOffsets, TopicPartition

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.5  # the longest the loop sleeps (backoffs, maintenance, lease expiry)
ROUND_THREADS = 4  # tables whose passes (rounds, maintenance) the background loop runs at once
MIN_GAP_SECONDS = 0.02  # the shortest: under a stream of manifests the loop plans at most 50 times a second
IDLE_DUTY = 0.25  # a pass that committed nothing is followed by a sleep of at least 3x its length


def pass_gap(idle_pass_seconds: float) -> float:
    """How long the loop sleeps after a pass that committed nothing and took ``idle_pass_seconds``
    (0 after a pass that committed): planning a large buffer that cannot commit (a gap, a round
    waiting for reports) takes at most ``IDLE_DUTY`` of a core however often intake wakes the loop."""
    return min(TICK_SECONDS, max(MIN_GAP_SECONDS, idle_pass_seconds * (1 - IDLE_DUTY) / IDLE_DUTY))


MAX_ROUTES = 100_000  # topics whose table is remembered (topics_regex may match any number of names)


class Coordinator:
    """Every table of the service, fencing, and the background commit loop."""

    def __init__(
        self,
        config: ServiceConfig,
        committer_factory: Callable[[TableConfig], Committer],
        listener: CommitListener | None = None,
        clock: Callable[[], float] = time.time,
        groups: ConnectGroups | None = None,
        dead_letters: Callable[[TableConfig], DeadLetterStore] | None = None,
        time_offsets: TimeOffsets | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.listener = listener
        self._factory = committer_factory
        self._dead_letters = dead_letters
        self._time_offsets = time_offsets  # where a table's start.timestamp falls (a kafka section)
        self._manifests: OrderedDict[str, int] = OrderedDict()  # manifest_id -> digest of its files
        self._manifests_lock = threading.Lock()
        self.fencing = Fencing(groups, clock, config.leases.ttl_seconds)  # checks Kafka with a kafka section
        self.tables: dict[str, TableCoordinator] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by intake when a table's round may be due
        self._thread: threading.Thread | None = None
        self._seen = SidecarsSeen()
        self.ready = False
        self._routes: dict[str, TableConfig | None] = {}  # topic -> its table (see _route)

    # -- lifecycle ------------------------------------------------------------------------

    def load(self) -> None:
        """Create committers and recover every table's offsets; then the service is ready."""
        limits = self.fencing.limits if self.fencing.enabled else None
        for table in self.config.tables:
            store = self._dead_letters(table) if self._dead_letters is not None else None
            tc = TableCoordinator(table, self._factory(table), self.clock, limits, store, self._time_offsets)
            tc.load()
            self.tables[table.name] = tc
        self.ready = True

    def start(self, thread_factory: Callable[..., threading.Thread] = threading.Thread) -> None:
        self._thread = thread_factory(target=self._run, name="lakegate-coordinator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        for tc in list(self.tables.values()):
            tc.drain()

    def _run(self) -> None:
        """The background loop: each table's pass (its round, then its maintenance) on a pool of
        :data:`ROUND_THREADS`, so one table's long round (an archive's, a slow store's) does not
        hold up another's. A table's next pass starts once its last one ended, at once if it
        committed (what a bounded round left is due), else after :func:`pass_gap` of its length."""
        for tc in list(self.tables.values()):  # ready already; now what the first commits need
            tc.warm()
        running: dict[str, Future[tuple[bool, float]]] = {}
        not_before: dict[str, float] = {}
        workers = max(1, min(len(self.tables), ROUND_THREADS))
        with ThreadPoolExecutor(workers, thread_name_prefix="lakegate-round") as pool:
            while not self._pause():
                now = time.monotonic()
                for name, done in [(n, f) for n, f in running.items() if f.done()]:
                    del running[name]
                    committed, took = done.result()
                    not_before[name] = now if committed else now + pass_gap(took)
                live = self._by_table(self.fencing.live())
                for name, tc in list(self.tables.items()):
                    if name in running or now < not_before.get(name, 0.0):
                        continue
                    running[name] = pool.submit(self._pass, tc, live.get(name, set()))
                    running[name].add_done_callback(lambda _: self._wake.set())

    def _pause(self, gap: float = MIN_GAP_SECONDS) -> bool:
        """Sleep ``gap``, then until the earliest table's next round is due, intake wakes the
        loop, or at most ``TICK_SECONDS``; True once the service is stopping."""
        if self._stop.wait(gap):
            return True
        due = [at for tc in list(self.tables.values()) if (at := tc.next_round_at()) is not None]
        wait = min(due, default=float("inf")) - self.clock()
        self._wake.wait(TICK_SECONDS if wait <= 0 else min(wait, TICK_SECONDS))
        self._wake.clear()
        return self._stop.is_set()

    def _nudge(self, tc: TableCoordinator) -> None:
        """Wake the loop if ``tc``'s round is due: new files or reports may be what it waits for."""
        at = tc.next_round_at()
        if at is not None and at <= self.clock():
            self._wake.set()

    def tick(self) -> bool:
        """One pass over the tables: each one's round if a trigger fired, then its maintenance
        that is due. Returns whether any table committed."""
        live = self._by_table(self.fencing.live())  # leases not renewed within the TTL stop holding rounds back
        committed = False
        for name, tc in list(self.tables.items()):
            committed = self._pass(tc, live.get(name, set()))[0] or committed
        return committed

    def _pass(self, tc: TableCoordinator, live: set[TopicPartition]) -> tuple[bool, float]:
        """One table's pass: its round if a trigger fired, then its maintenance if due. Returns
        whether it committed and how long the pass took; never raises (a table's surprise must
        not stop the loop)."""
        started = time.monotonic()
        committed = False
        tc.expect(live)
        try:
            committed = self._round(tc, force=False) is not None
        except CommitError:
            return False, time.monotonic() - started  # reported to the listener; retried with backoff
        except Exception:
            logger.exception("unexpected error in the commit round of %s", tc.config.name)
            return False, time.monotonic() - started
        try:
            tc.maybe_maintain()
        except Exception as exc:  # logged; the next run waits its interval
            logger.warning("maintenance of table %s failed: %s", tc.config.name, exc)
        return committed, time.monotonic() - started

    def _round(self, tc: TableCoordinator, *, force: bool) -> CommitRecord | None:
        try:
            record = tc.maybe_commit(force=force)
        except CommitError as exc:
            if self.listener:
                self.listener.failed(tc.config.name, exc)
            raise
        if record is not None and self.listener:
            self.listener.committed(record)
        return record

    # -- intake ---------------------------------------------------------------------------

    def submit(self, manifest: Manifest) -> ManifestReceipt:
        """Check every file against the roots first (any failure: 400, nothing buffered), then
        route each to its table and let the table's state judge it."""
        self._note_seen(manifest.sidecar.id, manifest.sidecar.worker)
        normalized = [self._checked(i, f) for i, f in enumerate(manifest.files)]
        self._check_id(manifest, normalized)
        self._check_capacity(normalized)
        receipts: list[FileReceipt] = []
        by_table: dict[str, list[tuple[int, PendingFile]]] = {}
        for i, f in enumerate(normalized):
            table = self._route(f.topic)
            if table is None:
                self._rejected("no_table")
                receipts.append(FileReceipt(f.path, FileStatus.REJECTED, f"no table takes topic {f.topic!r}"))
                continue
            denied = self.fencing.check(f, manifest.sidecar.id)
            if denied:
                self._rejected("stale_lease")
                receipts.append(FileReceipt(f.path, FileStatus.REJECTED, denied, table.name))
                continue
            by_table.setdefault(table.name, []).append((i, PendingFile(f, manifest.manifest_id, manifest.sidecar.id)))
            receipts.append(FileReceipt(f.path, FileStatus.ACCEPTED, table=table.name))  # placeholder
        for name, items in by_table.items():
            verdicts = self._table(name).offer([p for _, p in items], manifest.manifest_id)
            self._nudge(self._table(name))
            for (i, _), (status, reason) in zip(items, verdicts, strict=True):
                holds = self._table(name).holds(normalized[i]) if status is FileStatus.REJECTED else None
                receipts[i] = FileReceipt(normalized[i].path, status, reason, name, holds)
                if status is FileStatus.REJECTED:
                    self._rejected("content_range" if holds is not None else "overlap")
        return ManifestReceipt(manifest.manifest_id, tuple(receipts))

    def _checked(self, i: int, f: DataFile) -> DataFile:
        """``f`` with its path normalised, or a 400 if it is unsafe or outside the roots."""
        field = f"files[{i}].path"
        try:
            uri = normalize_uri(f.path)
        except UnsafePathError as exc:
            self._rejected("unsafe_path")
            raise BadRequestError(f"{field}: {exc}", {"field": field}) from None
        roots = self.config.storage.allowed_roots
        if not is_under(uri, roots):
            self._rejected("outside_roots")
            raise BadRequestError(
                f"{field}: {uri} is not under an allowed storage root", {"field": field, "allowed_roots": list(roots)}
            )
        return f if uri == f.path else replace(f, path=uri)  # most paths arrive canonical

    def _check_id(self, manifest: Manifest, files: list[DataFile]) -> None:
        """A ``manifest_id`` names one set of files: sent again with other files it is a 409."""
        digest = hash((manifest.sidecar.id, frozenset(files)))  # in-process only, like the ids it keys
        with self._manifests_lock:
            known = self._manifests.get(manifest.manifest_id)
            if known is not None and known != digest:
                self._rejected("manifest_conflict")
                raise ConflictError(
                    f"manifest_id {manifest.manifest_id!r} was already sent with other files: "
                    "a manifest_id is sent again only with the same files (use a new id for new files)",
                    {"field": "manifest_id"},
                )
            self._manifests[manifest.manifest_id] = digest
            self._manifests.move_to_end(manifest.manifest_id)
            while len(self._manifests) > MAX_TRACKED_MANIFESTS:
                self._manifests.popitem(last=False)

    def _check_capacity(self, files: list[DataFile]) -> None:
        """429 for the whole manifest if any table's buffer would pass its cap (nothing buffered)."""
        need: dict[str, tuple[int, int]] = {}
        for f in files:
            table = self._route(f.topic)
            if table is not None:
                count, size = need.get(table.name, (0, 0))
                need[table.name] = (count + 1, size + f.size_bytes)
        for name, (count, size) in need.items():
            try:
                self._table(name).check_capacity(count, size)
            except TooManyPendingError:
                self._rejected("buffer_full")
                raise

    def claim(self, request: LeaseRequest) -> list[LeaseGrant]:
        """Lease the claimed partitions (see :class:`Fencing`) and note the sender's watermarks."""
        self._note_seen(request.sidecar.id, request.sidecar.worker)
        grants, leased = self.fencing.claim(request)
        granted = {g.tp for g in grants if g.granted}
        marks: dict[str, list[Watermark]] = {}
        for w in request.watermarks:
            table = self._route(w.topic) if w.tp in granted else None
            if table is not None:
                marks.setdefault(table.name, []).append(w)
        routed = self._by_table(leased)
        for name, tc in self.tables.items():
            tc.claim(routed.get(name, set()), marks.get(name, ()))
            self._nudge(tc)
        due = {name: tc.due_ms() for name, tc in self.tables.items()}  # once a table, not once a partition
        return [self._with_held(g, due) for g in grants]

    def _route(self, topic: str) -> TableConfig | None:
        """``config.table_for(topic)``, remembered: each file of a manifest and each leased
        partition asks, and the answer walks every table (10,000 partitions of 100 tables made a
        lease claim cost 0.38 s)."""
        try:
            return self._routes[topic]
        except KeyError:
            if len(self._routes) >= MAX_ROUTES:
                self._routes.clear()
            table = self._routes[topic] = self.config.table_for(topic)
            return table

    def _by_table(self, partitions: Iterable[TopicPartition]) -> dict[str, set[TopicPartition]]:
        """``partitions`` by the table their topic routes to (one pass, not one per table)."""
        out: dict[str, set[TopicPartition]] = {}
        for tp in partitions:
            table = self._route(tp.topic)
            if table is not None:
                out.setdefault(table.name, set()).add(tp)
        return out

    def _with_held(self, grant: LeaseGrant, due: dict[str, int | None]) -> LeaseGrant:
        """A granted partition's answer with what its table holds of it (``LeaseGrant.held_next``,
        ``held_after``)
        and when the table's next round is due if it catches up (``due``, by table: ``due_ms``)."""
        table = self._route(grant.topic) if grant.granted else None
        if table is None:
            return grant
        held, after = self._table(table.name).held(grant.tp)  # built, not replace()d: a claim may hold 10,000
        return LeaseGrant(
            grant.topic, grant.partition, grant.granted, grant.epoch, grant.reason, held, due[table.name], after or None
        )

    def _note_seen(self, sidecar_id: str, worker: str) -> None:
        self._seen.note(sidecar_id, worker, self.clock())

    def sidecars(self) -> list[SidecarSeen]:
        """Every sidecar heard from since this process started, most recently seen first."""
        return self._seen.all()

    def _rejected(self, reason: str) -> None:
        if self.listener:
            self.listener.rejected(reason)

    # -- reads and admin ------------------------------------------------------------------

    def table(self, name: str) -> TableCoordinator:
        """Table ``name``'s coordinator (its config, committer and summary); a NotFoundError if none."""
        return self._table(name)

    def _table(self, name: str) -> TableCoordinator:
        tc = self.tables.get(name)
        if tc is None:
            raise NotFoundError(f"no table {name!r}", {"tables": sorted(self.tables)})
        return tc

    def manifest_status(self, manifest_id: str) -> ManifestStatus:
        found = [(name, s) for name, tc in self.tables.items() if (s := tc.manifest(manifest_id)) is not None]
        if not found:
            raise NotFoundError(f"no manifest {manifest_id!r} is known (unknown, or forgotten after a restart)")
        states = [s for _, (s, _, _) in found]
        if ManifestState.ACCEPTED in states:
            return ManifestStatus(manifest_id, ManifestState.ACCEPTED, found[0][0])
        if all(s is ManifestState.REJECTED for s in states):
            return ManifestStatus(manifest_id, ManifestState.REJECTED, found[0][0], reason=found[0][1][2])
        name, (_, version, _) = next((n, v) for n, v in found if v[0] is ManifestState.COMMITTED)
        return ManifestStatus(manifest_id, ManifestState.COMMITTED, name, version)

    def table_summary(self, name: str) -> TableSummary:
        return self._table(name).summary()

    def summaries(self) -> list[TableSummary]:
        return [tc.summary() for tc in self.tables.values()]

    def offsets(self, name: str) -> PartitionOffsets:
        return self._table(name).offsets()

    def commit_now(self, name: str) -> CommitRecord | None:
        return self._round(self._table(name), force=True)

    def maintenance(self, name: str) -> MaintenanceList:
        tc = self._table(name)
        runs = tuple(reversed(tc.maintenance_runs))
        return MaintenanceList(name, tc.config.maintenance.enabled, runs)

    def maintain_now(self, name: str, kind: MaintenanceKind) -> MaintenanceRecord:
        return self._table(name).maintain_now(kind)

    def dead_letters(self, table: str | None, state: DeadLetterState | None) -> list[DeadLetter]:
        tables = [self._table(table)] if table else list(self.tables.values())
        letters = [d for tc in tables for d in tc.dead_letters() if state is None or d.state is state]
        return sorted(letters, key=lambda d: d.at_ms, reverse=True)

    def _letter_table(self, letter_id: str) -> TableCoordinator:
        for tc in self.tables.values():
            if tc.dead_letter(letter_id) is not None:
                return tc
        raise NotFoundError(f"no dead letter {letter_id!r}")

    def retry_dead_letter(self, letter_id: str) -> DeadLetter:
        return self._letter_table(letter_id).retry_dead_letter(letter_id)

    def release_dead_letter(self, letter_id: str) -> CommitRecord:
        tc = self._letter_table(letter_id)
        return self._told(tc, lambda: tc.release_dead_letter(letter_id))

    def open_epoch(self, table: str, topic: str, starts: dict[int, int]) -> CommitRecord:
        """``TableCoordinator.open_epoch`` of ``table``, told to the listener like any commit."""
        tc = self._table(table)
        return self._told(tc, lambda: tc.open_epoch(topic, starts))

    def _told(self, tc: TableCoordinator, commit: Callable[[], CommitRecord]) -> CommitRecord:
        """An admin's commit (``commit``) of ``tc``, its outcome told to the listener."""
        try:
            record = commit()
        except CommitError as exc:
            if self.listener:
                self.listener.failed(tc.config.name, exc)
            raise
        if self.listener:
            self.listener.committed(record)
        return record

    def commits(self, table: str | None, limit: int) -> list[CommitRecord]:
        tables = [self._table(table)] if table else list(self.tables.values())
        records = [r for tc in tables for r in tc.history]
        records.sort(key=lambda r: (r.table, r.version), reverse=True)
        return records[:limit]
