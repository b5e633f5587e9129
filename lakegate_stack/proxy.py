"""A TCP fault proxy for the chaos tests: a partition or a slow link, switched on and off at will.

The chaos harness puts one :class:`FaultProxy` between the sidecars and the commit service and one
between everything and the S3 server (both HTTP), points the clients at :attr:`FaultProxy.url`, and
then injects faults from the test's thread while traffic flows:

* :meth:`FaultProxy.cut` models a network partition. Every open connection is dropped at once
  (aborted: a reset, nothing buffered is delivered), and while the cut lasts new connections are
  *accepted but held silently*: nothing is forwarded and nothing answered, so a client sees its
  request hang until its own timeout, as it would behind a partition (a refused connection would
  fail fast instead, which no partition does). :meth:`FaultProxy.restore` ends the cut: the held
  connections are dropped then (their clients retry on fresh ones) and new ones are forwarded again.
* :meth:`FaultProxy.slow` delays every chunk forwarded from the upstream to the client (a slow S3
  response); ``slow(0)`` turns it off.
* :meth:`FaultProxy.stats` counts connections and bytes each way, for the run's report.

The proxy runs an asyncio event loop in a daemon thread of its own; the control methods are safe
from any thread and return once the change is in effect (the cut's connections are already dropped).
Use it as a context manager, or :meth:`FaultProxy.start` / :meth:`FaultProxy.stop`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

logger = logging.getLogger(__name__)

CHUNK = 64 * 1024
CONNECT_TIMEOUT = 10.0  # seconds to reach the upstream before the client's connection is dropped
CONTROL_TIMEOUT = 10.0  # seconds a control call waits for the proxy's loop
SHUTDOWN_GRACE = 2.0  # seconds stop() lets dropped connections' handlers end before cancelling them


@dataclass(frozen=True)
class ProxyStats:
    """A snapshot of one proxy's counters since it started."""

    name: str
    connections: int  # accepted from clients, the held ones included
    held: int  # accepted while cut (never forwarded)
    active: int  # open right now (forwarded or held)
    upstream_failures: int  # connections dropped because the upstream could not be reached
    bytes_to_upstream: int  # client -> upstream
    bytes_to_client: int  # upstream -> client
    cut: bool
    delay_s: float


