"""Pinned JVM artifacts and their resolution from Maven Central into a project-owned cache.

Read by ``scripts/fetch-jars`` (and through it by the test and demo commands, the Dockerfile),
by :mod:`lakegate_stack.kafka` / :mod:`lakegate_stack.connect` / :mod:`lakegate_stack.iceberg_catalog`
to build class paths. The service's Spark factory finds the Delta and s3a jars in the same place
(:mod:`lakegate_core.cache`).

Each :class:`ArtifactGroup` lands in ``<cache>/jars/<name>/`` as a flat directory of jars,
resolved with ``mvn dependency:copy-dependencies`` from a generated POM. A stamp file holding a
hash of the group's pinned spec makes a second run a no-op; a change of pin re-resolves.
Nothing here is downloaded at import time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from lakegate_core.cache import default_jars_dir
from lakegate_stack.errors import ArtifactError

logger = logging.getLogger(__name__)

KAFKA_VERSION = "4.1.2"
LOG4J_VERSION = "2.24.3"
SLF4J_VERSION = "2.0.17"  # the API the log4j-slf4j2 binding needs (Kafka's POMs say 1.7.36)
SPARK_VERSION = "4.1.1"  # must equal the pyspark pin in setup.cfg
DELTA_VERSION = "4.4.0"  # must equal the delta-spark pin in setup.cfg
HADOOP_VERSION = "3.4.2"  # the hadoop-client-api inside pyspark 4.1.1
AWS_SDK_V2_VERSION = "2.29.52"  # what hadoop-project 3.4.2 declares for hadoop-aws
ICEBERG_VERSION = "1.11.0"  # the Iceberg Spark runtime and the REST catalog server of the local stack
JETTY_VERSION = "12.1.14"  # Jetty 12.1 (ee10 servlet, compression): what Iceberg's REST fixture is built on
SQLITE_JDBC_VERSION = "3.51.1.0"  # JDBC catalogs on a sqlite file (the service's, the REST server's backend)
POSTGRESQL_JDBC_VERSION = "42.7.8"  # JDBC catalogs on PostgreSQL
ICEBERG_PEER_VERSION = "1.12.0"  # Apache Iceberg's own Kafka Connect sink, the benchmark's peer (its newest)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
STAMP_FILE = ".lakegate-stamp"


@dataclass(frozen=True)
class Dependency:
    """One Maven coordinate ``group:artifact:version[:classifier]`` and the ``group:artifact`` it
    excludes.

    The classifier picks a secondary jar of the artifact (``tests``, ``test-fixtures``); it lives in
    the coordinate string, so a group without classifiers keeps its fingerprint.
    ``"*:*"`` in ``exclusions`` takes the artifact alone, without its transitive closure.
    """

    coordinate: str
    exclusions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        parts = self.coordinate.split(":")
        if len(parts) not in (3, 4) or not all(parts):
            raise ArtifactError(f"bad Maven coordinate {self.coordinate!r}: want group:artifact:version[:classifier]")
        for ex in self.exclusions:
            if len(ex.split(":")) != 2:
                raise ArtifactError(f"bad exclusion {ex!r} of {self.coordinate}: want group:artifact")

    @property
    def gav(self) -> tuple[str, str, str]:
        """``(group, artifact, version)`` of the coordinate, without its classifier."""
        g, a, v = self.coordinate.split(":")[:3]
        return g, a, v

    @property
    def classifier(self) -> str | None:
        parts = self.coordinate.split(":")
        return parts[3] if len(parts) == 4 else None


@dataclass(frozen=True)
class ArtifactGroup:
    """A named set of dependencies resolved together into one flat jar directory."""

    name: str
    description: str
    dependencies: tuple[Dependency, ...]
    # Jars dropped after resolution, by artifact-id prefix (e.g. what the host runtime provides).
    drop_prefixes: tuple[str, ...] = field(default=())
    # A Maven project in this repository to build instead of resolving ``dependencies``; its
    # runtime closure plus its own jar become the group (a Connect plugin directory).
    build_project: str | None = None
    # Fetched only when named (benchmark-only groups), not by a bare ``fetch-jars``.
    on_request: bool = False

    def fingerprint(self) -> str:
        """Hash of the pinned spec (and of the project's sources); a stamp must match it."""
        spec = {k: v for k, v in asdict(self).items() if k != "on_request"}  # what is fetched, not when
        digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode())
        if self.build_project:
            root = REPO_ROOT / self.build_project
            for src in sorted(p for p in root.rglob("*") if p.is_file() and "target" not in p.parts):
                digest.update(str(src.relative_to(root)).encode())
                digest.update(src.read_bytes())
        return digest.hexdigest()[:16]


