"""``POST /v1/manifests`` answered before Flask: the sidecars' hot path.

Every sidecar posts its files here, so this is the request the service answers most. Through
Flask, a one-file manifest spent more of its interpreter time in Flask's request and app contexts,
URL matching and response object than in the handler (``docs/performance-history.md``, "Manifest
intake").
:class:`ManifestRoute` wraps the app's WSGI callable (installed by
:func:`commit_service.http.app.create_app`) and answers a ``POST`` to exactly ``/v1/manifests`` with a
``Content-Length`` body itself, through the same functions as the blueprint's route
(:func:`~commit_service.http.api.identify`, :func:`~commit_service.http.api.parse_json`,
:func:`~commit_service.http.api.accept_manifest`): the same checks in the same order, the same errors
with the same statuses, headers and JSON shape. Anything else (other paths and methods, a chunked
body) goes to Flask.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.http import HTTP_STATUS_CODES, parse_options_header

from commit_service.errors import LakegateError
from commit_service.http.api import INTERNAL, accept_manifest, identify, parse_json, too_large
from commit_service.http.runtime import ServiceRuntime
from lakegate_core.status import ErrorBody, ErrorInfo

logger = logging.getLogger(__name__)

PATH = "/v1/manifests"
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` names JSON, as Flask's ``request.is_json`` decides it."""
    mimetype = parse_options_header(content_type)[0].lower()
    return mimetype == "application/json" or (mimetype.startswith("application/") and mimetype.endswith("+json"))


def json_answer(
    start_response: Callable[..., Any], status: int, document: Any, headers: Iterable[tuple[str, str]] = ()
) -> list[bytes]:
    """``document`` as the body of a ``status`` answer, encoded as Flask's ``jsonify`` does."""
    body = (json.dumps(document, separators=(",", ":")) + "\n").encode()
    start_response(
        f"{status} {HTTP_STATUS_CODES.get(status, 'UNKNOWN').upper()}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *headers],
    )
    return [body]


class ManifestRoute:
    """The app's WSGI callable, with ``POST /v1/manifests`` (``Content-Length`` bodies) answered here."""

    def __init__(self, flask: WSGIApp, rt: ServiceRuntime, max_body: int) -> None:
        """``flask``: the app's own WSGI callable; ``max_body``: ``server.max_request_bytes``."""
        self._flask = flask
        self._rt = rt
        self._max_body = max_body

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        length = environ.get("CONTENT_LENGTH") or ""
        if (
            environ.get("PATH_INFO") != PATH
            or environ.get("REQUEST_METHOD") != "POST"
            or not (length.isascii() and length.isdigit())
            or "HTTP_TRANSFER_ENCODING" in environ  # a framed body: Flask's route reads it
        ):
            return self._flask(environ, start_response)
        try:
            caller = identify(self._rt, environ.get("HTTP_AUTHORIZATION", ""))
            receipt = accept_manifest(self._rt, caller, lambda: self._body(environ, int(length)))
        except LakegateError as exc:
            return json_answer(start_response, exc.status, ErrorBody.of(exc).to_dict(), exc.headers().items())
        except Exception:
            logger.exception("unexpected error on POST %s", PATH)
            return json_answer(start_response, 500, ErrorBody(ErrorInfo("internal", INTERNAL)).to_dict())
        return json_answer(start_response, 202, receipt.to_dict())

    def _body(self, environ: dict[str, Any], length: int) -> Any:
        """The JSON body: checked for JSON, then for size, before a byte is read (as Flask's route)."""

        def read() -> bytes:
            if length > self._max_body:
                raise too_large(self._max_body)
            return bytes(environ["wsgi.input"].read(length))

        return parse_json(is_json(environ.get("CONTENT_TYPE", "")), read)
