"""The service's gunicorn worker: gthread's thread pool, with slow clients kept off its threads and
gunicorn's own error answers in the service's JSON error shape.

gunicorn's ``gthread`` worker gives a connection to a request thread as soon as its first byte
arrives; the thread then blocks until the request header is complete, for as long as the client
takes. Nine clients sending a header slowly hold eight threads and ``/healthz`` stops answering.
:class:`LakegateWorker` reads each request in its event loop instead, without blocking, and hands
the connection to a thread once the header (and a ``Content-Length`` body of at most
``body_bytes``) is there. A request that is not complete ``timeout`` seconds after the connection
opened (or woke up from keep-alive) is answered 408 and closed by the loop; a thread that still
reads the socket (a chunked body, a body behind ``Expect: 100-continue``) stops at the same
deadline (:class:`RequestTimeoutError`, a 408 from the app's error handler).

gunicorn answers the requests it cannot parse (``Worker.handle_error``) with HTML; this worker
answers them as ``{"error": {"code", "message", "details"}}`` with the class of
:mod:`commit_service.errors` that fits (:func:`request_error`).

gunicorn's settings are read per request through its ``Config`` object's ``__getattr__``; the
worker reads them once (:class:`SettledConfig`).

:func:`worker_class` builds the class (carrying its :class:`ReadLimits`) for
:func:`commit_service.serving.options.gunicorn_options`; gunicorn's arbiter runs it in the worker process.
Plain HTTP only: TLS, when wanted, terminates in front of the service.
"""

from __future__ import annotations

import errno
import json
import re
import selectors
import socket
import ssl
import time
from dataclasses import dataclass
from enum import Enum
from functools import partial
from http import HTTPStatus
from typing import Any, ClassVar

from gunicorn import util
from gunicorn.http import errors as parse_errors
from gunicorn.workers.gthread import TConn, ThreadWorker

from commit_service.errors import (
    ConfigError,
    ForbiddenError,
    HeadersTooLargeError,
    LakegateError,
    MalformedRequestError,
    RequestTimeoutError,
    UnsupportedTransferCodingError,
)
from lakegate_core.status import ErrorBody

RECV_BYTES = 65536
HEADER_END = b"\r\n\r\n"
CONTENT_LENGTH = re.compile(
    rb"\r\ncontent-length[ \t]*:[ \t]*(\d{0,18})[ \t]*(?=\r\n)|\r\ncontent-length", re.IGNORECASE
)
EXPECT = re.compile(rb"\r\nexpect[ \t]*:", re.IGNORECASE)
INTERNAL = "internal error; see the service log"


@dataclass(frozen=True)
class ReadLimits:
    """How long and how much the worker's event loop waits for a request before a thread takes it."""

    timeout: float = 15.0  # seconds from the connection's first wait to the request's last byte
    header_bytes: int = 64 * 1024  # more than this without the header's end is answered 431
    body_bytes: int = 1 << 20  # a Content-Length body up to this arrives in the loop; a larger one is refused

    def __post_init__(self) -> None:
        if self.timeout <= 0 or self.header_bytes < 1024 or self.body_bytes < 0:
            raise ConfigError(f"invalid read limits: {self}")


class Arrival(Enum):
    """How far a request has arrived on a connection (:func:`arrival`)."""

    WAITING = "waiting"
    COMPLETE = "complete"  # a thread can serve it without waiting for the client
    HEADER_TOO_LARGE = "header_too_large"


def arrival(data: bytes | bytearray, limits: ReadLimits) -> Arrival:
    """Whether ``data``, what a connection has sent so far, holds a request a thread can take.

    Only the hand-off's timing depends on it: gunicorn's parser still reads the request from these
    bytes and answers whatever is malformed."""
    end = data.find(HEADER_END)
    if end < 0:
        return Arrival.HEADER_TOO_LARGE if len(data) > limits.header_bytes else Arrival.WAITING
    header = data[: end + 2]
    if EXPECT.search(header):
        return Arrival.COMPLETE  # the thread answers 100 Continue, then reads the body
    lengths = CONTENT_LENGTH.findall(header)  # b"" for a Content-Length header whose value is not digits
    if len(lengths) != 1 or not lengths[0] or int(lengths[0]) > limits.body_bytes:
        return Arrival.COMPLETE  # no body, a chunked one, one the app refuses unread, or a header the parser refuses
    return Arrival.COMPLETE if len(data) - end - len(HEADER_END) >= int(lengths[0]) else Arrival.WAITING


