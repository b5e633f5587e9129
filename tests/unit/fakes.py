"""The unit tests' fakes at the service's seams, shared by the test modules (none imports another).

- :class:`FakeCommitter`: a :class:`~commit_service.ports.Committer` that commits to memory and can
  fail the next commit; :data:`CONFIG`, :func:`h`, :func:`manifest`, :func:`pending`: a service
  config with two tokens, and the requests of the HTTP tests;
- :class:`PoisonCommitter`, :class:`MemoryStore`, :class:`Clock`: a committer that fails any plan
  holding a poisoned file, a :class:`~commit_service.ports.DeadLetterStore` in memory, a settable clock;
- :func:`pf`: a buffered file of partition 0 (or any) with given offsets; :func:`lease`: a lease
  claim over HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from flask.testing import FlaskClient

from commit_service.domain.compaction import CompactionPlan, PartitionKey
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import CommitPlan, PendingFile
from commit_service.errors import CommitError, DataFileError, TableWriteError
from commit_service.ports import TableSnapshot
from lakegate_core.protocol import DataFile
from lakegate_core.status import CommitRecord, DeadLetter, MaintenanceKind, MaintenanceRecord
from lakegate_core.types import PartitionOffsets, TopicPartition

SIDE, ADMIN = "sidecar-token-0123456789", "admin-token-0123456789"


class FakeCommitter:
    """Commits plans to memory; can be told to fail the next commit."""

    def __init__(self) -> None:
        self.version = -1
        self.offsets: dict[tuple[str, int], int] = {}
        self.commits: list[CommitPlan] = []
        self.fail_next = False
        self.maintained: list[MaintenanceKind] = []
        self.merged: list[CompactionPlan] = []
        self.registered: list[str] = []
        self.prefetched: list[DataFile] = []

    def snapshot(self) -> TableSnapshot:
        return TableSnapshot(self.version, PartitionOffsets(self.offsets))

    def warm(self) -> TableSnapshot:
        return self.snapshot()

    def file_count(self) -> int:
        return sum(len(p.files) for p in self.commits)

    def maintain(self, kind: MaintenanceKind, policy: MaintenancePolicy) -> MaintenanceRecord:
        files = self.file_count()
        self.maintained.append(kind)
        return MaintenanceRecord("orders", kind, 0, 1, self.version, self.version, files, min(files, 1))

    def small_files(self, below: int) -> dict[PartitionKey, list[int]]:
        sizes = [f.file.size_bytes for p in self.commits for f in p.files if f.file.size_bytes < below]
        return {(): sizes} if sizes else {}

    def compact_small(self, plan: CompactionPlan) -> MaintenanceRecord:
        self.merged.append(plan)
        files = self.file_count()
        return MaintenanceRecord("orders", MaintenanceKind.COMPACT, 0, 1, self.version, self.version, files, files)

    def register(self, name: str) -> None:
        self.registered.append(name)

    def ledger(self) -> Any:
        raise NotImplementedError("the audit's unit tests pass a ledger of their own")

    def checkpoint(self) -> MaintenanceRecord:
        return MaintenanceRecord("orders", MaintenanceKind.CHECKPOINT, 0, 1, self.version, self.version, 0, 0)

    def prefetch(self, files: list[DataFile]) -> None:
        self.prefetched.extend(files)

    def commit(self, plan: CommitPlan) -> CommitRecord:
        if self.fail_next:
            self.fail_next = False
            raise CommitError("storage unavailable")
        self.version += 1
        self.offsets.update(plan.offsets)
        self.commits.append(plan)
        record = plan.record("orders", self.version, f"c{self.version}", 0)  # as the real committers do
        return replace(record, committed_at_ms=None, duration_ms=5)


CONFIG = {
    "server": {"max_request_bytes": 4096},
    "auth": {"enabled": True, "tokens": [{"token": SIDE, "role": "sidecar"}, {"token": ADMIN, "role": "admin"}]},
    "storage": {"allowed_roots": ["s3a://landing/"]},
    "tables": [
        {
            "name": "orders",
            "path": "s3a://lake/orders",
            "topics": ["orders"],
            "placement": "copy_into_table",
            "commit": {"interval_seconds": 3600},
        }
    ],
}


def h(token: str = SIDE) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def manifest(
    mid: str = "m1", start: int = 0, end: int = 9, path: str | None = None, topic: str = "orders", partition: int = 0
) -> dict[str, Any]:
    return {
        "manifest_id": mid,
        "sidecar": {"id": "sc-1", "worker": "w:8083"},
        "files": [
            {
                "path": path or f"s3://landing/{topic}-{partition}-{start}",
                "topic": topic,
                "partition": partition,
                "start_offset": start,
                "end_offset": end,
                "size_bytes": 100,
                "format": "parquet",
            }
        ],
    }


def pending(client: FlaskClient) -> int:
    return int(client.get("/v1/tables/orders", headers=h()).json["pending_files"])  # type: ignore[index]


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class PoisonCommitter:
    """Commits in memory, but any plan holding a poisoned path fails with ``error(path)``."""

    poison: set[str] = field(default_factory=set)
    error: type[CommitError] = TableWriteError
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    version: int = -1
    plans: list[CommitPlan] = field(default_factory=list)

    def snapshot(self) -> TableSnapshot:
        return TableSnapshot(self.version, PartitionOffsets(self.committed))

    def warm(self) -> TableSnapshot:
        return self.snapshot()

    def prefetch(self, files: list[DataFile]) -> None:
        pass  # nothing to read ahead: plans are judged by path

    def commit(self, plan: CommitPlan) -> CommitRecord:
        self.plans.append(plan)
        bad = [p.file.path for p in plan.files if p.file.path in self.poison]
        if bad:
            if issubclass(self.error, DataFileError):
                raise self.error(bad[0], "cannot be read")
            raise self.error("Delta refused the plan")
        for tp, start in plan.starts().items():
            assert self.committed.get(tp, start) == start, "a gap or an overlap was committed"
        self.version += 1
        self.committed.update(plan.offsets)
        self.files.extend(p.file.path for p in plan.files)
        return CommitRecord(
            "orders", self.version, "c", len(plan.files), plan.records, plan.offsets, released=plan.released or None
        )


class MemoryStore:
    def __init__(self) -> None:
        self.letters: dict[str, DeadLetter] = {}

    def write(self, letter: DeadLetter) -> None:
        self.letters[letter.id] = letter

    def load(self) -> list[DeadLetter]:
        return list(self.letters.values())


def pf(
    start: int,
    end: int,
    *,
    partition: int = 0,
    topic: str = "orders",
    path: str | None = None,
    manifest: str = "m1",
    size: int = 100,
) -> PendingFile:
    path = path or f"s3a://landing/{topic}-{partition}-{start}"
    return PendingFile(DataFile(path, topic, partition, start, end, size), manifest, "sidecar-1")


def lease(client: FlaskClient, sidecar: str, worker: str, tasks: list[int], partitions: list[int]) -> dict[str, Any]:
    body = {
        "sidecar": {"id": sidecar, "worker": worker},
        "connector": "snk",
        "tasks": tasks,
        "partitions": [{"topic": "orders", "partition": p} for p in partitions],
    }
    r = client.post("/v1/leases", json=body, headers=h())
    assert r.status_code == 200, r.json
    return dict(r.json)  # type: ignore[arg-type]
