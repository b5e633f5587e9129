"""An append Iceberg table's small files of one partition merged by Arrow and committed as
Iceberg's ``rewriteDataFiles`` commits its own: one ``replace`` snapshot that deletes them and
adds the merged file, validated from the snapshot the files were read in, with no offsets.

Used by :class:`~commit_service.iceberg.maintenance.IcebergMaintainer` for each group of a merge
plan (:mod:`commit_service.domain.compaction`), before ``rewriteDataFiles``, which merges the
groups this leaves (:func:`commit_service.storage.merge.refusal`). The merged file's metrics are
Iceberg's own (``ParquetUtil.fileMetrics``, the table's name mapping), read from its footer, and
it lies under the table's ``data/`` (orphan removal deletes it when its commit never lands).
Rounds that land meanwhile only append, and Iceberg retries the replace on the new head; a file
it deletes that is gone fails it, and the merge is planned again at the next look.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from contextlib import closing
from typing import Any

from commit_service.domain.compaction import bins
from commit_service.iceberg.tables import IcebergTable
from commit_service.spark.jvm_classes import java_class
from commit_service.storage.merge import merge_files
from commit_service.storage.reader import StorageReader

MERGED_FOLDER = "data/merged"
CODEC, DEFAULT_CODEC = "write.parquet.compression-codec", "zstd"  # Iceberg's table property and its default


class IcebergArrowMerge:
    """Merges one partition's small files by Arrow and commits them (one per table)."""

    def __init__(self, spark: Any, table: IcebergTable, storage: StorageReader) -> None:
        self.spark = spark
        self.table = table
        self.storage = storage

    def merge(self, table: Any, where: Any | None, paths: Collection[str], target_bytes: int) -> tuple[int, int] | None:
        """Merge the data files at ``paths`` (of one partition; ``where``: its filter, or None) into
        files of up to about ``target_bytes`` (:func:`~commit_service.domain.compaction.bins`) and
        commit them in their place, in one snapshot: (files removed, files added), or None when
        Arrow leaves them to Spark or the table no longer holds them all (nothing committed)."""
        snapshot = table.currentSnapshot()
        if snapshot is None:
            return None
        wanted = set(paths)
        scan = table.newScan().useSnapshot(snapshot.snapshotId())
        found: dict[str, Any] = {}
        with closing(scan.filter(where).planFiles() if where is not None else scan.planFiles()) as tasks:
            it = tasks.iterator()
            while it.hasNext():
                task = it.next()
                data_file = task.file()
                location = str(data_file.location())
                if location in wanted:
                    if not task.deletes().isEmpty():
                        return None  # rows deleted by delete files: rewriteDataFiles applies them
                    found[location] = data_file
        if len(found) != len(wanted) or len({int(f.specId()) for f in found.values()}) != 1:
            return None  # some are gone (a later look plans again), or of two specs: Spark sorts those out
        ordered = sorted(found, key=lambda p: int(found[p].dataSequenceNumber() or 0))  # rounds' order
        jvm = self.spark._jvm
        metrics_config = java_class(jvm, "org.apache.iceberg.MetricsConfig").forTable(table)
        mapping = self.table.name_mapping(table)
        rewrite = table.newRewrite().validateFromSnapshot(snapshot.snapshotId())
        removed = added = 0
        codec = str(table.properties().getOrDefault(CODEC, DEFAULT_CODEC))  # what Iceberg's writers use
        for run in bins([int(found[p].fileSizeInBytes()) for p in ordered], target_bytes):
            sources = [ordered[i] for i in run]
            target = f"{table.location().rstrip('/')}/{MERGED_FOLDER}/part-{uuid.uuid4()}.parquet"
            merged = merge_files(self.storage, sources, target, codec)
            if merged is None:
                return None  # nothing committed; a merged file already written is an orphan removal deletes
            first = found[sources[0]]
            source = table.io().newInputFile(target, merged.facts.size_bytes)
            data_file = (
                java_class(jvm, "org.apache.iceberg.DataFiles")
                .builder(table.specs().get(first.specId()))
                .withInputFile(source)
                .withFormat("PARQUET")
                .withPartition(first.partition())
                .withMetrics(
                    java_class(jvm, "org.apache.iceberg.parquet.ParquetUtil").fileMetrics(
                        source, metrics_config, mapping
                    )
                )
                .build()
            )
            for location in sources:
                rewrite = rewrite.deleteFile(found[location])
            rewrite = rewrite.addFile(data_file)
            removed, added = removed + len(sources), added + 1
        if not added:
            return None
        rewrite.commit()
        return removed, added
