"""One round's Avro container files: each read once, and its records decoded by Arrow or by Spark.

Used by :class:`~commit_service.round.convert.FrameReader`. :meth:`AvroReads.load` reads a file's
bytes (on the read-ahead's threads) and unwraps a container inside a compressed stream. A file
whose writer schema DataFusion decodes as Spark does
(:func:`~commit_service.domain.avro_files.arrow_refusal`) is spooled locally with its header's facts
(writer schema, the blocks' record count), and its offsets come from the decoding of its records:
the first :meth:`AvroReads.summary` of a writer schema decodes every spooled file of it at once
(:mod:`commit_service.storage.avro_arrow`), each file's rows counted against its blocks, and
:meth:`AvroReads.table` hands those rows to Spark. The other files are summarized by fastavro
(:func:`~commit_service.domain.avro_files.summary`: the first and last block decoded for the
offsets), and they and any group whose decoding fails its checks are read by Spark's Avro source
where :meth:`AvroReads.readable` says: the file itself, or for a wrapped container a copy staged in
the table's storage, which every Spark executor reads (staged only when Spark reads it).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from commit_service.domain import avro_files
from commit_service.domain.avro_files import AvroSummary
from commit_service.domain.coverage import OFFSET_FIELD
from commit_service.domain.plan import PendingFile
from commit_service.domain.round_schema import Schema
from commit_service.errors import DataFileError
from commit_service.storage.arrow_tables import ArrowReadError, bounds, rows_of
from commit_service.storage.avro_arrow import FILE_COLUMN, AvroSpool
from commit_service.storage.reader import StorageReader

logger = logging.getLogger(__name__)

# why each writer schema (its header's text) was left to Spark, logged once per process
_LEFT_TO_SPARK: dict[str, str] = {}


class AvroReads:
    """The Avro files of one commit: facts, spooled containers, decoded records and staged copies.
    ``staging``: a folder (URI ending in "/") of the table's storage for wrapped containers Spark
    reads (None: such files are refused); ``arrow``: whether files are decoded by Arrow at all."""

    def __init__(self, storage: StorageReader, staging: str | None, *, arrow: bool = True) -> None:
        self.storage = storage
        self.staging = staging
        self.arrow = arrow
        self._summaries: dict[str, AvroSummary] = {}  # a file's facts, offsets included
        self._headers: dict[str, AvroSummary] = {}  # a spooled file's, until its group is decoded
        self._wrapped: set[str] = set()  # files whose container was inside a compressed stream
        self._spooled: dict[str, int] = {}  # a file's path -> its number in the spool
        self._decoded: dict[str, Any] = {}  # a decoded file's path -> its group's table
        self._staged: dict[str, str] = {}  # a file's path -> its container's staged URI
        self._spool = AvroSpool()
        self.decoded = 0  # files of this commit whose records Arrow decoded and Spark took

    def load(self, p: PendingFile) -> None:
        """Read ``p`` once: spooled with its header's facts, or summarized by fastavro."""
        path = p.file.path
        if path in self._summaries or path in self._headers:
            return
        try:
            container, wrapped = avro_files.open_container(self.storage.read_bytes(path))
            header = avro_files.blocks(container)
        except avro_files.AvroFileError as exc:
            raise DataFileError(path, str(exc)) from None
        if wrapped is not None:
            if self.staging is None:
                raise DataFileError(path, f"is an Avro container inside a {wrapped.value} stream")
            self._wrapped.add(path)
        if self.arrow and self._refusal(header.schema_key) is None:
            self._spooled[path] = self._spool.put(header.schema_key, container)
            self._headers[path] = header
            return
        self._summaries[path] = self._fastavro(path, container)
        if wrapped is not None:
            self._stage(path, container)

    def summary(self, p: PendingFile) -> AvroSummary:
        """``p``'s writer schema, record count and offsets, read once per commit."""
        path = p.file.path
        self.load(p)
        if path not in self._summaries:
            self._decode(self._headers[path].schema_key)
        return self._summaries[path]

    def _decode(self, key: str) -> None:
        """Decode every spooled file of writer schema ``key`` not decoded yet, and take their
        offsets from their records; where that fails, fastavro's summary and Spark's reading."""
        paths = [path for path, h in self._headers.items() if h.schema_key == key]
        headers = [self._headers.pop(path) for path in paths]
        writer = json.loads(key)
        try:
            table = self._spool.decode(key, [self._spooled[path] for path in paths], [h.records for h in headers])
        except ArrowReadError as exc:
            self._left(key, str(exc))
            for path in paths:
                self._summaries[path] = self._fastavro(path, self._spool.container(self._spooled[path]))
            return
        by_file = bounds(table, FILE_COLUMN, OFFSET_FIELD) if avro_files.has_offsets(writer) else {}
        for path, header in zip(paths, headers, strict=True):
            low, high = by_file.get(self._spooled[path], (None, None))
            self._summaries[path] = avro_files.bounded(header, writer, low, high)
            self._decoded[path] = table

    def _fastavro(self, path: str, container: bytes) -> AvroSummary:
        try:
            return avro_files.summary(container)
        except avro_files.AvroFileError as exc:
            raise DataFileError(path, str(exc)) from None

    def readable(self, path: str) -> str:
        """Where Spark's Avro source reads the file ``path``: its staged container, or the file."""
        if path in self._wrapped and path not in self._staged:
            self._stage(path, self._spool.container(self._spooled[path]))
        return self._staged.get(path, path)

    def table(self, files: Sequence[PendingFile], spark_schema: Schema) -> Any:
        """The records of ``files`` (of one writer schema) as one Arrow table of Spark's schema of
        them, ``spark_schema``; None where Spark's Avro source reads them instead (logged once per
        writer schema, with the reason)."""
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        for p in files:
            self.summary(p)
        if not all(p.file.path in self._decoded for p in files):
            return None
        tables = {id(self._decoded[p.file.path]): self._decoded[p.file.path] for p in files}.values()
        parts = [(t, [self._spooled[p.file.path] for p in files if self._decoded[p.file.path] is t]) for t in tables]
        try:
            typed = rows_of(parts, FILE_COLUMN, to_arrow_schema(StructType.fromJson(spark_schema)))
        except (ArrowReadError, TypeError) as exc:  # TypeError: a Spark type with no Arrow one
            self._left(self.summary(files[0]).schema_key, str(exc))
            return None
        self.decoded += len(files)
        return typed

    def _refusal(self, key: str) -> str | None:
        if key in _LEFT_TO_SPARK:
            return _LEFT_TO_SPARK[key]
        reason = avro_files.arrow_refusal(json.loads(key))
        if reason is not None:
            self._left(key, reason)
        return reason

    @staticmethod
    def _left(key: str, reason: str) -> None:
        if key not in _LEFT_TO_SPARK:
            if len(_LEFT_TO_SPARK) >= 1_000:
                _LEFT_TO_SPARK.clear()
            _LEFT_TO_SPARK[key] = reason
            logger.info("Avro files of a writer schema are read by Spark's Avro source: %s", reason)

    def _stage(self, path: str, container: bytes) -> None:
        assert self.staging is not None
        staged = f"{self.staging}{uuid.uuid4().hex}.avro"
        self.storage.put(staged, container)
        self._staged[path] = staged

    def close(self) -> None:
        """Delete what this commit spooled and staged: the staging folder whole, so what a round that
        crashed left there goes too (one round of a table runs at a time)."""
        self._spool.close()
        self._decoded.clear()
        if self._staged and self.staging is not None:
            self.storage.delete_own(self.staging)
            self._staged.clear()
