"""``tables[]``: what each table takes (topics), where it lives, its format and mode, how its
rounds commit; checked when the config is read."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from enum import Enum

from commit_service.config.engine import IDENTIFIER
from commit_service.domain.content import Unwrap
from commit_service.domain.coverage import OffsetCheck
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.partitioning import PartitionField, PartitionSpecError, parse_spec
from commit_service.domain.paths import UnsafePathError, root_prefix
from commit_service.domain.plan import CommitPolicy
from commit_service.domain.start import TableStart
from commit_service.domain.upsert import OFFSET_COLUMN, Cdc, TableMode, UpsertSpec
from commit_service.errors import ConfigError

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
        self._check_partition_by()
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

    def _check_partition_by(self) -> None:
        where = f"tables[{self.name}].partition_by"
        try:
            parse_spec(self.partition_by)
        except PartitionSpecError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    @functools.cached_property
    def partition_spec(self) -> tuple[PartitionField, ...]:
        """``partition_by`` parsed: the table's partition transforms, in order."""
        return parse_spec(self.partition_by)

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
