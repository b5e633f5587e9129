"""An append Iceberg table's small files of one partition merged by Arrow and committed as
Iceberg's ``rewriteDataFiles`` commits its own: one ``replace`` snapshot that deletes them and
adds the merged file, validated from the snapshot the files were read in, with no offsets.

Used by :class:`~commit_service.iceberg.maintenance.IcebergMaintainer` for each group of a merge
plan (:mod:`commit_service.domain.compaction`), before ``rewriteDataFiles``, which merges the
groups this leaves (:func:`commit_service.storage.merge.refusal`). The files come from the look
that planned the merge (``io.lakegate.iceberg.SmallFiles``, which keeps them in the JVM); the
merged file's metrics are Iceberg's ``footerMetrics`` of the footer read back after it was
written (the table's name mapping), and it lies under the table's ``data/`` (orphan removal
deletes it when its commit never lands). Rounds that land meanwhile only append, and Iceberg
retries the replace on the new head; a file it deletes that is gone fails it, and the merge is
planned again at the next look.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from commit_service.domain.compaction import bins
from commit_service.errors import DataFileError
from commit_service.iceberg.tables import IcebergTable
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

    def merge(
        self,
        table: Any,
        look: Any,
        group: int,
        files: Sequence[tuple[str, int]],
        below_bytes: int,
        target_bytes: int,
    ) -> tuple[int, int] | None:
        """Merge group ``group``'s files of ``look`` (``io.lakegate.iceberg.SmallFiles``) below
        ``below_bytes`` (``files``: those, as Python read them, location and size, in the rounds'
        order) into files of up to about ``target_bytes``
        (:func:`~commit_service.domain.compaction.bins`) and commit them in their place, in one
        snapshot: (files removed, files added), or None when Arrow leaves them to Spark (nothing
        committed)."""
        merge = look.merge(group, below_bytes)
        if merge is None:
            return None  # rows deleted by delete files: rewriteDataFiles applies them
        if int(merge.count()) != len(files):
            raise ValueError(
                f"table {self.table.name}: {int(merge.count())} files to merge in the JVM, {len(files)} here"
            )
        mapping = self.table.name_mapping(table)
        codec = str(table.properties().getOrDefault(CODEC, DEFAULT_CODEC))  # what Iceberg's writers use
        rows = added = 0
        for run in bins([size for _, size in files], target_bytes):
            target = f"{table.location().rstrip('/')}/{MERGED_FOLDER}/part-{uuid.uuid4()}.parquet"
            merged = merge_files(self.storage, [files[i][0] for i in run], target, codec)
            if merged is None or merged.facts.footer is None:
                return None  # nothing committed; a merged file already written is an orphan removal deletes
            rows += int(
                merge.replace(run.start, run.stop, target, merged.facts.size_bytes, merged.facts.footer, mapping)
            )
            added += 1
        if not added:
            return None
        replaced = int(merge.replacedRows())
        if replaced != rows:  # the table's counts of the files replaced, against the merged files' footers
            raise DataFileError(target, f"merged files hold {rows} rows where the files they replace hold {replaced}")
        return int(merge.commit()), added
