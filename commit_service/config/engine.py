"""Where tables live and how Spark reaches them: ``storage:`` (allowed roots, S3), ``spark:``, and
the Iceberg ``catalogs:``; with the settings the SparkSession is built from."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from urllib.parse import urlsplit

from commit_service.domain.paths import UnsafePathError, root_prefix
from commit_service.errors import ConfigError, SparkSetupError


class CatalogType(str, Enum):
    """The kind of an Iceberg catalog (``catalogs[].type``)."""

    REST = "rest"  # the Iceberg REST catalog protocol (uri: http(s)://...)
    JDBC = "jdbc"  # Iceberg's JDBC catalog on a database (uri: jdbc:...)


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

    def spark_conf(self, s3: S3Settings | None = None) -> dict[str, str]:
        """The Spark properties of this catalog (``spark.sql.catalog.<name>...``), its FileIO given
        the service's ``storage.s3`` settings (``s3``; credentials among them: set at run time)."""
        prefix = f"spark.sql.catalog.{self.name}"
        conf = {
            prefix: "org.apache.iceberg.spark.SparkCatalog",
            f"{prefix}.type": self.type.value,
            f"{prefix}.uri": self.uri,
            # Spark's reads of a table (an upsert round's merge) are the catalog's: a copy cached
            # by Spark would hide another writer (the committer holds its own: docs/iceberg.md)
            f"{prefix}.cache-enabled": "false",
            # Iceberg's REST client posts a metrics report after every commit and scan: a request
            # each round that serves no commit (a catalog's properties may turn it back on)
            **({f"{prefix}.rest-metrics-reporting-enabled": "false"} if self.type is CatalogType.REST else {}),
            **{f"{prefix}.{k}": v for k, v in file_io(s3).items()},
        }
        if self.warehouse is not None:
            conf[f"{prefix}.warehouse"] = self.warehouse
        conf.update({f"{prefix}.{k}": v for k, v in self.properties.items()})
        return conf


def file_io(s3: S3Settings | None) -> dict[str, str]:
    """How Iceberg reads and writes a table's metadata and its own data files. With ``storage.s3``
    set: Iceberg's ``ResolvingFileIO``, which takes ``S3FileIO`` (one request a file, the AWS SDK's
    own client) for ``s3a://``/``s3://`` and Hadoop's file systems for the rest, with those
    settings. Hadoop's S3A under ``HadoopFileIO`` makes a ``HEAD`` before every manifest it opens
    and a ``HEAD`` and a ``LIST`` before every one it writes: most of the service's JVM time
    beside a busy Iceberg table (docs/performance.md). Without ``storage.s3``, ``HadoopFileIO``
    and the AWS environment, as Spark's own ``s3a://`` reads."""
    if s3 is None:
        return {"io-impl": "org.apache.iceberg.hadoop.HadoopFileIO"}
    conf = {
        "io-impl": "org.apache.iceberg.io.ResolvingFileIO",
        "client.region": s3.region,
        "s3.path-style-access": str(s3.path_style).lower(),
    }
    if s3.endpoint:
        conf["s3.endpoint"] = s3.endpoint
    if s3.access_key is not None and s3.secret_key is not None:
        conf["s3.access-key-id"] = s3.access_key
        conf["s3.secret-access-key"] = s3.secret_key
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