def _log_binding() -> tuple[Dependency, ...]:
    return (
        Dependency(f"org.slf4j:slf4j-api:{SLF4J_VERSION}"),
        Dependency(f"org.apache.logging.log4j:log4j-slf4j2-impl:{LOG4J_VERSION}"),
        Dependency(f"org.apache.logging.log4j:log4j-core:{LOG4J_VERSION}"),
    )


GROUPS: dict[str, ArtifactGroup] = {
    g.name: g
    for g in (
        ArtifactGroup(
            name="kafka",
            description=f"Apache Kafka {KAFKA_VERSION} broker (KRaft) with a log4j2 binding",
            dependencies=(Dependency(f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}"), *_log_binding()),
        ),
        ArtifactGroup(
            name="connect",
            description=f"Kafka Connect {KAFKA_VERSION} distributed worker runtime",
            dependencies=(
                Dependency(f"org.apache.kafka:connect-runtime:{KAFKA_VERSION}"),
                Dependency(f"org.apache.kafka:connect-json:{KAFKA_VERSION}"),
                Dependency(f"org.apache.kafka:connect-transforms:{KAFKA_VERSION}"),
                *_log_binding(),
            ),
        ),
        ArtifactGroup(
            name="delta",
            description=f"Delta Lake {DELTA_VERSION} and spark-avro for Spark {SPARK_VERSION[:3]} (Scala 2.13)",
            dependencies=(
                Dependency(
                    f"io.delta:delta-spark_{SPARK_VERSION[:3]}_2.13:{DELTA_VERSION}",
                    # Spark itself provides Scala and the Hadoop client.
                    exclusions=("org.scala-lang:scala-library", "org.apache.hadoop:*"),
                ),
                # Spark's own Avro source: how the service reads the Avro files sinks write.
                Dependency(
                    f"org.apache.spark:spark-avro_2.13:{SPARK_VERSION}",
                    exclusions=("org.scala-lang:scala-library", "org.apache.hadoop:*"),
                ),
            ),
            # Libraries pyspark already ships (newer): keep Spark's copies only.
            drop_prefixes=(
                "jackson-",
                "log4j-",
                "slf4j-",
                "parquet-",
                "snappy-java",
                "zstd-jni",
                "aircompressor",
                "RoaringBitmap",
                "shims-",
                "jsr305",
                "commons-pool",
                "jts-core",
                "avro-",
                "xz-",
                "tukaani",
                "spark-tags_",
                "scala-parallel-collections",
            ),
        ),
        ArtifactGroup(
            name="s3-sink",
            description="Kafka Connect S3 sink plugin (Aiven-compatible stand-in, built from connect-plugin/)",
            dependencies=(),
            build_project="connect-plugin",
        ),
        ArtifactGroup(
            name="log-store",
            description="Lakegate's Delta log store for file: tables (built from delta-log-store/)",
            dependencies=(),
            build_project="delta-log-store",
        ),
        ArtifactGroup(
            name="spark-kafka",
            description=f"Spark {SPARK_VERSION} Kafka source (spark-sql-kafka-0-10), for the benchmark's "
            "Spark Structured Streaming peer (scripts/bench --parts pipeline)",
            dependencies=(
                Dependency(
                    f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}",
                    # pyspark ships Scala and the Hadoop client
                    exclusions=("org.scala-lang:*", "org.apache.hadoop:*"),
                ),
            ),
            drop_prefixes=(
                "slf4j-",
                "log4j-",
                "snappy-java",
                "zstd-jni",
                "lz4-java",
                "jsr305",
                "spark-tags",
                "scala-parallel-collections",
            ),
            on_request=True,
        ),
        ArtifactGroup(
            name="hadoop-aws",
            description=f"hadoop-aws {HADOOP_VERSION} + AWS SDK v2 bundle {AWS_SDK_V2_VERSION} for s3a://",
            dependencies=(
                Dependency(f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}", exclusions=("*:*",)),
                Dependency(f"software.amazon.awssdk:bundle:{AWS_SDK_V2_VERSION}", exclusions=("*:*",)),
            ),
        ),
        ArtifactGroup(
            name="iceberg",
            description=f"Apache Iceberg {ICEBERG_VERSION} Spark runtime for Spark {SPARK_VERSION[:3]} (Scala 2.13), "
            "with the JDBC catalog's drivers",
            dependencies=(
                # A shaded jar carrying its own closure; Spark provides the rest.
                Dependency(
                    f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_VERSION[:3]}_2.13:{ICEBERG_VERSION}",
                    exclusions=("*:*",),
                ),
                # The drivers of Iceberg's JDBC catalog (catalogs[].type: jdbc): sqlite and PostgreSQL.
                Dependency(f"org.xerial:sqlite-jdbc:{SQLITE_JDBC_VERSION}", exclusions=("*:*",)),
                Dependency(f"org.postgresql:postgresql:{POSTGRESQL_JDBC_VERSION}", exclusions=("*:*",)),
            ),
        ),
        ArtifactGroup(
            name="iceberg-commit",
            description="Lakegate's classes inside Iceberg's commit (built from iceberg-commit/)",
            dependencies=(),
            build_project="iceberg-commit",
        ),
        ArtifactGroup(
            name="iceberg-rest",
            description=f"Apache Iceberg {ICEBERG_VERSION} REST catalog server (its test fixture) on a JDBC "
            "sqlite backend, for the local stack (lakegate_stack.iceberg_catalog)",
            dependencies=(
                # RESTCatalogServer itself: a small jar whose POM declares nothing.
                Dependency(f"org.apache.iceberg:iceberg-open-api:{ICEBERG_VERSION}:test-fixtures", exclusions=("*:*",)),
                # RESTCatalogAdapter and RESTCatalogServlet live in iceberg-core's test jar.
                Dependency(f"org.apache.iceberg:iceberg-core:{ICEBERG_VERSION}:tests", exclusions=("*:*",)),
                Dependency(f"org.apache.iceberg:iceberg-core:{ICEBERG_VERSION}"),
                Dependency(f"org.eclipse.jetty.ee10:jetty-ee10-servlet:{JETTY_VERSION}"),
                Dependency(f"org.eclipse.jetty.compression:jetty-compression-server:{JETTY_VERSION}"),
                Dependency(f"org.eclipse.jetty.compression:jetty-compression-gzip:{JETTY_VERSION}"),
                Dependency(f"org.xerial:sqlite-jdbc:{SQLITE_JDBC_VERSION}"),
                # Hadoop's Configuration (the server builds one) and HadoopFileIO's file systems,
                # shaded: two jars instead of hadoop-common's closure.
                Dependency(f"org.apache.hadoop:hadoop-client-api:{HADOOP_VERSION}", exclusions=("*:*",)),
                Dependency(f"org.apache.hadoop:hadoop-client-runtime:{HADOOP_VERSION}", exclusions=("*:*",)),
                # What s3a logs to (hadoop-client-runtime's pin); it finds log4j2 by itself.
                Dependency("commons-logging:commons-logging:1.3.0", exclusions=("*:*",)),
                *_log_binding(),
            ),
            # Compile-time annotations of caffeine's, never loaded.
            drop_prefixes=("checker-qual", "error_prone_annotations"),
        ),
        ArtifactGroup(
            name="iceberg-sink",
            description=f"Apache Iceberg {ICEBERG_PEER_VERSION} Kafka Connect sink as a Connect plugin (the "
            "benchmark's peer; lakegate_stack.iceberg_peer)",
            dependencies=(
                # The sink and its runtime closure (iceberg-core, -data, the control-topic events).
                Dependency(f"org.apache.iceberg:iceberg-kafka-connect:{ICEBERG_PEER_VERSION}"),
                # What its runtime distribution adds for a REST catalog on S3: the Parquet (and ORC) writers,
                # S3FileIO with the AWS SDK, and Hadoop's Configuration (shaded client jars here, in
                # place of the distribution's hadoop-common closure).
                Dependency(f"org.apache.iceberg:iceberg-parquet:{ICEBERG_PEER_VERSION}"),
                Dependency(f"org.apache.iceberg:iceberg-orc:{ICEBERG_PEER_VERSION}"),
                Dependency(f"org.apache.iceberg:iceberg-aws:{ICEBERG_PEER_VERSION}"),
                # The AWS SDK modules iceberg-aws uses, as Iceberg ships them for engines (69 MB, not
                # the SDK's 640 MB bundle).
                Dependency(f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_PEER_VERSION}", exclusions=("*:*",)),
                Dependency(f"org.apache.hadoop:hadoop-client-api:{HADOOP_VERSION}", exclusions=("*:*",)),
                Dependency(f"org.apache.hadoop:hadoop-client-runtime:{HADOOP_VERSION}", exclusions=("*:*",)),
                Dependency("commons-logging:commons-logging:1.3.0", exclusions=("*:*",)),
            ),
            # The worker provides the Kafka clients and the logging API to every plugin.
            drop_prefixes=("kafka-clients", "slf4j-", "log4j-", "checker-qual", "error_prone_annotations"),
        ),
    )
}


