"""What a round's files are before anything is written: their facts checked against their
manifests, the offsets their content holds, and Spark's schema of each Parquet footer and Avro
writer schema.

Called by both table formats' committers (:class:`~commit_service.delta.committer.DeltaCommitter`,
:class:`~commit_service.iceberg.committer.IcebergCommitter`) at the start of every commit, from
the table's commit thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
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
        elif p.file.format is FileFormat.AVRO:
            held = reader.avro_files.summary(p).coverage
        else:  # JSON lines, or CSV records as JSON lines
            held = coverage.from_lines(reader.lines(p))
        coverage.check(p.file, held, check)


class FileSchemas:
    """Spark's schema of a Parquet or Avro file: one Spark read per distinct footer or writer
    schema, remembered across commits (a sink writes the same schema file after file). One per
    table committer."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        # (format, footer schema as Arrow text or Avro writer schema) -> Spark's schema
        self._schemas: dict[tuple[str, str], dict[str, Any]] = {}

    def get(self, path: str, key: str | None) -> dict[str, Any]:
        """A Parquet file's (``key``: its footer's Arrow schema as text)."""
        return self._schema("parquet", path, key)

    def avro(self, where: Callable[[], str], key: str | None) -> dict[str, Any]:
        """An Avro file's (``key``: its writer schema as its header holds it), read where
        ``where()`` says only when the writer schema is new."""
        return self._schema("avro", where, key)

    def _schema(self, fmt: str, path: str | Callable[[], str], key: str | None) -> dict[str, Any]:
        schema = self._schemas.get((fmt, key)) if key is not None else None
        if schema is None:
            location = table_location(path if isinstance(path, str) else path())
            schema = json.loads(self.spark.read.format(fmt).load(location).schema.json())
            if key is not None:
                if len(self._schemas) >= SCHEMA_CACHE:
                    self._schemas.clear()
                self._schemas[(fmt, key)] = schema
        return schema
