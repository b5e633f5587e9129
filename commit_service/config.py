"""The commit service's configuration , read by ``lakegate-service`` at start.

One frozen dataclass per section, validated in ``__post_init__``; every key is documented in
docs/configuration.md. Without a file the service runs on :func:`embedded_default`: a local
warehouse, local Spark, one table taking every topic, authentication off (with a loud warning).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from commit_service.domain.content import Unwrap
from commit_service.domain.coverage import OffsetCheck
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.paths import UnsafePathError, root_prefix
from commit_service.domain.plan import CommitPolicy
from commit_service.domain.start import TableStart
from commit_service.domain.upsert import OFFSET_COLUMN, Cdc, TableMode, UpsertSpec
from commit_service.errors import ConfigError, SparkSetupError
from lakegate_core import configfile
from lakegate_core.connect_group import KafkaSettings

ENV_PREFIX = "LAKEGATE_"
TABLE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


class Placement(str, Enum):
    """Where a table's Parquet files live once committed (``tables[].placement``)."""

    IN_PLACE = "in_place"  # where the sink wrote them; they must lie under the table root
    COPY_INTO_TABLE = "copy_into_table"  # copied under <table>/data/<topic>/<partition>/ first
    IN_PLACE_ABSOLUTE = "in_place_absolute"  # anywhere, by absolute URI: delta-spark reads it, delta-rs does not


class TableFormat(str, Enum):
    """The table format a table is committed in (``tables[].format``)."""

    DELTA = "delta"
    ICEBERG = "iceberg"  # in an Iceberg catalog of ``catalogs``


class CatalogType(str, Enum):
    """The kind of an Iceberg catalog (``catalogs[].type``)."""

    REST = "rest"  # the Iceberg REST catalog protocol (uri: http(s)://...)
    JDBC = "jdbc"  # Iceberg's JDBC catalog on a database (uri: jdbc:...)


class Role(str, Enum):
    READ = "read"  # may read status: the status page and the GET endpoints
    SIDECAR = "sidecar"  # may also POST manifests and lease claims
    ADMIN = "admin"  # may also force commits, run maintenance, retry and release dead letters


@dataclass(frozen=True)
class ServerConfig:
    """``server:``: the HTTP side; :func:`commit_service.serving.options.gunicorn_options` turns it into gunicorn's."""

    host: str = "0.0.0.0"
    port: int = 8080
    threads: int = 8
    max_request_bytes: int = 1 << 20
    max_connections: int = 1000  # open connections, idle and arriving ones included
    read_timeout_seconds: float = 15.0  # a request's header and body must arrive within this
    keepalive_seconds: int = 5  # an idle kept-alive connection is closed after this
    log_format: str = "text"  # text | json

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ConfigError(f"server.port: {self.port} is not a TCP port")
        if self.threads < 1:
            raise ConfigError("server.threads: must be at least 1")
        if self.max_request_bytes < 1024:
            raise ConfigError("server.max_request_bytes: must be at least 1024")
        if self.max_connections <= self.threads:
            raise ConfigError("server.max_connections: must be more than server.threads")
        if self.read_timeout_seconds <= 0:
            raise ConfigError("server.read_timeout_seconds: must be positive")
        if self.keepalive_seconds < 0:
            raise ConfigError("server.keepalive_seconds: must be 0 (no keep-alive) or more")
        if self.log_format not in ("text", "json"):
            raise ConfigError("server.log_format: must be text or json")


@dataclass(frozen=True)
class TokenConfig:
    token: str
    role: Role = Role.SIDECAR
    sidecar_id: str | None = None  # set: the token may only send manifests and lease claims as this sidecar

    def __post_init__(self) -> None:
        if len(self.token) < 16:
            raise ConfigError("auth.tokens[].token: must be at least 16 characters")


@dataclass(frozen=True)
class AuthConfig:
    enabled: bool = True
    tokens: tuple[TokenConfig, ...] = ()
    session_hours: float = 12.0  # how long a status-page login lasts (the cookie; a restart ends it too)
    secure_cookie: bool = False  # mark the login cookie Secure: set it when the page is served over HTTPS

    def __post_init__(self) -> None:
        if self.enabled and not self.tokens:
            raise ConfigError("auth.tokens: at least one token is required while auth.enabled is true")
        if not 0 < self.session_hours <= 24 * 30:
            raise ConfigError("auth.session_hours: must be more than 0 and at most 720 (30 days)")


