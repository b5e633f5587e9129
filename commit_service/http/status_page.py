"""The status page (``GET /``) and its login, as a Flask blueprint rendered from Jinja templates.

Who reads it: operators, in a browser. It is read-only: any role may see it (``read``,
``sidecar``, ``admin``). A viewer is known by a bearer token (``curl -H 'Authorization: Bearer
...'``) or by the login cookie that ``POST /login`` sets after checking a token typed into the form:
the token travels in the form body, never in a URL, and the cookie holds only an HMAC of it under
a per-process secret (Flask's signed session), so a restart or a token removed from the config
ends the login. ``GET /status/panel`` is the live part of the page, which its script fetches
every few seconds.

What the page shows is built by :func:`commit_service.observe.status_view.build_view`; the templates only
format it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from flask import (
    Blueprint,
    Flask,
    Request,
    Response,
    current_app,
    make_response,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface

from commit_service.config import Role, TokenConfig
from commit_service.http.api import known_token
from commit_service.http.runtime import runtime
from commit_service.observe.status_view import build_view

ui = Blueprint("ui", __name__, template_folder="templates")
REFRESH_SECONDS = 5
SESSION_KEY = "viewer"


class LoginSessions(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, but a request that carries no session cookie (every API
    call: sidecars and tools send bearer tokens) gets the empty session Flask would give it without
    building the cookie signer first, which cost about 5% of a manifest's time in the HTTP thread."""

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        if app.secret_key and self.get_cookie_name(app) not in request.cookies:
            return self.session_class()
        return super().open_session(app, request)


def init_sessions(app: Flask, session_hours: float, secure: bool) -> None:
    """Sign login cookies with a secret made now: one service process, one secret (a restart logs
    everyone out, which is fine for a read-only page)."""
    app.session_interface = LoginSessions()
    app.secret_key = secrets.token_bytes(32)
    app.config.update(
        SESSION_COOKIE_NAME="lakegate_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",  # a link to the page sends it; a cross-site POST does not
        SESSION_COOKIE_SECURE=secure,
        PERMANENT_SESSION_LIFETIME=timedelta(hours=session_hours),
    )


def _mark(token: str) -> str:
    """What the cookie holds for ``token``: an HMAC under the process's secret, not the token."""
    return hmac.new(_secret(), token.encode(), hashlib.sha256).hexdigest()


def _secret() -> bytes:
    key = current_app.secret_key
    return key if isinstance(key, bytes) else str(key).encode()


def viewer() -> Role | None:
    """The role of whoever asks: auth off means everyone; else a bearer token or the login cookie."""
    auth = runtime().config.auth
    if not auth.enabled:
        return Role.ADMIN
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token:
        known = known_token(runtime().config.auth.tokens, token)
        return None if known is None else known.role
    mark = session.get(SESSION_KEY)
    if not isinstance(mark, str):
        return None
    found: TokenConfig | None = None
    for known in auth.tokens:  # a token removed from the config no longer matches
        if hmac.compare_digest(_mark(known.token), mark):
            found = known
    return None if found is None else found.role


def _page(template: str, status: int = 200, **context: Any) -> Response:
    """An HTML answer with a fresh script nonce, a strict Content-Security-Policy and no caching."""
    nonce = secrets.token_urlsafe(16)
    response = make_response(render_template(template, nonce=nonce, **context), status)
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


def _view_context() -> dict[str, Any]:
    rt = runtime()
    ui_url = rt.config.spark.ui_url or rt.spark.ui_url
    ends = rt.lag.last_ends if rt.lag is not None else None
    view = build_view(
        rt.coordinator, rt.lag_history, ends, ui_url, time.time(), kafka_configured=rt.config.kafka is not None
    )
    return {
        "view": view,
        "refresh_seconds": REFRESH_SECONDS,
        "start_error": rt.start_error,
        "audits": dict(rt.audits),
        "connectors": rt.doctor.last() if rt.doctor is not None else [],
    }


@ui.get("/")
def status_page() -> Response:
    role = viewer()
    if role is None:
        return redirect(url_for("ui.login_form"))  # type: ignore[return-value]
    return _page("status.html", role=role, auth=runtime().config.auth.enabled, **_view_context())


@ui.get("/status/panel")
def status_panel() -> Response:
    if viewer() is None:
        return _page("unauthorized.html", 401)
    return _page("panel.html", **_view_context())


@ui.get("/login")
def login_form() -> Response:
    return _page("login.html", error=None)


@ui.post("/login")
def login() -> Response:
    token = request.form.get("token", "").strip()
    known = known_token(runtime().config.auth.tokens, token) if token else None
    if known is None:
        return _page("login.html", 401, error="unknown token")
    session.clear()
    session.permanent = True
    session[SESSION_KEY] = _mark(token)
    return redirect(url_for("ui.status_page"), 303)  # type: ignore[return-value]


@ui.post("/logout")
def logout() -> Response:
    session.clear()
    return redirect(url_for("ui.login_form"), 303)  # type: ignore[return-value]


# -- formatting helpers for the templates -------------------------------------------------


@ui.app_template_filter("ago")
def ago(seconds: float | None) -> str:
    """12.3 -> '12 s', 754 -> '12 min 34 s', None -> '—'."""
    if seconds is None:
        return "—"
    s = int(seconds)
    if s < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


@ui.app_template_filter("when")
def when(epoch_ms: int | None) -> str:
    """Epoch milliseconds as UTC wall time, e.g. '14:03:07'."""
    if epoch_ms is None:
        return "—"
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%H:%M:%S")


@ui.app_template_filter("count")
def count(n: int | None) -> str:
    """1234567 -> '1,234,567'; None -> '—'."""
    return "—" if n is None else f"{n:,}"


@ui.app_template_filter("size")
def size(n: int) -> str:
    """Bytes, human-sized: 1536 -> '1.5 KiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
