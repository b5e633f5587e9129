"""FaultProxy: forwarding with keep-alive, a cut (drop open connections, hold new ones), restore,
a slow link, the counters and a clean stop; against a small threaded HTTP echo server."""

from __future__ import annotations

import asyncio
import http.client
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lakegate_stack import proxy as proxy_module
from lakegate_stack.process import free_port
from lakegate_stack.proxy import FaultProxy


class _EchoHandler(BaseHTTPRequestHandler):
    """``POST <path>`` answers the body it got; the path is recorded by the server."""

    protocol_version = "HTTP/1.1"  # keep-alive
    timeout = 10  # an idle keep-alive connection ends eventually

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        assert isinstance(self.server, _EchoServer)
        with self.server.lock:
            self.server.paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


class _EchoServer(ThreadingHTTPServer):
    request_queue_size = 128

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EchoHandler)
        self.lock = threading.Lock()
        self.paths: list[str] = []


@pytest.fixture
def upstream() -> Iterator[_EchoServer]:
    server = _EchoServer()
    thread = threading.Thread(target=server.serve_forever, name="echo-upstream", daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(10)


@pytest.fixture
def proxy(upstream: _EchoServer) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", upstream.server_port, name="test") as proxy:
        yield proxy


def _connect(proxy: FaultProxy, timeout: float = 5.0) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)


def _echo(conn: http.client.HTTPConnection, body: bytes, path: str = "/echo") -> bytes:
    conn.request("POST", path, body=body)
    response = conn.getresponse()
    assert response.status == 200
    return response.read()


def _wait_until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s")
        time.sleep(0.02)


def test_forwards_both_ways_on_one_keep_alive_connection(proxy: FaultProxy, upstream: _EchoServer) -> None:
    bodies = [b"x" * 10, bytes(range(256)) * 4, b"big" * 400_000]  # the last one in many chunks
    conn = _connect(proxy)
    try:
        for body in bodies:
            assert _echo(conn, body) == body
    finally:
        conn.close()
    stats = proxy.stats()
    assert stats.connections == 1  # one client connection carried every request
    assert upstream.paths == ["/echo"] * 3
    total = sum(len(b) for b in bodies)
    assert stats.bytes_to_upstream > total and stats.bytes_to_client > total  # bodies plus headers
    assert proxy.url == f"http://127.0.0.1:{proxy.port}"


def test_cut_drops_open_connections_and_holds_new_ones(proxy: FaultProxy, upstream: _EchoServer) -> None:
    conn = _connect(proxy)
    assert _echo(conn, b"before") == b"before"
    proxy.cut()
    sent_before_cut = proxy.stats().bytes_to_upstream
    with pytest.raises(OSError) as dropped:
        _echo(conn, b"during", path="/on-the-dropped-connection")
    assert not isinstance(dropped.value, TimeoutError), "the open connection was not closed"
    conn.close()

    held = _connect(proxy, timeout=0.5)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        _echo(held, b"held", path="/held")
    assert time.monotonic() - started >= 0.45
    held.close()

    stats = proxy.stats()
    assert stats.cut and stats.held == 1 and stats.connections == 2
    assert stats.bytes_to_upstream == sent_before_cut
    assert upstream.paths == ["/echo"]


def test_restore_drops_held_connections_and_forwards_new_ones(proxy: FaultProxy, upstream: _EchoServer) -> None:
    proxy.cut()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as held:
        held.sendall(b"POST /held HTTP/1.1\r\nHost: proxy\r\nContent-Length: 0\r\n\r\n")
        _wait_until(lambda: proxy.stats().held == 1)
        proxy.restore()
        _assert_dropped(held)
    conn = _connect(proxy)
    try:
        assert _echo(conn, b"after") == b"after"
    finally:
        conn.close()
    assert upstream.paths == ["/echo"]
    assert not proxy.stats().cut


def test_slow_delays_responses_until_turned_off(proxy: FaultProxy) -> None:
    conn = _connect(proxy)
    try:
        assert _echo(conn, b"warm") == b"warm"
        proxy.slow(0.3)
        started = time.monotonic()
        assert _echo(conn, b"slow") == b"slow"
        assert time.monotonic() - started >= 0.29
        assert proxy.stats().delay_s == 0.3
        proxy.slow(0)
        assert _echo(conn, b"fast") == b"fast"
    finally:
        conn.close()
    assert proxy.stats().delay_s == 0.0
    with pytest.raises(ValueError):
        proxy.slow(-1)


def test_many_concurrent_keep_alive_clients(proxy: FaultProxy, upstream: _EchoServer) -> None:
    clients = 50
    all_open = threading.Barrier(clients, timeout=30)

    def client(i: int) -> list[bytes]:
        conn = _connect(proxy, timeout=30)
        try:
            answers = [_echo(conn, f"{i}-first".encode())]
            all_open.wait()  # every client holds an open connection now
            answers += [_echo(conn, f"{i}-{n}".encode()) for n in range(3)]
            return answers
        finally:
            conn.close()

    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(client, range(clients)))
    for i, answers in enumerate(results):
        assert answers == [f"{i}-first".encode()] + [f"{i}-{n}".encode() for n in range(3)]
    assert proxy.stats().connections == clients
    assert len(upstream.paths) == clients * 4


def test_unreachable_upstream_drops_the_client() -> None:
    # The upstream port stays bound (never listening) for the whole test: a connection to it is
    # refused, and no other socket can take it meanwhile, not even the proxy's own upstream
    # connection, which Linux could otherwise give that very port and connect to itself.
    with socket.socket() as nowhere:
        nowhere.bind(("127.0.0.1", 0))
        with FaultProxy("127.0.0.1", nowhere.getsockname()[1], name="nowhere") as proxy:
            conn = _connect(proxy)
            with pytest.raises(OSError) as dropped:
                _echo(conn, b"x")
            conn.close()
            assert not isinstance(dropped.value, TimeoutError)
            _wait_until(lambda: proxy.stats().upstream_failures == 1)


def test_stop_closes_everything_cleanly(upstream: _EchoServer, caplog: pytest.LogCaptureFixture) -> None:
    proxy = FaultProxy("127.0.0.1", upstream.server_port, name="stopped")
    with pytest.raises(RuntimeError):
        _ = proxy.port
    proxy.slow(0.01)  # faults may be set before the start
    proxy.start()
    port = proxy.port
    forwarded = _connect(proxy)
    assert _echo(forwarded, b"open") == b"open"
    proxy.cut()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as held:
        _wait_until(lambda: proxy.stats().held == 1)
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            proxy.stop()
        _assert_dropped(held)
    forwarded.close()
    proxy.stop()  # idempotent
    assert not [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.WARNING]
    stats = proxy.stats()
    assert stats.active == 0 and stats.connections == 2
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def _assert_dropped(sock: socket.socket) -> None:
    """The proxy closed ``sock`` without answering (EOF or a reset; a timeout fails)."""
    try:
        assert sock.recv(1024) == b""
    except ConnectionResetError:
        pass


class _StuckProxy(FaultProxy):
    """An upstream that never answers the connect."""

    async def _connect_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        await asyncio.Event().wait()
        return None


def test_stop_cancels_a_handler_still_connecting_quietly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(proxy_module, "SHUTDOWN_GRACE", 0.1)
    proxy = _StuckProxy("127.0.0.1", free_port(), name="stuck").start()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
        _wait_until(lambda: proxy.stats().active == 1)
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            proxy.stop()
        _assert_dropped(client)
    assert not [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.WARNING]
    assert proxy.stats().active == 0
