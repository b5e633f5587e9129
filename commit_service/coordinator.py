"""The coordinator: routes manifests to tables and runs each table's commit rounds.

Owned by the Flask app (one per process; the service runs ONE gunicorn worker so there is one
writer). HTTP threads call :meth:`Coordinator.submit`, status reads and :meth:`commit_now`; a
background thread calls :meth:`Coordinator.tick` twice a second. Decisions are made by the pure
:class:`~commit_service.state.TableState`; Delta is touched only through the injected
:class:`Committer` (``DeltaCommitter`` in production, a fake in unit tests).

Locks: ``TableCoordinator.lock`` guards the state (held briefly); ``commit_lock`` serialises
commit rounds of one table, so intake continues while a commit runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from commit_service.config import ServiceConfig, TableConfig
from commit_service.delta_commit import TableSnapshot
from commit_service.connect_group import Assignment, GroupReadError, GroupReader
from commit_service.errors import (
    BadRequestError,
    CommitError,
    DataFileError,
    NotFoundError,
    OffsetsMovedError,
    RequestError,
    SchemaMismatchError,
)
from commit_service.leases import LeaseTable
from commit_service.paths import UnsafePathError, is_under, normalize_uri
from commit_service.protocol import (
    CommitRecord,
    DataFile,
    FileReceipt,
    FileStatus,
    LeaseGrant,
    LeaseRequest,
    Manifest,
    ManifestReceipt,
    ManifestState,
    ManifestStatus,
)
from commit_service.state import PendingFile, TableState

logger = logging.getLogger(__name__)

HISTORY = 1000
TICK_SECONDS = 0.5
MAX_BACKOFF = 30.0


class Committer(Protocol):
    """What the coordinator needs from a table's Delta writer."""

    def snapshot(self) -> TableSnapshot: ...

    def commit(self, plan: Any) -> CommitRecord: ...


class CommitListener(Protocol):
    """Told about every commit outcome (the metrics)."""

    def committed(self, record: CommitRecord) -> None: ...

    def failed(self, table: str, error: CommitError) -> None: ...

    def rejected(self, reason: str) -> None: ...


@dataclass
class _Retry:
    failures: int = 0
    not_before: float = 0.0


class TableCoordinator:
    """One table: its state, its committer, its recent commits."""

    def __init__(self, config: TableConfig, committer: Committer, clock: Callable[[], float],
                 limits: Callable[[set[tuple[str, int]]], dict[tuple[str, int], int]] | None = None) -> None:  # fmt: skip
        self.config = config
        self.committer = committer
        self.clock = clock
        self.limits = limits  # Connect's committed offsets, when fencing is on
        self.state = TableState(config.name, policy=config.commit, now=clock())
        self.lock = threading.Lock()
        self.commit_lock = threading.Lock()
        self.history: deque[CommitRecord] = deque(maxlen=HISTORY)
        self.retry = _Retry()
        self.last_error: str | None = None
        self.loaded = False

    def load(self) -> None:
        """Recover the committed offsets from the table's log (the only durable state)."""
        snap = self.committer.snapshot()
        with self.lock:
            self.state.recovered(snap.offsets, snap.version)
        self.loaded = True
        logger.info("table %s at version %d with %d partitions' offsets", self.config.name, snap.version, len(snap.offsets))

    def offer(self, files: list[PendingFile], manifest_id: str) -> list[tuple[FileStatus, str | None]]:
        now = self.clock()
        with self.lock:
            verdicts = [self.state.offer(f, now) for f in files]
            self.state.settle_manifest(manifest_id, verdicts)
        return verdicts

    def maybe_commit(self, *, force: bool = False) -> CommitRecord | None:
        """Run one commit round if a trigger fired (or ``force``); None if nothing to commit."""
        with self.commit_lock:
            now = self.clock()
            if not force and now < self.retry.not_before:
                return None
            with self.lock:
                plan = self.state.plan(now, force=force)
            if plan is not None and self.limits is not None:
                try:
                    limits = self.limits(set(plan.offsets))
                except GroupReadError as exc:
                    err = CommitError(f"table {self.config.name}: cannot check Connect's offsets: {exc}")
                    err.retryable = True
                    self._failed(err)
                    raise err from exc
                with self.lock:  # never commit past what Connect itself has committed
                    plan = self.state.plan(now, force=force, limits=limits)
            if plan is None:
                return None
            try:
                record = self.committer.commit(plan)
            except OffsetsMovedError as exc:
                with self.lock:
                    self.state.recovered(exc.offsets, exc.version)
                self._failed(exc)
                raise
            except (DataFileError, SchemaMismatchError) as exc:
                if not exc.retryable:
                    with self.lock:
                        self.state.drop_file(exc.path, str(exc))
                    logger.error("table %s: dropped %s from the buffer: %s (its partition waits for a "
                                 "correct file for that range)", self.config.name, exc.path, exc)  # fmt: skip
                self._failed(exc, backoff=exc.retryable)
                raise
            except CommitError as exc:
                self._failed(exc)
                raise
            with self.lock:
                self.state.committed_plan(plan, record.version, self.clock())
            self.history.append(record)
            self.retry = _Retry()
            self.last_error = None
            logger.info(
                "commit table=%s version=%d commit_id=%s files=%d records=%d offsets=%s vtts=%s duration_ms=%s reason=%s",
                record.table, record.version, record.commit_id, record.files, record.records,
                record.to_dict()["offsets"], record.vtts, record.duration_ms, plan.reason,
            )  # fmt: skip
            return record

    def _failed(self, exc: CommitError, *, backoff: bool = True) -> None:
        self.retry.failures += 1
        delay = 0.0 if not backoff or isinstance(exc, OffsetsMovedError) else min(MAX_BACKOFF, 2 ** self.retry.failures / 2)
        self.retry.not_before = self.clock() + delay
        self.last_error = str(exc)
        logger.warning("commit of table %s failed (%s, retry in %.1fs): %s", self.config.name,
                       "retryable" if exc.retryable else "fatal", delay, exc)  # fmt: skip

    def summary(self) -> dict[str, Any]:
        with self.lock:
            st = self.state
            return {
                "table": self.config.name,
                "path": self.config.path,
                "version": st.version,
                "offsets": _by_topic(st.committed),
                "pending_files": st.pending_files(),
                "pending_bytes": st.pending_bytes(),
                "pending_offsets": _by_topic({tp: max(p.file.next_offset for p in fs.values())
                                              for tp, fs in st.pending.items() if fs}),
                "last_error": self.last_error,
            }