@dataclass(frozen=True)
class S3Config:
    endpoint: str | None = None
    region: str = "us-east-1"
    path_style: bool = True
    access_key: str | None = None  # default: the AWS environment (provider chain)
    secret_key: str | None = None


@dataclass(frozen=True)
class StorageConfig:
    allowed_roots: tuple[str, ...] = ()
    s3: S3Config | None = None

    def __post_init__(self) -> None:
        for root in self.allowed_roots:
            parts = urlsplit(root)
            if parts.scheme not in ("s3a", "s3", "file") or not root.endswith("/"):
                raise ConfigError(
                    f"storage.allowed_roots: {root!r} must be an s3a://, s3:// or file:/// URI ending in /"
                )
            try:
                root_prefix(root)
            except UnsafePathError as exc:
                raise ConfigError(f"storage.allowed_roots: {root!r}: {exc}") from None


@dataclass(frozen=True)
class S3Settings:
    """s3a settings; credentials default to the AWS environment (Hadoop's provider chain)."""

    endpoint: str | None = None
    region: str = "us-east-1"
    path_style: bool = True
    access_key: str | None = None
    secret_key: str | None = None

    def __post_init__(self) -> None:
        if (self.access_key is None) != (self.secret_key is None):
            raise SparkSetupError("s3: set both access_key and secret_key, or neither")


IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class IcebergCatalog:
    """``catalogs[]``: an Iceberg catalog holding Iceberg tables; the service reaches it as a Spark
    catalog of this ``name`` (:mod:`commit_service.spark.session` sets it up, at run time: ``uri``
    and ``properties`` may hold secrets, which never go on the JVM's command line)."""

    name: str
    type: CatalogType
    uri: str
    warehouse: str | None = None  # where new tables go; a REST catalog may choose it itself
    properties: dict[str, str] = field(default_factory=dict)  # any other Iceberg catalog property

    def __post_init__(self) -> None:
        where = f"catalogs[{self.name}]"
        if not IDENTIFIER.match(self.name) or self.name == "spark_catalog":
            raise ConfigError(f"{where}.name: must be letters, digits and _ (not spark_catalog)")
        if self.type is CatalogType.REST and not re.match(r"^https?://\S+$", self.uri):
            raise ConfigError(f"{where}.uri: a REST catalog's uri is its http(s):// endpoint, got {self.uri!r}")
        if self.type is CatalogType.JDBC:
            if not self.uri.startswith("jdbc:"):
                raise ConfigError(f"{where}.uri: a JDBC catalog's uri is a jdbc: URL, got {self.uri!r}")
            if not self.warehouse:
                raise ConfigError(f"{where}.warehouse: a JDBC catalog needs the URI its tables live under")
        if self.warehouse is not None:
            try:
                root_prefix(self.warehouse)
            except UnsafePathError as exc:
                raise ConfigError(f"{where}.warehouse: {self.warehouse!r}: {exc}") from None
        for key in ("type", "uri", "warehouse", "catalog-impl"):
            if key in self.properties:
                raise ConfigError(f"{where}.properties.{key}: set it as {where}.{key.replace('catalog-impl', 'type')}")

    def spark_conf(self) -> dict[str, str]:
        """The Spark properties of this catalog (``spark.sql.catalog.<name>...``)."""
        prefix = f"spark.sql.catalog.{self.name}"
        conf = {
            prefix: "org.apache.iceberg.spark.SparkCatalog",
            f"{prefix}.type": self.type.value,
            f"{prefix}.uri": self.uri,
            # every commit reads the table afresh: Spark's cached copy would hide another writer
            f"{prefix}.cache-enabled": "false",
            # the file system Spark has (s3a://, file:), with the service's s3a settings
            f"{prefix}.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
        }
        if self.warehouse is not None:
            conf[f"{prefix}.warehouse"] = self.warehouse
        conf.update({f"{prefix}.{k}": v for k, v in self.properties.items()})
        return conf


