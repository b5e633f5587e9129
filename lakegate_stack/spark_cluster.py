"""A Spark standalone cluster on loopback: one master and N workers, each its own JVM on pyspark's
jars, for the commit service's ``spark.master: spark://...`` (the integration tests and
``scripts/demo --spark-cluster``).

The workers start executors for the service's application from pyspark's own Spark home, so an
executor runs the same Spark as the driver; the driver ships Lakegate's jars to them
(``spark.jars``). Tables and landing files on ``file:`` paths work here because every JVM shares
this machine's disk; on separate hosts they must be on shared storage or S3.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import requests

from lakegate_stack.history import pyspark_jars
from lakegate_stack.process import ManagedProcess, free_port, java_command, write_log4j2_config

logger = logging.getLogger(__name__)

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
EXECUTOR = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


class SparkCluster:
    """One master and ``workers`` workers of ``cores`` cores and ``memory`` each, on 127.0.0.1."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.workdir = workdir
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.ui_port = free_port()
        self.processes: list[ManagedProcess] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    def _env(self) -> dict[str, str]:
        # the workers launch executors from this Spark home (its jars/), as the driver runs them
        # (Spark's launcher needs the Scala version, which spark-class's load-spark-env.sh would set)
        return {
            "SPARK_HOME": str(pyspark_jars().parent),
            "SPARK_SCALA_VERSION": "2.13",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_NO_DAEMONIZE": "1",
        }

    def _jvm(self, name: str, main: str, args: list[str]) -> ManagedProcess:
        props = {"log4j2.configurationFile": str(write_log4j2_config(self.workdir))}
        cmd = java_command([pyspark_jars()], main, args, heap="256m", system_props=props)
        process = ManagedProcess(name, cmd, self.workdir / f"{name}.log", env=self._env(), cwd=self.workdir)
        self.processes.append(process.start())
        return process

    def start(self, timeout: float = 120.0) -> SparkCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        master = self._jvm(
            "spark-master",
            MASTER,
            ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port)],
        )
        master.wait_ready(lambda: self.state()["status"] == "ALIVE", timeout, "alive")
        for i in range(self.workers):
            work = self.workdir / f"worker-{i}"
            work.mkdir(exist_ok=True)
            args = ["--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory]
            args += ["--webui-port", str(free_port()), "--work-dir", str(work), self.master_url]
            self._jvm(f"spark-worker-{i}", WORKER, args)
        master.wait_ready(lambda: self.alive_workers() == self.workers, timeout, f"{self.workers} workers alive")
        logger.info("spark cluster at %s (%d workers), UI %s", self.master_url, self.workers, self.ui_url)
        return self

    def state(self) -> dict[str, Any]:
        """The master's own view (its UI's ``/json/``): workers, applications."""
        response = requests.get(f"{self.ui_url}/json/", timeout=5)
        response.raise_for_status()
        return dict(response.json())

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers run now (any application)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if EXECUTOR.encode() in cmdline:
                pids.append(int(entry.name))
        return sorted(pids)

    def stop(self) -> None:
        for process in reversed(self.processes):  # workers first: they take their executors down
            process.stop()
        self.processes = []


def executor_conf(memory: str = "512m", cores: int = 1, max_cores: int | None = None) -> dict[str, str]:
    """Spark properties of the service's application on the cluster: executor size, and all of
    the cluster's cores at most (``max_cores``)."""
    conf = {"spark.executor.memory": memory, "spark.executor.cores": str(cores)}
    if max_cores is not None:
        conf["spark.cores.max"] = str(max_cores)
    if os.environ.get("JAVA_HOME"):
        conf["spark.executorEnv.JAVA_HOME"] = os.environ["JAVA_HOME"]
    return conf
