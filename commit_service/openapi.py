"""The OpenAPI 3 document of HTTP API v1, served at ``GET /openapi.json``.

Request and response schemas are generated from the dataclasses of :mod:`commit_service.protocol`
(so the spec cannot drift from the wire model); paths are listed here, next to nothing else.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum
from typing import Any

from commit_service import protocol

MODELS = (protocol.SidecarInfo, protocol.DataFile, protocol.Manifest, protocol.FileReceipt,
          protocol.ManifestReceipt, protocol.ManifestStatus, protocol.CommitRecord, protocol.LeaseGrant)  # fmt: skip
LEASE_REQUEST = {
    "type": "object", "description": "Partitions a sidecar's worker tasks own, to lease (fencing)",
    "required": ["sidecar", "connector", "tasks", "partitions"],
    "properties": {
        "sidecar": {"$ref": "#/components/schemas/SidecarInfo"}, "connector": {"type": "string", "minLength": 1},
        "tasks": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "partitions": {"type": "array", "items": {"type": "object", "required": ["topic", "partition"], "properties": {
            "topic": {"type": "string", "minLength": 1}, "partition": {"type": "integer", "minimum": 0}}}},
        "watermarks": {"type": "array", "description": "every file below connect_offset (read at read_at_ms) was sent",
                       "items": {"type": "object", "required": ["topic", "partition", "connect_offset", "read_at_ms"],
                                 "properties": {"topic": {"type": "string"}, "partition": {"type": "integer", "minimum": 0},
                                                "connect_offset": {"type": "integer", "minimum": 0},
                                                "read_at_ms": {"type": "integer", "minimum": 0}}}},
    },
}  # fmt: skip
NON_NEGATIVE = {"partition", "start_offset", "end_offset", "size_bytes", "record_count", "files", "records", "version",
                "lease_epoch", "epoch"}


def _schema_of(tp: Any, name: str) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        return {**_schema_of(inner, name), "nullable": True}
    if dataclasses.is_dataclass(tp):
        return {"$ref": f"#/components/schemas/{tp.__name__}"}  # type: ignore[union-attr]
    if origin in (tuple, list):
        return {"type": "array", "items": _schema_of(typing.get_args(tp)[0], name)}
    if origin is dict or tp is protocol.Offsets:
        return {"type": "object", "additionalProperties": {"type": "object", "additionalProperties": {"type": "integer"}},
                "description": "topic -> partition -> next offset"}  # fmt: skip
    if isinstance(tp, type) and issubclass(tp, Enum):
        return {"type": "string", "enum": [e.value for e in tp]}
    if tp is int:
        return {"type": "integer", **({"minimum": 0} if name in NON_NEGATIVE else {})}
    if tp is float:
        return {"type": "number"}
    if tp is bool:
        return {"type": "boolean"}
    return {"type": "string", "minLength": 1}


def model_schema(cls: type) -> dict[str, Any]:
    """JSON schema (OpenAPI flavour) of one protocol dataclass."""
    hints = typing.get_type_hints(cls, vars(protocol))
    props, required = {}, []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        props[f.name] = _schema_of(hints[f.name], f.name)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    return {"type": "object", "description": (cls.__doc__ or "").strip().splitlines()[0],
            "properties": props, "required": required}  # fmt: skip


def _error() -> dict[str, Any]:
    return {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "details": {"type": "object"}},
    }}}  # fmt: skip


def _resp(desc: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": desc}
    if schema is not None:
        out["content"] = {"application/json": {"schema": schema}}
    return out


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


ERRORS = {str(c): {"$ref": f"#/components/responses/E{c}"} for c in (400, 401, 403, 404, 413)}
TABLE = {"type": "object", "additionalProperties": True, "description": "version, offsets, pending files/bytes, last error"}


def document() -> dict[str, Any]:
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    table_param = {"name": "table", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Lakegate commit service", "version": "1", "description":
                 "Buffers manifests of Kafka Connect storage-sink files and commits them into Delta "
                 "tables atomically, exactly once, with the Kafka offsets in the same commit."},
        "paths": {
            "/v1/manifests": {"post": {
                "summary": "Submit completed data files (sidecar)", "security": secured,
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("Manifest")}}},
                "responses": {"202": _resp("Accepted: a status per file (never 'committed')", _ref("ManifestReceipt")), **ERRORS},
            }},
            "/v1/leases": {"post": {
                "summary": "Lease partitions before sending their files (sidecar)", "security": secured,
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("LeaseRequest")}}},
                "responses": {"200": _resp("A grant (with epoch) or a refusal per partition", {"type": "object", "properties": {
                    "fencing": {"type": "boolean"}, "leases": {"type": "array", "items": _ref("LeaseGrant")}}}),
                    **ERRORS, "503": _resp("Kafka unavailable", _error())},
            }},
            "/v1/manifests/{manifest_id}": {"get": {
                "summary": "Where a manifest's files are", "security": secured,
                "parameters": [{"name": "manifest_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": _resp("Status", _ref("ManifestStatus")), **ERRORS},
            }},
            "/v1/tables": {"get": {"summary": "Every table", "security": secured, "responses": {
                "200": _resp("Tables", {"type": "object", "properties": {"tables": {"type": "array", "items": TABLE}}}), **ERRORS}}},
            "/v1/tables/{table}": {"get": {"summary": "One table", "security": secured, "parameters": [table_param],
                                           "responses": {"200": _resp("Table", TABLE), **ERRORS}}},
            "/v1/tables/{table}/offsets": {"get": {
                "summary": "Committed next offsets (the sidecar's start point)", "security": secured,
                "parameters": [table_param],
                "responses": {"200": _resp("topic -> partition -> next offset", _schema_of(protocol.Offsets, "offsets")), **ERRORS},
            }},
            "/v1/tables/{table}/commit": {"post": {
                "summary": "Commit now (admin)", "security": secured, "parameters": [table_param],
                "responses": {"200": _resp("The commit made, or committed=false when nothing was pending",
                                           {"type": "object"}), **ERRORS, "409": _resp("Commit failed", _error())},
            }},
            "/v1/commits": {"get": {
                "summary": "Recent commits", "security": secured,
                "parameters": [{"name": "table", "in": "query", "schema": {"type": "string"}},
                               {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}],
                "responses": {"200": _resp("Commits, newest first", {"type": "object", "properties": {
                    "commits": {"type": "array", "items": _ref("CommitRecord")}}}), **ERRORS},
            }},
            "/healthz": {"get": {"summary": "Liveness", "responses": {"200": _resp("alive")}}},
            "/readyz": {"get": {"summary": "Readiness: Spark started, tables loaded",
                                "responses": {"200": _resp("ready"), "503": _resp("not ready")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": _resp("text exposition")}}},
            "/openapi.json": {"get": {"summary": "This document", "responses": {"200": _resp("OpenAPI 3")}}},
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {**{cls.__name__: model_schema(cls) for cls in MODELS}, "LeaseRequest": LEASE_REQUEST},
            "responses": {f"E{c}": _resp(d, _error()) for c, d in (
                (400, "Malformed request"), (401, "Missing or unknown token"), (403, "Role not allowed"),
                (404, "No such resource"), (413, "Body too large"))},
        },
    }  # fmt: skip
