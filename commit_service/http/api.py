"""HTTP API v1 as a Flask blueprint: thin handlers over the :class:`Coordinator`.

Every request but the probes, ``/metrics`` and ``/openapi.json`` needs a bearer token (when auth is
enabled). Every error is JSON (:class:`~lakegate_core.status.ErrorBody`) with the status its class
carries (:mod:`commit_service.errors`); an unexpected exception is a 500 with a generic message
(the trace goes to the log, never the client).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from commit_service.audit.auditor import AuditRequest
from commit_service.config import Role, TokenConfig
from commit_service.coordination.coordinator import Coordinator
from commit_service.errors import (
    BadRequestError,
    ForbiddenError,
    LakegateError,
    NotReadyError,
    PayloadTooLargeError,
    ProtocolError,
    UnauthorizedError,
)
from commit_service.http.audit import MAX_AUDIT_SAMPLE, audit_table
from commit_service.http.doctor import examine
from commit_service.http.epochs import open_epoch
from commit_service.http.openapi import document
from commit_service.http.runtime import ServiceRuntime, runtime
from commit_service.observe.metrics import CONTENT_TYPE
from lakegate_core.doctor import DoctorRequest
from lakegate_core.protocol import LeaseRequest, LeaseResponse, Manifest, ManifestReceipt
from lakegate_core.status import (
    CommitList,
    CommitOutcome,
    DeadLetterList,
    DeadLetterState,
    EpochRequest,
    ErrorBody,
    ErrorInfo,
    MaintenanceKind,
    TableList,
)

logger = logging.getLogger(__name__)

bp = Blueprint("lakegate", __name__)
OPEN_PATHS = {"/healthz", "/readyz", "/metrics", "/openapi.json"}
PAGE_PATHS = {
    "/",
    "/status/panel",
    "/login",
    "/logout",
}  # commit_service.http.status_page: bearer token or login cookie
MAX_JSON_DEPTH = 32  # manifests and lease claims nest 3 deep; anything deeper is not ours
INTERNAL = "internal error; see the service log"  # an unexpected exception's answer (the trace is logged)


def _coordinator() -> Coordinator:
    return runtime().coordinator


@dataclass(frozen=True)
class Caller:
    """Who sent an API request, from its bearer token (:func:`identify`); the handlers check it."""

    role: Role
    sidecar_id: str | None = None  # a token bound to one sidecar (``auth.tokens[].sidecar_id``) speaks only for it

    def require(self, role: Role) -> None:
        """A 403 unless the caller's role is at least ``role``."""
        if RANK[self.role] < RANK[role]:
            raise ForbiddenError(
                f"this needs a{'n' if role is Role.ADMIN else ''} {role.value} token, not a {self.role.value} one"
            )

    def speaks_for(self, sidecar_id: str) -> None:
        """A 403 when the caller's token belongs to another sidecar than ``sidecar_id``."""
        if self.sidecar_id is not None and sidecar_id != self.sidecar_id:
            raise ForbiddenError(
                f"this token belongs to sidecar {self.sidecar_id!r}, not {sidecar_id!r}", {"field": "sidecar.id"}
            )


RANK = {Role.READ: 0, Role.SIDECAR: 1, Role.ADMIN: 2}


def identify(rt: ServiceRuntime, authorization: str) -> Caller:
    """The caller of an API request with this ``Authorization`` header; a 503 while the service
    starts, a 401 without a known bearer token. Used by Flask's hook and by :mod:`commit_service.http.intake`."""
    if not rt.ready:  # before the tables' offsets are loaded every answer would mislead
        raise NotReadyError("the service is starting (Spark and tables are loading); retry shortly")
    auth = rt.config.auth
    if not auth.enabled:
        return Caller(Role.ADMIN)
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise UnauthorizedError("missing bearer token (Authorization: Bearer <token>)")
    known = known_token(auth.tokens, token)
    if known is None:
        raise UnauthorizedError("unknown token")
    return Caller(known.role, known.sidecar_id)


@bp.before_app_request
def authenticate() -> None:
    if request.path in OPEN_PATHS or request.path in PAGE_PATHS:  # the page checks its viewer itself
        return
    g.caller = identify(runtime(), request.headers.get("Authorization", ""))


def _caller() -> Caller:
    """The current request's caller (set by :func:`authenticate`)."""
    return cast(Caller, g.caller)


def known_token(tokens: Iterable[TokenConfig], token: str) -> TokenConfig | None:
    """The configured token equal to ``token`` (compared in constant time), or None."""
    found = None
    for known in tokens:
        if hmac.compare_digest(known.token.encode(), token.encode()):
            found = known
    return found


