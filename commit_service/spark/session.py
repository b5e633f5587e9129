"""The SparkSession factory of the commit service: local or any master, Delta, optional s3a,
and the Iceberg catalogs of ``catalogs`` when a table is ``format: iceberg``.

Called once per process by the service (never at import time: ``create_app`` takes the factory)
and by the tests. The Delta, log store, Iceberg and hadoop-aws jars come from the project's jar cache, filled by
``scripts/fetch-jars`` (or at image build time); nothing is downloaded when a session starts.

pyspark passes every builder property to the JVM on its command line (``spark-submit --conf``),
which any local user can read (``ps``). So :func:`spark_conf` holds no secret: static S3
credentials (:func:`s3a_credentials`) are set on the live session's Hadoop configuration, before
anything opens an ``s3a://`` file system, and the Iceberg catalogs (whose uri and properties may
carry tokens and passwords) on the live session's SQL configuration, before a table is loaded. The Spark UI's listen address is no Spark property (its
Jetty binds to ``$SPARK_LOCAL_IP``, else every interface), so :func:`driver_environment` gives it
to the JVM through its environment.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commit_service.config import S3Settings, SparkSettings
from commit_service.errors import SparkSetupError
from lakegate_core.cache import default_jars_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

# Jar groups (directories under the jars dir) the service puts on Spark's class path.
DELTA_GROUP = "delta"
LOG_STORE_GROUP = "log-store"  # delta-log-store/: LocalListFromLogStore
S3A_GROUP = "hadoop-aws"
ICEBERG_GROUPS = ("iceberg", "iceberg-commit")  # Iceberg's Spark runtime, JDBC drivers; iceberg-commit/
DELTA_EXTENSIONS = "io.delta.sql.DeltaSparkSessionExtension"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ANY_HOST = ("", "0.0.0.0", "::", "[::]")  # wildcard addresses: Spark's own default, nothing to set


def spark_jars(jars_dir: Path | None, *, with_s3a: bool, with_iceberg: bool = False) -> list[Path]:
    """The Delta jars, Lakegate's log store (and hadoop-aws + AWS SDK when ``with_s3a``, Iceberg's
    when ``with_iceberg``) from the cache."""
    root = jars_dir or default_jars_dir()
    groups = (
        [DELTA_GROUP, LOG_STORE_GROUP]
        + ([S3A_GROUP] if with_s3a else [])
        + (list(ICEBERG_GROUPS) if with_iceberg else [])
    )
    jars: list[Path] = []
    for group in groups:
        found = sorted((root / group).glob("*.jar"))
        if not found:
            raise SparkSetupError(
                f"no jars in {root / group}: run `scripts/fetch-jars {' '.join(groups)}` "
                "(or set LAKEGATE_JARS_DIR to where they are)"
            )
        jars.extend(found)
    return jars


# The log store of file: tables. By default Delta (HDFSLogStore), Delta Kernel and Delta's checksum
# writer rename through Hadoop's FileContext, whose local rename runs `readlink` as a child process
# for each side of it and for each hidden .crc: 16 processes spawned by the JVM per commit (a JFR
# recording of scripts/bench --parts checkpoints), a third of a 10-file commit's time. Delta's
# LocalLogStore renames through the FileSystem API instead: it checks that the version is new and
# renames under a lock per table, so two commits of one JVM cannot both write a version (across
# processes a local rename is check-then-rename with either store). Lakegate's
# LocalListFromLogStore (delta-log-store/) is LocalLogStore with a listing that stats only the
# entries from the last checkpoint on, where Delta's stats the whole folder, 30 days of commits
# (scripts/bench-log-listing --store local). The checksum goes through Spark's FileSystem-based
# writer, which on s3a copies as the FileContext one does. Only file: paths use the log store.
LOCAL_LOG_STORE = "io.lakegate.delta.LocalListFromLogStore"
# Hadoop's local file system without its native library (pyspark ships none) sets each new file's
# permission by running `chmod` in a child process: four per commit of a file: table (the version,
# the version checksum, Hadoop's hidden .crc of each), more per checkpoint, and a commit beside a
# background checkpoint waited longer for its own (a JFR recording of scripts/bench --parts
# checkpoints). Lakegate's NioPermissionsLocalFileSystem (delta-log-store/) sets the same bits
# through java.nio; everything else is Hadoop's LocalFileSystem.
LOCAL_FILE_SYSTEM = "io.lakegate.delta.NioPermissionsLocalFileSystem"
LOCAL_FILE_SYSTEM_JAR = "-local-fs.jar"  # the log-store group's jar that holds it, and nothing else
DRIVER_CLASS_PATH = "spark.driver.extraClassPath"
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# The driver's JIT compiles a method after ten times HotSpot's default count of its runs. A service
# commits small rounds every few seconds: thousands of lukewarm methods (the AWS SDK's requests,
# Jackson, Delta's commit) cross the default counts one after another for an hour, and compiling
# them was 45% of the service's CPU at 5,000 records/s (scripts/bench --parts pipeline: 3.5 of 7.8
# CPU-s, 0.6 of 5.1 with this). Work that runs hot (a round's rewrite, a merge, a 10,000-file
# commit) crosses the higher counts within its first milliseconds and is compiled as before.
JIT_OPTIONS = "-XX:CompileThresholdScaling=10"
# The driver collects garbage with the throughput collector, not Java's default G1: a round's
# records pass through the heap once and die young, and G1's concurrent marking and refinement
# threads cost more than its short pauses save a service whose requests Python answers. An upsert
# round of 50,000 gzip JSON-lines records (scripts/bench-s3-commit --kind jsonl --keys new --files
# 15 --rows 3334 --mode upsert, the last 8 of 14 rounds of one JVM): 3.61 and 3.83 CPU-s a round
# against 4.58 and 4.72 with G1, two runs each alternated. A collector named in the driver's
# extraJavaOptions (`-XX:+UseG1GC`) replaces this one: the JVM refuses to start with two
# ("Multiple garbage collectors selected"), whichever comes last.
GC_OPTIONS = "-XX:+UseParallelGC"
COLLECTOR = re.compile(r"(?<!\S)-XX:\+Use\w+GC(?!\S)")  # -XX:+UseG1GC, -XX:+UseZGC, -XX:+UseSerialGC, ...
# The Spark UI's "Lakegate" tab (delta-log-store/, io.lakegate.spark.ui): every commit, zero-copy ones
# included, posted on the listener bus by commit_service.spark.ui_events (and so into the event log
# for the History Server, which takes the same jar).
UI_PLUGIN = "io.lakegate.spark.ui.LakegatePlugin"
PLUGINS = "spark.plugins"
LOCAL_LOG_WRITES = {
    "spark.delta.logStore.file.impl": LOCAL_LOG_STORE,
    "spark.hadoop.io.delta.kernel.logStore.file.impl": LOCAL_LOG_STORE,
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
    ),
}


def holds_class(jar: Path, name: str) -> bool:
    """Whether ``jar`` holds the class ``name`` (a dotted name); False for a file that is no jar."""
    try:
        with zipfile.ZipFile(jar) as z:
            return name.replace(".", "/") + ".class" in z.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def spark_conf(settings: SparkSettings) -> dict[str, str]:
    """Every Spark property the factory sets, none of them secret (they end up on the JVM's command
    line); pure, so it is unit-tested without a JVM."""
    jars = spark_jars(settings.jars_dir, with_s3a=settings.s3 is not None, with_iceberg=bool(settings.catalogs))
    file_system_jars = [p for p in jars if p.name.endswith(LOCAL_FILE_SYSTEM_JAR)]
    if not file_system_jars:
        raise SparkSetupError(
            f"no *{LOCAL_FILE_SYSTEM_JAR} among the {LOG_STORE_GROUP} jars (built before the file system was "
            f"added): run `scripts/fetch-jars {LOG_STORE_GROUP}`"
        )
    if not any(holds_class(p, UI_PLUGIN) for p in jars if p.parent.name == LOG_STORE_GROUP):
        raise SparkSetupError(
            f"no {UI_PLUGIN} among the {LOG_STORE_GROUP} jars (built before the Spark UI plugin was added): "
            f"run `scripts/fetch-jars {LOG_STORE_GROUP}`"
        )
    conf = {
        "spark.master": settings.master,
        "spark.app.name": settings.app_name,
        "spark.jars": ",".join(str(p) for p in jars),  # executors' tasks get the file system from here
        # and the driver from its class path, from the JVM's start: spark-submit opens the jars through it
        DRIVER_CLASS_PATH: os.pathsep.join(str(p) for p in file_system_jars),
        "spark.sql.extensions": ",".join([DELTA_EXTENSIONS] + ([ICEBERG_EXTENSIONS] if settings.catalogs else [])),
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.ui.enabled": str(settings.ui_enabled).lower(),
        "spark.ui.port": str(settings.ui_port),
        "spark.driver.memory": settings.driver_memory,
        "spark.sql.shuffle.partitions": "4",
        # VACUUM lists the table directory with this many tasks (Spark's default, 10000, turns a vacuum
        # of a small table into minutes of empty tasks on a few cores)
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "16",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Delta rebuilds a table's state (after a restart without a checksum, for checkpoints) in this
        # many tasks; its default, 50, is mostly task overhead for the service's small log replays.
        "spark.databricks.delta.snapshotPartitions": "4",
        # One SetTransaction per partition is kept in the checksum file for cheap reads.
        "spark.databricks.delta.setTransactionsInCrc.maxAllowed": "100000",
        # After each commit Delta parses every added file's statistics (JSON, in the driver) to count
        # small files per partition for its own auto compaction, which Lakegate's maintenance does
        # instead: 40% of the Delta commit of a 10,000-file round (0.25 s), and every round's share.
        # Off, Delta's auto compaction (a table's delta.autoOptimize.autoCompact) finds nothing to do.
        "spark.databricks.delta.autoCompact.recordPartitionStats.enabled": "false",
        # Every commit lists the table's _delta_log from its last checkpoint on (and the S3 log
        # store lists once more to check the new version is not there): on s3a, list from that key
        # on (ListObjectsV2 StartAfter) instead of the whole log, which keeps
        # delta.logRetentionDuration (30 days) of commits. scripts/bench-log-listing, 3,000 more
        # log objects: a commit's p50 0.26 s either way, 0.70 s listing it all. Only s3a reads it.
        "spark.hadoop.delta.enableFastS3AListFrom": "true",
        # the records a round reads with Arrow (JSON lines, JSON arrays, CSV) reach Spark as Arrow
        # batches: always as a distributed relation, converted to rows in the tasks that write them.
        # Spark's default (48 MB) turns a smaller table into a LocalRelation converted row by row on
        # the driver, in one thread: 1,000,000 JSON records took 3.8 s so, against 0.4 s
        "spark.sql.execution.arrow.localRelationThreshold": "0",
        DRIVER_JAVA_OPTIONS: f"{JIT_OPTIONS} {GC_OPTIONS}",
        **LOCAL_LOG_WRITES,
        "spark.hadoop.fs.file.impl": LOCAL_FILE_SYSTEM,
        PLUGINS: UI_PLUGIN,
    }
    if settings.local_dir is not None:
        conf["spark.local.dir"] = str(settings.local_dir / "tmp")
        conf["spark.sql.warehouse.dir"] = str(settings.local_dir / "warehouse")
        conf[DRIVER_JAVA_OPTIONS] += f" -Dderby.system.home={settings.local_dir / 'derby'}"
    if settings.s3 is not None:
        conf.update(s3a_conf(settings.s3))
    user = {str(k): str(v) for k, v in settings.conf.items()}
    user_class_path = user.pop(DRIVER_CLASS_PATH, "")  # added to the file system's jar, not instead of it
    user_plugins = user.pop(PLUGINS, "")  # added to Lakegate's UI plugin, not instead of it
    user_java = user.pop(DRIVER_JAVA_OPTIONS, "")  # after Lakegate's: the JVM takes the last of a flag given twice
    conf.update(user)
    if user_plugins:
        conf[PLUGINS] = ",".join([UI_PLUGIN, *(p for p in user_plugins.split(",") if p.strip() and p != UI_PLUGIN)])
    if user_class_path:
        conf[DRIVER_CLASS_PATH] = os.pathsep.join([conf[DRIVER_CLASS_PATH], user_class_path])
    if user_java:
        if COLLECTOR.search(user_java):  # the user's collector instead of Lakegate's, never beside it
            conf[DRIVER_JAVA_OPTIONS] = conf[DRIVER_JAVA_OPTIONS].replace(f" {GC_OPTIONS}", "", 1)
        conf[DRIVER_JAVA_OPTIONS] += f" {user_java}"
    return conf


def s3a_conf(s3: S3Settings) -> dict[str, str]:
    """The s3a file system's settings but the credentials (:func:`s3a_credentials`)."""
    conf = {
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint.region": s3.region,
        "spark.hadoop.fs.s3a.path.style.access": str(s3.path_style).lower(),
    }
    if s3.endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = s3.endpoint
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(s3.endpoint.startswith("https")).lower()
    return conf


