"""An Apache Iceberg REST catalog server on loopback, for the tests of the Iceberg table format.

Started by the integration tests (``tests/integration/test_iceberg_catalog.py``), which read what
it holds with pyiceberg, an implementation independent of the JVM one. The server is Apache
Iceberg's own: ``org.apache.iceberg.rest.RESTCatalogServer`` from the ``iceberg-rest`` jar group
(the class the ``apache/iceberg-rest-fixture`` image runs), in front of a JDBC catalog whose state
is a sqlite file in the server's ``workdir``: a second client, or a restarted server, sees the
same tables.

The server takes its catalog properties from environment variables ``CATALOG_<KEY>`` (its
``RCKUtils``: ``__`` becomes ``-``, then ``_`` becomes ``.``, lower-cased; so ``CATALOG_IO__IMPL``
is ``io-impl`` and ``CATALOG_REST_PORT`` is ``rest.port``, the port it listens on, on every
address). It writes table metadata itself through Hadoop's file systems
(``org.apache.iceberg.hadoop.HadoopFileIO``): a ``file:`` warehouse needs nothing more; an
``s3a://bucket/...`` warehouse on the stack's S3 server (:class:`lakegate_stack.s3.S3Server`) adds
the ``hadoop-aws`` jars and a ``core-site.xml``, packed into a jar of its own on the class path
(the server builds a default Hadoop ``Configuration``, which reads that resource and nothing
else), with the endpoint, path-style addressing and the server's credentials. A Spark client on
``HadoopFileIO`` over the same ``s3a://`` URIs reads what it wrote.
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import requests

from lakegate_stack import artifacts
from lakegate_stack import s3 as s3mod
from lakegate_stack.errors import StackError
from lakegate_stack.process import ManagedProcess, free_port, java_command, write_log4j2_config

logger = logging.getLogger(__name__)

MAIN_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"
CATALOG_NAME = "lakegate"
DATABASE_FILE = "iceberg-catalog.db"
SITE_JAR = "iceberg-rest-site.jar"  # holds core-site.xml (s3a settings) for the server's Hadoop


def s3a_site(s3: s3mod.S3Server) -> dict[str, str]:
    """Hadoop properties for ``s3a://`` on the stack's S3 server: path-style, plain HTTP, its keys."""
    return {
        "fs.s3a.endpoint": s3.endpoint,
        "fs.s3a.endpoint.region": s3mod.REGION,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": str(s3.endpoint.startswith("https")).lower(),
        "fs.s3a.access.key": s3mod.ACCESS_KEY,
        "fs.s3a.secret.key": s3mod.SECRET_KEY,
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }


def write_site_jar(path: Path, props: dict[str, str]) -> Path:
    """A jar holding one ``core-site.xml`` of ``props``: Hadoop's default resource, on a class path."""
    body = "".join(
        f"<property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in props.items()
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("core-site.xml", f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n')
    return path


class IcebergRestCatalog:
    """One REST catalog server process; owns ``workdir`` (its sqlite database, ``iceberg-rest.log``).

    ``warehouse`` is where new tables go: a ``file:`` URI, or ``s3a://bucket/prefix`` on ``s3``
    (the bucket must exist before the first table is made). A ``CATALOG_*`` variable in this
    process's environment reaches the server too, under what :meth:`environment` sets.
    """

    def __init__(
        self,
        workdir: Path,
        warehouse: str,
        s3: s3mod.S3Server | None = None,
        *,
        jars_dir: Path | None = None,
        host: str = "127.0.0.1",
        heap: str = "512m",
    ) -> None:
        if warehouse.startswith("s3") and s3 is None:
            raise StackError(f"warehouse {warehouse} is on S3: give the S3 server it lives on")
        if s3 is not None and not warehouse.startswith("s3a://"):
            raise StackError(f"warehouse {warehouse} on the S3 server must be an s3a:// URI (what Hadoop reads)")
        self.workdir = workdir
        self.warehouse = warehouse
        self.s3 = s3
        self.host = host
        self.port = free_port(host)
        self.heap = heap
        self.classpath = [artifacts.group_dir("iceberg-rest", jars_dir)]
        artifacts.jars_of("iceberg-rest", jars_dir)  # fail early with "run scripts/fetch-jars iceberg-rest"
        if s3 is not None:
            # First: iceberg-core's test jar carries a stub of s3a's S3ABlockOutputStream that
            # must not shadow hadoop-aws's own.
            self.classpath.insert(0, artifacts.group_dir("hadoop-aws", jars_dir))
            artifacts.jars_of("hadoop-aws", jars_dir)
        self.process: ManagedProcess | None = None

    @property
    def uri(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def database(self) -> Path:
        """The sqlite file holding the catalog's namespaces and table pointers."""
        return self.workdir / DATABASE_FILE

    def environment(self) -> dict[str, str]:
        """The server's configuration: catalog properties as its ``CATALOG_*`` variables."""
        return {
            "CATALOG_REST_PORT": str(self.port),
            "CATALOG_CATALOG_NAME": CATALOG_NAME,
            "CATALOG_CATALOG__IMPL": "org.apache.iceberg.jdbc.JdbcCatalog",
            "CATALOG_URI": f"jdbc:sqlite:{self.database}",
            "CATALOG_JDBC_SCHEMA__VERSION": "V1",  # namespaces' properties and views
            "CATALOG_CLIENTS": "1",  # one sqlite connection: commits queue for it, not meet as SQLITE_BUSY
            "CATALOG_WAREHOUSE": self.warehouse,
            "CATALOG_IO__IMPL": "org.apache.iceberg.hadoop.HadoopFileIO",
        }

    def start(self, timeout: float = 60.0) -> IcebergRestCatalog:
        self.workdir.mkdir(parents=True, exist_ok=True)
        classpath = list(self.classpath)
        if self.s3 is not None:
            classpath.insert(0, write_site_jar(self.workdir / SITE_JAR, s3a_site(self.s3)))
        props = {"log4j2.configurationFile": str(write_log4j2_config(self.workdir))}
        cmd = java_command(classpath, MAIN_CLASS, [], heap=self.heap, system_props=props)
        self.process = ManagedProcess(
            "iceberg-rest", cmd, self.workdir / "iceberg-rest.log", env=self.environment(), cwd=self.workdir
        ).start()
        self.process.wait_ready(
            lambda: requests.get(f"{self.uri}/v1/config", timeout=2).status_code == 200, timeout, "serving /v1/config"
        )
        logger.info("iceberg rest catalog ready at %s (warehouse %s)", self.uri, self.warehouse)
        return self

    def stop(self) -> None:
        if self.process:
            self.process.stop()
