"""The doctor on the wire: what a sidecar or ``lakegate-doctor`` sends to ``POST /v1/doctor``
(the connectors' configs as Connect's REST API holds them), and the report the service answers
there and at ``GET /v1/doctor``.

Standard library only. Written by the sidecar at start (:mod:`sidecar.preflight`) and by the
``lakegate-doctor`` console script (:mod:`lakegate_ops.doctor`); read by the service's doctor
(:mod:`commit_service.doctor`), which writes the :class:`DoctorReport` they read back.

A connector's config holds secrets (``aws.secret.access.key``, SASL passwords); only the keys the
doctor reads travel (:func:`doctor_view`), and the service drops any other key it is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from lakegate_core.errors import ProtocolError
from lakegate_core.wire import WireModel, read, read_count, read_list, read_object, read_text

MAX_CONNECTORS = 1000  # per request


class DoctorSeverity(str, Enum):
    """How much a finding weighs. ``blocking``: exactly once cannot hold as configured (records may be
    lost, dropped or never committed); ``lakegate-doctor --require exactly-once`` and a sidecar with
    ``preflight: require`` refuse to go on. ``warning``: it holds, at a cost or a risk to watch."""

    BLOCKING = "blocking"
    WARNING = "warning"
    INFO = "info"  # what the doctor could not check, and why


class Check(str, Enum):
    """What a finding is about; docs/operations.md says what each means and how to fix it."""

    FILE_NAMING = "file_naming"  # the file names carry topic, partition, start offset, as the sidecar reads them
    FORMAT = "format"  # the file format is one the service reads
    OFFSET_FIELD = "offset_field"  # the records carry their offset (the orphan guard)
    UPSERT_FIELDS = "upsert_fields"  # an upsert table's records carry what its merge reads
    PARTITION_FIELDS = "partition_fields"  # a partitioned table's records carry the Kafka fields it is partitioned by
    KEY_CONVERTER = "key_converter"  # an upsert table's keys arrive as text it can read
    ERRORS_TOLERANCE = "errors_tolerance"  # errors.tolerance=all drops records silently without a DLQ
    FILE_CADENCE = "file_cadence"  # how often files complete against the table's commit interval
    RETENTION = "retention"  # records kept long enough to be committed
    ISOLATION_LEVEL = "isolation_level"  # read_committed for topics written in transactions
    PLACEMENT = "placement"  # the sink's bucket and prefix under allowed_roots and the table root
    ROUTING = "routing"  # every topic has a table
    OFFSETS_BACKWARDS = "offsets_backwards"  # Kafka or Connect behind the table: a recreated cluster or a reset
    CONNECTOR_STATE = "connector_state"  # the connector and its tasks run
    NOT_CHECKED = "not_checked"  # a check the doctor could not run here


# The connector keys the doctor reads; nothing else of a config is sent (secrets stay with Connect).
DOCTOR_KEYS = frozenset(
    {
        "connector.class",
        "topics",
        "topics.regex",
        "tasks.max",
        "format.output.type",
        "format.output.fields",
        "format.output.fields.value.encoding",
        "format.output.envelope",
        "format.class",
        "file.name.template",
        "file.name.prefix",
        "file.compression.type",
        "file.max.records",
        "aws.s3.bucket.name",
        "aws_s3_bucket",
        "aws.s3.prefix",
        "aws_s3_prefix",
        "gcs.bucket.name",
        "s3.bucket.name",
        "topics.dir",
        "flush.size",
        "rotate.interval.ms",
        "rotate.schedule.interval.ms",
        "errors.tolerance",
        "errors.deadletterqueue.topic.name",
        "key.converter",
        "key.converter.schemas.enable",
        "value.converter",
        "consumer.override.isolation.level",
    }
)


def doctor_view(config: Mapping[str, Any]) -> dict[str, str]:
    """The keys of a connector's config the doctor reads, as text (the rest, secrets included, left out)."""
    return {k: str(v) for k, v in config.items() if k in DOCTOR_KEYS and v is not None}


@dataclass(frozen=True)
class ConnectorSpec(WireModel):
    """One connector as Connect's REST API holds it: its config (:func:`doctor_view` of it) and its
    state (``RUNNING``, ``FAILED``, ...; None when not read)."""

    name: str
    config: dict[str, str]
    state: str | None = None
    failed_tasks: tuple[int, ...] = ()

    @classmethod
    def from_connect(cls, name: str, config: Mapping[str, Any], status: Mapping[str, Any] | None) -> ConnectorSpec:
        """A connector as Connect's REST API shows it (its config, and its status: None when Connect
        has no such connector), read by the sidecar and by ``lakegate-doctor --connect``."""
        if status is None:
            return cls(name, {}, "MISSING")
        failed = tuple(int(t["id"]) for t in status.get("tasks", []) if t.get("state") == "FAILED")
        state = str((status.get("connector") or {}).get("state", "UNKNOWN"))
        return cls(name, doctor_view(config), state, failed)

    @classmethod
    def from_dict(cls, raw: Any, path: str) -> ConnectorSpec:
        d = read_object(raw, path)
        config = read_object(read(d, "config", f"{path}.", dict), f"{path}.config")
        for key, value in config.items():
            if not isinstance(value, str):
                raise ProtocolError(f"{path}.config.{key}", "must be a string (as Connect's REST API holds it)")
        return cls(
            read_text(d, "name", f"{path}.", max_len=249),
            doctor_view(config),
            read_text(d, "state", f"{path}.", max_len=64, required=False),
            tuple(
                read_count({"t": t}, "t", f"{path}.failed_tasks[]")
                for t in read_list(d, "failed_tasks", path, required=False)
            ),
        )


