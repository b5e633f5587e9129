"""The coordinator: routes manifests to tables and runs each table's commit rounds.

Owned by the service runtime (one per process; the service runs ONE gunicorn worker so there is
one writer). HTTP threads call :meth:`Coordinator.submit`, :meth:`Coordinator.claim`, the status
reads and :meth:`Coordinator.commit_now`; a background thread calls :meth:`Coordinator.tick`
twice a second. Decisions are made by the pure :class:`~commit_service.state.TableState`; Delta is
touched only through the injected :class:`~commit_service.committer.Committer`, and Kafka only
through :class:`~commit_service.fencing.Fencing`, so this module imports neither.

Locks: each :class:`TableCoordinator` keeps its state behind its own ``_lock`` (held briefly, never
taken from outside) and serialises its commit rounds with ``_commit_lock``, so intake continues
while a commit runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from commit_service.committer import CommitListener, Committer
from commit_service.config import Placement, ServiceConfig, TableConfig
from commit_service.errors import (
    BadRequestError,
    CommitError,
    ConnectCheckError,
    DataFileError,
    NotFoundError,
    OffsetsMovedError,
)
from commit_service.fencing import ConnectGroups, Fencing
from commit_service.paths import UnsafePathError, is_under, normalize_uri
from commit_service.state import CommitPlan, PendingFile, TableState
from lakegate_core.connect_group import GroupReadError
from lakegate_core.protocol import (
    DataFile,
    FileFormat,
    FileReceipt,
    FileStatus,
    LeaseGrant,
    LeaseRequest,
    Manifest,
    ManifestReceipt,
    Watermark,
)
from lakegate_core.status import CommitRecord, ManifestState, ManifestStatus, TableSummary
from lakegate_core.types import PartitionOffsets, TopicPartition

logger = logging.getLogger(__name__)

HISTORY = 1000
TICK_SECONDS = 0.5
MAX_BACKOFF = 30.0
Limits = Callable[[Iterable[TopicPartition]], PartitionOffsets]


@dataclass
class _Retry:
    failures: int = 0
    not_before: float = 0.0


class TableCoordinator:
    """One table: its state, its committer, its recent commits. Every method takes the locks it
    needs; nothing outside reaches into the state."""

    def __init__(
        self, config: TableConfig, committer: Committer, clock: Callable[[], float], limits: Limits | None = None
    ) -> None:
        self.config = config
        self.committer = committer
        self.clock = clock
        self.limits = limits  # Connect's committed offsets, when fencing is on
        self.history: deque[CommitRecord] = deque(maxlen=HISTORY)
        self._state = TableState(config.name, policy=config.commit, now=clock())
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self._retry = _Retry()
        self._last_error: str | None = None

    def load(self) -> None:
        """Recover the committed offsets from the table's log (the only durable state)."""
        snap = self.committer.snapshot()
        with self._lock:
            self._state.recovered(snap.offsets, snap.version)
        logger.info(
            "table %s at version %d with %d partitions' offsets", self.config.name, snap.version, len(snap.offsets)
        )

    # -- intake ---------------------------------------------------------------------------

    def offer(self, files: list[PendingFile], manifest_id: str) -> list[tuple[FileStatus, str | None]]:
        now = self.clock()
        with self._lock:
            verdicts = [self._state.offer(f, now) for f in files]
            self._state.settle_manifest(manifest_id, verdicts)
        return verdicts

    def claim(self, leased: set[TopicPartition], watermarks: Iterable[Watermark]) -> None:
        """The leased partitions of this table's topics become the ones a complete round waits
        for; each watermark of a granted partition counts as that partition's report."""
        expected = {tp for tp in leased if self.config.routes(tp.topic)}
        with self._lock:
            self._state.set_expected(expected)
            for w in watermarks:
                if w.tp in expected:
                    self._state.note_watermark(w.tp, w.connect_offset, w.read_at_ms / 1000)

    # -- commit rounds --------------------------------------------------------------------

    def maybe_commit(self, *, force: bool = False) -> CommitRecord | None:
        """Run one commit round if a trigger fired (or ``force``); None if nothing to commit."""
        with self._commit_lock:
            now = self.clock()
            if not force and now < self._retry.not_before:
                return None
            plan = self._plan(now, force)
            if plan is None:
                return None
            try:
                record = self.committer.commit(plan)
            except OffsetsMovedError as exc:
                with self._lock:
                    self._state.recovered(exc.offsets, exc.version)
                self._failed(exc)
                raise
            except DataFileError as exc:
                if not exc.retryable:
                    with self._lock:
                        self._state.drop_file(exc.path, str(exc))
                    logger.error(
                        "table %s: dropped %s from the buffer: %s (its partition waits for a "
                        "correct file for that range)",
                        self.config.name,
                        exc.path,
                        exc,
                    )
                self._failed(exc, backoff=exc.retryable)
                raise
            except CommitError as exc:
                self._failed(exc)
                raise
            with self._lock:
                self._state.committed_plan(plan, record.version, self.clock())
            self.history.append(record)
            self._retry = _Retry()
            self._last_error = None
            logger.info(
                "commit table=%s version=%d commit_id=%s files=%d records=%d offsets=%s vtts=%s duration_ms=%s reason=%s",
                record.table,
                record.version,
                record.commit_id,
                record.files,
                record.records,
                record.offsets.to_json(),
                record.vtts,
                record.duration_ms,
                plan.reason,
            )
            return record

    def _plan(self, now: float, force: bool) -> CommitPlan | None:
        """The state's plan, capped at Connect's committed offsets when fencing is on."""
        with self._lock:
            plan = self._state.plan(now, force=force)
        if plan is None or self.limits is None:
            return plan
        try:
            limits = self.limits(plan.offsets)
        except GroupReadError as exc:
            err = ConnectCheckError(f"table {self.config.name}: cannot check Connect's offsets: {exc}")
            self._failed(err)
            raise err from exc
        with self._lock:  # never commit past what Connect itself has committed
            return self._state.plan(now, force=force, limits=limits)

    def _failed(self, exc: CommitError, *, backoff: bool = True) -> None:
        self._retry.failures += 1
        delay = (
            0.0 if not backoff or isinstance(exc, OffsetsMovedError) else min(MAX_BACKOFF, 2**self._retry.failures / 2)
        )
        self._retry.not_before = self.clock() + delay
        self._last_error = str(exc)
        logger.warning(
            "commit of table %s failed (%s, retry in %.1fs): %s",
            self.config.name,
            "retryable" if exc.retryable else "fatal",
            delay,
            exc,
        )

    # -- reads ----------------------------------------------------------------------------

    def summary(self) -> TableSummary:
        with self._lock:
            st = self._state
            return TableSummary(
                table=self.config.name,
                path=self.config.path,
                version=st.version,
                offsets=PartitionOffsets(st.committed),
                pending_files=st.pending_files(),
                pending_bytes=st.pending_bytes(),
                pending_offsets=st.pending_offsets(),
                last_error=self._last_error,
            )

    def offsets(self) -> PartitionOffsets:
        with self._lock:
            return PartitionOffsets(self._state.committed)

    def manifest(self, manifest_id: str) -> tuple[ManifestState, int | None, str | None] | None:
        with self._lock:
            return self._state.manifest(manifest_id)


