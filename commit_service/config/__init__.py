"""The commit service's configuration, read by ``lakegate-service`` at start.

One frozen dataclass per section, validated in ``__post_init__``; every key is documented in
docs/configuration.md. Without a file the service runs on :func:`embedded_default`: a local
warehouse, local Spark, one table taking every topic, authentication off (with a loud warning).

- ``server``: ``server:``, ``auth:``, ``leases:``;
- ``engine``: ``storage:``, ``spark:``, ``catalogs:``, and the SparkSession's settings;
- ``tables``: ``tables[]``;
- here: the whole file (:class:`ServiceConfig`, the checks across sections) and how it is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commit_service.config.engine import (
    CatalogType,
    IcebergCatalog,
    S3Config,
    S3Settings,
    SparkConfig,
    SparkSettings,
    StorageConfig,
)
from commit_service.config.server import AuthConfig, LeaseConfig, Role, ServerConfig, TokenConfig
from commit_service.config.tables import CatalogConfig, Placement, TableConfig, TableFormat
from commit_service.domain.paths import root_prefix
from commit_service.errors import ConfigError
from lakegate_core import configfile
from lakegate_core.connect_group import KafkaSettings

ENV_PREFIX = "LAKEGATE_"


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


__all__ = [
    "AuthConfig",
    "CatalogConfig",
    "CatalogType",
    "IcebergCatalog",
    "LeaseConfig",
    "Placement",
    "Role",
    "S3Config",
    "S3Settings",
    "ServerConfig",
    "ServiceConfig",
    "SparkConfig",
    "SparkSettings",
    "StorageConfig",
    "TableConfig",
    "TableFormat",
    "TokenConfig",
    "default_home",
    "embedded_default",
    "load_config",
]
