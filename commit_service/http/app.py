"""``create_app``: the Flask application of the commit service (gunicorn loads it).

The SparkSession is never built at import time: ``create_app`` takes a committer factory and runs
the start-up in a background thread, so ``/healthz`` answers at once: every table's offsets are
read from the log files (no Spark) and ``/readyz`` turns ready; then the SparkSession starts, then
the commit loop. A Spark that cannot start turns ``/readyz`` to failed with the reason.
"""

from __future__ import annotations

import gc
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from flask import Flask

from commit_service.config import Placement, ServiceConfig, TableConfig, TableFormat, load_config
from commit_service.coordination.coordinator import Coordinator
from commit_service.delta import spark_committer_factory
from commit_service.errors import LakegateError
from commit_service.http.api import bp, register_error_handlers
from commit_service.http.intake import ManifestRoute
from commit_service.http.request_body import ServiceRequest
from commit_service.http.runtime import ServiceRuntime
from commit_service.http.status_page import init_sessions, ui
from commit_service.iceberg import iceberg_committer_factory
from commit_service.observe.lag import LagSampler, LogEnds
from commit_service.observe.metrics import ServiceMetrics
from commit_service.ports import CommitListeners, CommitterFactory, ConnectGroups, DeadLetterStore
from commit_service.spark import SparkHandle
from commit_service.spark.ui_events import SparkUiCommits
from lakegate_core.connect_group import GroupReader
from lakegate_core.status import ErrorInfo

if TYPE_CHECKING:  # pyarrow is imported only when the production service builds its reader
    from commit_service.storage.reader import StorageReader

logger = logging.getLogger(__name__)


def dead_letter_stores(storage: StorageReader) -> Callable[[TableConfig], DeadLetterStore]:
    """Each table's dead letters, as JSON objects under its ``_lakegate/dead-letters/``."""
    from commit_service.storage.dead_letters import ObjectDeadLetterStore

    return lambda table: ObjectDeadLetterStore(storage, table.root)


def service_storage(config: ServiceConfig) -> StorageReader:
    """The one storage reader of the production service (data files, logs, dead letters)."""
    from commit_service.storage.reader import StorageReader

    return StorageReader(config.spark_settings().s3, config.storage.allowed_roots)


def kafka_groups(config: ServiceConfig) -> GroupReader | None:
    """A reader of the Connect groups when the config has a ``kafka`` section (fencing on)."""
    return None if config.kafka is None else GroupReader(config.kafka.admin_factory("lakegate-service"))


def format_committer_factory(config: ServiceConfig, spark: SparkHandle, storage: StorageReader) -> CommitterFactory:
    """The production factory: each table's committer by its ``format`` (Delta or Iceberg), all
    on the process's one SparkSession."""
    delta = spark_committer_factory(config, spark, storage)
    iceberg = iceberg_committer_factory(config, spark, storage)
    return lambda table: iceberg(table) if table.format is TableFormat.ICEBERG else delta(table)


