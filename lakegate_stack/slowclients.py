"""Slow clients for the service's transport tests and ``scripts/bench-slowclients``.

:class:`SlowClients` holds connections that send a request header one line at a time and never
the blank line that ends it (a "slow loris"); :func:`healthz_latency` times one ``/healthz``
request on a fresh connection while they are open.
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import Any

import requests

from lakegate_stack.services import ServiceProcess

logger = logging.getLogger(__name__)


HEADER = b"GET /healthz HTTP/1.1\r\nHost: slow-client\r\n"
BODY_HEADER = (
    "POST /v1/manifests HTTP/1.1\r\nHost: slow-client\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n"
)


class SlowClients:
    """``count`` connections to ``host:port``, each sending a little more every ``interval``
    seconds: one more header line and never the header's end (``body=False``), or a complete
    header and then the body's bytes one at a time (``body=True``). A connection the server closes
    is reopened, as an attacker would, so ``count`` stay open; the status line the server answered
    before closing one is counted in ``answers``. ``token``: a bearer token for the slow bodies (a
    ready service reads the body of an authorised ``POST /v1/manifests``; it refuses others unread).

    Use as a context manager (or :meth:`start` / :meth:`stop`); the sending runs in one thread."""

    def __init__(
        self, host: str, port: int, count: int, interval: float = 1.0, body: bool = False, token: str | None = None
    ) -> None:
        self.host, self.port, self.count, self.interval, self.body = host, port, count, interval, body
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self._first = (BODY_HEADER + auth + "\r\n").encode() if body else HEADER
        self.opened = 0  # connections opened, reopenings included
        self.closed_by_server = 0
        self.answers: Counter[str] = Counter()  # e.g. "HTTP/1.1 408 Request Timeout"
        self.rounds = 0  # sending rounds done (every connection sent a little more)
        self._round_done = threading.Condition()
        self._socks: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> SlowClients:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> SlowClients:
        """Open every connection and send its first, partial header; returns once all are open."""
        self._socks = [self._open() for _ in range(self.count)]
        self._thread = threading.Thread(target=self._run, name="slow-clients", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for sock in self._socks:
            sock.close()
        self._socks = []

    def wait_round(self, timeout: float = 30) -> int:
        """Block until the next sending round is done; its number."""
        with self._round_done:
            target = self.rounds + 1
            if not self._round_done.wait_for(lambda: self.rounds >= target, timeout):
                raise TimeoutError(f"slow clients: no sending round within {timeout}s")
            return self.rounds

    def _open(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=5)
        sock.sendall(self._first)
        self.opened += 1
        return sock

    def _run(self) -> None:
        line = 0
        while not self._stop.wait(self.interval):
            line += 1
            readable, _, _ = select.select(self._socks, [], [], 0)
            for sock in readable:  # the server answered (and closes) or closed
                self._server_closed(sock)
            for i, sock in enumerate(self._socks):
                try:
                    if sock in readable:
                        raise ConnectionResetError
                    sock.sendall(b" " if self.body else f"X-Slow-{line}: {line}\r\n".encode())
                except OSError:
                    sock.close()
                    try:
                        self._socks[i] = self._open()
                    except OSError as exc:  # the server's backlog is full: try again next round
                        logger.debug("reopen failed: %s", exc)
            with self._round_done:
                self.rounds += 1
                self._round_done.notify_all()

    def _server_closed(self, sock: socket.socket) -> None:
        self.closed_by_server += 1
        try:
            data = sock.recv(4096)
        except OSError:
            return
        if data:
            self.answers[data.split(b"\r\n", 1)[0].decode("latin-1")] += 1


def healthz_latency(url: str, timeout: float) -> float | None:
    """Seconds one ``GET /healthz`` took on a fresh connection, or None when it failed or timed out."""
    start = time.monotonic()
    try:
        ok = requests.get(f"{url}/healthz", timeout=timeout).status_code == 200
    except requests.RequestException:
        ok = False
    return time.monotonic() - start if ok else None


def probe_service(
    workdir: Path, server: dict[str, Any], *, name: str = "service", with_spark: bool = False
) -> ServiceProcess:
    """A one-table service to probe the HTTP side with (not spawned); without Spark unless asked
    (an empty jars dir: ``/healthz`` answers while the start-up fails)."""
    spark: dict[str, Any] = {}
    if not with_spark:
        (workdir / "no-jars").mkdir(parents=True, exist_ok=True)
        spark = {"jars_dir": str(workdir / "no-jars"), "ui_enabled": False}
    return ServiceProcess(
        workdir,
        [{"name": "probe", "path": str(workdir / "lake" / "probe"), "topics": ["probe"]}],
        [f"file://{workdir}/lake/"],
        name=name,
        server=server,
        spark=spark,
    )