def _by_topic(offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


class Coordinator:
    """Every table of the service, and the background commit loop."""

    def __init__(self, config: ServiceConfig, committer_factory: Callable[[TableConfig], Committer],
                 listener: CommitListener | None = None, clock: Callable[[], float] = time.time,
                 groups: GroupReader | None = None) -> None:  # fmt: skip
        self.config = config
        self.clock = clock
        self.listener = listener
        self._factory = committer_factory
        self.groups = groups  # set when fencing is on (service config has a kafka section)
        self.leases = LeaseTable()
        self._lease_lock = threading.Lock()
        self.tables: dict[str, TableCoordinator] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ready = False

    # -- lifecycle ------------------------------------------------------------------------

    def load(self) -> None:
        """Create committers and recover every table's offsets; then the service is ready."""
        for table in self.config.tables:
            tc = TableCoordinator(table, self._factory(table), self.clock,
                                  self._connect_limits if self.groups is not None else None)  # fmt: skip
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
                record = tc.maybe_commit()
            except CommitError as exc:
                if self.listener:
                    self.listener.failed(tc.config.name, exc)
                continue
            except Exception:  # never let one table's surprise stop the loop
                logger.exception("unexpected error in the commit round of %s", tc.config.name)
                continue
            if record is not None and self.listener:
                self.listener.committed(record)

    # -- intake ---------------------------------------------------------------------------

    def submit(self, manifest: Manifest) -> ManifestReceipt:
        """Check every file against the roots first (any failure: 400, nothing buffered), then
        route each to its table and let the table's state judge it."""
        normalized: list[DataFile] = []
        for i, f in enumerate(manifest.files):
            try:
                uri = normalize_uri(f.path)
            except UnsafePathError as exc:
                self._rejected("unsafe_path")
                raise BadRequestError(f"files[{i}].path: {exc}", {"field": f"files[{i}].path"}) from None
            if not is_under(uri, self.config.storage.allowed_roots):
                self._rejected("outside_roots")
                raise BadRequestError(f"files[{i}].path: {uri} is not under an allowed storage root",
                                      {"field": f"files[{i}].path", "allowed_roots": list(self.config.storage.allowed_roots)})  # fmt: skip
            normalized.append(replace(f, path=uri))
        receipts: list[FileReceipt] = []
        by_table: dict[str, list[tuple[int, PendingFile]]] = {}
        for i, f in enumerate(normalized):
            table = self.config.table_for(f.topic)
            if table is None:
                self._rejected("no_table")
                receipts.append(FileReceipt(f.path, FileStatus.REJECTED, f"no table takes topic {f.topic!r}"))
                continue
            if self.groups is not None:
                with self._lease_lock:
                    denied = self.leases.check((f.topic, f.partition), manifest.sidecar.id, f.lease_epoch)
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

    # -- fencing --------------------------------------------------------------------------

    def claim(self, request: LeaseRequest) -> list[LeaseGrant]:
        """Grant leases on the partitions Kafka shows on the claimant's worker and tasks.

        Without a ``kafka`` section (fencing off) every claim is granted and files need no epoch.
        """
        held: dict[tuple[str, int], Assignment] | None = None
        if self.groups is not None:
            try:
                held = self.groups.assignments(request.connector)
            except GroupReadError as exc:
                err = RequestError(f"cannot check the Connect group in Kafka: {exc}")
                err.status, err.code = 503, "kafka_unavailable"
                raise err from exc
        host = request.sidecar.worker.rsplit(":", 1)[0]
        grants: list[LeaseGrant] = []
        with self._lease_lock:
            for tp in request.partitions:
                a = None if held is None else held.get(tp)
                if held is not None and (a is None or a.task not in request.tasks or a.host != host):
                    where = "unassigned" if a is None else f"task {a.task} on {a.host}"
                    grants.append(LeaseGrant(tp[0], tp[1], False, reason=(
                        f"Kafka shows {tp[0]}-{tp[1]} of connect-{request.connector} {where}, not on "
                        f"{host} tasks {sorted(request.tasks)}")))  # fmt: skip
                    continue
                lease = self.leases.grant(tp, request.sidecar.id, request.sidecar.worker, request.connector)
                grants.append(LeaseGrant(tp[0], tp[1], True, lease.epoch))
            leased = self.leases.partitions()
        granted = {(g.topic, g.partition) for g in grants if g.granted}
        for tc in self.tables.values():
            expected = {tp for tp in leased if tc.config.routes(tp[0])}
            with tc.lock:
                tc.state.set_expected(expected)
                for topic, partition, offset, read_at_ms in request.watermarks:
                    if (topic, partition) in granted and (topic, partition) in expected:
                        tc.state.note_watermark((topic, partition), offset, read_at_ms / 1000)
        return grants

    def _connect_limits(self, partitions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Connect's committed offset for each partition, via the connector holding its lease."""
        assert self.groups is not None
        by_connector: dict[str, dict[tuple[str, int], int]] = {}
        limits: dict[tuple[str, int], int] = {}
        for tp in partitions:
            with self._lease_lock:
                lease = self.leases.get(tp)
            if lease is None:
                continue
            if lease.connector not in by_connector:
                by_connector[lease.connector] = self.groups.committed(lease.connector)
            if tp in by_connector[lease.connector]:
                limits[tp] = by_connector[lease.connector][tp]
        return limits

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
        found: list[tuple[str, tuple[ManifestState, int | None, str | None]]] = []
        for name, tc in self.tables.items():
            with tc.lock:
                status = tc.state.manifest(manifest_id)
            if status is not None:
                found.append((name, status))
        if not found:
            raise NotFoundError(f"no manifest {manifest_id!r} is known (unknown, or forgotten after a restart)")
        states = [s for _, (s, _, _) in found]
        if ManifestState.ACCEPTED in states:
            return ManifestStatus(manifest_id, ManifestState.ACCEPTED, found[0][0])
        if all(s is ManifestState.REJECTED for s in states):
            return ManifestStatus(manifest_id, ManifestState.REJECTED, found[0][0], reason=found[0][1][2])
        name, (_, version, _) = next((n, v) for n, v in found if v[0] is ManifestState.COMMITTED)
        return ManifestStatus(manifest_id, ManifestState.COMMITTED, name, version)

    def table_summary(self, name: str) -> dict[str, Any]:
        return self._table(name).summary()

    def summaries(self) -> list[dict[str, Any]]:
        return [tc.summary() for tc in self.tables.values()]

    def offsets(self, name: str) -> dict[str, dict[str, int]]:
        tc = self._table(name)
        with tc.lock:
            return _by_topic(tc.state.committed)

    def commit_now(self, name: str) -> CommitRecord | None:
        tc = self._table(name)
        try:
            record = tc.maybe_commit(force=True)
        except CommitError as exc:
            if self.listener:
                self.listener.failed(name, exc)
            raise
        if record is not None and self.listener:
            self.listener.committed(record)
        return record

    def commits(self, table: str | None, limit: int) -> list[CommitRecord]:
        tables = [self._table(table)] if table else list(self.tables.values())
        records = [r for tc in tables for r in tc.history]
        records.sort(key=lambda r: (r.table, r.version), reverse=True)
        return records[:limit]