class _Link:
    """One forwarded connection: the client's side and, once connected, the upstream's."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.dropped = False

    def drop(self) -> None:
        """Abort both sides at once (a partition: nothing buffered is delivered)."""
        self.dropped = True
        self.client.transport.abort()
        if self.upstream is not None:
            self.upstream.transport.abort()

    def close(self) -> None:
        self.client.close()
        if self.upstream is not None:
            self.upstream.close()


class FaultProxy:
    """Forwards TCP connections from ``listen_host`` (a free port) to ``upstream_host:upstream_port``,
    with faults switchable at any time from any thread. ``name`` labels its thread, logs and stats."""

    def __init__(self, upstream_host: str, upstream_port: int, *, name: str, listen_host: str = "127.0.0.1") -> None:
        self.upstream_host, self.upstream_port = upstream_host, upstream_port
        self.name, self.listen_host = name, listen_host
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._port: int | None = None
        # Fault state and connections: changed on the loop's thread only.
        self._cut = False
        self._stopping = False
        self._delay_s = 0.0
        self._links: set[_Link] = set()
        self._held: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        # Counters: written on the loop's thread, read by stats() from any thread.
        self._lock = threading.Lock()
        self._connections = self._held_total = self._active = self._upstream_failures = 0
        self._bytes_to_upstream = self._bytes_to_client = 0

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"proxy {self.name} is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.listen_host}:{self.port}"

    # --- life cycle -------------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Bind a free port and serve from a background thread; returns once it listens."""
        if self._loop is not None:
            raise RuntimeError(f"proxy {self.name} is already started")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=self._run_loop, args=(loop,), name=f"proxy-{self.name}", daemon=True)
        self._loop, self._thread, self._stopping = loop, thread, False
        thread.start()
        try:
            self._server = asyncio.run_coroutine_threadsafe(self._listen(), loop).result(CONTROL_TIMEOUT)
        except BaseException:
            self._stop_loop()
            raise
        logger.info("proxy %s: %s -> %s:%s", self.name, self.url, self.upstream_host, self.upstream_port)
        return self

    def stop(self) -> None:
        """Drop every connection, stop listening and end the thread. Idempotent; stats stay readable."""
        loop = self._loop
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(CONTROL_TIMEOUT)
        finally:
            self._stop_loop()
        logger.info("proxy %s stopped: %s", self.name, self.stats())

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop, self._thread, self._server = None, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(CONTROL_TIMEOUT)

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _listen(self) -> asyncio.AbstractServer:
        server = await asyncio.start_server(self._handle, self.listen_host, 0, backlog=256)
        self._port = int(server.sockets[0].getsockname()[1])
        return server

    async def _shutdown(self) -> None:
        """Stop accepting, drop every connection and wait for their handlers to end. A handler
        still busy after a grace period (connecting upstream) is cancelled and ends quietly."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
        await asyncio.sleep(0)  # connections accepted just before the close start, and see _stopping
        self._drop_links()
        self._drop_held()
        if self._tasks:
            _, busy = await asyncio.wait(set(self._tasks), timeout=SHUTDOWN_GRACE)
            for task in busy:
                task.cancel()
            await asyncio.gather(*busy, return_exceptions=True)
        if self._server is not None:
            await asyncio.wait_for(self._server.wait_closed(), CONTROL_TIMEOUT)

    # --- faults -----------------------------------------------------------------------------------

    def cut(self) -> None:
        """Partition: drop every open connection; hold new ones silently until :meth:`restore`."""
        self._on_loop(self._apply_cut)
        logger.info("proxy %s: cut", self.name)

    def restore(self) -> None:
        """End the cut: drop the connections held during it, forward new ones again."""
        self._on_loop(self._apply_restore)
        logger.info("proxy %s: restored", self.name)

    def slow(self, delay_s: float) -> None:
        """Delay every chunk forwarded from the upstream to the client by ``delay_s`` (0: off)."""
        if delay_s < 0:
            raise ValueError(f"delay must be >= 0, not {delay_s}")
        self._on_loop(lambda: self._apply_delay(float(delay_s)))
        logger.info("proxy %s: upstream->client delay %.3fs", self.name, delay_s)

    def stats(self) -> ProxyStats:
        with self._lock:
            return ProxyStats(
                name=self.name,
                connections=self._connections,
                held=self._held_total,
                active=self._active,
                upstream_failures=self._upstream_failures,
                bytes_to_upstream=self._bytes_to_upstream,
                bytes_to_client=self._bytes_to_client,
                cut=self._cut,
                delay_s=self._delay_s,
            )

    def _apply_cut(self) -> None:
        with self._lock:
            self._cut = True
        self._drop_links()

    def _apply_restore(self) -> None:
        with self._lock:
            self._cut = False
        self._drop_held()

    def _apply_delay(self, delay_s: float) -> None:
        with self._lock:
            self._delay_s = delay_s

    def _drop_links(self) -> None:
        for link in list(self._links):
            link.drop()

    def _drop_held(self) -> None:
        for writer in list(self._held):
            writer.transport.abort()

    def _on_loop(self, change: Callable[[], None]) -> None:
        """Run ``change`` on the loop's thread and wait for it (directly when not running)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or threading.current_thread() is thread:
            change()
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            try:
                change()
                done.set_result(None)
            except BaseException as exc:  # handed to the calling thread
                done.set_exception(exc)

        loop.call_soon_threadsafe(run)
        done.result(CONTROL_TIMEOUT)

    # --- connections (on the loop's thread) -------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._count(connections=1, active=1, held=1 if self._cut else 0)
        try:
            if self._cut:
                await self._hold(reader, writer)
            else:
                await self._forward(reader, writer)
        except asyncio.CancelledError:
            # Only _shutdown cancels a handler. Ending normally keeps asyncio's stream callback
            # from logging the cancellation as an error (Python 3.11 asks a cancelled task for its exception).
            if not self._stopping:
                raise
        finally:
            writer.close()
            self._count(active=-1)
            if task is not None:
                self._tasks.discard(task)

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read and discard until the client gives up or the cut ends (which aborts the connection)."""
        self._held.add(writer)
        try:
            while await reader.read(CHUNK):
                pass
        except OSError:
            pass
        finally:
            self._held.discard(writer)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(writer)
        self._links.add(link)
        try:
            upstream = await self._connect_upstream()
            if upstream is None:
                return
            up_reader, link.upstream = upstream
            if link.dropped:  # cut while connecting
                link.drop()
                return
            await asyncio.gather(
                self._pump(reader, link.upstream, link, to_client=False),
                self._pump(up_reader, writer, link, to_client=True),
            )
        finally:
            self._links.discard(link)
            link.close()

    async def _connect_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            connect = asyncio.open_connection(self.upstream_host, self.upstream_port)
            return await asyncio.wait_for(connect, CONNECT_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as exc:
            logger.debug("proxy %s: upstream unreachable: %s", self.name, exc)
            self._count(upstream_failures=1)
            return None

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, link: _Link, *, to_client: bool
    ) -> None:
        """Copy ``src`` to ``dst`` until EOF, then half-close ``dst``; on an error drop the link."""
        try:
            while data := await src.read(CHUNK):
                if to_client and self._delay_s > 0:
                    await asyncio.sleep(self._delay_s)
                if to_client:  # counted before the write: whoever receives the bytes sees them counted
                    self._count(bytes_to_client=len(data))
                else:
                    self._count(bytes_to_upstream=len(data))
                dst.write(data)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()
        except OSError:
            link.drop()

    def _count(
        self,
        *,
        connections: int = 0,
        held: int = 0,
        active: int = 0,
        upstream_failures: int = 0,
        bytes_to_upstream: int = 0,
        bytes_to_client: int = 0,
    ) -> None:
        with self._lock:
            self._connections += connections
            self._held_total += held
            self._active += active
            self._upstream_failures += upstream_failures
            self._bytes_to_upstream += bytes_to_upstream
            self._bytes_to_client += bytes_to_client
