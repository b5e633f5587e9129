"""Apache Iceberg behind the :class:`~commit_service.ports.Committer` port: the only package that
talks to Iceberg (Spark itself is ``commit_service.spark``).

This ``__init__`` is the composition root: :func:`iceberg_committer_factory` builds each Iceberg
table's committer (``tables[].format: iceberg``) from its config, on the process's one
SparkSession, whose Spark catalogs are the ``catalogs[]`` of the config. Every other module here
is imported through it, lazily (pyspark loads only when the production service starts Spark):

- ``committer``: ``IcebergCommitter``, one snapshot per round (the offsets in its summary);
- ``summary``: what a Lakegate snapshot's summary holds, encoded and read back (pure);
- ``validator``: the check, inside Iceberg's commit, that the offsets are still those planned from;
- ``tables``: the table in its catalog: load, create, grow its schema, its name mapping, its offsets;
- ``catalog_read``: a table's offsets read from its catalog without Spark (pyiceberg), at start-up;
- ``upsert``: an upsert round as a row delta: the new rows, position deletes for the rows they replace;
- ``datafiles``: a round's rows written as Parquet and described as Iceberg data (and delete) files;
- ``schema``: a round's schema as Iceberg holds it (pure);
- ``maintenance``: compaction, snapshot expiry, orphan removal.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from commit_service.config import ServiceConfig, TableConfig
from commit_service.ports import Committer, CommitterFactory
from commit_service.spark import SparkHandle

if TYPE_CHECKING:  # pyarrow loads when the production service builds its reader, not on import
    from commit_service.storage.reader import StorageReader

__all__ = ["iceberg_committer_factory"]


def iceberg_committer_factory(config: ServiceConfig, spark: SparkHandle, storage: StorageReader) -> CommitterFactory:
    """The production factory of Iceberg tables: per table an
    :class:`~commit_service.iceberg.committer.IcebergCommitter` that starts the SparkSession on its
    first need (its offsets are in the catalog: at start-up read without Spark where the catalog
    allows, so the service is ready before the session is up); footers are read ahead from the
    first manifest on, without Spark."""
    from commit_service.iceberg.catalog_read import CatalogReader
    from commit_service.iceberg.committer import IcebergCommitter
    from commit_service.storage.prefetch import THREADS as FACTS_THREADS
    from commit_service.storage.prefetch import table_facts

    readers = ThreadPoolExecutor(FACTS_THREADS, thread_name_prefix="lakegate-iceberg-facts")
    s3 = config.spark_settings().s3
    catalog_readers = {c.name: CatalogReader.of(c, s3) for c in config.catalogs}

    def factory(table: TableConfig) -> Committer:
        return IcebergCommitter(
            spark.ensure,
            table.name,
            config.catalog_of(table).name,
            table.root.rstrip("/"),  # a URI (file:///..., s3a://...): where a new table is created
            storage,
            unwrap=table.unwrap,
            offset_check=table.offset_check,
            placement=table.placement,
            upsert=table.upsert,
            partition_by=table.partition_spec,
            facts=table_facts(storage, readers, table.name, table.root, footers=True),
            catalog_reader=catalog_readers[config.catalog_of(table).name],
        )

    return factory