@dataclass(frozen=True)
class Listing(WireModel):
    """Where a sidecar lists the sink's files and how it reads their names (its ``storage`` section):
    the doctor checks that the connector writes there, named so."""

    naming: str = "aiven"  # aiven | confluent | a regex with the groups topic, partition, start_offset
    bucket: str | None = None  # kind s3 (None: not told)
    prefix: str | None = None  # None: not told (taken to be the sink's own prefix)

    @classmethod
    def from_dict(cls, raw: Any) -> Listing:
        d = read_object(raw, "listing")
        return cls(
            read_text(d, "naming", "listing.", max_len=2048, required=False) or "aiven",
            read_text(d, "bucket", "listing.", max_len=255, required=False),
            read(d, "prefix", "listing.", str, required=False),
        )


@dataclass(frozen=True)
class DoctorRequest(WireModel):
    """``POST /v1/doctor``: check these connectors (sent by a sidecar at start, which the service
    remembers for ``GET /v1/doctor``, or by ``lakegate-doctor --connect``)."""

    connectors: tuple[ConnectorSpec, ...]
    listing: Listing | None = None
    sidecar: str | None = None  # the sending sidecar's id (None: an operator's one-off check)

    @classmethod
    def from_dict(cls, raw: Any) -> DoctorRequest:
        d = read_object(raw, "body")
        items = read_list(d, "connectors", "")
        if not 1 <= len(items) <= MAX_CONNECTORS:
            raise ProtocolError("connectors", f"must hold 1..{MAX_CONNECTORS} connectors")
        listing = d.get("listing")
        return cls(
            tuple(ConnectorSpec.from_dict(c, f"connectors[{i}]") for i, c in enumerate(items)),
            Listing.from_dict(listing) if listing is not None else None,
            read_text(d, "sidecar", "", max_len=255, required=False),
        )


@dataclass(frozen=True)
class DoctorFinding(WireModel):
    """One thing the doctor found about one connector: what, how much it weighs, the config key to
    change (``key``, a connector key unless it names a Lakegate or topic setting) and why."""

    check: Check
    severity: DoctorSeverity
    connector: str
    message: str
    why: str
    key: str | None = None
    fix: str | None = None
    table: str | None = None
    topic: str | None = None


@dataclass(frozen=True)
class ConnectorVerdict(WireModel):
    """A connector as the doctor saw it: the tables its topics feed and the checks it passed."""

    name: str
    topics: tuple[str, ...]
    tables: tuple[str, ...]
    passed: tuple[Check, ...]
    source: str  # who reported its config: "sidecar <id>", or "request"


@dataclass(frozen=True)
class DoctorReport(WireModel):
    """What the doctor answers: ``ok`` unless a finding is blocking."""

    ok: bool
    checked_at_ms: int
    duration_ms: int
    connectors: tuple[ConnectorVerdict, ...] = ()
    findings: tuple[DoctorFinding, ...] = ()

    def blocking(self) -> list[DoctorFinding]:
        return [f for f in self.findings if f.severity is DoctorSeverity.BLOCKING]

    @classmethod
    def from_json(cls, raw: Any) -> DoctorReport:
        """The report as the service answered it (the sidecar and the console script read it so)."""
        d = read_object(raw, "doctor")
        return cls(
            ok=bool(d["ok"]),
            checked_at_ms=int(d.get("checked_at_ms", 0)),
            duration_ms=int(d.get("duration_ms", 0)),
            connectors=tuple(
                ConnectorVerdict(
                    name=str(c["name"]),
                    topics=tuple(c.get("topics", ())),
                    tables=tuple(c.get("tables", ())),
                    passed=tuple(Check(p) for p in c.get("passed", ())),
                    source=str(c.get("source", "")),
                )
                for c in read_list(d, "connectors", "doctor.", required=False)
            ),
            findings=tuple(
                DoctorFinding(
                    check=Check(f["check"]),
                    severity=DoctorSeverity(f["severity"]),
                    connector=str(f["connector"]),
                    message=str(f["message"]),
                    why=str(f["why"]),
                    key=f.get("key"),
                    fix=f.get("fix"),
                    table=f.get("table"),
                    topic=f.get("topic"),
                )
                for f in read_list(d, "findings", "doctor.", required=False)
            ),
        )
