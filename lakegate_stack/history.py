"""Spark's History Server for the local stack: serves the UIs of stopped applications (the commit
service's Spark, with its "Lakegate" tab) from an event log directory.

One JVM running ``org.apache.spark.deploy.history.HistoryServer`` on pyspark's own jars plus the
``log-store`` group's jar (which holds ``io.lakegate.spark.ui.LakegateHistoryPlugin``), as a user runs
it with ``SPARK_DAEMON_CLASSPATH=<that jar> $SPARK_HOME/sbin/start-history-server.sh``. Used by the
Spark UI tests and ``scripts/history-server``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import requests

from lakegate_stack import artifacts
from lakegate_stack.process import ManagedProcess, free_port, java_command, write_log4j2_config

logger = logging.getLogger(__name__)

MAIN_CLASS = "org.apache.spark.deploy.history.HistoryServer"


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


class HistoryServer:
    """One History Server reading ``log_dir`` (an event log directory, ``spark.eventLog.dir``)."""

    def __init__(self, workdir: Path, log_dir: Path, port: int | None = None, jars_dir: Path | None = None) -> None:
        self.workdir = workdir
        self.log_dir = log_dir
        self.port = port or free_port()
        self.classpath = [pyspark_jars(), *artifacts.jars_of("log-store", jars_dir)]
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> HistoryServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        props = {
            "log4j2.configurationFile": str(write_log4j2_config(self.workdir)),
            "spark.history.fs.logDirectory": self.log_dir.resolve().as_uri(),
            "spark.history.ui.port": str(self.port),
            "spark.history.fs.update.interval": "1s",
            "spark.ui.host": "127.0.0.1",  # (spark.history.store.path unset: replayed UIs kept in memory)
        }
        cmd = java_command(self.classpath, MAIN_CLASS, [], heap="512m", system_props=props)
        self.process = ManagedProcess(
            "history-server",
            cmd,
            self.workdir / "history-server.log",
            env={"SPARK_LOCAL_IP": "127.0.0.1"},
            cwd=self.workdir,
        ).start()
        self.process.wait_ready(
            lambda: requests.get(f"{self.url}/api/v1/applications", timeout=2).status_code == 200,
            timeout,
            "serving /api/v1/applications",
        )
        logger.info("history server at %s reading %s", self.url, self.log_dir)
        return self

    def applications(self) -> list[dict[str, Any]]:
        """The applications it lists (newest first), each with its ``id`` and ``attempts``."""
        response = requests.get(f"{self.url}/api/v1/applications", timeout=10)
        response.raise_for_status()
        return list(response.json())

    def stop(self) -> None:
        if self.process:
            self.process.stop()


def main(argv: list[str] | None = None) -> int:
    """``scripts/history-server``: serve the Spark UIs of stopped services from their event log."""
    import argparse
    import signal
    import threading

    parser = argparse.ArgumentParser(
        prog="history-server",
        description="Spark's History Server on an event log directory, with Lakegate's plugin: the UI of a "
        "stopped commit service, its 'Lakegate' tab included. The service must have run with "
        "spark.eventLog.enabled=true and spark.eventLog.dir=<the directory> in spark.conf.",
    )
    parser.add_argument("--log-dir", type=Path, required=True, help="the event log directory (spark.eventLog.dir)")
    parser.add_argument("--port", type=int, default=18080, help="the UI's port (default 18080)")
    parser.add_argument("--workdir", type=Path, default=Path(".lakegate-history"), help="where its log goes")
    args = parser.parse_args(argv)
    if not args.log_dir.is_dir():
        print(f"history-server: {args.log_dir} is not a directory", flush=True)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    server = HistoryServer(args.workdir, args.log_dir, args.port).start()
    print(f"History Server at {server.url} (log {args.workdir / 'history-server.log'}); Ctrl-C stops it", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
