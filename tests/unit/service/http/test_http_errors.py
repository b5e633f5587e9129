"""The app's error surface over a fake committer (no JVM): 405 with Allow, a chunked body past the
limit, and what /readyz says about a failed start-up (never a trace)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from commit_service.config import ServiceConfig, TableConfig
from commit_service.errors import ConfigError, SparkSetupError
from commit_service.http.app import START_FAILED, create_app, start_failure
from commit_service.http.runtime import runtime
from lakegate_core.configfile import build
from tests.unit.fakes import ADMIN, CONFIG, SIDE, FakeCommitter, manifest

LIMIT = CONFIG["server"]["max_request_bytes"]  # type: ignore[index]
# What py4j puts in the message of a JVM that failed to start (abridged; the real one is ~12 KB).
JAVA_TRACE = (
    "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
    ": java.lang.NoClassDefFoundError: io/delta/sql/DeltaSparkSessionExtension\n"
    "\tat org.apache.spark.sql.SparkSession$.$anonfun$applyExtensions$1(SparkSession.scala:1234)\n"
    "\tat py4j.reflection.MethodInvoker.invoke(MethodInvoker.java:244)\n"
)


@pytest.fixture
def client() -> FlaskClient:
    committer = FakeCommitter()
    app = create_app(build(ServiceConfig, CONFIG), committer_factory=lambda t: committer, start=False)
    runtime(app).coordinator.load()
    return app.test_client()


def h(token: str = SIDE) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_405_is_json_and_says_which_methods_are_allowed(client: FlaskClient) -> None:
    r = client.delete("/healthz")
    assert r.status_code == 405 and r.mimetype == "application/json"
    assert r.json["error"]["code"] == "method_not_allowed"  # type: ignore[index]
    assert {m.strip() for m in r.headers["Allow"].split(",")} >= {"GET", "HEAD"}
    r = client.put("/v1/manifests", headers=h(), json={})
    assert r.status_code == 405 and "POST" in r.headers["Allow"]
    assert r.json["error"]["code"] == "method_not_allowed"  # type: ignore[index]


def chunked_post(client: FlaskClient, body: bytes) -> Any:
    """A body without Content-Length, as gunicorn hands over a ``Transfer-Encoding: chunked`` one."""
    return client.post(
        "/v1/manifests",
        input_stream=io.BytesIO(body),
        headers={**h(), "Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True},
    )


def padded(size: int) -> bytes:
    """A valid manifest of exactly ``size`` bytes (JSON allows trailing blanks)."""
    body = json.dumps(manifest()).encode()
    assert len(body) <= size
    return body + b" " * (size - len(body))


def test_a_chunked_body_past_the_limit_is_413_not_400(client: FlaskClient) -> None:
    r = chunked_post(client, padded(LIMIT + 1))
    assert r.status_code == 413, r.json
    assert r.json["error"]["code"] == "payload_too_large"  # type: ignore[index]
    r = chunked_post(client, padded(4 * LIMIT))
    assert r.status_code == 413 and r.json["error"]["code"] == "payload_too_large"  # type: ignore[index]
    assert client.get("/v1/tables/orders", headers=h()).json["pending_files"] == 0  # type: ignore[index]


def test_a_chunked_body_up_to_the_limit_is_read_whole(client: FlaskClient) -> None:
    r = chunked_post(client, padded(LIMIT))
    assert r.status_code == 202, r.json
    assert client.get("/v1/tables/orders", headers=h()).json["pending_files"] == 1  # type: ignore[index]
    r = chunked_post(client, b'{"manifest_id": "m2", "files": [')  # cut short: invalid JSON, not a 413
    assert r.status_code == 400


def failing_app(exc: Exception) -> Flask:
    def factory(table: TableConfig) -> Any:
        raise exc

    return create_app(build(ServiceConfig, CONFIG), committer_factory=factory)


def readyz_once_settled(app: Flask, timeout: float = 10) -> Any:
    """/readyz once start-up has ended (failed), polled within a deadline."""
    client = app.test_client()
    deadline = time.monotonic() + timeout
    while True:
        r = client.get("/readyz")
        if r.json["status"] != "starting" or time.monotonic() > deadline:  # type: ignore[index]
            return r
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (SparkSetupError(f"Spark did not start: {JAVA_TRACE}"), "spark_setup", START_FAILED),
        (RuntimeError(f"py4j.protocol.Py4JJavaError: {JAVA_TRACE}"), "start_failed", START_FAILED),
        (SparkSetupError("Spark did not start: java.lang.OutOfMemoryError"), "spark_setup", START_FAILED),
        (ConfigError("x" * 400), "config_error", START_FAILED),
        (
            SparkSetupError("no jars in /jars/delta: run `scripts/fetch-jars delta`"),
            "spark_setup",
            "no jars in /jars/delta: run `scripts/fetch-jars delta`",
        ),
    ],
)
def test_readyz_reports_a_failed_start_without_a_trace(exc: Exception, code: str, message: str) -> None:
    r = readyz_once_settled(failing_app(exc))
    assert r.status_code == 503
    assert r.json == {"status": "failed", "error": {"code": code, "message": message, "details": {}}}
    text = r.get_data(as_text=True)
    assert "java" not in text.replace("scripts/fetch-jars", "") and "py4j" not in text and "\\n" not in text


def test_readyz_says_starting_until_the_tables_load() -> None:
    committer = FakeCommitter()
    app = create_app(build(ServiceConfig, CONFIG), committer_factory=lambda t: committer, start=False)
    assert app.test_client().get("/readyz").json == {"status": "starting"}
    runtime(app).coordinator.load()
    assert app.test_client().get("/readyz").status_code == 200


def test_no_error_answer_carries_a_trace(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected exception (a py4j error, say) in a handler is a generic 500."""
    coordinator = runtime(client.application).coordinator

    def boom(*_: Any) -> Any:
        raise RuntimeError(f"py4j.protocol.Py4JJavaError: {JAVA_TRACE}")

    monkeypatch.setattr(coordinator, "commit_now", boom)
    r = client.post("/v1/tables/orders/commit", headers=h(ADMIN))
    assert r.status_code == 500
    assert r.json == {"error": {"code": "internal", "message": "internal error; see the service log", "details": {}}}


def test_start_failure_keeps_only_one_line_messages_of_ours() -> None:
    keep: Callable[[Exception], str] = lambda e: start_failure(e).message  # noqa: E731
    assert keep(SparkSetupError("no jars in /j/delta: run `scripts/fetch-jars delta`")).startswith("no jars")
    assert keep(SparkSetupError("line one\nline two")) == START_FAILED
    assert keep(SparkSetupError("failed at org.apache.spark.SparkContext.<init>(SparkContext.scala:1)")) == START_FAILED
    assert keep(ValueError("a plain message")) == START_FAILED
    assert start_failure(ValueError("x")).code == "start_failed"
