"""gunicorn's options and the worker's pure parts: when a request has arrived, gunicorn's errors as
the service's JSON errors (the worker itself runs under gunicorn in tests/integration/test_slow_clients.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from gunicorn.config import Config
from gunicorn.http import errors as parse_errors

from commit_service.config import ServerConfig
from commit_service.errors import ConfigError, RequestTimeoutError
from commit_service.serving.options import HEADER_BYTES, gunicorn_options, huge_pages_kept, process_env
from commit_service.serving.worker import (
    Arrival,
    LakegateWorker,
    ReadLimits,
    SettledConfig,
    arrival,
    error_response,
    request_error,
)

LIMITS = ReadLimits(timeout=5, header_bytes=4096, body_bytes=100)


def test_options_come_from_the_server_section_and_gunicorn_takes_them() -> None:
    server = ServerConfig(
        host="127.0.0.1",
        port=8181,
        threads=4,
        max_request_bytes=2048,
        max_connections=200,
        read_timeout_seconds=7.5,
        keepalive_seconds=3,
    )
    options = gunicorn_options(server)
    assert options["bind"] == "127.0.0.1:8181" and options["workers"] == 1
    assert options["threads"] == 4 and options["worker_connections"] == 200 and options["keepalive"] == 3
    worker = options["worker_class"]
    assert issubclass(worker, LakegateWorker)
    assert worker.limits == ReadLimits(timeout=7.5, header_bytes=HEADER_BYTES, body_bytes=2048)
    cfg = Config()
    for key, value in options.items():
        cfg.set(key, value)
    assert cfg.worker_class is worker and cfg.threads == 4 and cfg.worker_connections == 200
    # the loop's header limit is the largest header gunicorn's parser could accept under its limits
    assert HEADER_BYTES >= cfg.limit_request_line + cfg.limit_request_fields * (cfg.limit_request_field_size + 2)


def test_the_worker_runs_without_huge_pages_unless_the_operator_says_otherwise() -> None:
    assert process_env({}) == {"MIMALLOC_ALLOW_THP": "0"}
    assert process_env({"MIMALLOC_ALLOW_THP": "1", "PATH": "/bin"}) == {}
    assert not huge_pages_kept({}) and not huge_pages_kept({"MIMALLOC_ALLOW_THP": "0"})
    assert huge_pages_kept({"MIMALLOC_ALLOW_THP": "1"})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_huge_pages_go_off_for_the_process_and_the_ones_it_starts() -> None:
    """In a child Python (the switch is for its life): off after the call, and in a process it starts."""
    code = (
        "import subprocess; from commit_service.serving.options import no_huge_pages; assert no_huge_pages(); "
        "print(subprocess.run(['grep', 'THP_enabled', '/proc/self/status'], capture_output=True, text=True).stdout)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["THP_enabled:", "0"], out


def test_the_settled_config_reads_as_gunicorns() -> None:
    """What the worker's requests read instead of gunicorn's Config: every setting's value, the
    properties the request path reads, and the Config's other properties and methods."""
    cfg = Config()
    for key, value in gunicorn_options(ServerConfig(port=8181, threads=3)).items():
        cfg.set(key, value)
    settled = SettledConfig(cfg)
    for name in cfg.settings:
        assert getattr(settled, name) == getattr(cfg, name), name
    assert (settled.threads, settled.limit_request_fields, settled.accesslog) == (3, 32, None)
    assert settled.is_ssl == cfg.is_ssl and settled.sendfile == cfg.sendfile
    assert settled.address == cfg.address and settled.ssl_options == cfg.ssl_options
    assert settled.worker_class is cfg.worker_class


def test_each_worker_class_keeps_its_own_limits() -> None:
    a = gunicorn_options(ServerConfig(read_timeout_seconds=1))["worker_class"]
    b = gunicorn_options(ServerConfig(read_timeout_seconds=2))["worker_class"]
    assert (a.limits.timeout, b.limits.timeout, LakegateWorker.limits.timeout) == (1, 2, ReadLimits().timeout)


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ({"max_connections": 8}, "server.max_connections"),
        ({"read_timeout_seconds": 0}, "server.read_timeout_seconds"),
        ({"keepalive_seconds": -1}, "server.keepalive_seconds"),
    ],
)
def test_server_limits_are_validated(server: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ServerConfig(**server)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "state"),
    [
        (b"", Arrival.WAITING),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n", Arrival.WAITING),  # slow loris: the header never ends
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", Arrival.COMPLETE),
        (b"POST /v HTTP/1.1\r\nContent-Length: 5\r\n\r\nabc", Arrival.WAITING),  # the body is on its way
        (b"POST /v HTTP/1.1\r\ncontent-length:5\r\n\r\nabcde", Arrival.COMPLETE),
        (b"POST /v HTTP/1.1\r\nContent-Length: 5000\r\n\r\n", Arrival.COMPLETE),  # the app refuses it unread
        (b"POST /v HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", Arrival.COMPLETE),
        (b"POST /v HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", Arrival.COMPLETE),  # its thread reads it
        (b"POST /v HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", Arrival.COMPLETE),  # a 400
        (b"POST /v HTTP/1.1\r\nContent-Length: five\r\n\r\n", Arrival.COMPLETE),  # a 400 too
        (b"GET / HTTP/1.1\r\nX: " + b"a" * 5000, Arrival.HEADER_TOO_LARGE),
    ],
)
def test_arrival(data: bytes, state: Arrival) -> None:
    assert arrival(data, LIMITS) is state


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (parse_errors.InvalidRequestLine("GARBAGE"), 400, "malformed_request"),
        (parse_errors.InvalidHeaderName("Bad Name"), 400, "malformed_request"),
        (parse_errors.InvalidHTTPVersion("HTTP/9"), 400, "malformed_request"),
        (parse_errors.LimitRequestLine(9000, 4094), 431, "headers_too_large"),
        (parse_errors.LimitRequestHeaders("limit request headers fields size"), 431, "headers_too_large"),
        (parse_errors.UnsupportedTransferCoding("gzip"), 501, "unsupported_transfer_coding"),
        (parse_errors.ForbiddenProxyRequest("10.0.0.1"), 403, "forbidden"),
        (parse_errors.ConfigurationProblem("bad"), 500, "internal"),
        (RequestTimeoutError("late"), 408, "request_timeout"),
        (RuntimeError("Traceback ... java.lang.Error"), 500, "internal"),
    ],
)
def test_gunicorn_errors_become_the_services_json_errors(exc: Exception, status: int, code: str) -> None:
    error = request_error(exc)
    assert (error.status, error.code) == (status, code)
    head, _, body = error_response(error).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith(f"HTTP/1.1 {status} ")
    assert "Content-Type: application/json" in lines and "Connection: close" in lines
    assert f"Content-Length: {len(body)}" in lines
    assert json.loads(body) == {"error": {"code": code, "message": error.message, "details": {}}}
    if status == 500:
        assert "java" not in error.message and "Traceback" not in error.message
