"""``POST /v1/manifests`` before Flask (commit_service.http.intake) answers as Flask's route does.

Every case is sent to two services built alike: once with a ``Content-Length`` body (answered by
:class:`ManifestRoute`), once chunked (no ``Content-Length``: handed to Flask's route). Both must
give the same status, JSON body and headers, and leave the same buffer behind.
"""

from __future__ import annotations

import copy
import io
import json
import logging
from typing import Any

import pytest
from flask import request
from flask.testing import FlaskClient

from commit_service.config import ServiceConfig
from commit_service.http.app import create_app
from commit_service.http.intake import ManifestRoute, is_json
from commit_service.http.runtime import runtime
from lakegate_core.configfile import build
from tests.unit.fakes import ADMIN, CONFIG, SIDE, FakeCommitter, manifest

READER, BOUND = "reader-token-0123456789", "bound-token-0123456789"
LIMIT = 4096


def service(*, ready: bool = True, max_pending: int = 1000) -> FlaskClient:
    raw: dict[str, Any] = copy.deepcopy(CONFIG)
    raw["auth"]["tokens"] += [
        {"token": READER, "role": "read"},
        {"token": BOUND, "role": "sidecar", "sidecar_id": "sc-9"},
    ]
    raw["tables"][0]["commit"]["max_pending_files"] = max_pending
    committer = FakeCommitter()
    app = create_app(build(ServiceConfig, raw), committer_factory=lambda t: committer, start=False)
    if ready:
        runtime(app).coordinator.load()
    return app.test_client()


def post(client: FlaskClient, body: bytes, headers: dict[str, str], *, chunked: bool) -> Any:
    if chunked:  # as gunicorn hands over a Transfer-Encoding: chunked body
        return client.post(
            "/v1/manifests",
            input_stream=io.BytesIO(body),
            headers={**headers, "Transfer-Encoding": "chunked"},
            environ_overrides={"wsgi.input_terminated": True},
        )
    return client.post("/v1/manifests", data=body, headers=headers)


def auth(token: str | None = SIDE, content_type: str = "application/json") -> dict[str, str]:
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


OUTSIDE = manifest(path="s3a://elsewhere/orders-0-0")
NO_FILES = {k: v for k, v in manifest().items() if k != "files"}
OTHER_SIDECAR = {**manifest(), "sidecar": {"id": "sc-1", "worker": "w:8083"}}

# (case, its status, requests sent before the one compared, the compared one's body and headers, service options)
CASES: list[tuple[str, int, list[bytes], bytes, dict[str, str], dict[str, Any]]] = [
    ("accepted", 202, [], body(manifest()), auth(), {}),
    ("accepted by an admin", 202, [], body(manifest()), auth(ADMIN), {}),
    ("duplicate", 202, [body(manifest())], body(manifest("m2")), auth(), {}),
    ("not ready", 503, [], body(manifest()), auth(), {"ready": False}),
    ("no token", 401, [], body(manifest()), auth(None), {}),
    ("unknown token", 401, [], body(manifest()), auth("unknown-token-0123456789"), {}),
    ("read token", 403, [], body(manifest()), auth(READER), {}),
    ("read token, bad body", 403, [], b"{", auth(READER), {}),
    ("token of another sidecar", 403, [], body(OTHER_SIDECAR), auth(BOUND), {}),
    ("not JSON", 400, [], body(manifest()), auth(content_type="text/plain"), {}),
    ("JSON with a charset", 202, [], body(manifest()), auth(content_type="application/json; charset=utf-8"), {}),
    ("invalid JSON", 400, [], b'{"manifest_id": ', auth(), {}),
    ("not UTF-8", 400, [], b'{"manifest_id": "\xff"}', auth(), {}),
    ("too deep", 400, [], nested(40), auth(), {}),
    ("no files", 400, [], body(NO_FILES), auth(), {}),
    ("outside the roots", 400, [], body(OUTSIDE), auth(), {}),
    ("too large", 413, [], body(manifest()) + b" " * LIMIT, auth(), {}),
    ("reused id, other files", 409, [body(manifest())], body(manifest(start=10, end=19)), auth(), {}),
    ("buffer full", 429, [body(manifest())], body(manifest("m2", start=10, end=19)), auth(), {"max_pending": 1}),
]


@pytest.mark.parametrize(
    ("case", "expected", "before", "payload", "headers", "options"), CASES, ids=[c[0] for c in CASES]
)
def test_both_routes_answer_alike(
    case: str, expected: int, before: list[bytes], payload: bytes, headers: dict[str, str], options: dict[str, Any]
) -> None:
    answers = []
    for chunked in (False, True):
        client = service(**options)
        for earlier in before:
            assert post(client, earlier, auth(), chunked=chunked).status_code == 202
        r = post(client, payload, headers, chunked=chunked)
        state = client.get("/v1/tables/orders", headers={"Authorization": f"Bearer {ADMIN}"})
        answers.append(
            (
                r.status_code,
                r.json,
                r.mimetype,
                r.headers.get("Retry-After"),
                state.json["pending_files"] if state.status_code == 200 else None,  # type: ignore[index]
            )
        )
    assert answers[0] == answers[1], case
    status, document, mimetype = answers[0][:3]
    assert status == expected and mimetype == "application/json"
    assert ("files" in document) if status == 202 else set(document["error"]) == {"code", "message", "details"}


def test_content_length_bodies_skip_flask_and_the_others_reach_it(monkeypatch: pytest.MonkeyPatch) -> None:
    client = service()
    route = client.application.wsgi_app
    assert isinstance(route, ManifestRoute)
    seen: list[str] = []
    flask = route._flask
    monkeypatch.setattr(route, "_flask", lambda env, sr: seen.append(env["PATH_INFO"]) or flask(env, sr))
    assert post(client, body(manifest()), auth(), chunked=False).status_code == 202
    assert seen == []
    assert post(client, body(manifest("m2", start=10, end=19)), auth(), chunked=True).status_code == 202
    assert client.get("/v1/manifests/m1", headers=auth()).json["status"] == "accepted"  # type: ignore[index]
    assert client.put("/v1/manifests", data=b"{}", headers=auth()).status_code == 405
    assert seen == ["/v1/manifests", "/v1/manifests/m1", "/v1/manifests"]


def test_an_unexpected_error_is_a_500_without_trace_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    client = service()
    coordinator = runtime(client.application).coordinator

    def broken(_: Any) -> Any:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(coordinator, "submit", broken)
    with caplog.at_level(logging.ERROR):
        r = post(client, body(manifest()), auth(), chunked=False)
    assert r.status_code == 500
    assert r.json == {"error": {"code": "internal", "message": "internal error; see the service log", "details": {}}}
    assert "ZeroDivisionError" in caplog.text


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("application/problem+json", True),
        ("text/json", False),
        ("application/x-www-form-urlencoded", False),
        ("", False),
    ],
)
def test_is_json_decides_as_flask(content_type: str, expected: bool) -> None:
    client = service()
    with client.application.test_request_context(headers={"Content-Type": content_type}):
        assert request.is_json is expected
    assert is_json(content_type) is expected