def group_dir(name: str, jars_dir: Path | None = None) -> Path:
    return (jars_dir or default_jars_dir()) / name


def is_resolved(group: ArtifactGroup, jars_dir: Path | None = None) -> bool:
    stamp = group_dir(group.name, jars_dir) / STAMP_FILE
    return stamp.is_file() and stamp.read_text().strip() == group.fingerprint()


def jars_of(name: str, jars_dir: Path | None = None) -> list[Path]:
    """The jars of a resolved group, sorted; raises :class:`ArtifactError` if not fetched."""
    group = GROUPS[name]
    if not is_resolved(group, jars_dir):
        raise ArtifactError(
            f"jar group {name!r} is not in {group_dir(name, jars_dir)} (or its pins changed): "
            f"run scripts/fetch-jars {name}"
        )
    return sorted(group_dir(name, jars_dir).glob("*.jar"))


def render_pom(group: ArtifactGroup) -> str:
    """A throw-away POM whose dependency closure is the group."""
    deps = []
    for dep in group.dependencies:
        g, a, v = (escape(p) for p in dep.gav)
        classifier = f"<classifier>{escape(dep.classifier)}</classifier>" if dep.classifier else ""
        excl = "".join(
            "<exclusion><groupId>{}</groupId><artifactId>{}</artifactId></exclusion>".format(
                *(escape(p) for p in ex.split(":"))
            )
            for ex in dep.exclusions
        )
        deps.append(
            f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
            + classifier
            + (f"<exclusions>{excl}</exclusions>" if excl else "")
            + "</dependency>"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0">'
        "<modelVersion>4.0.0</modelVersion>"
        f"<groupId>lakegate.fetch</groupId><artifactId>{escape(group.name)}</artifactId>"
        "<version>0</version><packaging>pom</packaging>"
        f"<dependencies>{''.join(deps)}</dependencies></project>\n"
    )


