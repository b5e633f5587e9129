"""How ``lakegate-service`` runs gunicorn: every gunicorn option, from the ``server:`` config, in one place.

:func:`gunicorn_options` is pure (unit-tested); :func:`run` is called by
:func:`commit_service.cli.serve` and blocks in gunicorn's arbiter. One worker process (the single
writer holding the SparkSession) runs :class:`~commit_service.serving.worker.LakegateWorker`: gthread's
``server.threads`` request threads, with requests read by its event loop so slow clients hold no
thread. The app is built inside the worker, after the fork, so the JVM is never forked.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping
from typing import Any

from commit_service.config import ServerConfig
from commit_service.serving.worker import ReadLimits, worker_class

# gunicorn's request-header limits (its defaults but fewer fields: clients here send a handful);
# the worker's event loop answers 431 past the largest header the parser could accept under them.
REQUEST_LINE_BYTES = 4094
HEADER_FIELDS = 32
HEADER_FIELD_BYTES = 8190
HEADER_BYTES = REQUEST_LINE_BYTES + 2 + HEADER_FIELDS * (HEADER_FIELD_BYTES + 2) + 2

# Set for the worker before it loads Arrow, unless the operator set them. Arrow's allocator
# (mimalloc) asks the kernel for transparent huge pages, and the kernel then zeroes a whole 2 MiB
# page at the first touch of each region it maps: a quarter of the worker's own CPU at 5,000
# records a second into an Iceberg table went into clearing pages (perf; 1.3% without them;
# docs/performance.md). The mimalloc of pyarrow 26 (3.4.1) honours this variable; that of pyarrow
# 17 has no such option, so :func:`run` also turns them off itself, as mimalloc does (prctl). The
# Spark JVM the worker starts inherits that; a JVM uses them only with -XX:+UseTransparentHugePages.
THP_VARIABLE = "MIMALLOC_ALLOW_THP"  # also the operator's switch: a value other than 0 keeps them
PROCESS_ENV = {THP_VARIABLE: "0"}
PR_SET_THP_DISABLE = 41  # <linux/prctl.h>

WORKER_TIMEOUT_SECONDS = 300  # the worker's heartbeat (its event loop, never a request) may lag this long
GRACEFUL_TIMEOUT_SECONDS = 60  # requests in flight at SIGTERM may finish within this


def gunicorn_options(server: ServerConfig) -> dict[str, Any]:
    """gunicorn's settings for the service, from ``server:``."""
    limits = ReadLimits(
        timeout=server.read_timeout_seconds, header_bytes=HEADER_BYTES, body_bytes=server.max_request_bytes
    )
    return {
        "bind": f"{server.host}:{server.port}",
        "workers": 1,
        "worker_class": worker_class(limits),
        "threads": server.threads,
        "worker_connections": server.max_connections,
        "keepalive": server.keepalive_seconds,
        "timeout": WORKER_TIMEOUT_SECONDS,
        "graceful_timeout": GRACEFUL_TIMEOUT_SECONDS,
        "limit_request_line": REQUEST_LINE_BYTES,
        "limit_request_fields": HEADER_FIELDS,
        "limit_request_field_size": HEADER_FIELD_BYTES,
        "accesslog": None,
        "loglevel": "info",
        "preload_app": False,
    }


def process_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The :data:`PROCESS_ENV` variables ``environ`` does not set already."""
    return {key: value for key, value in PROCESS_ENV.items() if key not in environ}


def huge_pages_kept(environ: Mapping[str, str]) -> bool:
    """Whether the operator asked to keep transparent huge pages (``MIMALLOC_ALLOW_THP`` other than 0)."""
    return environ.get(THP_VARIABLE, "0") != "0"


def no_huge_pages() -> bool:
    """Turn transparent huge pages off for this process and every process it starts (inherited
    through fork and exec); False where the system has no such switch (not Linux)."""
    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def run(options: dict[str, Any], load: Callable[[], Any]) -> None:
    """Run gunicorn with ``options``; ``load`` builds the WSGI app inside the worker process
    (which inherits :func:`process_env` and, unless the operator keeps them, no huge pages: the
    worker loads Arrow and starts the JVM after the fork)."""
    from gunicorn.app.base import BaseApplication

    os.environ.update(process_env(os.environ))
    if not huge_pages_kept(os.environ):
        no_huge_pages()

    class Service(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return load()

    Service().run()