class Coordinator:
    """Every table of the service, fencing, and the background commit loop."""

    def __init__(
        self,
        config: ServiceConfig,
        committer_factory: Callable[[TableConfig], Committer],
        listener: CommitListener | None = None,
        clock: Callable[[], float] = time.time,
        groups: ConnectGroups | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.listener = listener
        self._factory = committer_factory
        self.fencing = Fencing(groups)  # enabled when the service config has a kafka section
        self.tables: dict[str, TableCoordinator] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ready = False

    # -- lifecycle ------------------------------------------------------------------------

    def load(self) -> None:
        """Create committers and recover every table's offsets; then the service is ready."""
        limits = self.fencing.limits if self.fencing.enabled else None
        for table in self.config.tables:
            tc = TableCoordinator(table, self._factory(table), self.clock, limits)
            tc.load()
            self.tables[table.name] = tc
        self.ready = True

    def start(self, thread_factory: Callable[..., threading.Thread] = threading.Thread) -> None:
        self._thread = thread_factory(target=self._run, name="lakegate-coordinator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _run(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self.tick()

    def tick(self) -> None:
        for tc in list(self.tables.values()):
            try:
                self._round(tc, force=False)
            except CommitError:
                continue  # reported to the listener; retried with backoff
            except Exception:  # never let one table's surprise stop the loop
                logger.exception("unexpected error in the commit round of %s", tc.config.name)

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
        normalized = [self._checked(i, f) for i, f in enumerate(manifest.files)]
        receipts: list[FileReceipt] = []
        by_table: dict[str, list[tuple[int, PendingFile]]] = {}
        for i, f in enumerate(normalized):
            table = self.config.table_for(f.topic)
            if table is None:
                self._rejected("no_table")
                receipts.append(FileReceipt(f.path, FileStatus.REJECTED, f"no table takes topic {f.topic!r}"))
                continue
            if table.placement is Placement.IN_PLACE and f.format is FileFormat.PARQUET and not table.holds(f.path):
                self._rejected("outside_table")
                outside = (
                    f"placement in_place adds Parquet files where they are, but this one is not under the table "
                    f"root {table.root}: point the sink's prefix there, or set placement: copy_into_table"
                )
                receipts.append(FileReceipt(f.path, FileStatus.REJECTED, outside, table.name))
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
            for (i, _), (status, reason) in zip(items, verdicts, strict=True):
                receipts[i] = FileReceipt(normalized[i].path, status, reason, name)
                if status is FileStatus.REJECTED:
                    self._rejected("overlap")
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
        return replace(f, path=uri)

    def claim(self, request: LeaseRequest) -> list[LeaseGrant]:
        """Lease the claimed partitions (see :class:`Fencing`) and note the sender's watermarks."""
        grants, leased = self.fencing.claim(request)
        granted = {g.tp for g in grants if g.granted}
        marks = [w for w in request.watermarks if w.tp in granted]
        for tc in self.tables.values():
            tc.claim(leased, marks)
        return grants

    def _rejected(self, reason: str) -> None:
        if self.listener:
            self.listener.rejected(reason)

    # -- reads and admin ------------------------------------------------------------------

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

    def commits(self, table: str | None, limit: int) -> list[CommitRecord]:
        tables = [self._table(table)] if table else list(self.tables.values())
        records = [r for tc in tables for r in tc.history]
        records.sort(key=lambda r: (r.table, r.version), reverse=True)
        return records[:limit]
