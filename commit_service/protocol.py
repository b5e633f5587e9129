"""The wire model between sidecars (and admins) and the commit service: HTTP API v1 bodies.

Standard library only: the sidecar imports this module without pulling in Flask, Spark or Kafka.
Every message is a frozen dataclass with ``to_dict`` / ``from_dict``; ``from_dict`` checks types
and values, ignores unknown keys (newer senders may add fields) and raises :class:`ProtocolError`
naming the offending field, which the service answers with a 400.

Senders and readers:
- :class:`Manifest` — sent by a sidecar in ``POST /v1/manifests``; read by the service.
- :class:`ManifestReceipt` — the service's 202 answer, one :class:`FileReceipt` per file.
- :class:`ManifestStatus` — ``GET /v1/manifests/{id}``.
- :class:`CommitRecord` — one Delta commit, in ``GET /v1/commits`` and the commit's userMetadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

SCHEMA_VERSION = 1
MAX_FILES_PER_MANIFEST = 10_000


class ProtocolError(ValueError):
    """A message does not match the protocol; ``field`` is the dotted path of the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class FileFormat(str, Enum):
    """Data file formats the service can commit (Parquet in place, the others converted)."""

    PARQUET = "parquet"
    JSONL = "jsonl"
    CSV = "csv"


class FileStatus(str, Enum):
    """What the service did with one file of a manifest."""

    ACCEPTED = "accepted"  # buffered, will be committed
    DUPLICATE = "duplicate"  # the same path and range is already buffered
    ALREADY_COMMITTED = "already_committed"  # its range is below the table's committed offset
    REJECTED = "rejected"  # see ``reason``; nothing was buffered


class ManifestState(str, Enum):
    ACCEPTED = "accepted"
    COMMITTED = "committed"
    REJECTED = "rejected"


