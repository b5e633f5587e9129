"""An append Delta table's small files of one partition merged by Arrow and committed as Delta's
``OPTIMIZE`` commits its own: the files removed and the merged file added with ``dataChange``
false, no ``txn`` action, operation ``OPTIMIZE``.

Used by :class:`~commit_service.delta.maintenance.DeltaMaintainer` for each group of a merge plan
(:mod:`commit_service.domain.compaction`), before ``OPTIMIZE``, which merges the groups this
leaves (:func:`commit_service.storage.merge.refusal`). The files come from the look that made the
plan (:meth:`DeltaMaintainer.small_files`), so no Spark job reads the snapshot again. The commit
starts from the table's newest snapshot: rounds that landed since only added files, which never
conflict with it (Delta's conflict checker takes a commit of ``dataChange`` false as snapshot
isolation); a file the merge removes that another commit removed first fails the commit, and the
merge is planned again at the next look.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from commit_service.delta.jvm_actions import ActionBuilder, ActionKind
from commit_service.delta.jvm_handles import JvmHandles
from commit_service.domain.compaction import bins
from commit_service.domain.paths import delta_path, file_uri
from commit_service.storage.merge import Merged, merge_files
from commit_service.storage.reader import StorageReader

OPTIMIZE = "org.apache.spark.sql.delta.DeltaOperations$Optimize"
PARQUET_CODEC = "spark.sql.parquet.compression.codec"  # Spark's default: snappy
MERGED_FOLDER = "merged"  # below the table root; not ``_``-prefixed, which VACUUM would never clean


@dataclass(frozen=True)
class SmallFile:
    """A data file of the table as the look read it (an ``AddFile``'s fields)."""

    path: str  # as the log has it: relative to the root, or absolute
    size: int
    modification_time: int
    partition_values: dict[str, str | None]
    deleted: bool = False  # it has a deletion vector (rows deleted in place): Spark merges it, applying it


class DeltaArrowMerge:
    """Merges one partition's small files by Arrow and commits them (one per table)."""

    def __init__(self, jvm: Any, conf: Any, root: str, storage: StorageReader, delta_log: Callable[[], Any]) -> None:
        self.root = root
        self.storage = storage
        self._delta_log = delta_log
        self._handles = JvmHandles.resolve(jvm)
        self._actions = ActionBuilder(jvm, self._handles)
        self._optimize = getattr(jvm, OPTIMIZE)
        self._conf = conf  # the session's SQL settings: its Parquet codec

    def merge(self, files: Sequence[SmallFile], target_bytes: int) -> tuple[int, int] | None:
        """Merge ``files`` (of one partition) into files of up to about ``target_bytes``
        (:func:`~commit_service.domain.compaction.bins`) and commit them in their place, in one
        commit: (files removed, files added), or None when Arrow leaves them to Spark (nothing
        committed; a merged file already written is left to VACUUM)."""
        ordered = sorted(files, key=lambda f: (f.modification_time, f.path))  # rounds' files in round order
        removes: list[dict[str, Any]] = []
        adds: list[dict[str, Any]] = []
        now = int(time.time() * 1000)
        codec = self._codec()  # what Spark's OPTIMIZE would write with
        for run in bins([f.size for f in ordered], target_bytes):
            sources = [ordered[i] for i in run]
            target = f"{self.root}{MERGED_FOLDER}/part-{uuid.uuid4()}.snappy.parquet"
            merged = merge_files(self.storage, [file_uri(f.path, self.root) for f in sources], target, codec)
            if merged is None:
                return None
            adds.append(self._add(merged, sources[0].partition_values))
            removes.extend(_remove(f, now) for f in sources)
        if not adds:
            return None
        txn = self._delta_log().startTransaction()
        h = self._handles
        nothing = h.as_scala(h.array_list()).toList()
        op = self._optimize(nothing, nothing, False, h.none, False)  # predicate, zOrderBy, auto, clusterBy, isFull
        actions = self._actions.seq(
            self._actions.many(ActionKind.REMOVE, removes), self._actions.many(ActionKind.ADD, adds)
        )
        txn.commit(actions, op)
        return len(removes), len(adds)

    def _codec(self) -> str:
        return str(self._conf.get(PARQUET_CODEC, "snappy"))

    def _add(self, merged: Merged, values: dict[str, str | None]) -> dict[str, Any]:
        return {
            "path": delta_path(merged.uri, self.root),
            "partitionValues": values,
            "size": merged.facts.size_bytes,
            "modificationTime": merged.facts.modification_time_ms,
            "dataChange": False,
            **({"stats": merged.facts.stats_json} if merged.facts.stats_json else {}),
        }


def _remove(f: SmallFile, now_ms: int) -> dict[str, Any]:
    return {
        "path": f.path,
        "deletionTimestamp": now_ms,
        "dataChange": False,
        "extendedFileMetadata": True,
        "partitionValues": f.partition_values,
        "size": f.size,
    }
