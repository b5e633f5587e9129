"""One Iceberg table of a catalog, through Iceberg's Java API over py4j: load or create it, grow its
schema, read its offsets from its snapshots.

Used by :class:`~commit_service.iceberg.committer.IcebergCommitter` (the table's commit thread)
only. The catalog is the Spark catalog the session built from ``catalogs[]``
(:meth:`commit_service.config.IcebergCatalog.spark_conf`), so Spark SQL and Lakegate see one catalog.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from py4j.protocol import Py4JJavaError

from commit_service.domain.partitioning import PartitionField
from commit_service.domain.round_schema import Schema
from commit_service.iceberg.partitions import build_spec
from commit_service.iceberg.summary import decode
from commit_service.iceberg.validator import offset_texts
from commit_service.ports import TableSnapshot
from commit_service.spark.java_errors import ICEBERG_NO_TABLE, thrown
from commit_service.spark.jvm_classes import java_class
from lakegate_core.types import PartitionOffsets

logger = logging.getLogger(__name__)

NAME_MAPPING = "schema.name-mapping.default"  # how files written without field ids are read
FORMAT_VERSION = "2"
CREATED_PROPERTIES = {
    "format-version": FORMAT_VERSION,
    "write.parquet.compression-codec": "zstd",
}


class IcebergTable:
    """Catalog ``catalog``'s table ``name`` (``namespace.table``), created at ``location`` if new."""

    def __init__(self, spark: Any, catalog: str, name: str, location: str) -> None:
        self.spark = spark
        self.catalog = catalog
        self.name = name
        self.location = location.rstrip("/")
        self._jvm = spark._jvm
        self._ident = java_class(self._jvm, "org.apache.iceberg.catalog.TableIdentifier").parse(name)
        self._said_location = False
        self._held: Any | None = None  # the table as this service's last round left it

    def _catalog(self) -> Any:
        """Iceberg's catalog, as the session's Spark catalog holds it. The calling thread's active
        session is set first: Spark builds a catalog (on its first use, or again after a failed
        build) from the thread's ``SQLConf.get``, which without an active session is a fallback
        conf that lacks the catalogs (``CATALOG_NOT_FOUND``)."""
        session = self.spark._jsparkSession
        java_class(self._jvm, "org.apache.spark.sql.SparkSession").setActiveSession(session)
        return session.sessionState().catalogManager().catalog(self.catalog).icebergCatalog()

    def load(self) -> Any | None:
        """The table as the catalog has it now (a fresh read: one request to a REST catalog), or
        None if there is none."""
        try:
            table = self._catalog().loadTable(self._ident)
        except Py4JJavaError as exc:
            if thrown(exc, ICEBERG_NO_TABLE):
                return None
            raise
        if table.location().rstrip("/") != self.location and not self._said_location:
            logger.warning(
                "table %s lives at %s, not at its configured path %s: its data goes there; "
                "Lakegate's own files (dead letters) stay under the path",
                self.name,
                table.location(),
                self.location,
            )
            self._said_location = True
        return table

    def current(self) -> Any | None:
        """The table as this service's last round left it (a commit leaves the metadata the
        catalog answered with in it), else read afresh (:meth:`load`). A round never needs a read
        of its own: Iceberg's commit reads the table's head again before it makes the snapshot,
        and the round's offsets check runs against that head, so a table another writer moved
        meanwhile refuses the round (then :meth:`forget`, and the next round reads afresh)."""
        if self._held is None:
            self._held = self.load()
        return self._held

    def forget(self) -> None:
        """Read the table afresh on the next :meth:`current` (after a failed round, or a
        maintenance commit made through another copy of the table)."""
        self._held = None

    def create(self, schema: Schema, partition_by: Sequence[PartitionField] = ()) -> Any:
        """Create the table with ``schema`` (Spark's JSON form), partitioned by ``partition_by``, at
        the configured location, its namespace too; if another writer created it meanwhile, that table."""
        jvm = self._jvm
        catalog = self._catalog()
        namespace = self._ident.namespace()
        if not catalog.namespaceExists(namespace):
            try:
                catalog.createNamespace(namespace)
            except Exception:  # created meanwhile by another writer: fine if it exists now
                if not catalog.namespaceExists(namespace):
                    raise
        props = java_class(jvm, "java.util.HashMap")()
        for key, value in CREATED_PROPERTIES.items():
            props.put(key, value)
        # One transaction, so the table is born with its name mapping: a reader (or a second
        # Lakegate service) never sees it without one.
        try:
            iceberg = self._iceberg_schema(schema)
            txn = catalog.newCreateTableTransaction(
                self._ident,
                iceberg,
                build_spec(jvm, iceberg, partition_by),
                self.location,
                props,
            )
            txn.updateProperties().set(NAME_MAPPING, self._mapping_text(txn.table())).commit()
            txn.commitTransaction()
        except Exception:  # created meanwhile by another writer (a REST catalog says so at once): that table
            table = self.load()
            if table is None:
                raise
            return table
        logger.info("table %s: created in catalog %s at %s", self.name, self.catalog, self.location)
        self._held = self.load()
        return self._held

    def _iceberg_schema(self, schema: Schema) -> Any:
        struct = java_class(self._jvm, "org.apache.spark.sql.types.DataType").fromJson(json.dumps(schema))
        return java_class(self._jvm, "org.apache.iceberg.spark.SparkSchemaUtil").convert(struct)

    def spark_schema(self, table: Any) -> Schema:
        """The table's schema in Spark's JSON form (what the round's schema is reconciled with)."""
        result: Schema = json.loads(
            java_class(self._jvm, "org.apache.iceberg.spark.SparkSchemaUtil").convert(table.schema()).json()
        )
        return result

    def grow(self, table: Any, schema: Schema) -> None:
        """Add ``schema``'s new columns and fields to the table (by name, at any depth), then map
        the new names; one metadata commit, no snapshot, so a round's offsets never move with it."""
        table.updateSchema().unionByNameWith(self._iceberg_schema(schema)).commit()
        table.refresh()
        self.map_names(table)

    def map_names(self, table: Any) -> None:
        """Set the table's name mapping to its current schema: Lakegate's data files carry no
        Iceberg field ids (Spark's Parquet writer and the sinks write none), so readers find
        each column by its name."""
        text = self._mapping_text(table)
        if table.properties().get(NAME_MAPPING) != text:
            table.updateProperties().set(NAME_MAPPING, text).commit()
            table.refresh()

    def _mapping_text(self, table: Any) -> str:
        mapping = java_class(self._jvm, "org.apache.iceberg.mapping.MappingUtil").create(table.schema())
        return str(java_class(self._jvm, "org.apache.iceberg.mapping.NameMappingParser").toJson(mapping))

    def name_mapping(self, table: Any) -> Any:
        """The table's name mapping; a table created without one (by Spark SQL, another tool) is
        given one for its schema first (a mapping it has is kept as it is)."""
        if table.properties().get(NAME_MAPPING) is None:
            self.map_names(table)
        return java_class(self._jvm, "org.apache.iceberg.mapping.NameMappingParser").fromJson(
            table.properties().get(NAME_MAPPING)
        )

    def offsets_text(self, table: Any) -> str | None:
        """The ``lakegate.offsets`` text of the table's newest snapshot that has one (None: none)."""
        ancestry = java_class(self._jvm, "org.apache.iceberg.util.SnapshotUtil").currentAncestors(table)
        return next((text for text in offset_texts(ancestry) if text is not None), None)

    def snapshot(self, table: Any | None) -> TableSnapshot:
        """The table's version and offsets (see :meth:`read`)."""
        return self.read(table)[0]

    def read(self, table: Any | None) -> tuple[TableSnapshot, str | None]:
        """The table's version (its head snapshot's sequence number; 0 with no snapshot, -1 with
        no table) and the offsets of its newest Lakegate snapshot, with their text as stored
        (what a round's check inside Iceberg's commit compares): one walk of the ancestry."""
        if table is None:
            return TableSnapshot(-1, PartitionOffsets({})), None
        head = table.currentSnapshot()
        if head is None:
            return TableSnapshot(0, PartitionOffsets({})), None
        text = self.offsets_text(table)
        offsets = decode(text, self.name) if text is not None else PartitionOffsets({})
        return TableSnapshot(int(head.sequenceNumber()), offsets), text
