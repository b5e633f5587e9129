"""The wire model between sidecars and the commit service: the bodies of intake and leases.

Standard library only: the sidecar imports it without pulling in Flask, Spark or Kafka. Every
message is a frozen dataclass; ``to_dict`` is :func:`~lakegate_core.wire.encode`; ``from_dict``
checks types and values, ignores unknown keys (newer senders may add fields) and raises
:class:`~lakegate_core.errors.ProtocolError` naming the offending field (the service answers 400).
The read side of the API (status, commits, tables, errors) is in :mod:`lakegate_core.status`.

Senders and readers:
- :class:`Manifest` — sent by a sidecar in ``POST /v1/manifests``; read by the service.
- :class:`ManifestReceipt` — the service's 202 answer, one :class:`FileReceipt` per file.
- :class:`LeaseRequest` — sent by a sidecar in ``POST /v1/leases`` each round, with its
  :class:`Watermark` per partition; answered by a :class:`LeaseResponse` of :class:`LeaseGrant`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from lakegate_core.errors import ProtocolError
from lakegate_core.types import TopicPartition
from lakegate_core.wire import (
    MAX_LONG,
    MAX_PARTITION,
    WireModel,
    read,
    read_count,
    read_list,
    read_object,
    read_text,
    read_topic_partition,
)

SCHEMA_VERSION = 1
MAX_FILES_PER_MANIFEST = 10_000


class FileFormat(str, Enum):
    """Data file formats the service can commit (Parquet in place, the others converted)."""

    PARQUET = "parquet"
    JSONL = "jsonl"
    CSV = "csv"
    JSON = "json"  # one JSON array of records per file (Aiven's format.output.type=json)
    AVRO = "avro"  # Avro container files (any codec), as Aiven's and Confluent's Avro formats write them


class FileStatus(str, Enum):
    """What the service did with one file of a manifest."""

    ACCEPTED = "accepted"  # buffered, will be committed
    DUPLICATE = "duplicate"  # the same path and range is already buffered
    ALREADY_COMMITTED = "already_committed"  # its range is below the table's committed offset
    REJECTED = "rejected"  # see ``reason``; nothing was buffered


@dataclass(frozen=True)
class SidecarInfo(WireModel):
    """Who sent a manifest or a lease claim: the sidecar's id and the Connect worker it follows."""

    id: str
    worker: str  # host:port

    @classmethod
    def from_dict(cls, raw: Any, path: str = "sidecar.") -> SidecarInfo:
        d = read_object(raw, path.rstrip("."))
        return cls(id=read_text(d, "id", path, max_len=256), worker=read_text(d, "worker", path, max_len=256))


CSV_FIELDS = ("key", "value", "offset", "timestamp", "headers")  # what a sink's CSV line may hold
VALUE_ENCODINGS = ("base64", "none")


@dataclass(frozen=True)
class CsvLayout(WireModel):
    """How a headerless CSV file lays out a record, sent by the sidecar with each CSV file from the
    connector's config (Aiven's S3 sink: ``format.output.fields`` in that order, default ``value``;
    the value base64 unless ``format.output.fields.value.encoding=none``; the key always base64)."""

    fields: tuple[str, ...] = ("value",)
    value_encoding: str = "base64"

    def __post_init__(self) -> None:
        if not self.fields or len(set(self.fields)) != len(self.fields):
            raise ProtocolError("csv.fields", f"must name each field once, not {list(self.fields)}")
        unknown = [f for f in self.fields if f not in CSV_FIELDS]
        if unknown:
            raise ProtocolError("csv.fields", f"{unknown} are not among {list(CSV_FIELDS)}")
        if self.value_encoding not in VALUE_ENCODINGS:
            raise ProtocolError("csv.value_encoding", f"must be one of {list(VALUE_ENCODINGS)}")

    @classmethod
    def from_dict(cls, raw: Any, path: str = "csv.") -> CsvLayout:
        d = read_object(raw, path.rstrip("."))
        fields = read_list(d, "fields", path)
        if not all(isinstance(f, str) for f in fields):
            raise ProtocolError(f"{path}fields", "must be a list of field names")
        encoding = read_text(d, "value_encoding", path, max_len=16, required=False) or "base64"
        try:
            return cls(tuple(fields), encoding)
        except ProtocolError as exc:
            raise ProtocolError(f"{path}{exc.field.removeprefix('csv.')}", exc.reason) from None


