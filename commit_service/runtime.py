"""The service's runtime: everything one service process holds, as one typed Flask extension.

Built by :func:`commit_service.app.create_app`, stored with :meth:`ServiceRuntime.init_app` (the
Flask extension pattern) and read by the HTTP handlers through :func:`runtime`, which raises a
clear error on an app that was not built by ``create_app``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app

from commit_service.config import ServiceConfig
from commit_service.coordinator import Coordinator
from commit_service.metrics import ServiceMetrics
from lakegate_core.status import ErrorInfo

EXTENSION = "lakegate"


@dataclass
class SparkHandle:
    """The process's SparkSession once it is built (by the first committer), and its UI address."""

    session: Any = None
    ui_url: str | None = None


@dataclass
class ServiceRuntime:
    """One service process: its config, coordinator, metrics, Spark, and how start-up went."""

    config: ServiceConfig
    coordinator: Coordinator
    metrics: ServiceMetrics
    spark: SparkHandle = field(default_factory=SparkHandle)
    start_error: ErrorInfo | None = None  # set when start-up failed; shown (code, short message) on /readyz

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
