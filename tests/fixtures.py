"""Session-scoped real services (a pytest plugin loaded by tests/conftest.py) on loopback: S3 server, Kafka broker, Connect worker(s), Spark.

Every fixture starts a real process from the project's cache (``scripts/fetch-jars``) and stops
it at the end of the session; logs land in ``<tmp>/stack/*.log`` and their tails appear in
start-up errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog import Catalog, load_catalog

from commit_service.config import CatalogType, IcebergCatalog, S3Settings, SparkSettings
from commit_service.spark.session import create_session
from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.process import free_port
from lakegate_stack.s3 import S3Server

ICEBERG_BUCKET = "lake-iceberg"  # the S3 REST catalog's bucket: its warehouse is s3a://<it>/warehouse
FULL_JIT = "-XX:TieredStopAtLevel=4"
ICEBERG_CATALOG = "ice"  # the Spark session's Iceberg catalog: JDBC on a sqlite file in the stack dir


def iceberg_jdbc_catalog(stack_dir: Path) -> IcebergCatalog:
    """The tests' Iceberg JDBC catalog: a sqlite database file, tables under ``iceberg-warehouse/``."""
    return IcebergCatalog(
        name=ICEBERG_CATALOG,
        type=CatalogType.JDBC,
        uri=f"jdbc:sqlite:{stack_dir / 'iceberg-catalog.db'}",
        warehouse=(stack_dir / "iceberg-warehouse").as_uri() + "/",
        properties={"jdbc.schema-version": "V1"},
    )


@pytest.fixture(scope="session")
def stack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stack")


@pytest.fixture(scope="session")
def s3_server(stack_dir: Path) -> Iterator[S3Server]:
    server = S3Server(stack_dir).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kafka_broker(stack_dir: Path) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(stack_dir / "kafka").start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def connect_worker(stack_dir: Path, kafka_broker: KafkaBroker) -> Iterator[ConnectWorker]:
    worker = ConnectWorker(stack_dir / "connect", kafka_broker.bootstrap_servers, name="connect-1").start()
    yield worker
    worker.stop()


@pytest.fixture
def extra_connect_worker(
    stack_dir: Path, kafka_broker: KafkaBroker, connect_worker: ConnectWorker
) -> Iterator[Callable[[str], ConnectWorker]]:
    """Starts more workers in the first worker's group; stops them when the test ends."""
    started: list[ConnectWorker] = []

    def start(name: str) -> ConnectWorker:
        worker = ConnectWorker(
            stack_dir / "connect", kafka_broker.bootstrap_servers, name=name, group_id=connect_worker.group_id
        ).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture(scope="session")
def spark(stack_dir: Path, s3_server: S3Server):  # type: ignore[no-untyped-def]
    settings = SparkSettings(
        master="local[2]",
        app_name="lakegate-tests",
        ui_port=free_port(),
        ui_host="127.0.0.1",
        driver_memory="2g",
        local_dir=stack_dir / "spark",
        s3=S3Settings(endpoint=s3_server.endpoint, access_key=s3mod.ACCESS_KEY, secret_key=s3mod.SECRET_KEY),
        catalogs=(iceberg_jdbc_catalog(stack_dir),),
        # the one JVM of the run that lives the whole run and works hard (every integration test's
        # commits): C2 back on, after tests/conftest.py's C1-only JDK_JAVA_OPTIONS (the last wins)
        conf={"spark.driver.extraJavaOptions": FULL_JIT},
    )
    session = create_session(settings)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def s3_rest_catalog(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> Iterator[IcebergRestCatalog]:
    """Apache Iceberg's REST catalog server with its warehouse on the S3 server (``ICEBERG_BUCKET``)."""
    s3_server.create_bucket(ICEBERG_BUCKET)
    server = IcebergRestCatalog(tmp_path_factory.mktemp("iceberg-rest"), f"s3a://{ICEBERG_BUCKET}/warehouse", s3_server)
    server.start()
    yield server
    server.stop()


def pyiceberg_rest(rest: IcebergRestCatalog, s3_server: S3Server) -> Catalog:
    """pyiceberg on ``rest``, reading the data files from the S3 server: the independent reader."""
    return load_catalog(
        "check",
        type="rest",
        uri=rest.uri,
        **{
            "s3.endpoint": s3_server.endpoint,
            "s3.access-key-id": s3mod.ACCESS_KEY,
            "s3.secret-access-key": s3mod.SECRET_KEY,
            "s3.region": s3mod.REGION,
        },
    )