@dataclass(frozen=True)
class DataFile(WireModel):
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
    csv: CsvLayout | None = None  # a CSV file's layout (None: Aiven's defaults)
    # when the object was written (ms since the epoch), as the sender's listing gave it; with it the
    # service reads a Parquet file's footer at size_bytes without a stat request of its own
    modified_ms: int | None = None

    def __post_init__(self) -> None:
        if self.start_offset > self.end_offset:
            raise ProtocolError("end_offset", f"{self.end_offset} is below start_offset {self.start_offset}")

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def next_offset(self) -> int:
        """The first offset after this file: what the table's committed offset becomes."""
        return self.end_offset + 1

    @classmethod
    def from_dict(cls, raw: Any, path: str = "") -> DataFile:
        d = read_object(raw, path.rstrip("."))
        fmt = read_text(d, "format", path, max_len=16, required=False) or FileFormat.PARQUET.value
        try:
            file_format = FileFormat(fmt)
        except ValueError:
            raise ProtocolError(f"{path}format", f"must be one of {[f.value for f in FileFormat]}") from None
        try:
            return cls(
                path=read_text(d, "path", path),
                topic=read_text(d, "topic", path, max_len=249),
                partition=read_count(d, "partition", path, maximum=MAX_PARTITION),
                start_offset=read_count(d, "start_offset", path, maximum=MAX_LONG - 1),
                end_offset=read_count(d, "end_offset", path, maximum=MAX_LONG - 1),  # the next offset must fit
                size_bytes=read_count(d, "size_bytes", path),
                format=file_format,
                record_count=read_count(d, "record_count", path, required=False),
                lease_epoch=read_count(d, "lease_epoch", path, required=False),
                csv=CsvLayout.from_dict(d["csv"], f"{path}csv.") if d.get("csv") is not None else None,
                modified_ms=read_count(d, "modified_ms", path, required=False),
            )
        except ProtocolError as exc:
            if exc.field == "end_offset":  # raised by __post_init__ without the prefix
                raise ProtocolError(f"{path}end_offset", exc.reason) from None
            raise


@dataclass(frozen=True)
class Manifest(WireModel):
    """``POST /v1/manifests`` body, sent by a sidecar: files it found complete."""

    manifest_id: str
    sidecar: SidecarInfo
    files: tuple[DataFile, ...]
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def from_dict(cls, raw: Any) -> Manifest:
        d = read_object(raw, "")
        version = read(d, "schema_version", "", int, required=False) or SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise ProtocolError("schema_version", f"{version} is newer than this service's {SCHEMA_VERSION}")
        manifest_id = read_text(d, "manifest_id", "", max_len=256)
        sidecar = SidecarInfo.from_dict(read(d, "sidecar", "", dict))
        files = read_list(d, "files", "")
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


@dataclass(frozen=True)
class OffsetSpan(WireModel):
    """The Kafka offsets a data file's content holds, ``first`` to ``last`` inclusive, as the
    service read them from the sink's ``offset`` field: sent back in a :class:`FileReceipt` when
    a file's content does not fit the range it was sent with, so the sidecar re-derives ranges."""

    first: int
    last: int

    @classmethod
    def from_dict(cls, raw: Any, path: str = "holds.") -> OffsetSpan:
        d = read_object(raw, path.rstrip("."))
        return cls(first=read_count(d, "first", path), last=read_count(d, "last", path))

    def __str__(self) -> str:
        return f"{self.first}..{self.last}"


@dataclass(frozen=True)
class FileReceipt(WireModel):
    """The service's verdict on one file of a manifest. ``holds`` is set on a ``rejected`` file
    whose content holds offsets beyond the range it was sent with (an orphan of a re-written
    range lies inside it): the sender should claim the file as ``holds.first..holds.last``."""

    path: str
    status: FileStatus
    reason: str | None = None
    table: str | None = None
    holds: OffsetSpan | None = None

    @classmethod
    def from_dict(cls, raw: Any) -> FileReceipt:
        d = read_object(raw, "file")
        holds = d.get("holds")
        return cls(
            path=d["path"],
            status=FileStatus(d["status"]),
            reason=d.get("reason"),
            table=d.get("table"),
            holds=None if holds is None else OffsetSpan.from_dict(holds),
        )


@dataclass(frozen=True)
class ManifestReceipt(WireModel):
    """The 202 answer to a manifest; ``accepted`` never means ``committed``."""

    manifest_id: str
    files: tuple[FileReceipt, ...]

    @classmethod
    def from_dict(cls, raw: Any) -> ManifestReceipt:
        d = read_object(raw, "")
        return cls(manifest_id=d["manifest_id"], files=tuple(FileReceipt.from_dict(f) for f in d.get("files", [])))


