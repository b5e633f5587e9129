"""The whole local stack in one object, and the ``python -m lakegate_stack`` command behind the demo.

:class:`LocalStack` starts, in order, the S3 server, the Kafka broker and one or more Connect
workers, each on free loopback ports with logs under ``workdir``, and stops them in reverse. The
workers run the storage sink plugin, and any other Connect plugin group named in ``plugins`` (the
benchmark adds Apache Iceberg's sink, :mod:`lakegate_stack.iceberg_peer`).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from lakegate_stack import artifacts
from lakegate_stack.connect import SINK_PLUGIN_GROUP, ConnectWorker
from lakegate_stack.errors import StackError
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import ACCESS_KEY, SECRET_KEY, S3Server

logger = logging.getLogger(__name__)

STACK_GROUPS = ("kafka", "connect", "s3-sink")


class LocalStack:
    """S3 server + Kafka + Connect worker(s), owned by the demo or a script; a context manager."""

    def __init__(
        self,
        workdir: Path,
        *,
        connect_workers: int = 1,
        buckets: tuple[str, ...] = ("landing",),
        plugins: tuple[str, ...] = (SINK_PLUGIN_GROUP,),
    ) -> None:
        self.workdir = workdir
        self.plugins = plugins
        self.connect_workers = connect_workers
        self.buckets = buckets
        self.s3: S3Server | None = None
        self.kafka: KafkaBroker | None = None
        self.workers: list[ConnectWorker] = []

    def start(self) -> LocalStack:
        for name in STACK_GROUPS:
            artifacts.jars_of(name)
        try:
            self.s3 = S3Server(self.workdir).start()
            for bucket in self.buckets:
                self.s3.create_bucket(bucket)
            self.kafka = KafkaBroker(self.workdir / "kafka").start()
            for i in range(1, self.connect_workers + 1):
                worker = ConnectWorker(
                    self.workdir / "connect", self.kafka.bootstrap_servers, name=f"connect-{i}", plugins=self.plugins
                )
                self.workers.append(worker.start())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for worker in reversed(self.workers):
            worker.stop()
        self.workers.clear()
        for svc in (self.kafka, self.s3):
            if svc is not None:
                svc.stop()

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def describe(self) -> str:
        assert self.s3 and self.kafka
        lines = [
            f"S3 server      {self.s3.endpoint}  (access key {ACCESS_KEY!r}, secret {SECRET_KEY!r}, "
            f"path-style; buckets: {', '.join(self.buckets)})",
            f"Kafka          {self.kafka.bootstrap_servers}",
        ]
        lines += [f"Connect REST   {w.url}  (worker {w.name})" for w in self.workers]
        lines.append(f"Logs           {self.workdir}/*.log, {self.workdir}/kafka, {self.workdir}/connect")
        return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lakegate_stack",
        description="Bring up the local Lakegate stack (S3 server, Kafka, Kafka Connect with the S3 "
        "sink plugin) on loopback, print where everything is, and stop it all on Ctrl-C.",
    )
    parser.add_argument("--workdir", type=Path, help="where configs, data and logs go (default: a temp dir)")
    parser.add_argument("--connect-workers", type=int, default=1, help="Connect workers in one group (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the workdir after stopping")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lakegate-stack-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    started = time.monotonic()
    try:
        with LocalStack(workdir, connect_workers=args.connect_workers) as stack:
            print(
                f"\nLakegate local stack is up ({time.monotonic() - started:.0f}s):\n{stack.describe()}\n"
                "Press Ctrl-C to stop everything.",
                flush=True,
            )
            while all(w.process and w.process.running() for w in stack.workers):
                time.sleep(1)
            print("a Connect worker exited; stopping the stack", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
        return 0
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