def parse_json(is_json: bool, read: Callable[[], bytes]) -> Any:
    """A request's JSON body, or a 400: not JSON (checked before ``read`` is called), not UTF-8, or
    nested deeper than MAX_JSON_DEPTH."""
    if not is_json:
        raise BadRequestError("body must be JSON (Content-Type: application/json)")
    try:
        body = json.loads(read())
    except RecursionError:
        raise BadRequestError(f"body is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        raise BadRequestError("body is not valid JSON (UTF-8)") from None
    if _depth(body) > MAX_JSON_DEPTH:
        raise BadRequestError(f"body is nested deeper than {MAX_JSON_DEPTH} levels")
    return body


def _json_body() -> Any:
    """The current request's JSON body (:func:`parse_json`; a 413 past ``MAX_CONTENT_LENGTH``)."""
    return parse_json(request.is_json, lambda: request.get_data(cache=True))


def too_large(limit: int | None) -> PayloadTooLargeError:
    """The 413 of a request body above ``server.max_request_bytes``."""
    return PayloadTooLargeError(f"request body is larger than {limit} bytes (server.max_request_bytes)")


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in ``value`` (iterative: no recursion on hostile input)."""
    if not isinstance(value, (dict, list)):
        return 0
    deepest, stack = 0, [(value, 1)]
    while stack:  # only containers are pushed: a manifest's 60,000 scalars are looked at once each
        item, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_JSON_DEPTH:
            break
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _query_int(name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter from ``low`` to ``high`` (ASCII digits only), else a 400."""
    raw = request.args.get(name, str(default))
    if not (raw.isascii() and raw.isdigit() and low <= int(raw) <= high):
        raise BadRequestError(f"{name} must be an integer from {low} to {high}", {"field": name})
    return int(raw)


def accept_manifest(rt: ServiceRuntime, caller: Caller, body: Callable[[], Any]) -> ManifestReceipt:
    """``POST /v1/manifests`` for both of its routes (this blueprint's and
    :class:`commit_service.http.intake.ManifestRoute`): a sidecar's token, the body (read by ``body``
    only then) as a manifest, the token's sidecar, then the coordinator's verdict per file."""
    try:
        caller.require(Role.SIDECAR)
        manifest = Manifest.from_dict(body())
    except ProtocolError:
        rt.metrics.rejected("invalid")
        raise
    caller.speaks_for(manifest.sidecar.id)
    return rt.coordinator.submit(manifest)


@bp.post("/v1/manifests")
def post_manifest() -> tuple[Response, int]:
    """A manifest whose body has no Content-Length (chunked); the others are answered by
    :class:`commit_service.http.intake.ManifestRoute` before Flask."""
    receipt = accept_manifest(runtime(), _caller(), _json_body)
    return jsonify(receipt.to_dict()), 202


@bp.post("/v1/leases")
def post_leases() -> Response:
    _caller().require(Role.SIDECAR)
    claim = LeaseRequest.from_dict(_json_body())
    _caller().speaks_for(claim.sidecar.id)
    coordinator = _coordinator()
    grants = coordinator.claim(claim)
    answer = LeaseResponse(coordinator.fencing.enabled, tuple(grants), int(coordinator.clock() * 1000))
    return jsonify(answer.to_dict())


@bp.get("/v1/manifests/<manifest_id>")
def get_manifest(manifest_id: str) -> Response:
    return jsonify(_coordinator().manifest_status(manifest_id).to_dict())


@bp.get("/v1/tables")
def get_tables() -> Response:
    return jsonify(TableList(tuple(_coordinator().summaries())).to_dict())


@bp.get("/v1/tables/<table>")
def get_table(table: str) -> Response:
    return jsonify(_coordinator().table_summary(table).to_dict())


@bp.get("/v1/tables/<table>/offsets")
def get_offsets(table: str) -> Response:
    return jsonify(_coordinator().offsets(table).to_json())


@bp.post("/v1/tables/<table>/commit")
def post_commit(table: str) -> Response:
    _caller().require(Role.ADMIN)
    record = _coordinator().commit_now(table)
    if record is None:
        return jsonify(CommitOutcome(False, table, "nothing contiguous is pending").to_dict())
    return jsonify(CommitOutcome(True, table, commit=record).to_dict())


@bp.get("/v1/tables/<table>/maintenance")
def get_maintenance(table: str) -> Response:
    return jsonify(_coordinator().maintenance(table).to_dict())


@bp.post("/v1/tables/<table>/maintenance/<kind>")
def post_maintenance(table: str, kind: str) -> Response:
    _caller().require(Role.ADMIN)
    try:
        which = MaintenanceKind(kind)
    except ValueError:
        raise BadRequestError(f"kind must be compact or vacuum, not {kind!r}", {"field": "kind"}) from None
    if which is MaintenanceKind.CHECKPOINT:
        raise BadRequestError("kind must be compact or vacuum (Delta writes checkpoints itself)", {"field": "kind"})
    return jsonify(_coordinator().maintain_now(table, which).to_dict())


@bp.get("/v1/tables/<table>/audit")
def get_audit(table: str) -> Response:
    rt = runtime()
    if not rt.ready or rt.start_error is not None:
        raise NotReadyError("the service is starting; audit when /readyz is ready")
    request_ = AuditRequest(
        sample=_query_int("sample", 100, 0, MAX_AUDIT_SAMPLE), seed=_query_int("seed", 0, 0, 2**31 - 1)
    )
    report = audit_table(rt, table, request_)
    rt.audits[table] = report
    return jsonify(report.to_dict())


@bp.get("/v1/doctor")
def get_doctor() -> Response:
    """The connectors the sidecars reported at start (``?connector=``: those named), checked now."""
    only = frozenset(request.args.getlist("connector"))
    return jsonify(examine(runtime(), None, remember=False, only=only).to_dict())


@bp.post("/v1/doctor")
def post_doctor() -> Response:
    """These connectors, checked now; a sidecar's report (``sidecar`` set) is also kept for ``GET``."""
    caller = _caller()
    caller.require(Role.SIDECAR)
    asked = DoctorRequest.from_dict(_json_body())
    if asked.sidecar is not None:
        caller.speaks_for(asked.sidecar)
    return jsonify(examine(runtime(), asked, remember=asked.sidecar is not None).to_dict())


@bp.get("/v1/commits")
def get_commits() -> Response:
    limit = _query_int("limit", 50, 1, 1000)
    records = _coordinator().commits(request.args.get("table") or None, limit)
    return jsonify(CommitList(tuple(records)).to_dict())


@bp.get("/v1/dead-letters")
def get_dead_letters() -> Response:
    raw = request.args.get("state")
    try:
        state = DeadLetterState(raw) if raw else None
    except ValueError:
        choices = [s.value for s in DeadLetterState]
        raise BadRequestError(f"state must be one of {choices}", {"field": "state"}) from None
    letters = _coordinator().dead_letters(request.args.get("table") or None, state)
    return jsonify(DeadLetterList(tuple(letters)).to_dict())


@bp.post("/v1/dead-letters/<letter_id>/retry")
def post_dead_letter_retry(letter_id: str) -> Response:
    _caller().require(Role.ADMIN)
    return jsonify(_coordinator().retry_dead_letter(letter_id).to_dict())


@bp.post("/v1/dead-letters/<letter_id>/release")
def post_dead_letter_release(letter_id: str) -> Response:
    _caller().require(Role.ADMIN)
    record = _coordinator().release_dead_letter(letter_id)
    return jsonify(CommitOutcome(True, record.table, commit=record).to_dict())


@bp.post("/v1/tables/<table>/epochs")
def post_table_epoch(table: str) -> Response:
    """The topic named was deleted and made again: its partitions begin a new ledger epoch."""
    _caller().require(Role.ADMIN)
    record = open_epoch(runtime(), table, EpochRequest.from_dict(_json_body()))
    return jsonify(CommitOutcome(True, record.table, commit=record).to_dict())


@bp.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


@bp.get("/readyz")
def readyz() -> tuple[Response, int]:
    """200 once every table is loaded; before, 503 ``starting``, or ``failed`` with the start-up
    error's code and a short message (never a trace: :func:`commit_service.http.app.start_failure`)."""
    rt = runtime()
    if rt.ready:
        return jsonify({"status": "ready", "spark_ui": rt.spark.ui_url}), 200
    if rt.start_error is None:
        return jsonify({"status": "starting"}), 503
    return jsonify({"status": "failed", "error": rt.start_error.to_dict()}), 503


@bp.get("/metrics")
def metrics() -> Response:
    return Response(runtime().metrics.render(), mimetype=None, content_type=CONTENT_TYPE)


@bp.get("/openapi.json")
def openapi() -> Response:
    return jsonify(document())


def _error(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> tuple[Response, int]:
    return jsonify(ErrorBody(ErrorInfo(code, message, details or {})).to_dict()), status


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(LakegateError)
    def _lakegate_error(exc: LakegateError) -> tuple[Response, int]:
        response = jsonify(ErrorBody.of(exc).to_dict())
        response.headers.update(exc.headers())
        return response, exc.status

    @app.errorhandler(RequestEntityTooLarge)
    def _too_large(_: RequestEntityTooLarge) -> tuple[Response, int]:
        return _lakegate_error(too_large(current_app.config.get("MAX_CONTENT_LENGTH")))

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> tuple[Response, int]:
        response, status = _error(
            exc.code or 500, (exc.name or "error").lower().replace(" ", "_"), exc.description or ""
        )
        for name, value in exc.get_headers():  # e.g. a 405's Allow
            if name.lower() != "content-type":
                response.headers[name] = value
        return response, status

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> tuple[Response, int]:
        logger.exception("unexpected error on %s %s", request.method, request.path)
        return _error(500, "internal", INTERNAL)