@dataclass(frozen=True)
class SparkSettings:
    """How the service's SparkSession is built; read from the ``spark:`` config section."""

    master: str = "local[*]"
    app_name: str = "lakegate"
    ui_enabled: bool = True
    ui_port: int = 4040
    ui_host: str | None = None  # the UI's listen address (and the driver's, see driver_environment); None: all
    driver_memory: str = "2g"
    jars_dir: Path | None = None
    local_dir: Path | None = None
    s3: S3Settings | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    catalogs: tuple[IcebergCatalog, ...] = ()  # set: Iceberg's jars and extensions, and these catalogs

    def __post_init__(self) -> None:
        if not self.master:
            raise SparkSetupError("spark.master must not be empty")
        if not 0 <= self.ui_port <= 65535:
            raise SparkSetupError(f"spark.ui_port {self.ui_port} is not a TCP port")


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    ui_port: int = 4040
    ui_host: str | None = None  # default: server.host
    ui_enabled: bool = True
    ui_url: str | None = None  # how a browser reaches the Spark UI (the status page's job links); default: Spark's own
    driver_memory: str = "2g"
    jars_dir: Path | None = None
    local_dir: Path | None = None
    conf: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.ui_url is not None and not re.match(r"^https?://[^\s\"'<>]+$", self.ui_url):
            raise ConfigError(f"spark.ui_url: {self.ui_url!r} is not an http(s) URL")


COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
CATALOG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")


@dataclass(frozen=True)
class CatalogConfig:
    """``tables[].catalog``: register the table in the Spark session catalog under ``name``
    (``[catalog.][database.]table``), so a metastore configured through ``spark.conf`` sees it."""

    name: str

    def __post_init__(self) -> None:
        if not CATALOG_NAME.match(self.name):
            raise ConfigError(f"tables[].catalog.name: {self.name!r} must be [catalog.][database.]table identifiers")


