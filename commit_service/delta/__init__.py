"""Delta Lake behind the :class:`~commit_service.ports.Committer` port: the only package that
talks to Spark, py4j and Delta.

This ``__init__`` is the composition root: :func:`spark_committer_factory` builds each table's
committer from its config, and :class:`~commit_service.delta.session.SparkHandle` holds the
process's one SparkSession. Every other module here is imported through them, lazily (pyspark
loads only when the production service starts Spark):

- ``session``: the SparkSession factory and its properties (``SparkHandle``, ``create_session``);
- ``deferred``: a table's committer before Spark runs (offsets read from the log files);
- ``committer``: ``DeltaCommitter``, one atomic Delta commit per round (the ``txn`` offsets in it);
- ``append`` / ``upsert`` / ``changes``: what a round writes into an append table, and a MERGE's
  changes and writes for an upsert or CDC table;
- ``convert`` / ``conform``: a round's text and enveloped files read as one frame of the round's schema;
- ``log``: the table's ``_delta_log`` read without Spark (offsets, version, the orphan guard);
- ``maintenance``: compaction, vacuum and checkpoints;
- ``jvm_actions`` / ``jvm_handles`` / ``java_errors`` / ``thread_priority``: py4j plumbing;
- ``faults``: the chaos run's crash points inside a commit.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from commit_service.config import ServiceConfig, TableConfig
from commit_service.delta.session import SparkHandle
from commit_service.ports import Committer, CommitterFactory

if TYPE_CHECKING:  # pyarrow loads when the production service builds its reader, not on import
    from commit_service.storage.reader import StorageReader

__all__ = ["SparkHandle", "spark_committer_factory"]


def spark_committer_factory(config: ServiceConfig, spark: SparkHandle, storage: StorageReader) -> CommitterFactory:
    """The production factory: per table a :class:`~commit_service.delta.deferred.DeferredCommitter`
    that reads its offsets from the log files and builds its DeltaCommitter (on the process's one
    SparkSession, ``spark``) only when something needs Delta. Both share the table's
    :class:`~commit_service.storage.prefetch.FactsCache`, so footers are read ahead from the first manifest on."""
    from commit_service.delta.committer import DeltaCommitter
    from commit_service.delta.deferred import DeferredCommitter
    from commit_service.delta.txn import log_snapshot
    from commit_service.storage.prefetch import THREADS as FACTS_THREADS
    from commit_service.storage.prefetch import FactsCache, storage_facts

    readers = ThreadPoolExecutor(FACTS_THREADS, thread_name_prefix="lakegate-facts")  # shared by the tables

    def factory(table: TableConfig) -> Committer:
        facts = FactsCache(storage_facts(storage), pool=readers, threads=FACTS_THREADS, name=table.name)

        def build() -> Committer:
            return DeltaCommitter(
                spark.ensure(),
                table.name,
                table.path,
                storage,
                placement=table.placement,
                unwrap=table.unwrap,
                offset_check=table.offset_check,
                checkpoint_in_commit=not table.maintenance.background_checkpoints,
                facts=facts,
                upsert=table.upsert,
                type_widening=table.type_widening,
            )

        return DeferredCommitter(
            table.name, lambda: log_snapshot(storage, table.name, table.root), build, facts.prefetch
        )

    return factory
