"""HTTP API v1 as a Flask blueprint: thin handlers over the :class:`Coordinator`.

Every request but the probes, ``/metrics`` and ``/openapi.json`` needs a bearer token (when auth is
enabled). Errors are JSON ``{"error": {"code", "message", "details"}}`` with a 4xx status; an
unexpected exception is a 500 with a generic message (the trace goes to the log, never the client).
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from commit_service.config import Role, ServiceConfig
from commit_service.coordinator import Coordinator
from commit_service.errors import (
    BadRequestError,
    CommitError,
    DataFileError,
    ForbiddenError,
    OffsetsMovedError,
    PayloadTooLargeError,
    RequestError,
    SchemaMismatchError,
    UnauthorizedError,
)
from commit_service.metrics import CONTENT_TYPE, ServiceMetrics
from commit_service.openapi import document
from commit_service.protocol import LeaseRequest, Manifest, ProtocolError

logger = logging.getLogger(__name__)

bp = Blueprint("lakegate", __name__)
OPEN_PATHS = {"/healthz", "/readyz", "/metrics", "/openapi.json"}


def _coordinator() -> Coordinator:
    return current_app.extensions["lakegate"]["coordinator"]  # type: ignore[no-any-return]


def _config() -> ServiceConfig:
    return current_app.extensions["lakegate"]["config"]  # type: ignore[no-any-return]


@bp.before_app_request
def authenticate() -> None:
    if request.path in OPEN_PATHS:
        return
    if not _ready():  # before the tables' offsets are loaded every answer would mislead
        raise _not_ready()
    auth = _config().auth
    if not auth.enabled:
        g.role = Role.ADMIN
        return
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise UnauthorizedError("missing bearer token (Authorization: Bearer <token>)")
    for known in auth.tokens:
        if hmac.compare_digest(known.token.encode(), token.encode()):
            g.role = known.role
            return
    raise UnauthorizedError("unknown token")


def _require(role: Role) -> None:
    if role is Role.ADMIN and g.role is not Role.ADMIN:
        raise ForbiddenError("this needs an admin token")


def _json_body() -> Any:
    if not request.is_json:
        raise BadRequestError("body must be JSON (Content-Type: application/json)")
    body = request.get_json(silent=True)
    if body is None:
        raise BadRequestError("body is not valid JSON")
    return body


def _ready() -> bool:
    return bool(current_app.extensions["lakegate"]["coordinator"].ready)


@bp.post("/v1/manifests")
def post_manifest() -> tuple[Response, int]:
    try:
        manifest = Manifest.from_dict(_json_body())
    except ProtocolError as exc:
        current_app.extensions["lakegate"]["metrics"].rejected("invalid")
        raise BadRequestError(str(exc), {"field": exc.field}) from None
    receipt = _coordinator().submit(manifest)
    return jsonify(receipt.to_dict()), 202


@bp.post("/v1/leases")
def post_leases() -> Response:
    try:
        lease_request = LeaseRequest.from_dict(_json_body())
    except ProtocolError as exc:
        raise BadRequestError(str(exc), {"field": exc.field}) from None
    grants = _coordinator().claim(lease_request)
    return jsonify({"fencing": _coordinator().groups is not None, "leases": [g.to_dict() for g in grants]})


@bp.get("/v1/manifests/<manifest_id>")
def get_manifest(manifest_id: str) -> Response:
    return jsonify(_coordinator().manifest_status(manifest_id).to_dict())


@bp.get("/v1/tables")
def get_tables() -> Response:
    return jsonify({"tables": _coordinator().summaries()})


@bp.get("/v1/tables/<table>")
def get_table(table: str) -> Response:
    return jsonify(_coordinator().table_summary(table))


@bp.get("/v1/tables/<table>/offsets")
def get_offsets(table: str) -> Response:
    return jsonify(_coordinator().offsets(table))


@bp.post("/v1/tables/<table>/commit")
def post_commit(table: str) -> Response:
    _require(Role.ADMIN)
    record = _coordinator().commit_now(table)
    if record is None:
        return jsonify({"committed": False, "table": table, "reason": "nothing contiguous is pending"})
    return jsonify({"committed": True, **record.to_dict()})


@bp.get("/v1/commits")
def get_commits() -> Response:
    raw = request.args.get("limit", "50")
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise BadRequestError("limit must be an integer from 1 to 1000", {"field": "limit"})
    records = _coordinator().commits(request.args.get("table") or None, int(raw))
    return jsonify({"commits": [r.to_dict() for r in records]})


@bp.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


@bp.get("/readyz")
def readyz() -> tuple[Response, int]:
    ext = current_app.extensions["lakegate"]
    if _ready():
        return jsonify({"status": "ready", "spark_ui": ext.get("spark_ui")}), 200
    return jsonify({"status": "starting", "error": ext.get("start_error")}), 503


@bp.get("/metrics")
def metrics() -> Response:
    m: ServiceMetrics = current_app.extensions["lakegate"]["metrics"]
    return Response(m.render(), mimetype=None, content_type=CONTENT_TYPE)


@bp.get("/openapi.json")
def openapi() -> Response:
    return jsonify(document())


def _not_ready() -> RequestError:
    err = RequestError("the service is starting (Spark and tables are loading); retry shortly")
    err.status, err.code = 503, "not_ready"
    return err


def _error(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> tuple[Response, int]:
    return jsonify({"error": {"code": code, "message": message, "details": details or {}}}), status


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(RequestError)
    def _request_error(exc: RequestError) -> tuple[Response, int]:
        return _error(exc.status, exc.code, exc.message, exc.details)

    @app.errorhandler(CommitError)
    def _commit_error(exc: CommitError) -> tuple[Response, int]:
        if isinstance(exc, OffsetsMovedError):
            return _error(409, "offsets_moved", str(exc), {"retryable": True})
        if isinstance(exc, (SchemaMismatchError, DataFileError)):
            return _error(422, "bad_data_file", str(exc), {"path": exc.path, "retryable": exc.retryable})
        return _error(503, "commit_failed", str(exc), {"retryable": exc.retryable})

    @app.errorhandler(RequestEntityTooLarge)
    def _too_large(_: RequestEntityTooLarge) -> tuple[Response, int]:
        limit = app.config.get("MAX_CONTENT_LENGTH")
        err = PayloadTooLargeError(f"request body is larger than {limit} bytes (server.max_request_bytes)")
        return _error(err.status, err.code, err.message)

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> tuple[Response, int]:
        return _error(exc.code or 500, (exc.name or "error").lower().replace(" ", "_"), exc.description or "")

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> tuple[Response, int]:
        logger.exception("unexpected error on %s %s", request.method, request.path)
        return _error(500, "internal", "internal error; see the service log")
