"""The service's runtime: everything one service process holds, as one typed Flask extension.

Built by :func:`commit_service.app.create_app`, stored with :meth:`ServiceRuntime.init_app` (the
Flask extension pattern) and read by the HTTP handlers through :func:`runtime`, which raises a
clear error on an app that was not built by ``create_app``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app

from commit_service.config import ServiceConfig
from commit_service.coordinator import Coordinator
from commit_service.lag import LagHistory, LagSampler
from commit_service.metrics import ServiceMetrics
from commit_service.spark import SparkSettings, create_session, spark_conf
from lakegate_core.status import ErrorInfo

EXTENSION = "lakegate"
logger = logging.getLogger(__name__)


@dataclass
class SparkHandle:
    """The process's SparkSession, built once when first needed (never at import time), and its UI
    address. ``settings`` None: this process has no Spark (an app built with a fake committer)."""

    settings: SparkSettings | None = None
    session: Any = None
    ui_url: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def preflight(self) -> None:
        """What can be checked before the service says it is ready, cheaply (the jars are in the
        cache): raises :class:`~commit_service.errors.SparkSetupError`."""
        if self.settings is not None:
            spark_conf(self.settings)

    def ensure(self) -> Any:
        """The session, started on the first call (the others wait for it)."""
        with self._lock:
            if self.session is None:
                if self.settings is None:
                    raise RuntimeError("this process was built without Spark settings")
                self.session = create_session(self.settings)
                self.ui_url = self.session.sparkContext.uiWebUrl
                logger.info("Spark UI: %s", self.ui_url or "(disabled)")
            return self.session


@dataclass
class ServiceRuntime:
    """One service process: its config, coordinator, metrics, Spark, and how start-up went."""

    config: ServiceConfig
    coordinator: Coordinator
    metrics: ServiceMetrics
    spark: SparkHandle = field(default_factory=SparkHandle)
    start_error: ErrorInfo | None = None  # set when start-up failed; shown (code, short message) on /readyz
    lag_history: LagHistory = field(default_factory=LagHistory)  # the status page's plots
    lag: LagSampler | None = None  # fills lag_history; started with the commit loop

    def init_app(self, app: Flask) -> None:
        app.extensions[EXTENSION] = self

    @property
    def ready(self) -> bool:
        return self.coordinator.ready


def runtime(app: Flask | None = None) -> ServiceRuntime:
    """The runtime of ``app`` (default: the current app)."""
    found = (app or current_app).extensions.get(EXTENSION)
    if not isinstance(found, ServiceRuntime):
        raise RuntimeError("this Flask app has no Lakegate runtime: build it with commit_service.app.create_app")
    return found