@dataclass(frozen=True)
class TableConfig:
    name: str
    path: str
    topics: tuple[str, ...] = ()
    topics_regex: str | None = None
    partition_by: tuple[str, ...] = ()
    commit: CommitPolicy = field(default_factory=CommitPolicy)
    start: TableStart = field(default_factory=TableStart)  # where each partition's ledger begins
    placement: Placement = Placement.IN_PLACE
    unwrap: Unwrap = Unwrap.AUTO
    offset_check: OffsetCheck = OffsetCheck.AUTO
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    catalog: CatalogConfig | None = None
    mode: TableMode = TableMode.APPEND
    key: tuple[str, ...] = ()  # upsert: the columns identifying a row
    ordering: str = OFFSET_COLUMN  # upsert: which of two changes of a key in one round wins (the greater)
    cdc: Cdc = Cdc.NONE
    delete_on_tombstone: bool = False
    deletion_vectors: bool = True  # upsert: replaced rows are marked deleted, their files kept
    type_widening: bool = False  # a column may widen (int -> long, ...) with Delta's typeWidening feature
    format: TableFormat = TableFormat.DELTA
    iceberg_catalog: str | None = None  # format iceberg: the catalogs[] entry (default: the only one)

    def __post_init__(self) -> None:
        self._check_upsert()
        self._check_iceberg()
        if not TABLE_NAME.match(self.name):
            raise ConfigError(f"tables[].name: {self.name!r} must be 1-128 of A-Z a-z 0-9 _ . -")
        try:
            root_prefix(self.path)
        except UnsafePathError as exc:
            raise ConfigError(f"tables[{self.name}].path: {self.path!r}: {exc}") from None
        if self.partition_by:
            raise ConfigError(
                f"tables[{self.name}].partition_by: partitioned tables are not supported yet "
                "(files are added in place, so each would need one partition value); leave it []"
            )
        if bool(self.topics) == bool(self.topics_regex):
            raise ConfigError(f"tables[{self.name}]: set exactly one of topics or topics_regex")
        if self.topics_regex:
            try:
                re.compile(self.topics_regex)
            except re.error as exc:
                raise ConfigError(f"tables[{self.name}].topics_regex: {exc}") from None

    def _check_iceberg(self) -> None:
        where = f"tables[{self.name}]"
        if self.format is TableFormat.DELTA:
            if self.iceberg_catalog is not None:
                raise ConfigError(f"{where}.iceberg_catalog: only for format: iceberg")
            return
        if len(self.name.split(".")) != 2 or not all(IDENTIFIER.match(p) for p in self.name.split(".")):
            raise ConfigError(
                f"{where}.name: an Iceberg table is named namespace.table (letters, digits, _), got {self.name!r}"
            )
        if self.mode is TableMode.UPSERT and not self.deletion_vectors:
            raise ConfigError(
                f"{where}.deletion_vectors: an Iceberg upsert table marks replaced rows with position "
                "deletes (merge-on-read); rewriting their files (false) is Delta only"
            )
        if self.catalog is not None:
            raise ConfigError(f"{where}.catalog: an Iceberg table is in its catalog already (see iceberg_catalog)")
        if self.type_widening:
            raise ConfigError(f"{where}.type_widening: Delta only (Iceberg promotes int -> long itself: not yet)")

    @property
    def background_checkpoints(self) -> bool:
        """Whether the service writes this table's checkpoints off the commit path (Delta tables
        only: an Iceberg table has none)."""
        return self.format is TableFormat.DELTA and self.maintenance.background_checkpoints

    def _check_upsert(self) -> None:
        where = f"tables[{self.name}]"
        if self.mode is TableMode.APPEND:
            for name, value, default in (
                ("key", self.key, ()),
                ("cdc", self.cdc, Cdc.NONE),
                ("delete_on_tombstone", self.delete_on_tombstone, False),
                ("ordering", self.ordering, OFFSET_COLUMN),
                ("deletion_vectors", self.deletion_vectors, True),
            ):
                if value != default:
                    raise ConfigError(f"{where}.{name}: only for mode: upsert (this table appends)")
            return
        if not self.key:
            raise ConfigError(f"{where}.key: mode: upsert needs the key column(s), e.g. key: [id]")
        for column in self.key:
            if not COLUMN.match(column) or "." in column:
                raise ConfigError(f"{where}.key: {column!r} is not a top-level column name (letters, digits, _)")
        if not COLUMN.match(self.ordering):
            raise ConfigError(f"{where}.ordering: {self.ordering!r} is not a column name (a.b for a nested field)")
        if len(set(self.key)) != len(self.key):
            raise ConfigError(f"{where}.key: a column is named twice in {list(self.key)}")

    @property
    def adds_in_place(self) -> bool:
        """Whether Parquet files are added where they lie (``placement: in_place``, append tables;
        an upsert table rewrites every record)."""
        return (
            self.placement is Placement.IN_PLACE and self.mode is TableMode.APPEND and self.format is TableFormat.DELTA
        )

    @property
    def upsert(self) -> UpsertSpec | None:
        """How an upsert table reads changes; None for an append table."""
        if self.mode is TableMode.APPEND:
            return None
        return UpsertSpec(self.key, self.ordering, self.cdc, self.delete_on_tombstone, self.deletion_vectors)

    @functools.cached_property
    def root(self) -> str:
        """The table's location as a URI prefix ending in ``/`` (``s3a://b/t/``, ``file:///p/t/``)."""
        return root_prefix(self.path)

    def holds(self, uri: str) -> bool:
        """Whether normalised ``uri`` lies under the table root (an in-place file may)."""
        return uri.startswith(self.root)

    def routes(self, topic: str) -> bool:
        if self.topics_regex:
            return re.fullmatch(self.topics_regex, topic) is not None
        return topic in self.topics


@dataclass(frozen=True)
class LeaseConfig:
    """``leases:``: how long a partition lease lives without its holder claiming it again."""

    ttl_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.ttl_seconds <= 0:
            raise ConfigError("leases.ttl_seconds: must be positive")