def resolve(group: ArtifactGroup, jars_dir: Path | None = None, *, mvn: str = "mvn") -> Path:
    """Resolve ``group`` into its directory unless already there; return the directory.

    The copy goes to a temporary sibling first and is renamed into place, so an interrupted run
    never leaves a half-filled directory that looks complete.
    """
    target = group_dir(group.name, jars_dir)
    if is_resolved(group, jars_dir):
        logger.info("%-11s cached   %s", group.name, target)
        return target
    if shutil.which(mvn) is None:
        raise ArtifactError(f"{mvn!r} not found on PATH: Maven is needed to fetch {group.name}")
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f".{group.name}-", dir=target.parent) as tmp:
        work = Path(tmp)
        out = work / "jars"
        if group.build_project:
            pom = REPO_ROOT / group.build_project / "pom.xml"
            goals = ["package"]
        else:
            pom = work / "pom.xml"
            pom.write_text(render_pom(group))
            goals = []
        cmd = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            *goals,
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={out}",
            "-DincludeScope=runtime",
        ]
        logger.info("%-11s fetching %s", group.name, group.description)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
            raise ArtifactError(f"mvn failed to resolve {group.name}:\n{tail}")
        if group.build_project:
            out.mkdir(exist_ok=True)  # Maven makes it only when a dependency is copied
            for built in (pom.parent / "target").glob("*.jar"):
                shutil.copy2(built, out / built.name)
        for jar in list(out.glob("*.jar")):
            if group.drop_prefixes and jar.name.startswith(group.drop_prefixes):
                jar.unlink()
        (out / STAMP_FILE).write_text(group.fingerprint() + "\n")
        if target.exists():
            shutil.rmtree(target)
        out.rename(target)
    size_mb = sum(p.stat().st_size for p in target.glob("*.jar")) / 1e6
    logger.info(
        "%-11s fetched  %d jars, %.0f MB in %.0fs -> %s",
        group.name,
        len(list(target.glob("*.jar"))),
        size_mb,
        time.monotonic() - started,
        target,
    )
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fetch-jars",
        description="Resolve Lakegate's pinned JVM artifacts from Maven Central into the cache "
        "(idempotent; quick once cached).",
    )
    parser.add_argument(
        "groups",
        nargs="*",
        metavar="GROUP",
        help=f"any of {', '.join(GROUPS)} (default: all but the benchmark-only spark-kafka)",
    )
    parser.add_argument(
        "--jars-dir", type=Path, default=None, help="default: $LAKEGATE_JARS_DIR or ~/.cache/lakegate/jars"
    )
    parser.add_argument("--list", action="store_true", help="print the pinned groups and exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="fetch-jars: %(message)s")
    if args.list:
        for g in GROUPS.values():
            state = "cached" if is_resolved(g, args.jars_dir) else "missing"
            print(f"{g.name:11} {state:8} {g.description}")
            for d in g.dependencies:
                print(f"{'':21}{d.coordinate}")
        return 0
    unknown = [n for n in args.groups if n not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    try:
        for name in args.groups or [n for n, g in GROUPS.items() if not g.on_request]:
            resolve(GROUPS[name], args.jars_dir)
    except ArtifactError as exc:
        print(f"fetch-jars: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
