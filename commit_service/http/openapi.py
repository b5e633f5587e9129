"""The OpenAPI 3 document of HTTP API v1, served at ``GET /openapi.json``.

Every schema is generated from the wire types of :mod:`lakegate_core.protocol`,
:mod:`lakegate_core.status` and :mod:`lakegate_core.types` (so the spec cannot drift from what the
handlers send and parse); this module only lists the paths and which type each one takes and
answers.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum
from typing import Any

from lakegate_core import audit, doctor, protocol, status
from lakegate_core.types import PartitionOffsets, TopicPartition
from lakegate_core.wire import MAX_LONG, MAX_PARTITION

MODELS: tuple[type, ...] = (
    protocol.SidecarInfo,
    protocol.CsvLayout,
    protocol.DataFile,
    protocol.Manifest,
    protocol.OffsetSpan,
    protocol.FileReceipt,
    protocol.ManifestReceipt,
    TopicPartition,
    protocol.Watermark,
    protocol.LeaseRequest,
    protocol.LeaseGrant,
    protocol.LeaseResponse,
    status.ManifestStatus,
    status.CommitRecord,
    status.TableSummary,
    status.TableList,
    status.CommitList,
    status.CommitOutcome,
    status.ErrorInfo,
    status.ErrorBody,
    status.MaintenanceRecord,
    status.MaintenanceList,
    status.DeadLetter,
    status.DeadLetterList,
    status.EpochRequest,
    audit.Finding,
    audit.AuditCounts,
    audit.AuditReport,
    doctor.ConnectorSpec,
    doctor.Listing,
    doctor.DoctorRequest,
    doctor.DoctorFinding,
    doctor.ConnectorVerdict,
    doctor.DoctorReport,
)
NON_NEGATIVE = {
    "partition",
    "start_offset",
    "end_offset",
    "size_bytes",
    "record_count",
    "files",
    "records",
    "lease_epoch",
    "modified_ms",
    "epoch",
    "connect_offset",
    "read_at_ms",
    "log_end",
    "first_file",
    "held_next",
    "due_ms",
    "pending_files",
    "pending_bytes",
    "files_before",
    "files_after",
    "duration_ms",
    "started_ms",
    "attempts",
    "at_ms",
    "resolved_at_ms",
    "dead_letters",
    "first",
    "last",
    "checked_at_ms",
    "failed_tasks",
    "started_at_ms",
}
MAXIMUM = {"partition": MAX_PARTITION, "start_offset": MAX_LONG - 1, "end_offset": MAX_LONG - 1}
NAMESPACE = {
    **vars(protocol),
    **vars(status),
    **vars(audit),
    **vars(doctor),
    "PartitionOffsets": PartitionOffsets,
    "TopicPartition": TopicPartition,
}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or issubclass(tp, tuple) and hasattr(tp, "_fields"))


def _schema_of(tp: Any, name: str) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        return {**_schema_of(inner, name), "nullable": True}
    if tp is PartitionOffsets:
        return _ref("PartitionOffsets")
    if _is_model(tp):
        return _ref(tp.__name__)
    if origin in (tuple, list):
        return {"type": "array", "items": _schema_of(typing.get_args(tp)[0], name)}
    if origin is dict or tp is dict:
        return {"type": "object"}
    if isinstance(tp, type) and issubclass(tp, Enum):
        return {"type": "string", "enum": [e.value for e in tp]}
    if tp is int:
        return {
            "type": "integer",
            "format": "int64",
            **({"minimum": 0} if name in NON_NEGATIVE else {}),
            "maximum": MAXIMUM.get(name, MAX_LONG),
        }
    if tp is float:
        return {"type": "number"}
    if tp is bool:
        return {"type": "boolean"}
    return {"type": "string", "minLength": 1}


def _fields(cls: type) -> list[tuple[str, bool, dict[str, Any]]]:
    """(name, required, metadata) of each field of a dataclass or named tuple."""
    if dataclasses.is_dataclass(cls):
        return [
            (f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, dict(f.metadata))
            for f in dataclasses.fields(cls)
        ]
    defaults = getattr(cls, "_field_defaults", {})
    names: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    return [(name, name not in defaults, {}) for name in names]


def model_schema(cls: type) -> dict[str, Any]:
    """JSON schema (OpenAPI flavour) of one wire type; a ``flatten`` field's properties are inlined."""
    hints = typing.get_type_hints(cls, NAMESPACE)
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, needed, meta in _fields(cls):
        if meta.get("flatten"):
            inner = [a for a in typing.get_args(hints[name]) if a is not type(None)][0]
            props.update({k: v for k, v in model_schema(inner)["properties"].items() if k not in props})
            continue
        props[name] = _schema_of(hints[name], name)
        if needed:
            required.append(name)
    out = {"type": "object", "description": (cls.__doc__ or "").strip().splitlines()[0], "properties": props}
    return {**out, "required": required} if required else out