def request_error(exc: BaseException) -> LakegateError:
    """The service's error for what gunicorn raised while reading a request."""
    if isinstance(exc, LakegateError):
        return exc
    detail = str(exc)[:200]
    if isinstance(exc, (parse_errors.LimitRequestLine, parse_errors.LimitRequestHeaders)):
        return HeadersTooLargeError(f"request line or header too large: {detail}")
    if isinstance(exc, parse_errors.UnsupportedTransferCoding):
        return UnsupportedTransferCodingError(f"unsupported Transfer-Encoding: {detail}")
    if isinstance(exc, parse_errors.ForbiddenProxyRequest):
        return ForbiddenError("request forbidden")
    if isinstance(exc, parse_errors.ParseException) and not isinstance(exc, parse_errors.ConfigurationProblem):
        return MalformedRequestError(f"malformed request: {detail}")
    if isinstance(exc, ssl.SSLError):
        return MalformedRequestError("malformed request: TLS error")
    return LakegateError(INTERNAL)


def error_response(error: LakegateError) -> bytes:
    """A whole HTTP/1.1 answer with ``error`` as the service's JSON error body; the connection closes."""
    body = json.dumps(ErrorBody.of(error).to_dict()).encode()
    head = (
        f"HTTP/1.1 {error.status} {HTTPStatus(error.status).phrase}\r\n"
        f"Connection: close\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class _Reading:
    """A request arriving on a connection, read by the event loop."""

    __slots__ = ("data", "deadline")

    def __init__(self, deadline: float) -> None:
        self.data = bytearray()
        self.deadline = deadline


class DeadlineSocket:
    """The socket as a request thread's parser reads it: first what the event loop already read
    (``arrived``), then the socket, where no read waits past the request's deadline.

    What arrived is handed out as a socket would, at most ``size`` bytes a read, rather than put
    back into gunicorn's unreader whole: its body reader takes 1 KiB at a time and puts the rest
    back, copying all that is left, so a 2 MB manifest handed over whole was copied about 2,000
    times (a tenth of a second of a 10,000-file manifest's acceptance)."""

    def __init__(self, sock: socket.socket, deadline: float, arrived: bytes = b"") -> None:
        self.sock = sock
        self.deadline = deadline
        self.expired = False
        self._arrived = memoryview(arrived)
        self._at = 0

    def recv(self, size: int) -> bytes:
        if self._at < len(self._arrived):
            piece = bytes(self._arrived[self._at : self._at + size])
            self._at += len(piece)
            return piece
        remaining = self.deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
            return self.sock.recv(size)
        except TimeoutError:
            self.expired = True
            raise RequestTimeoutError("the request did not arrive in time (server.read_timeout_seconds)") from None
        finally:
            self.sock.settimeout(None)


class SettledConfig:
    """gunicorn's settings as plain attributes, read once when the worker starts.

    gunicorn's ``Config`` answers each setting through ``__getattr__`` and the setting's object;
    its parser, environ, response and access log read about 30 of them per request, about 5% of a
    one-file manifest's interpreter time. The worker process never changes a setting (a reload
    starts a new worker), so each one is copied as ``Config`` answers it (a property of the same
    name, such as ``logger_class`` or ``sendfile``, wins, as it does there), with ``is_ssl``;
    anything else (methods, other properties) goes to the real ``Config``."""

    def __init__(self, cfg: Any) -> None:
        self._cfg = cfg
        for name in cfg.settings:
            setattr(self, name, getattr(cfg, name))
        self.is_ssl = cfg.is_ssl

    def __getattr__(self, name: str) -> Any:  # only what was not copied
        return getattr(self._cfg, name)


class LakegateWorker(ThreadWorker):  # type: ignore[misc]
    """gthread with requests read by the event loop (see the module's docstring)."""

    limits: ClassVar[ReadLimits] = ReadLimits()
    cfg: Any  # gunicorn's Config, then its SettledConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the parser, environ, response and access log read the settings per request
        self.cfg = self.log.cfg = SettledConfig(self.cfg)
        self._reading: dict[TConn, _Reading] = {}  # in deadline order; only the loop's thread touches it
        self._paused: dict[Any, Any] = {}  # listener -> its accept callback, while at max connections

    @classmethod
    def check_config(cls, cfg: Any, log: Any) -> None:
        super().check_config(cfg, log)
        if cfg.is_ssl:
            raise ConfigError("the Lakegate worker serves plain HTTP; terminate TLS in front of it")

    # -- the event loop's side ---------------------------------------------------------------

    def accept(self, server: Any, listener: Any) -> None:
        try:
            sock, client = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        conn = TConn(self.cfg, sock, client, server)  # non-blocking until a thread takes it
        self.nr_conns += 1
        self._reading[conn] = _Reading(time.monotonic() + self.limits.timeout)
        with self._lock:
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_client_socket_readable, conn))

    def on_client_socket_readable(self, conn: TConn, client: Any) -> None:
        reading = self._reading.get(conn)
        if reading is None:  # a kept-alive connection: its next request begins
            with self._lock:
                try:
                    self._keep.remove(conn)
                except ValueError:
                    return  # closed by murder_keepalived meanwhile
            reading = self._reading[conn] = _Reading(time.monotonic() + self.limits.timeout)
        try:
            chunk = conn.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(conn)
            return
        reading.data += chunk
        state = arrival(reading.data, self.limits)
        if state is Arrival.HEADER_TOO_LARGE:
            self._close(conn, HeadersTooLargeError(f"request header larger than {self.limits.header_bytes} bytes"))
        elif state is Arrival.COMPLETE:
            self._hand_off(conn, reading)

    def _hand_off(self, conn: TConn, reading: _Reading) -> None:
        del self._reading[conn]
        with self._lock:
            self.poller.unregister(conn.sock)
        conn.init()  # blocking socket; the parser is made on the connection's first request
        conn.parser.unreader.sock = DeadlineSocket(conn.sock, reading.deadline, bytes(reading.data))
        self._wrap_future(self.tpool.submit(self.handle, conn), conn)

    def murder_keepalived(self) -> None:
        """gthread's per-iteration housekeeping; also closes the requests past their deadline."""
        super().murder_keepalived()
        now = time.monotonic()
        while self._reading:
            conn, reading = next(iter(self._reading.items()))
            if reading.deadline > now:
                break
            timeout = RequestTimeoutError(
                f"the request did not arrive within {self.limits.timeout:g} s (server.read_timeout_seconds)"
            )
            self._close(conn, timeout if reading.data else None)
        at_capacity = self.nr_conns >= self.worker_connections
        self._accept(not at_capacity)
        if at_capacity:
            self._read_at_capacity()

    def _accept(self, accepting: bool) -> None:
        """Poll the listeners or not: at ``worker_connections`` a pending connection would keep the
        poller ready (and the loop spinning) though none may be accepted."""
        if accepting == (not self._paused):
            return
        with self._lock:
            if accepting:
                for listener, callback in self._paused.items():
                    self.poller.register(listener, selectors.EVENT_READ, callback)
                self._paused.clear()
            else:
                self._paused = {sock: self.poller.unregister(sock).data for sock in self.sockets}

    def _read_at_capacity(self) -> None:
        """At ``worker_connections`` gthread's loop stops polling: keep the arriving requests moving
        (the listeners are out of the poller) until connections close."""
        for key, _ in self.poller.select(0 if self.futures else 0.5):
            key.data(key.fileobj)

    def _close(self, conn: TConn, error: LakegateError | None = None) -> None:
        self._reading.pop(conn, None)
        self.nr_conns -= 1
        with self._lock:
            try:
                self.poller.unregister(conn.sock)
            except (KeyError, ValueError, OSError):
                pass
        if error is not None:
            self.log.info("closing connection from %s: %s", conn.client[0] if conn.client else "?", error.message)
            try:
                conn.sock.send(error_response(error))  # non-blocking and best effort: the client is slow
            except OSError:
                pass
        conn.close()

    # -- a request thread's side -------------------------------------------------------------

    def handle(self, conn: TConn) -> tuple[bool, TConn]:
        keepalive, conn = super().handle(conn)
        reader = conn.parser.unreader.sock
        return keepalive and not (isinstance(reader, DeadlineSocket) and reader.expired), conn

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        """gunicorn's answer to a request it could not read or serve, as the service's JSON error."""
        error = request_error(exc)
        if error.status >= 500:
            self.log.exception("Error handling request %s", getattr(req, "uri", "(no URI read)"))
        else:
            self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        try:
            util.write_nonblock(client, error_response(error))
        except OSError:
            self.log.debug("Failed to send error message.")


def worker_class(limits: ReadLimits) -> type[LakegateWorker]:
    """A worker class reading requests within ``limits`` (gunicorn's ``worker_class`` takes a class)."""
    return type("LakegateWorker", (LakegateWorker,), {"limits": limits})