def _get(d: dict[str, Any], key: str, path: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
    if key not in d or d[key] is None:
        if required:
            raise ProtocolError(f"{path}{key}", "is required")
        return None
    value = d[key]
    # bool is an int subclass: never accept true/false where a number is meant
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ProtocolError(f"{path}{key}", f"must be {_kind_name(kind)}, not a boolean")
    if not isinstance(value, kind):
        raise ProtocolError(f"{path}{key}", f"must be {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", dict: "an object", list: "an array", bool: "a boolean"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _text(d: dict[str, Any], key: str, path: str, *, max_len: int = 4096, required: bool = True) -> Any:
    value = _get(d, key, path, str, required=required)
    if value is not None and not (0 < len(value) <= max_len):
        raise ProtocolError(f"{path}{key}", f"must be 1..{max_len} characters")
    return value


def _count(d: dict[str, Any], key: str, path: str, *, required: bool = True) -> Any:
    value = _get(d, key, path, int, required=required)
    if value is not None and value < 0:
        raise ProtocolError(f"{path}{key}", "must not be negative")
    return value


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(path or "body", f"must be a JSON object, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class SidecarInfo:
    """Who sent a manifest: the sidecar's id and the Connect worker (``host:port``) it follows."""

    id: str
    worker: str

    @classmethod
    def from_dict(cls, raw: Any, path: str = "sidecar.") -> SidecarInfo:
        d = _object(raw, path.rstrip("."))
        return cls(id=_text(d, "id", path, max_len=256), worker=_text(d, "worker", path, max_len=256))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "worker": self.worker}


@dataclass(frozen=True)
class DataFile:
    """One completed data file: where it is and which offsets of which partition it holds."""

    path: str
    topic: str
    partition: int
    start_offset: int
    end_offset: int  # inclusive
    size_bytes: int
    format: FileFormat = FileFormat.PARQUET
    record_count: int | None = None
    lease_epoch: int | None = None  # the sender's lease on this partition (required when fencing)

    def __post_init__(self) -> None:
        if self.start_offset > self.end_offset:
            raise ProtocolError("end_offset", f"{self.end_offset} is below start_offset {self.start_offset}")

    @property
    def next_offset(self) -> int:
        """The first offset after this file: what the table's committed offset becomes."""
        return self.end_offset + 1

    @classmethod
    def from_dict(cls, raw: Any, path: str = "") -> DataFile:
        d = _object(raw, path.rstrip("."))
        fmt = _text(d, "format", path, max_len=16, required=False) or FileFormat.PARQUET.value
        try:
            file_format = FileFormat(fmt)
        except ValueError:
            raise ProtocolError(f"{path}format", f"must be one of {[f.value for f in FileFormat]}") from None
        try:
            return cls(
                path=_text(d, "path", path),
                topic=_text(d, "topic", path, max_len=249),
                partition=_count(d, "partition", path),
                start_offset=_count(d, "start_offset", path),
                end_offset=_count(d, "end_offset", path),
                size_bytes=_count(d, "size_bytes", path),
                format=file_format,
                record_count=_count(d, "record_count", path, required=False),
                lease_epoch=_count(d, "lease_epoch", path, required=False),
            )
        except ProtocolError as exc:
            if exc.field == "end_offset":  # raised by __post_init__ without the prefix
                raise ProtocolError(f"{path}end_offset", exc.message) from None
            raise

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path, "topic": self.topic, "partition": self.partition,
            "start_offset": self.start_offset, "end_offset": self.end_offset,
            "size_bytes": self.size_bytes, "format": self.format.value,
        }  # fmt: skip
        if self.record_count is not None:
            out["record_count"] = self.record_count
        if self.lease_epoch is not None:
            out["lease_epoch"] = self.lease_epoch
        return out


@dataclass(frozen=True)
class Manifest:
    """``POST /v1/manifests`` body, sent by a sidecar: files it found complete."""

    manifest_id: str
    sidecar: SidecarInfo
    files: tuple[DataFile, ...]
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def from_dict(cls, raw: Any) -> Manifest:
        d = _object(raw, "")
        version = _get(d, "schema_version", "", int, required=False) or SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise ProtocolError("schema_version", f"{version} is newer than this service's {SCHEMA_VERSION}")
        manifest_id = _text(d, "manifest_id", "", max_len=256)
        sidecar = SidecarInfo.from_dict(_get(d, "sidecar", "", dict))
        files = _get(d, "files", "", list)
        if not files:
            raise ProtocolError("files", "must list at least one file")
        if len(files) > MAX_FILES_PER_MANIFEST:
            raise ProtocolError("files", f"at most {MAX_FILES_PER_MANIFEST} files per manifest")
        return cls(
            manifest_id=manifest_id,
            sidecar=sidecar,
            files=tuple(DataFile.from_dict(f, f"files[{i}].") for i, f in enumerate(files)),
            schema_version=version,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "manifest_id": self.manifest_id,
            "sidecar": self.sidecar.to_dict(),
            "files": [f.to_dict() for f in self.files],
        }


@dataclass(frozen=True)
class FileReceipt:
    """The service's verdict on one file of a manifest."""

    path: str
    status: FileStatus
    reason: str | None = None
    table: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "status": self.status.value}
        if self.reason:
            out["reason"] = self.reason
        if self.table:
            out["table"] = self.table
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> FileReceipt:
        d = _object(raw, "file")
        return cls(path=d["path"], status=FileStatus(d["status"]), reason=d.get("reason"), table=d.get("table"))


@dataclass(frozen=True)
class ManifestReceipt:
    """The 202 answer to a manifest; ``accepted`` never means ``committed``."""

    manifest_id: str
    files: tuple[FileReceipt, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"manifest_id": self.manifest_id, "files": [f.to_dict() for f in self.files]}

    @classmethod
    def from_dict(cls, raw: Any) -> ManifestReceipt:
        d = _object(raw, "")
        return cls(manifest_id=d["manifest_id"], files=tuple(FileReceipt.from_dict(f) for f in d.get("files", [])))


@dataclass(frozen=True)
class ManifestStatus:
    """``GET /v1/manifests/{id}``: where a manifest's files are now."""

    manifest_id: str
    status: ManifestState
    table: str | None = None
    version: int | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"manifest_id": self.manifest_id, "status": self.status.value}
        for key in ("table", "version", "reason"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True)
