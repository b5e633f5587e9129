"""Delta Lake behind the :class:`~commit_service.ports.Committer` port: the only package that
talks to Delta (Spark itself is ``commit_service.spark``).

This ``__init__`` is the composition root: :func:`spark_committer_factory` builds each Delta
table's committer from its config, on the process's one SparkSession
(:class:`~commit_service.spark.session.SparkHandle`). Every other module here is imported through
it, lazily (pyspark loads only when the production service starts Spark):

- ``deferred``: a table's committer before Spark runs (offsets read from the log files);
- ``committer``: ``DeltaCommitter``, one atomic Delta commit per round (the ``txn`` offsets in it);
- ``append`` / ``upsert`` / ``changes``: what a round writes into an append table, and a MERGE's
  changes and writes for an upsert or CDC table;
- ``log``: the table's ``_delta_log`` read without Spark (offsets, version, the orphan guard);
- ``maintenance``: compaction, vacuum and checkpoints;
- ``jvm_actions`` / ``jvm_handles``: Delta's actions and classes through py4j;
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from commit_service.config import ServiceConfig, TableConfig
from commit_service.ports import Committer, CommitterFactory
from commit_service.spark import SparkHandle

if TYPE_CHECKING:  # pyarrow loads when the production service builds its reader, not on import
    from commit_service.storage.reader import StorageReader

__all__ = ["spark_committer_factory"]


def spark_committer_factory(config: ServiceConfig, spark: SparkHandle, storage: StorageReader) -> CommitterFactory:
    """The production factory: per table a :class:`~commit_service.delta.deferred.DeferredCommitter`
    that reads its offsets from the log files and builds its DeltaCommitter (on the process's one
    SparkSession, ``spark``) only when something needs Delta. Both share the table's
    :class:`~commit_service.storage.prefetch.FactsCache`, so footers are read ahead from the first manifest on."""
    from commit_service.delta.committer import DeltaCommitter
    from commit_service.delta.deferred import DeferredCommitter
    from commit_service.delta.partitions import DeltaPartitioning
    from commit_service.delta.txn import log_snapshot
    from commit_service.storage.prefetch import THREADS as FACTS_THREADS
    from commit_service.storage.prefetch import table_facts

    readers = ThreadPoolExecutor(FACTS_THREADS, thread_name_prefix="lakegate-facts")  # shared by the tables

    def factory(table: TableConfig) -> Committer:
        facts = table_facts(storage, readers, table.name, table.root)

        def build() -> Committer:
            return DeltaCommitter(
                spark.ensure(),
                table.name,
                table.path,
                storage,
                placement=table.placement,
                unwrap=table.unwrap,
                offset_check=table.offset_check,
                checkpoint_in_commit=not table.background_checkpoints,
                facts=facts,
                upsert=table.upsert,
                type_widening=table.type_widening,
                partitioning=DeltaPartitioning(table.partition_spec),
            )

        return DeferredCommitter(
            table.name, lambda: log_snapshot(storage, table.name, table.root), build, facts.prefetch
        )

    return factory
