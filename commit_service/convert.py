"""The files a commit rewrites into the table, read as Spark DataFrames (one reader per commit).

Used by :class:`~commit_service.delta_commit.DeltaCommitter` inside a commit's transaction: its
frames go to ``txn.writeFiles``, which writes new Parquet files under the table root. Rewritten
are JSON-lines and CSV files, and Parquet files whose sink envelope is unwrapped (their columns
change, so they cannot be added in place).

Text files are read whole through :class:`~commit_service.storage.StorageReader` and decompressed
by their magic bytes (:mod:`commit_service.content`): Spark would pick a codec by file extension
only, and sinks write gzip objects without one. Spark then parses the lines (``read.json`` /
``read.csv`` over an RDD of lines), so types are inferred exactly as Spark infers them from files.
Where the table's ``unwrap`` says so, the envelope's ``value`` fields become top-level columns and
its ``key``/``offset``/``timestamp``/``headers`` become ``_kafka_*`` columns.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

from commit_service.content import KAFKA_COLUMNS, ContentError, Unwrap, decode_text, envelope_shape
from commit_service.errors import DataFileError
from commit_service.paths import table_location
from commit_service.state import PendingFile
from commit_service.storage import FileFacts, StorageReader
from lakegate_core.protocol import FileFormat

CORRUPT_RECORD = "_corrupt_record"  # Spark's column for lines it cannot parse (PERMISSIVE mode)
LINES_PER_SLICE = 20_000


class FrameReader:
    """Reads one commit's rewritten files; caches each file's text and frame for that commit."""

    def __init__(self, spark: Any, storage: StorageReader, unwrap: Unwrap) -> None:
        self.spark = spark
        self.storage = storage
        self.unwrap = unwrap
        self._lines: dict[str, list[str]] = {}
        self._frames: dict[str, Any] = {}
        self._groups: dict[tuple[str, ...], Any] = {}

    def rewrites(self, p: PendingFile, facts: FileFacts | None) -> bool:
        """Whether ``p`` is rewritten (text, or Parquet whose envelope is unwrapped) or added in place."""
        if p.file.format is not FileFormat.PARQUET:
            return True
        return facts is not None and envelope_shape(dict(facts.columns), self.unwrap)

    def lines(self, p: PendingFile) -> list[str]:
        """The non-empty lines of a text file, decompressed whatever its name says."""
        path = p.file.path
        if path not in self._lines:
            try:
                text = decode_text(self.storage.read_bytes(path))
            except ContentError as exc:
                raise DataFileError(path, str(exc)) from None
            try:
                decoded = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFileError(path, f"is not UTF-8 text: {exc}") from None
            self._lines[path] = [line for line in decoded.splitlines() if line.strip()]
        return self._lines[path]

    def frame(self, p: PendingFile) -> Any:
        """One file as the DataFrame the table would get (after unwrapping)."""
        if p.file.path not in self._frames:
            self._frames[p.file.path] = self._unwrapped(self._read([p]))
        return self._frames[p.file.path]

    def schema(self, p: PendingFile) -> dict[str, Any]:
        """Spark's schema (JSON form) of :meth:`frame`; a file with unparseable lines is refused."""
        schema: dict[str, Any] = json.loads(self.frame(p).schema.json())
        if any(f["name"] == CORRUPT_RECORD for f in schema["fields"]):
            raise DataFileError(p.file.path, f"has lines that are not {p.file.format.value} records")
        return schema

    def group_schema(self, files: list[PendingFile]) -> dict[str, Any] | None:
        """Spark's schema of :meth:`group_frame`: one inference over all of ``files`` instead of one
        Spark job per file. None where each file's own schema is needed: CSV (headers are per
        file), or a line that does not parse (:meth:`schema` then names the file)."""
        if files[0].file.format is FileFormat.CSV:
            return None
        schema: dict[str, Any] = json.loads(self.group_frame(files).schema.json())
        return None if any(f["name"] == CORRUPT_RECORD for f in schema["fields"]) else schema

    def group_frame(self, files: list[PendingFile]) -> Any:
        """All of ``files`` (one format) as one DataFrame, for one ``txn.writeFiles`` (made once per
        commit: reading text infers its schema, a Spark job)."""
        key = tuple(p.file.path for p in files)
        if key not in self._groups:
            if files[0].file.format is FileFormat.CSV:  # headers are per file: one frame each, unioned
                frames = [self.frame(p) for p in files]
                self._groups[key] = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
            else:
                self._groups[key] = self._unwrapped(self._read(files))
        return self._groups[key]

    def raw_frame(self, files: list[PendingFile]) -> Any:
        """``files`` (one format) as the sink wrote them, envelope kept: an upsert table reads its
        changes from the envelope (:mod:`commit_service.upsert`)."""
        return self._read(files)

    def _read(self, files: list[PendingFile]) -> Any:
        fmt = files[0].file.format
        if fmt is FileFormat.PARQUET:
            return self.spark.read.parquet(*[table_location(p.file.path) for p in files])
        lines = list(self._all_lines(files)) or [""]
        # a slice per LINES_PER_SLICE lines, at most one per core: one slice of a large commit is
        # one task on one core, shipped as one huge task
        slices = max(1, min(self.spark.sparkContext.defaultParallelism, len(lines) // LINES_PER_SLICE))
        rdd = self.spark.sparkContext.parallelize(lines, slices)
        if fmt is FileFormat.JSONL:
            return self.spark.read.json(rdd)
        return self.spark.read.option("header", "true").option("inferSchema", "true").csv(rdd)

    def _all_lines(self, files: Iterable[PendingFile]) -> Iterable[str]:
        for p in files:
            yield from self.lines(p)

    def _unwrapped(self, df: Any) -> Any:
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        structs = {f.name: isinstance(f.dataType, StructType) for f in df.schema.fields}
        if not envelope_shape(structs, self.unwrap):
            return df
        cols = [F.col("value.*") if structs["value"] else F.col("value")]
        cols += [F.col(name).alias(alias) for name, alias in KAFKA_COLUMNS.items() if name in structs]
        return df.select(*cols)