class LeaseRequest:
    """``POST /v1/leases`` body, sent by a sidecar each round: the partitions its worker's tasks of
    ``connector`` own, as it sees them. The service grants a lease only if Kafka agrees."""

    sidecar: SidecarInfo
    connector: str
    tasks: tuple[int, ...]
    partitions: tuple[tuple[str, int], ...]
    # (topic, partition, Connect's committed offset, when it was read, epoch ms): the sender has
    # sent every file below that offset; lets the service tell when a round is complete (VTTS)
    watermarks: tuple[tuple[str, int, int, int], ...] = ()

    @classmethod
    def from_dict(cls, raw: Any) -> LeaseRequest:
        d = _object(raw, "")
        tasks = _get(d, "tasks", "", list)
        parts = _get(d, "partitions", "", list)
        if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in tasks):
            raise ProtocolError("tasks", "must be non-negative integers")
        out = []
        for i, p in enumerate(parts):
            p = _object(p, f"partitions[{i}]")
            out.append((_text(p, "topic", f"partitions[{i}].", max_len=249), _count(p, "partition", f"partitions[{i}].")))
        marks = []
        for i, w in enumerate(_get(d, "watermarks", "", list, required=False) or []):
            w = _object(w, f"watermarks[{i}]")
            where = f"watermarks[{i}]."
            marks.append((_text(w, "topic", where, max_len=249), _count(w, "partition", where),
                          _count(w, "connect_offset", where), _count(w, "read_at_ms", where)))  # fmt: skip
        return cls(SidecarInfo.from_dict(_get(d, "sidecar", "", dict)), _text(d, "connector", "", max_len=249),
                   tuple(tasks), tuple(out), tuple(marks))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"sidecar": self.sidecar.to_dict(), "connector": self.connector, "tasks": list(self.tasks),
                "partitions": [{"topic": t, "partition": p} for t, p in self.partitions],
                "watermarks": [{"topic": t, "partition": p, "connect_offset": o, "read_at_ms": r}
                               for t, p, o, r in self.watermarks]}  # fmt: skip


@dataclass(frozen=True)
class LeaseGrant:
    """One partition's answer to a lease request: its epoch if granted, else why not."""

    topic: str
    partition: int
    granted: bool
    epoch: int | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topic": self.topic, "partition": self.partition, "granted": self.granted}
        if self.epoch is not None:
            out["epoch"] = self.epoch
        if self.reason:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> LeaseGrant:
        d = _object(raw, "lease")
        return cls(d["topic"], int(d["partition"]), bool(d["granted"]), d.get("epoch"), d.get("reason"))


Offsets = dict[str, dict[int, int]]  # topic -> partition -> next offset


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """JSON objects have string keys: partitions become ``"0"``, ``"1"``..."""
    return {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())}


def offsets_from_json(raw: Any) -> Offsets:
    d = _object(raw, "offsets")
    out: Offsets = {}
    for topic, parts in d.items():
        out[topic] = {int(p): int(o) for p, o in _object(parts, f"offsets.{topic}").items()}
    return out


@dataclass(frozen=True)
class CommitRecord:
    """One Delta commit made by the service; also the commit's ``userMetadata`` (as JSON)."""

    table: str
    version: int
    commit_id: str
    files: int
    records: int
    offsets: Offsets = field(default_factory=dict)
    vtts: int | None = None  # valid-through timestamp (ms) when every expected partition reported
    duration_ms: int | None = None
    sidecars: tuple[str, ...] = ()

    def user_metadata(self) -> dict[str, Any]:
        """What goes into the Delta commit's ``userMetadata`` (DESIGN §3)."""
        return {
            "commit_id": self.commit_id,
            "offsets": offsets_to_json(self.offsets),
            "vtts": self.vtts,
            "files": self.files,
            "records": self.records,
            "sidecars": list(self.sidecars),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "version": self.version, "duration_ms": self.duration_ms, **self.user_metadata()}

    @classmethod
    def from_user_metadata(cls, table: str, version: int, raw: Any) -> CommitRecord:
        d = _object(raw, "userMetadata")
        return cls(
            table=table, version=version, commit_id=str(d.get("commit_id", "")),
            files=int(d.get("files", 0)), records=int(d.get("records", 0)),
            offsets=offsets_from_json(d.get("offsets", {})), vtts=d.get("vtts"),
            sidecars=tuple(d.get("sidecars", ())),
        )  # fmt: skip
