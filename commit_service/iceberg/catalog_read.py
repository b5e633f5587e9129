"""An Iceberg table's head and Lakegate offsets read from its catalog without Spark (pyiceberg).

Used by :class:`~commit_service.iceberg.committer.IcebergCommitter` at start-up only: the service is
ready once every table's offsets are known, and with this read an Iceberg table's are known in a
second or two, as a Delta table's are from its log files, instead of after the SparkSession and
Iceberg's Java catalog have started (half a minute and more). The Spark read follows as soon as the
session is up (the coordinator's warm-up), and it is the one every round commits from; the two
are cross-checked there.

The read is the catalog's own: a REST catalog answers the table's metadata (Iceberg's REST
protocol, through pyiceberg's client); a JDBC catalog on SQLite gives its metadata file's location
(pyiceberg's SQL catalog, which keeps the same tables as Iceberg's Java ``JdbcCatalog``), read
through pyarrow's file systems with the service's ``storage.s3`` settings. A catalog this cannot
read (a JDBC database other than SQLite) is read through Spark, as before; so is a table whose
read fails, with a warning in the log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from commit_service.config import CatalogType, IcebergCatalog, S3Settings
from commit_service.iceberg.summary import OFFSETS, decode
from commit_service.ports import TableSnapshot
from lakegate_core.types import PartitionOffsets

logger = logging.getLogger(__name__)

SQLITE = re.compile(r"^jdbc:sqlite:(?:file:)?(?P<path>[^?]+)$")
# catalogs[].properties that Iceberg's Java REST client and pyiceberg's both read, under one name
REST_KEYS = ("credential", "token", "scope", "oauth2-server-uri", "audience", "resource", "prefix")


def pyiceberg_properties(catalog: IcebergCatalog, s3: S3Settings | None) -> dict[str, str] | None:
    """The properties of pyiceberg's catalog equal to ``catalog``, or None when pyiceberg cannot
    read it (then Spark does). Pure."""
    props: dict[str, str] = {}
    if catalog.type is CatalogType.REST:
        props.update(type="rest", uri=catalog.uri)
        if catalog.warehouse is not None:
            props["warehouse"] = catalog.warehouse
        props.update({k: v for k, v in catalog.properties.items() if k in REST_KEYS or k.startswith("header.")})
    else:
        match = SQLITE.match(catalog.uri)
        if match is None:
            return None
        # read only: the Java catalog made its tables; pyiceberg must not make its own first
        props.update(type="sql", uri=f"sqlite:///{match['path']}", init_catalog_tables="false")
    if s3 is not None:
        if s3.endpoint:
            props["s3.endpoint"] = s3.endpoint
        props["s3.region"] = s3.region
        props["s3.force-virtual-addressing"] = "false" if s3.path_style else "true"
        if s3.access_key is not None and s3.secret_key is not None:
            props["s3.access-key-id"] = s3.access_key
            props["s3.secret-access-key"] = s3.secret_key
    return props


def ancestry(snapshots: Mapping[int, tuple[int | None, Mapping[str, str]]], head: int) -> Iterator[Mapping[str, str]]:
    """The summaries of ``head`` and its ancestors, newest first, as far as the metadata holds
    them (``snapshots``: id -> (parent id, summary)). Pure."""
    seen: set[int] = set()
    at: int | None = head
    while at is not None and at in snapshots and at not in seen:
        seen.add(at)
        parent, summary = snapshots[at]
        yield summary
        at = parent


def offsets_of(
    snapshots: Mapping[int, tuple[int | None, Mapping[str, str]]], head: int | None, sequence: int, table: str
) -> tuple[TableSnapshot, str | None]:
    """What :meth:`~commit_service.iceberg.tables.IcebergTable.read` says of a table, from its
    metadata: its head's sequence number (0 with no snapshot) and the offsets of its newest
    Lakegate snapshot, with their text. Pure."""
    if head is None:
        return TableSnapshot(0, PartitionOffsets({})), None
    text = next((s[OFFSETS] for s in ancestry(snapshots, head) if OFFSETS in s), None)
    offsets = decode(text, table) if text is not None else PartitionOffsets({})
    return TableSnapshot(sequence, offsets), text


class CatalogReader:
    """One catalog, read through pyiceberg (its client made on the first read)."""

    def __init__(self, catalog: IcebergCatalog, properties: dict[str, str]) -> None:
        self.name = catalog.name
        self._properties = properties
        self._catalog: Any = None
        sqlite = properties["uri"].removeprefix("sqlite:///") if properties["type"] == "sql" else None
        self._database = Path(sqlite) if sqlite is not None else None  # a SQLite catalog's file

    @classmethod
    def of(cls, catalog: IcebergCatalog, s3: S3Settings | None) -> CatalogReader | None:
        """The reader of ``catalog``, or None (with a line in the log) when Spark must read it."""
        props = pyiceberg_properties(catalog, s3)
        if props is None:
            logger.info(
                "catalog %s: %s is read through Spark at start-up (only REST and SQLite catalogs without it)",
                catalog.name,
                catalog.uri.split("?")[0].split("//")[0],
            )
            return None
        return cls(catalog, props)

    def read(self, table: str) -> tuple[TableSnapshot, str | None]:
        """The table's version and offsets (version -1: no such table); raises what pyiceberg
        raises when the catalog or the metadata cannot be read."""
        from pyiceberg.exceptions import NoSuchTableError

        if self._database is not None and not self._database.exists():  # Iceberg's JDBC catalog makes it
            return TableSnapshot(-1, PartitionOffsets({})), None
        if self._catalog is None:
            from pyiceberg.catalog import load_catalog

            self._catalog = load_catalog(self.name, **self._properties)
        try:
            metadata = self._catalog.load_table(table).metadata
        except NoSuchTableError:
            return TableSnapshot(-1, PartitionOffsets({})), None
        snapshots = {
            s.snapshot_id: (s.parent_snapshot_id, s.summary.additional_properties if s.summary else {})
            for s in metadata.snapshots
        }
        head = metadata.current_snapshot()
        if head is None:
            return offsets_of(snapshots, None, 0, table)
        return offsets_of(snapshots, head.snapshot_id, head.sequence_number or 0, table)