@dataclass(frozen=True)
class ServiceConfig:
    """The whole ``service.yaml``."""

    server: ServerConfig = field(default_factory=ServerConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    tables: tuple[TableConfig, ...] = ()
    kafka: KafkaSettings | None = None  # set: fencing on (docs/design.md, "Fencing")
    leases: LeaseConfig = field(default_factory=LeaseConfig)
    catalogs: tuple[IcebergCatalog, ...] = ()

    def __post_init__(self) -> None:
        if not self.tables:
            raise ConfigError("tables: at least one table is required")
        catalogs = [c.name for c in self.catalogs]
        if len(set(catalogs)) != len(catalogs):
            raise ConfigError(f"catalogs: duplicate catalog names in {catalogs}")
        for t in self.tables:
            if t.format is TableFormat.ICEBERG:
                self.catalog_of(t)  # raises when it has none
        for t in self.tables:
            if t.start.timestamp is not None and self.kafka is None:
                raise ConfigError(
                    f"tables[{t.name}].start.timestamp: finding where a time falls in each partition asks Kafka: "
                    "add a kafka section (bootstrap_servers), or start at offsets instead"
                )
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise ConfigError(f"tables: duplicate table names in {names}")
        if not self.storage.allowed_roots:
            raise ConfigError("storage.allowed_roots: at least one root is required")
        for t in self.tables:
            roots = [root_prefix(r) for r in self.storage.allowed_roots]
            overlaps = any(r.startswith(t.root) or t.root.startswith(r) for r in roots)
            if t.adds_in_place and not overlaps:
                raise ConfigError(
                    f"tables[{t.name}].placement: in_place adds Parquet files where the sink wrote them, so they "
                    f"must lie under the table root {t.root}, but no storage.allowed_roots reaches into it "
                    f"({', '.join(roots)}). Point the sink's prefix inside the table root (e.g. "
                    f"{t.root}data/), or set placement: copy_into_table (files are copied under "
                    f"{t.root}data/<topic>/<partition>/ before the commit), or in_place_absolute (absolute "
                    "paths: delta-spark reads them, delta-rs and the engines built on it (DuckDB, Polars) do not)"
                )

    def catalog_of(self, table: TableConfig) -> IcebergCatalog:
        """The Iceberg catalog holding ``table`` (``format: iceberg``)."""
        if table.iceberg_catalog is None:
            if len(self.catalogs) != 1:
                raise ConfigError(
                    f"tables[{table.name}].iceberg_catalog: name one of catalogs[] "
                    f"({', '.join(c.name for c in self.catalogs) or 'none is configured'})"
                )
            return self.catalogs[0]
        for catalog in self.catalogs:
            if catalog.name == table.iceberg_catalog:
                return catalog
        raise ConfigError(
            f"tables[{table.name}].iceberg_catalog: {table.iceberg_catalog!r} is not in catalogs[] "
            f"({', '.join(c.name for c in self.catalogs) or 'none is configured'})"
        )

    def table_for(self, topic: str) -> TableConfig | None:
        """The one table a topic routes to (the first that matches), or None."""
        return next((t for t in self.tables if t.routes(topic)), None)

    def spark_settings(self) -> SparkSettings:
        s3 = self.storage.s3
        return SparkSettings(
            master=self.spark.master,
            app_name="lakegate-service",
            ui_enabled=self.spark.ui_enabled,
            ui_port=self.spark.ui_port,
            ui_host=self.spark.ui_host or self.server.host,
            driver_memory=self.spark.driver_memory,
            jars_dir=self.spark.jars_dir,
            local_dir=self.spark.local_dir,
            conf=self.spark.conf,
            catalogs=self.catalogs if any(t.format is TableFormat.ICEBERG for t in self.tables) else (),
            s3=None if s3 is None else S3Settings(s3.endpoint, s3.region, s3.path_style, s3.access_key, s3.secret_key),
        )


def default_home() -> Path:
    """``$LAKEGATE_HOME`` or ``~/.local/share/lakegate``: the embedded default's data."""
    env = os.environ.get("LAKEGATE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".local" / "share" / "lakegate"


def embedded_default(home: Path | None = None) -> dict[str, Any]:
    """The configuration used when no file is given: local everything, one catch-all table."""
    home = (home or default_home()).resolve()
    return {
        "server": {"host": "127.0.0.1", "port": 8080},
        "auth": {"enabled": False},
        "storage": {"allowed_roots": [f"file://{home}/landing/"]},
        "spark": {"master": "local[*]", "local_dir": str(home / "spark")},
        "tables": [
            {
                "name": "default",
                "path": str(home / "warehouse" / "default"),
                "topics_regex": ".*",
                "placement": "copy_into_table",
            }
        ],
    }


def load_config(path: Path | None, environ: dict[str, str] | None = None) -> ServiceConfig:
    return configfile.load(ServiceConfig, path, env_prefix=ENV_PREFIX, default=embedded_default(), environ=environ)