@dataclass(frozen=True)
class Watermark(WireModel):
    """A sidecar read Connect's committed offset ``connect_offset`` of a partition at
    ``read_at_ms`` (epoch ms) and has sent every file below it: sent with its next lease claim, it
    lets the service tell when a commit round is complete (VTTS). ``log_end``, when the lease
    answer gave the partition a ``due_ms`` no later than ``read_at_ms``: the partition's log-end
    offset in Kafka, read after that answer (so at or after the round was due); the round waits,
    up to ``commit.catch_up_seconds``, until the table holds every record below it.
    ``first_file``, while the table has no offset of the partition: where the sink's first file of
    it begins as the listing found it (``connect_offset`` when it holds none below that); the
    service decides from it where the partition's ledger begins (``tables[].start``)."""

    topic: str
    partition: int
    connect_offset: int
    read_at_ms: int
    log_end: int | None = None
    first_file: int | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @classmethod
    def from_dict(cls, raw: Any, path: str) -> Watermark:
        d = read_object(raw, path.rstrip("."))
        return cls(
            read_text(d, "topic", path, max_len=249),
            read_count(d, "partition", path, maximum=MAX_PARTITION),
            read_count(d, "connect_offset", path),
            read_count(d, "read_at_ms", path),
            read_count(d, "log_end", path, required=False),
            read_count(d, "first_file", path, required=False),
        )


@dataclass(frozen=True)
class LeaseRequest(WireModel):
    """``POST /v1/leases`` body, sent by a sidecar each round: the partitions its worker's tasks of
    ``connector`` own, as it sees them. The service grants a lease only if Kafka agrees."""

    sidecar: SidecarInfo
    connector: str
    tasks: tuple[int, ...]
    partitions: tuple[TopicPartition, ...]
    watermarks: tuple[Watermark, ...] = ()

    @classmethod
    def from_dict(cls, raw: Any) -> LeaseRequest:
        d = read_object(raw, "")
        tasks = read_list(d, "tasks", "")
        if any(isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= MAX_PARTITION for t in tasks):
            raise ProtocolError("tasks", f"must be integers from 0 to {MAX_PARTITION}")
        parts = [read_topic_partition(p, f"partitions[{i}].") for i, p in enumerate(read_list(d, "partitions", ""))]
        marks = [
            Watermark.from_dict(w, f"watermarks[{i}].")
            for i, w in enumerate(read_list(d, "watermarks", "", required=False))
        ]
        return cls(
            SidecarInfo.from_dict(read(d, "sidecar", "", dict)),
            read_text(d, "connector", "", max_len=249),
            tuple(tasks),
            tuple(parts),
            tuple(marks),
        )


MAX_HELD_RUNS = 64  # runs past a gap one lease answer names per partition (the first ones)


@dataclass(frozen=True)
class LeaseGrant(WireModel):
    """One partition's answer to a lease request: its epoch if granted, else why not; and, from a
    service that says so, ``held_next``: the first offset after the files it holds for the
    partition, committed or buffered in one run from the committed offset. A sidecar does not send
    again a file that ends below it; a file the service drops, and every file after a restart, falls
    below it no more and is sent again. ``due_ms``, from a table with ``commit.catch_up_seconds``:
    when its next round is due (the service's clock, epoch ms); the sidecar reads the partition's
    log end once that time has passed and sends it with its watermark (``Watermark.log_end``).
    ``held_after``: the runs of files the service buffers past a gap (each ``first..last``, in
    order, above ``held_next``; at most :data:`MAX_HELD_RUNS`), which the sidecar does not send
    again either while the gap waits; they leave the answer as held_next's files do."""

    topic: str
    partition: int
    granted: bool
    epoch: int | None = None
    reason: str | None = None
    held_next: int | None = None
    due_ms: int | None = None
    held_after: tuple[OffsetSpan, ...] | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @classmethod
    def from_dict(cls, raw: Any) -> LeaseGrant:
        d = read_object(raw, "lease")
        held = read_count(d, "held_next", "lease.", required=False)
        due = read_count(d, "due_ms", "lease.", required=False)
        runs = read_list(d, "held_after", "lease.", required=False) if d.get("held_after") is not None else None
        after = None if runs is None else tuple(OffsetSpan.from_dict(r, "lease.held_after.") for r in runs)
        return cls(
            d["topic"], int(d["partition"]), bool(d["granted"]), d.get("epoch"), d.get("reason"), held, due, after
        )


@dataclass(frozen=True)
class LeaseResponse(WireModel):
    """The service's answer to ``POST /v1/leases``: whether fencing is on, a grant each, and the
    service's clock when it answered (epoch ms). The sidecar reads Connect's committed offsets
    *after* this answer and stamps their watermarks with ``now_ms``: a time no later than the
    read, in the clock the service decides completeness with, so no two clocks are compared."""

    fencing: bool
    leases: tuple[LeaseGrant, ...]
    now_ms: int | None = None

    @classmethod
    def from_dict(cls, raw: Any) -> LeaseResponse:
        d = read_object(raw, "")
        leases = tuple(LeaseGrant.from_dict(g) for g in d.get("leases", []))
        return cls(bool(d.get("fencing")), leases, read_count(d, "now_ms", "", required=False))
