"""``lakegate-sidecar``: follow this Kafka Connect worker's sink tasks and report their files.

Runs the round of :mod:`sidecar.loop` every ``poll_interval_seconds`` until SIGTERM/SIGINT, with a
``/healthz`` and ``/metrics`` endpoint on ``http.host:http.port``. A bad config exits with code 2
and a message naming the key; a failed round is logged, counted and retried next round. Before
the first round the preflight (:mod:`sidecar.preflight`) asks the service's doctor about the
followed connectors; with ``preflight: require`` a blocking finding exits with code 3.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from lakegate_core.connect_group import GroupReader
from lakegate_core.logsetup import setup_logging
from sidecar.client import ServiceClient
from sidecar.config import SidecarConfig, load_config
from sidecar.connect import ConnectRest
from sidecar.errors import SidecarConfigError, SidecarError
from sidecar.loop import SidecarLoop
from sidecar.metrics import SidecarMetrics, serve
from sidecar.preflight import preflight, report_connectors
from sidecar.storage import LocalLister, NamePattern, S3Lister

logger = logging.getLogger("sidecar")
EXIT_PREFLIGHT = 3  # preflight: require, and exactly once cannot hold as configured


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakegate-sidecar",
        description="Lakegate sidecar: follows this Kafka Connect worker's sink tasks, finds the data "
        "files Connect has committed, and sends their manifests to the Lakegate commit service.",
        epilog="Environment variables LAKEGATE_SIDECAR_<KEY>__<KEY> override config keys, e.g. "
        "LAKEGATE_SIDECAR_WORKER_ID=10.0.0.5:8083; ${NAME} in the file reads the environment. "
        "See docs/sidecar.md.",
    )
    parser.add_argument(
        "--config", type=Path, metavar="PATH", help="sidecar YAML config (connect, kafka, storage, service sections)"
    )
    parser.add_argument("--once", action="store_true", help="run one round, print what it did, exit")
    return parser


def build_loop(config: SidecarConfig, metrics: SidecarMetrics) -> SidecarLoop:
    st = config.storage
    pattern = NamePattern(st.naming, st.prefix)
    lister: Any = (
        S3Lister(st.bucket or "", endpoint=st.endpoint, region=st.region, path_style=st.path_style)
        if st.kind == "s3"
        else LocalLister(Path(st.directory or "."))
    )
    settings = config.loop_settings()
    connect = ConnectRest(config.connect.url)
    service = ServiceClient(config.service.url, config.service.token)
    return SidecarLoop(
        settings,
        connect=connect,
        groups=GroupReader(config.kafka.admin_factory(f"lakegate-sidecar-{settings.worker_id}")),
        lister=lister,
        pattern=pattern,
        service=service,
        metrics=metrics,
        on_health_change=lambda names: report_connectors(config, connect, service, names),
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
        metrics = SidecarMetrics(stale_after=max(60.0, 6 * config.poll_interval_seconds))
        loop = build_loop(config, metrics)
    except SidecarConfigError as exc:
        print(f"lakegate-sidecar: config error: {exc}", file=sys.stderr)
        return 2
    setup_logging(config.log_format)
    if args.once:
        report = loop.run_once()
        print(f"owned={[tuple(tp) for tp in report.owned]} sent={len(report.sent)} statuses={report.statuses}")
        return 0
    checked = preflight(
        config, ConnectRest(config.connect.url), ServiceClient(config.service.url, config.service.token)
    )
    if not checked.proceed:
        print(f"lakegate-sidecar: preflight (preflight: require): {checked.reason}", file=sys.stderr)
        for f in checked.report.blocking() if checked.report else ():
            print(f"  BLOCKING {f.connector}: {f.check.value}: {f.message}; change {f.key}: {f.fix}", file=sys.stderr)
        return EXIT_PREFLIGHT
    server = serve(metrics, config.http.host, config.http.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    logger.info(
        "lakegate-sidecar for worker %s -> %s, /healthz and /metrics on %s:%d",
        loop.worker_id,
        config.service.url,
        config.http.host,
        config.http.port,
    )
    while not stop.is_set():
        started = time.monotonic()
        try:
            loop.step()
        except SidecarError as exc:
            metrics.errors.labels(type(exc).__name__).inc()
            logger.warning("round failed (will retry): %s", exc)
        except Exception:  # never die on a surprise; the health endpoint shows staleness
            metrics.errors.labels("unexpected").inc()
            logger.exception("round failed unexpectedly")
        # rounds start every poll interval, however long each took (one that overran is followed at
        # once), and more often while a table's round catches up (SidecarLoop.next_round_at)
        stop.wait(max(0.0, loop.next_round_at(started) - time.monotonic()))
    server.shutdown()
    loop.groups.close()
    logger.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
