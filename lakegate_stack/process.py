"""Supervised child processes of the local stack: spawn, log to a file, wait ready, stop cleanly.

Used by :mod:`lakegate_stack.kafka`, :mod:`lakegate_stack.connect` and :mod:`lakegate_stack.s3`.
Each child runs in its own process group with its output in ``<workdir>/<name>.log``. On Linux
the child also gets ``PR_SET_PDEATHSIG`` so a killed test runner never leaves an orphan JVM, and
every live process is stopped at interpreter exit. The death signal follows the *thread* that
spawned the child: start processes from a thread that outlives them (the main thread).
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from lakegate_stack.errors import ServiceStartError

logger = logging.getLogger(__name__)

_LIVE: set[ManagedProcess] = set()
_LIVE_LOCK = threading.Lock()


LISTEN_PORTS_FROM = 15_000  # listening ports are drawn from here up to the kernel's ephemeral range
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_HANDED_OUT: set[int] = set()
_PORTS_LOCK = threading.Lock()
_PORTS_RANDOM = random.Random()


def ephemeral_ports_from() -> int:
    """The lowest port the kernel gives an outgoing connection (Linux's range file; else 32768)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, for a child to listen on, never the same twice in a process.

    Drawn from below the kernel's ephemeral range: the stack stops and starts a Connect worker or
    the service on its port (the chaos run does), and a port from that range can be taken in the
    meantime as the source port of any outgoing connection (a restarted worker failed to bind its
    REST port so in CI). Where that range leaves no room, the OS picks the port."""
    low = ephemeral_ports_from()
    tries = 200 if low - LISTEN_PORTS_FROM >= 1_000 else 0
    with _PORTS_LOCK:
        for _ in range(tries):
            port = _PORTS_RANDOM.randrange(LISTEN_PORTS_FROM, low)
            if port not in _HANDED_OUT and _bindable(host, port):
                _HANDED_OUT.add(port)
                return port
        while True:  # the OS may pick a port it picked before, now free again
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = int(sock.getsockname()[1])
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def java_command(
    classpath: Sequence[Path],
    main_class: str,
    args: Sequence[str],
    *,
    heap: str = "512m",
    system_props: dict[str, str] | None = None,
) -> list[str]:
    """``java`` with a class path of jar directories (``dir/*`` wildcards) and a bounded heap."""
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    props = [f"-D{k}={v}" for k, v in (system_props or {}).items()]
    cp = os.pathsep.join(f"{p}/*" if p.is_dir() else str(p) for p in classpath)
    return [java, f"-Xmx{heap}", "-XX:+UseSerialGC", "-Djava.awt.headless=true", *props, "-cp", cp, main_class, *args]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ManagedProcess:
    """One child process of the stack, owned by whoever started it (a fixture, the demo)."""

    def __init__(
        self,
        name: str,
        cmd: Sequence[str],
        log_path: Path,
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.cmd = list(cmd)
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **(self.env or {})}
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== {time.strftime('%H:%M:%S')} start {self.name}: {' '.join(self.cmd)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self.cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        with _LIVE_LOCK:
            _LIVE.add(self)
        logger.info("started %s (pid %s), log %s", self.name, self._proc.pid, self.log_path)
        return self

    def wait_ready(self, check: Callable[[], bool], timeout: float, what: str = "ready") -> None:
        """Poll ``check`` until true; fail fast if the process exits, with its log's tail."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise ServiceStartError(f"{self.name} exited before {what}:\n{self.log_tail()}")
            try:
                if check():
                    return
            except Exception as exc:  # a readiness probe may fail in any way until it succeeds
                logger.debug("%s not %s yet: %s", self.name, what, exc)
            time.sleep(0.25)
        raise ServiceStartError(f"{self.name} not {what} within {timeout:.0f}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_path})"
        return "\n".join(text[-lines:]) + f"\n(full log: {self.log_path})"

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the process group, SIGKILL what is left after ``timeout``."""
        proc, self._proc = self._proc, None
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if proc is None or proc.poll() is not None:
            return
        self._signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            logger.warning("%s did not stop in %.0fs; killing", self.name, timeout)
            self._signal_group(proc, signal.SIGKILL)
            proc.wait(10)
        logger.info("stopped %s", self.name)

    def kill(self) -> None:
        """SIGKILL the process group at once (a crash: nothing is flushed or closed)."""
        proc, self._proc = self._proc, None
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if proc is not None and proc.poll() is None:
            self._signal_group(proc, signal.SIGKILL)
            proc.wait(30)
            logger.info("killed %s", self.name)

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass


@atexit.register
def _stop_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for proc in live:
        proc.stop(timeout=10)


LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.zk.name = org.apache.kafka.clients
logger.zk.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
"""


def write_log4j2_config(workdir: Path) -> Path:
    """A log4j2 configuration for the stack's JVMs (INFO to stdout, which goes to the log file)."""
    path = workdir / "log4j2.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(LOG4J2_PROPERTIES)
    return path


def write_properties(path: Path, props: dict[str, object]) -> Path:
    """A Java ``.properties`` file from a dict (values rendered with ``str``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path