def s3a_credentials(s3: S3Settings) -> dict[str, str]:
    """Static credentials as Hadoop properties, set by :func:`create_session` on the live session's
    Hadoop configuration (Spark copies it into every job's, so executors get them too); empty when
    the AWS environment provides them (Hadoop's default provider chain)."""
    if s3.access_key is None or s3.secret_key is None:
        return {}
    return {
        "fs.s3a.access.key": s3.access_key,
        "fs.s3a.secret.key": s3.secret_key,
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }


def driver_environment(settings: SparkSettings) -> dict[str, str]:
    """Environment variables for the driver JVM: ``SPARK_LOCAL_IP``, the one address Spark's UI
    binds to (Spark's ``WebUI.bind``), when ``ui_host`` is a single address. It is also the
    driver's default host: with a cluster master, set ``spark.driver.host`` to an address the
    executors reach."""
    host = settings.ui_host
    return {} if host is None or host in ANY_HOST else {"SPARK_LOCAL_IP": host.strip("[]")}


@contextmanager
def _environment(extra: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` plus ``extra`` while the JVM is launched (it copies the environment), then as before."""
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def create_session(settings: SparkSettings) -> SparkSession:
    """Build (or return the process's existing) SparkSession with Delta (and the Iceberg catalogs) configured."""
    conf = spark_conf(settings)
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # the service extra is not installed
        raise SparkSetupError("pyspark is not installed: pip install 'lakegate[service]'") from exc
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        with _environment(driver_environment(settings)):
            session = builder.getOrCreate()
    except Exception as exc:  # py4j/JVM start-up failures come in many types
        raise SparkSetupError(f"Spark did not start: {exc}") from exc
    if settings.s3 is not None:
        hadoop = session.sparkContext._jsc.hadoopConfiguration()
        for key, value in s3a_credentials(settings.s3).items():
            hadoop.set(key, value)
    for catalog in settings.catalogs:  # before any table is loaded: Spark builds a catalog on first use
        for key, value in catalog.spark_conf(settings.s3).items():
            session.conf.set(key, value)
    session.sparkContext.setLogLevel("WARN")
    logger.info(
        "Spark %s on %s; Spark UI at %s",
        session.version,
        settings.master,
        session.sparkContext.uiWebUrl or "(disabled)",
    )
    return session


def job_group(table: str, commit_id: str, version: int | None = None) -> str:
    """The Spark job group of one commit: ``lakegate-<table>-<commit id>`` until the commit knows
    its version, then ``lakegate-<table>-v<version>-<commit id>`` (the Spark UI's Jobs page shows it)."""
    return f"lakegate-{table}-{commit_id}" if version is None else f"lakegate-{table}-v{version}-{commit_id}"


def job_ids(spark: Any, *groups: str) -> tuple[int, ...]:
    """The Spark UI's ids of the jobs run under ``groups``, oldest first (empty if Spark forgot
    them: it keeps ``spark.ui.retainedJobs``); the status page links a commit to them."""
    try:
        tracker = spark.sparkContext.statusTracker()
        return tuple(sorted(int(j) for g in groups for j in tracker.getJobIdsForGroup(g)))
    except Exception as exc:  # only the status page's links depend on it
        logger.warning("cannot list the Spark jobs of %s: %s", groups, exc)
        return ()


@contextmanager
def job_label(spark: Any, group: str, description: str) -> Iterator[None]:
    """Label every Spark job this thread starts inside the block (the Spark UI's job group and
    description), e.g. ``lakegate commit orders v12: ...``; cleared afterwards."""
    sc = spark.sparkContext
    sc.setLocalProperty("spark.jobGroup.id", group)
    sc.setLocalProperty("spark.job.description", description)
    try:
        yield
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)


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

    def thread_factory(self) -> Callable[..., threading.Thread]:
        """What starts the service's long-lived threads: pyspark's ``InheritableThread`` once the
        session runs (a thread's JVM peer then inherits its job properties and ends with it),
        else a plain thread."""
        if self.session is None:
            return threading.Thread
        from pyspark import InheritableThread

        return InheritableThread
