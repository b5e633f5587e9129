"""What a round's files are before anything is written: their facts checked against their
manifests, the offsets their content holds, and Spark's schema of each Parquet footer.

Called by both table formats' committers (:class:`~commit_service.delta.committer.DeltaCommitter`,
:class:`~commit_service.iceberg.committer.IcebergCommitter`) at the start of every commit, from
the table's commit thread.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from commit_service.domain import coverage
from commit_service.domain.coverage import OffsetCheck
from commit_service.domain.paths import table_location
from commit_service.domain.plan import PendingFile
from commit_service.errors import DataFileError
from commit_service.round.convert import FrameReader
from commit_service.storage.prefetch import FactsCache
from commit_service.storage.reader import FileFacts
from lakegate_core.protocol import FileFormat

SCHEMA_CACHE = 256  # distinct footer schemas remembered


def checked_facts(cache: FactsCache, files: Sequence[PendingFile]) -> dict[str, FileFacts]:
    """Every file's facts (size and mtime; for Parquet also its footer's), mostly read ahead by
    :mod:`commit_service.storage.prefetch` while the file waited; checked against its manifest."""
    results = cache.get_all([p.file for p in files])
    facts = {}
    for p, f in zip(files, results, strict=True):
        if f.size_bytes != p.file.size_bytes:
            raise DataFileError(p.file.path, f"is {f.size_bytes} bytes, the manifest said {p.file.size_bytes}")
        if f.num_records is not None and p.file.record_count is not None and f.num_records != p.file.record_count:
            raise DataFileError(p.file.path, f"holds {f.num_records} records, the manifest said {p.file.record_count}")
        facts[p.file.path] = f
    return facts


def check_coverage(
    files: Sequence[PendingFile], facts: dict[str, FileFacts], reader: FrameReader, check: OffsetCheck
) -> None:
    """Refuse a file whose content holds other offsets than its manifest claims (when it carries
    the sink's offset field; ``offset_check: off`` skips it)."""
    if check is OffsetCheck.OFF:
        return
    for p in files:
        if p.file.format is FileFormat.PARQUET:
            held = facts[p.file.path].coverage
        else:  # JSON lines, or CSV records as JSON lines
            held = coverage.from_lines(reader.lines(p))
        coverage.check(p.file, held, check)


class ParquetSchemas:
    """Spark's schema of a Parquet file: one Spark read per distinct footer schema, remembered
    across commits (a sink writes the same schema file after file). One per table committer."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self._schemas: dict[str, dict[str, Any]] = {}  # footer schema (Arrow text) -> Spark's schema

    def get(self, path: str, key: str | None) -> dict[str, Any]:
        schema = self._schemas.get(key) if key is not None else None
        if schema is None:
            schema = json.loads(self.spark.read.parquet(table_location(path)).schema.json())
            if key is not None:
                if len(self._schemas) >= SCHEMA_CACHE:
                    self._schemas.clear()
                self._schemas[key] = schema
        return schema
