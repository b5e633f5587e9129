"""The service's runtime: everything one service process holds, as one typed Flask extension.

Built by :func:`commit_service.http.app.create_app`, stored with :meth:`ServiceRuntime.init_app` (the
Flask extension pattern) and read by the HTTP handlers through :func:`runtime`, which raises a
clear error on an app that was not built by ``create_app``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from flask import Flask, current_app

from commit_service.config import ServiceConfig
from commit_service.coordination.coordinator import Coordinator
from commit_service.doctor.doctor import Doctor
from commit_service.observe.lag import LagHistory, LagSampler
from commit_service.observe.metrics import ServiceMetrics
from commit_service.spark import SparkHandle
from lakegate_core.audit import AuditReport
from lakegate_core.status import ErrorInfo

EXTENSION = "lakegate"
logger = logging.getLogger(__name__)


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
    audits: dict[str, AuditReport] = field(default_factory=dict)  # each table's last audit (the status page)
    doctor: Doctor | None = None  # the connectors' doctor (GET/POST /v1/doctor), built on first use

    def init_app(self, app: Flask) -> None:
        app.extensions[EXTENSION] = self

    @property
    def ready(self) -> bool:
        return self.coordinator.ready


def runtime(app: Flask | None = None) -> ServiceRuntime:
    """The runtime of ``app`` (default: the current app)."""
    found = (app or current_app).extensions.get(EXTENSION)
    if not isinstance(found, ServiceRuntime):
        raise RuntimeError("this Flask app has no Lakegate runtime: build it with commit_service.http.app.create_app")
    return found
