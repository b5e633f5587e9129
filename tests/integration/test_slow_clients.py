"""The service's HTTP transport as users run it (``lakegate-service`` under gunicorn, its own worker),
without Spark: slow clients hold no request thread, a request that does not arrive in time is a
408, and what gunicorn answers itself is the service's JSON error.

Each service here has an empty jars directory, so its start-up fails at once (no JVM) while its
HTTP side runs: ``/healthz`` answers, ``/readyz`` says why it failed.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lakegate_stack.procfs import process_cpu_seconds
from lakegate_stack.slowclients import SlowClients, healthz_latency, probe_service
from tests.service_helpers import ServiceProcess

SLOW = 50
BUDGET = 2.0  # seconds /healthz may take with SLOW slow connections open


def spawn_bare(workdir: Path, name: str, **server: Any) -> ServiceProcess:
    """A Spark-less service with the given ``server:`` keys, its HTTP side up."""
    svc = probe_service(workdir, server, name=name)
    svc.spawn()
    try:
        return svc.wait_healthy()
    except BaseException:
        svc.stop()
        raise


@pytest.fixture
def bare_service(tmp_path: Path) -> Iterator[Callable[..., ServiceProcess]]:
    """Starts Spark-less services with the given ``server:`` keys; stops them after the test."""
    started: list[ServiceProcess] = []

    def start(**server: Any) -> ServiceProcess:
        started.append(spawn_bare(tmp_path, f"service-{len(started)}", **server))
        return started[-1]

    yield start
    for svc in started:
        svc.stop()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """One Spark-less service with the default ``server:`` settings, for the whole module."""
    svc = spawn_bare(tmp_path_factory.mktemp("transport"), "service")
    yield svc
    svc.stop()


def exchange(port: int, data: bytes, timeout: float = 10) -> tuple[str, dict[str, str], bytes]:
    """Send raw bytes; read until the server closes (bounded by ``timeout``): status line, headers, body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body


@pytest.mark.parametrize("body", [False, True], ids=["slow-header", "slow-body"])
def test_healthz_answers_while_50_slow_clients_are_open(
    bare_service: Callable[..., ServiceProcess], body: bool
) -> None:
    svc = bare_service(threads=4)  # far fewer threads than slow clients
    latencies = []
    with SlowClients("127.0.0.1", svc.port, SLOW, interval=0.5, body=body) as slow:
        for _ in range(6):  # timed across several rounds of the slow clients' sending
            slow.wait_round()
            latencies += [healthz_latency(svc.url, timeout=BUDGET) for _ in range(3)]
        assert slow.closed_by_server == 0, "the slow connections must stay open while /healthz is timed"
    assert all(t is not None and t < BUDGET for t in latencies), latencies
    assert svc.process.running()


def test_a_request_that_does_not_arrive_in_time_is_a_json_408(bare_service: Callable[..., ServiceProcess]) -> None:
    svc = bare_service(read_timeout_seconds=1.5)
    started = time.monotonic()
    status, headers, body = exchange(svc.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n")
    waited = time.monotonic() - started
    assert status == "HTTP/1.1 408 Request Timeout" and 1.4 < waited < 5, (status, waited)
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "request_timeout"
    # a slow body past the deadline too, and the service still answers
    status, _, body = exchange(
        svc.port,
        b"POST /v1/manifests HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    )
    assert status.startswith("HTTP/1.1 408") and json.loads(body)["error"]["code"] == "request_timeout"
    assert healthz_latency(svc.url, timeout=BUDGET) is not None


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"GARBAGE\r\n\r\n", 400, "malformed_request"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n", 400, "malformed_request"),
        (b"GET /healthz HTTP/7.1\r\nHost: x\r\n\r\n", 400, "malformed_request"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 431, "headers_too_large"),
        (b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 431, "headers_too_large"),
        (
            b"POST /v1/manifests HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: bogus\r\n\r\n",
            501,
            "unsupported_transfer_coding",
        ),
    ],
    ids=["request-line", "header-name", "http-version", "header-field", "long-uri", "transfer-coding"],
)
def test_what_gunicorn_answers_itself_is_json(
    service: ServiceProcess, request_bytes: bytes, status: int, code: str
) -> None:
    line, headers, body = exchange(service.port, request_bytes)
    assert line.startswith(f"HTTP/1.1 {status} "), (line, body)
    assert headers["content-type"] == "application/json" and int(headers["content-length"]) == len(body)
    assert json.loads(body)["error"]["code"] == code
    assert b"<html" not in body


def test_readyz_says_why_start_up_failed_in_one_line(service: ServiceProcess) -> None:
    deadline = time.monotonic() + 30
    while (ready := json.loads(exchange(service.port, b"GET /readyz HTTP/1.0\r\n\r\n")[2]))["status"] == "starting":
        assert time.monotonic() < deadline, "start-up neither failed nor finished"
        time.sleep(0.1)
    assert ready["status"] == "failed" and ready["error"]["code"] == "spark_setup"
    assert ready["error"]["message"].startswith("no jars in ") and "\n" not in ready["error"]["message"]


def test_at_max_connections_the_worker_waits_without_spinning(bare_service: Callable[..., ServiceProcess]) -> None:
    svc = bare_service(threads=2, max_connections=10, read_timeout_seconds=3)
    arbiter = svc.process.pid
    assert arbiter is not None
    (worker,) = (int(p) for p in Path(f"/proc/{arbiter}/task/{arbiter}/children").read_text().split())
    with SlowClients("127.0.0.1", svc.port, 15, interval=0.5):  # 10 held, 5 in the listen backlog
        before = process_cpu_seconds(worker)
        started = time.monotonic()
        latency = healthz_latency(svc.url, timeout=15)  # queued until the read deadline frees connections
        spent = process_cpu_seconds(worker) - before
        elapsed = time.monotonic() - started
    assert latency is not None, "/healthz was never answered"
    assert spent < 0.5 * elapsed, f"the worker burnt {spent:.2f} s of CPU in {elapsed:.2f} s at max connections"