def _resp(desc: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": desc}
    if schema is not None:
        out["content"] = {"application/json": {"schema": schema}}
    return out


def _body(model: type) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": _ref(model.__name__)}}}


ERROR_CODES = {
    400: "Malformed request",
    401: "Missing or unknown token",
    403: "Role not allowed",
    404: "No such resource",
    409: "Conflict: offsets moved (a concurrent writer: retry), a manifest_id reused with other files, or a release of a range that is not next",
    413: "Body too large",
    422: "A data file cannot be committed",
    429: "The table's buffer is full: retry after Retry-After seconds",
    503: "Not ready yet, Kafka unavailable, or the commit failed: retry",
}


def _errors(*codes: int) -> dict[str, Any]:
    return {str(c): {"$ref": f"#/components/responses/E{c}"} for c in (400, 401, 403, 404, 413, 503, *codes)}


def document() -> dict[str, Any]:
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    table_param = {"name": "table", "in": "path", "required": True, "schema": {"type": "string"}}
    dead_letter_param = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Lakegate commit service",
            "version": "1",
            "description": "Buffers manifests of Kafka Connect storage-sink files and commits them into Delta "
            "tables atomically, exactly once, with the Kafka offsets in the same commit.",
        },
        "paths": {
            "/v1/manifests": {
                "post": {
                    "summary": "Submit completed data files (sidecar)",
                    "security": secured,
                    "requestBody": _body(protocol.Manifest),
                    "responses": {
                        "202": _resp("Accepted: a status per file (never 'committed')", _ref("ManifestReceipt")),
                        **_errors(409, 429),
                    },
                }
            },
            "/v1/leases": {
                "post": {
                    "summary": "Lease partitions before sending their files (sidecar)",
                    "security": secured,
                    "requestBody": _body(protocol.LeaseRequest),
                    "responses": {
                        "200": _resp("A grant (with epoch) or a refusal per partition", _ref("LeaseResponse")),
                        **_errors(),
                    },
                }
            },
            "/v1/manifests/{manifest_id}": {
                "get": {
                    "summary": "Where a manifest's files are",
                    "security": secured,
                    "parameters": [
                        {"name": "manifest_id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": {"200": _resp("Status", _ref("ManifestStatus")), **_errors()},
                }
            },
            "/v1/tables": {
                "get": {
                    "summary": "Every table",
                    "security": secured,
                    "responses": {"200": _resp("Tables", _ref("TableList")), **_errors()},
                }
            },
            "/v1/tables/{table}": {
                "get": {
                    "summary": "One table",
                    "security": secured,
                    "parameters": [table_param],
                    "responses": {"200": _resp("Table", _ref("TableSummary")), **_errors()},
                }
            },
            "/v1/tables/{table}/offsets": {
                "get": {
                    "summary": "Committed next offsets (the sidecar's start point)",
                    "security": secured,
                    "parameters": [table_param],
                    "responses": {"200": _resp("Offsets", _ref("PartitionOffsets")), **_errors()},
                }
            },
            "/v1/tables/{table}/commit": {
                "post": {
                    "summary": "Commit now (admin)",
                    "security": secured,
                    "parameters": [table_param],
                    "responses": {
                        "200": _resp(
                            "The commit made, or committed=false when nothing was pending", _ref("CommitOutcome")
                        ),
                        **_errors(409, 422),
                    },
                }
            },
            "/v1/tables/{table}/maintenance": {
                "get": {
                    "summary": "Recent compactions and vacuums of a table",
                    "security": secured,
                    "parameters": [table_param],
                    "responses": {"200": _resp("Runs, newest first", _ref("MaintenanceList")), **_errors()},
                }
            },
            "/v1/tables/{table}/maintenance/{kind}": {
                "post": {
                    "summary": "Compact or vacuum a table now (admin)",
                    "security": secured,
                    "parameters": [
                        table_param,
                        {
                            "name": "kind",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string", "enum": ["compact", "vacuum"]},
                        },
                    ],
                    "responses": {"200": _resp("The run", _ref("MaintenanceRecord")), **_errors()},
                }
            },
            "/v1/tables/{table}/audit": {
                "get": {
                    "summary": "Audit a table: its ledger, its rows, Kafka, and sampled records field by field",
                    "description": "Read-only; reads the whole table (seconds to minutes). ok=false when a finding "
                    "is a breach (docs/operations.md).",
                    "security": secured,
                    "parameters": [
                        table_param,
                        {
                            "name": "sample",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 0, "maximum": 100000, "default": 100},
                        },
                        {
                            "name": "seed",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 0, "maximum": 2147483647, "default": 0},
                        },
                    ],
                    "responses": {"200": _resp("The report", _ref("AuditReport")), **_errors()},
                }
            },
            "/v1/doctor": {
                "get": {
                    "summary": "Check the connectors the sidecars reported against what exactly once needs",
                    "description": "Read-only; reads Kafka's topic configs and log ends. ok=false when a finding "
                    "is blocking (docs/operations.md).",
                    "security": secured,
                    "parameters": [
                        {
                            "name": "connector",
                            "in": "query",
                            "schema": {"type": "array", "items": {"type": "string"}},
                            "style": "form",
                            "explode": True,
                        }
                    ],
                    "responses": {"200": _resp("The report", _ref("DoctorReport")), **_errors()},
                },
                "post": {
                    "summary": "Check these connectors (sidecar at start, or lakegate-doctor --connect)",
                    "description": "A body with sidecar set is also kept for GET. Only the config keys the doctor "
                    "reads are kept; any other key is dropped.",
                    "security": secured,
                    "requestBody": _body(doctor.DoctorRequest),
                    "responses": {"200": _resp("The report", _ref("DoctorReport")), **_errors()},
                },
            },
            "/v1/commits": {
                "get": {
                    "summary": "Recent commits",
                    "security": secured,
                    "parameters": [
                        {"name": "table", "in": "query", "schema": {"type": "string"}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
                    ],
                    "responses": {"200": _resp("Commits, newest first", _ref("CommitList")), **_errors()},
                }
            },
            "/v1/tables/{table}/epochs": {
                "post": {
                    "summary": "A topic was deleted and made again: its partitions begin a new ledger epoch (admin)",
                    "description": "One commit with no files records, under the keys <topic>~<epoch>, where each "
                    "partition of the new topic begins (Kafka's log start). 409 unless the topic looks made again "
                    "(every partition the table holds ends below the table's offset in Kafka) or force is set "
                    '(docs/operations.md, "A topic deleted and made again").',
                    "security": secured,
                    "parameters": [table_param],
                    "requestBody": _body(status.EpochRequest),
                    "responses": {
                        "200": _resp("The commit that began the epoch", _ref("CommitOutcome")),
                        **_errors(409),
                    },
                }
            },
            "/v1/dead-letters": {
                "get": {
                    "summary": "Files quarantined out of the tables' buffers, newest first",
                    "security": secured,
                    "parameters": [
                        {"name": "table", "in": "query", "schema": {"type": "string"}},
                        {
                            "name": "state",
                            "in": "query",
                            "schema": {"type": "string", "enum": [s.value for s in status.DeadLetterState]},
                        },
                    ],
                    "responses": {"200": _resp("Dead letters", _ref("DeadLetterList")), **_errors()},
                }
            },
            "/v1/dead-letters/{id}/retry": {
                "post": {
                    "summary": "Put a quarantined file back into its table's buffer (admin)",
                    "security": secured,
                    "parameters": [dead_letter_param],
                    "responses": {"200": _resp("The dead letter, now retried", _ref("DeadLetter")), **_errors(409)},
                }
            },
            "/v1/dead-letters/{id}/release": {
                "post": {
                    "summary": "Commit the partition past a quarantined range, without its file (admin)",
                    "security": secured,
                    "parameters": [dead_letter_param],
                    "responses": {
                        "200": _resp("The commit that skipped the range", _ref("CommitOutcome")),
                        **_errors(409, 422),
                    },
                }
            },
            "/healthz": {"get": {"summary": "Liveness", "responses": {"200": _resp("alive")}}},
            "/readyz": {
                "get": {
                    "summary": "Readiness: Spark started, tables loaded",
                    "responses": {"200": _resp("ready"), "503": _resp("not ready")},
                }
            },
            "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": _resp("text exposition")}}},
            "/openapi.json": {"get": {"summary": "This document", "responses": {"200": _resp("OpenAPI 3")}}},
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "PartitionOffsets": PartitionOffsets.json_schema(),
                **{cls.__name__: model_schema(cls) for cls in MODELS},
            },
            "responses": {f"E{c}": _resp(d, _ref("ErrorBody")) for c, d in ERROR_CODES.items()},
        },
    }