def create_app(
    config: ServiceConfig | None = None,
    *,
    config_path: Path | None = None,
    committer_factory: CommitterFactory | None = None,
    start: bool = True,
    groups: ConnectGroups | None = None,
) -> Flask:
    """Build the app. Tests pass a fake ``committer_factory``; gunicorn uses the defaults."""
    config = config or load_config(config_path)
    app = Flask("lakegate")
    app.request_class = ServiceRequest  # a chunked body past MAX_CONTENT_LENGTH is a 413, not a truncated body
    app.config["MAX_CONTENT_LENGTH"] = config.server.max_request_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]
    spark = SparkHandle()
    dead_letters = None
    if committer_factory is None:  # production: Spark, and one storage reader for everything
        spark.settings = config.spark_settings()
        storage = service_storage(config)
        committer_factory = format_committer_factory(config, spark, storage)
        dead_letters = dead_letter_stores(storage)
    groups = groups if groups is not None else kafka_groups(config)
    coordinator = Coordinator(
        config,
        committer_factory,
        groups=groups,
        dead_letters=dead_letters,
        time_offsets=groups.offsets_at if isinstance(groups, GroupReader) else None,
    )
    metrics = ServiceMetrics(coordinator.summaries)
    formats = {t.name: t.format.value for t in config.tables}
    coordinator.listener = CommitListeners(metrics, SparkUiCommits(spark, formats))
    rt = ServiceRuntime(config, coordinator, metrics, spark)
    metrics.watch_connectors(
        lambda: [(c.verdict.name, c.blocking, c.warnings) for c in (rt.doctor.last() if rt.doctor is not None else [])]
    )
    ends = LogEnds.for_kafka(config.kafka) if config.kafka is not None else None
    rt.lag = LagSampler(coordinator.summaries, ends, rt.lag_history)
    rt.init_app(app)
    app.register_blueprint(bp)
    app.register_blueprint(ui)
    init_sessions(app, config.auth.session_hours, config.auth.secure_cookie)
    register_error_handlers(app)
    # the sidecars' POST /v1/manifests, answered before Flask's contexts (commit_service.http.intake)
    app.wsgi_app = ManifestRoute(app.wsgi_app, rt, config.server.max_request_bytes)  # type: ignore[method-assign]
    if not config.auth.enabled:
        logger.warning(
            "AUTHENTICATION IS DISABLED (auth.enabled=false): anyone who reaches this port "
            "can submit files and force commits. Use this only for a local demo."
        )
    for table in config.tables:
        if table.placement is Placement.IN_PLACE_ABSOLUTE:
            logger.warning(
                "table %s: placement in_place_absolute adds files outside %s by absolute URI; delta-spark reads "
                "them, but delta-rs and the engines built on it (DuckDB, Polars, ...) cannot read this table",
                table.name,
                table.root,
            )
    if start:
        threading.Thread(target=_start, args=(rt,), name="lakegate-start", daemon=True).start()
    return app


# What a start-up failure's own message must not contain to be shown on /readyz: JVM and py4j internals.
INTERNALS = re.compile(r"py4j|Traceback|\bat [\w$.]+\(|java\.|javax\.|scala\.|org\.apache\.", re.IGNORECASE)
START_FAILED = "start-up failed; see the service log"


def start_failure(exc: BaseException) -> ErrorInfo:
    """What ``/readyz`` says about a failed start-up: a code and a short message, never a trace.

    A :class:`LakegateError` keeps its own message when it is one line of ours (e.g. "no jars in
    ...: run scripts/fetch-jars delta"); anything else (a py4j error carrying the JVM's stack
    trace, an unexpected exception) is reported generically, its details are in the log."""
    if isinstance(exc, LakegateError):
        message = exc.message.strip()
        ours = message and "\n" not in message and len(message) <= 300 and not INTERNALS.search(message)
        return ErrorInfo(exc.code, message if ours else START_FAILED)
    return ErrorInfo("start_failed", START_FAILED)


def _start(rt: ServiceRuntime) -> None:
    """Ready as soon as every table's offsets are read (from the log files: no Spark), so intake
    resumes within seconds of a restart; then the SparkSession starts, then the commit loop."""
    try:
        rt.spark.preflight()
        rt.coordinator.load()
        if rt.spark.settings is not None:
            rt.spark.ensure()
    except Exception as exc:  # reported on /readyz and in the log; the process stays up for probes
        logger.exception("start-up failed")
        rt.coordinator.ready = False
        rt.start_error = start_failure(exc)
        return
    rt.coordinator.start(rt.spark.thread_factory())
    if rt.lag is not None:
        rt.lag.start()
    settle_heap()
    logger.info("ready: %d table(s) loaded", len(rt.coordinator.tables))


GC_YOUNG_OBJECTS = 10_000  # new container objects between two young collections (Python's default: 700)


def settle_heap() -> None:
    """Tune the garbage collector once the service has started (called by :func:`_start`; the
    intake benchmark calls it too, to measure what the service runs).

    The start-up's objects (pyspark and py4j, Flask, the config: about 100,000) live as long as the
    process; frozen, out of the collector's generations, no full collection walks them again. A
    manifest of 10,000 files makes about 200,000 container objects: at Python's default a young
    collection ran every 700 of them, and their survivors moved on into collections of the older
    generations; at 10,000 the same manifest is accepted about 8% faster (scripts/bench-intake)."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_OBJECTS, *gc.get_threshold()[1:])
