"""What a chaos run is made of: its settings (:class:`ChaosSettings`), the fault kinds, the
topics, connectors and tables it builds, and the helpers every part uses: how it waits for an outcome (:func:`wait_until`), the
sink's record of the ranges it split (:func:`claimed`), a signal to a process that may be gone."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakegate_stack import s3 as s3mod
from lakegate_stack.errors import StackError

if TYPE_CHECKING:
    pass

if TYPE_CHECKING:
    from lakegate_stack.chaos.run import ChaosRun

logger = logging.getLogger(__name__)


FAULT_KINDS = (
    "service_kill",  # SIGKILL of the service at a random moment, restart
    "service_kill_before_commit",  # SIGKILL between footer reads and the Delta commit
    "service_kill_after_commit",  # SIGKILL between the Delta commit landing and the HTTP answer
    "sidecar_kill",  # SIGKILL of a sidecar, restart
    "sidecar_zombie",  # a sidecar frozen while its worker's partitions move away, then thawed
    "worker_stop_start",  # graceful stop of a Connect worker (rebalance), start again
    "worker_kill",  # SIGKILL of a Connect worker, restart
    "task_restart",  # restart a sink task through the Connect REST API
    "sink_rewrite",  # a sink task fails after uploading: the range is re-written, an orphan stays
    "rogue_manifests",  # replayed, duplicated and reordered manifests from an outside client
    "service_unreachable",  # the sidecars cannot reach the service for 30 s
    "slow_s3",  # every S3 response delayed
)
# Kinds a run draws only when named (not in the default plan, whose seeds CI and the docs fix).
EXTRA_FAULT_KINDS = ("catalog_unreachable",)  # the Iceberg REST catalog unreachable for 30 s
ALL_FAULT_KINDS = FAULT_KINDS + EXTRA_FAULT_KINDS
# The kinds that apply to a coordinator living inside Connect (Apache Iceberg's sink, the peer of a
# ``--peer`` run): its workers stopped, killed and rebalanced, its tasks restarted, S3 slow, the
# catalog gone. The default plan of a ``--peer`` run.
PEER_FAULT_KINDS = ("worker_stop_start", "worker_kill", "task_restart", "slow_s3", "catalog_unreachable")
PARTITIONS = 6
CONNECTORS = {
    "chaos-parquet": ("a", "parquet", "snappy"),
    "chaos-jsonl": ("b", "jsonl", "gzip"),
    "chaos-upsert": ("c", "jsonl", "gzip"),
}
UPSERT_EVERY = 4  # every 4th record also changes a key of the upsert topic c
UPSERT_KEYS = 500  # the keys those changes cycle through: each is changed many times
UPSERT_TABLE = "chaos_c"  # mode: upsert, key [id]: one row per key of topic c, its last seq
ICEBERG_TABLE = "chaos.b"  # format: iceberg: topic b's records, in the run's own Iceberg REST catalog
ICEBERG_CATALOG = "chaos"  # that catalog's name in the service's (and the check's) Spark
PEER_TABLE = "peer.ab"  # a --peer run: Apache Iceberg's own sink lands topics a and b here, same catalog
PEER_TASKS = 3
S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}


class ChaosError(StackError):
    """The run could not be carried out (a fault's outcome never came, the stack did not start);
    distinct from a run that finished and found loss or duplicates."""


@dataclass(frozen=True)
class ChaosSettings:
    """One run's parameters (``scripts/chaos --help`` describes each)."""

    seed: int = 1
    records: int = 50_000
    faults: int = 10
    kinds: tuple[str, ...] = FAULT_KINDS
    rate: int = 2_000  # records per second the producer aims at
    workers: int = 3
    interval_seconds: float = 2.0  # the tables' commit interval
    outage_seconds: float = 30.0  # how long service_unreachable lasts
    slow_s3_seconds: float = 20.0
    slow_s3_delay: float = 0.2
    quiesce_timeout: float = 600.0
    offset_check: str = "required"  # the tables' orphan guard; "off" shows what it prevents
    catalog_outage_seconds: float = 30.0  # how long catalog_unreachable lasts
    peer: bool = False  # also run Apache Iceberg's Kafka Connect sink on topics a and b, same faults
    peer_quiesce_timeout: float = 300.0  # how long the end waits for the peer's table once Lakegate's caught up

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(ALL_FAULT_KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(ALL_FAULT_KINDS)}")
        if self.records < 2 * PARTITIONS * 10 or self.faults < 0 or self.rate <= 0 or not 2 <= self.workers <= 5:
            raise ValueError("records must be >= 120, faults >= 0, rate > 0, workers 2..5")


@dataclass(frozen=True)
class TableRef:
    """One of the run's tables as a Spark reader finds it: a Delta table by its ``s3a://`` URI, an
    Iceberg table by its name in the REST catalog at ``catalog_uri``."""

    name: str
    uri: str
    catalog_uri: str | None = None  # set: an Iceberg table

    def spark_ids(self, spark: Any) -> list[int]:
        """Every id of the table, read by ``spark`` (a session with Delta and Iceberg's extensions):
        delta-spark, or Iceberg's Spark runtime through the catalog (registered here, at run time)."""
        if self.catalog_uri is None:
            frame = spark.read.format("delta").load(self.uri)
        else:
            prefix = f"spark.sql.catalog.{ICEBERG_CATALOG}"
            for key, value in {
                prefix: "org.apache.iceberg.spark.SparkCatalog",
                f"{prefix}.type": "rest",
                f"{prefix}.uri": self.catalog_uri,
                f"{prefix}.cache-enabled": "false",
                f"{prefix}.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
            }.items():
                spark.conf.set(key, value)
            frame = spark.table(f"{ICEBERG_CATALOG}.{self.name}")
        return [int(r["id"]) for r in frame.select("id").collect()]


SparkCheck = Callable[[TableRef], list[int]]  # a table -> every id in it, read by Spark


def wait_until(what: str, check: Callable[[], bool], timeout: float, poll: float = 1.0) -> float:
    """Poll ``check`` until true; returns the seconds it took, raises :class:`ChaosError` at the deadline."""
    started = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - started
        except Exception as exc:  # the thing being waited for may be down: keep polling
            logger.debug("waiting for %s: %s", what, exc)
        if time.monotonic() - started > timeout:
            raise ChaosError(f"{what}: not within {timeout:.0f}s")
        time.sleep(poll)


def claimed(run: ChaosRun) -> list[str]:
    """The ranges the stand-in sink split and failed on (the ``sink_rewrite`` fault), one per line."""
    log = run.fault_dir / "claimed.log"
    return log.read_text().splitlines() if log.exists() else []


def signal_process(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
