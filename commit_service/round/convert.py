"""The files a commit rewrites into the table, read as Spark DataFrames of the round's one schema.

Used by :class:`~commit_service.delta.committer.DeltaCommitter` (and for upsert tables by
:class:`~commit_service.delta.upsert.UpsertWriter`) inside a commit's transaction: the committer
asks each file's :meth:`FrameReader.shape`, reconciles them with the table's
(:func:`commit_service.domain.round_schema.reconcile`), and then :meth:`FrameReader.frame` reads the
rewritten files as one frame holding exactly that schema for ``txn.writeFiles``. Rewritten are
JSON-lines, JSON-array, CSV and Avro files, Parquet files whose sink envelope is unwrapped, and Parquet files whose
types differ from the table's (or that lie outside an ``in_place`` table's root).

Text files are read whole through :class:`~commit_service.storage.reader.StorageReader` and decompressed
by their magic bytes (:mod:`commit_service.domain.content`): Spark would pick a codec by file extension
only, and sinks write gzip objects without one. A round's text and Avro files are read on several
threads at once (:meth:`FrameReader.read_ahead`). JSON records are typed and read by Arrow
(:mod:`commit_service.storage.json_types`) and handed to Spark as Arrow columns; where Arrow might
read them otherwise they are typed by :mod:`commit_service.domain.json_infer` (as Spark would, but a
null-only value keeps no type) and Spark parses the lines with that explicit schema, failing on any
line that does not fit it. Parquet files
are read by Spark, files of one footer schema together. Avro container files are read once, by the
service, and the files of one writer schema decoded together into Arrow where DataFusion decodes
them as Spark's Avro source would, else read by that source (:mod:`commit_service.round.avro_reads`). Where the table's ``unwrap`` says so, the
envelope's ``value`` fields become top-level columns and its ``key``/``offset``/``timestamp``/
``headers`` become ``_kafka_*`` columns.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from commit_service.domain import csv_records, json_infer
from commit_service.domain.content import KAFKA_COLUMNS, ContentError, Unwrap, decode_text, envelope_shape
from commit_service.domain.paths import table_location
from commit_service.domain.plan import PendingFile
from commit_service.domain.round_schema import VOID, Schema
from commit_service.errors import DataFileError
from commit_service.round.avro_reads import AvroReads
from commit_service.round.conform import conform, devoid
from commit_service.round.parquet_reads import arrow_table
from commit_service.storage import json_types
from commit_service.storage.reader import FileFacts, StorageReader
from lakegate_core.protocol import CsvLayout, FileFormat

LINES_PER_SLICE = 20_000

# Spark's schema (JSON form) of a Parquet file, given its path and footer key (the committer
# remembers them across commits: a sink writes the same schema file after file)
SchemaOf = Callable[[str, "str | None"], Schema]
# Spark's schema of an Avro file, given where Spark reads it (asked only when the writer schema is
# new to the committer: a wrapped container is staged for it then) and its writer schema
AvroSchemaOf = Callable[[Callable[[], str], "str | None"], Schema]


def marked_voids(schema: Schema, paths: Sequence[str]) -> Schema:
    """``schema`` with the struct leaves at the dotted ``paths`` typed :data:`VOID`."""
    if not paths:
        return schema
    heads: dict[str, list[str]] = {}
    for path in paths:
        head, _, rest = path.partition(".")
        heads.setdefault(head, []).append(rest)
    fields = []
    for f in schema["fields"]:
        rests = heads.get(f["name"])
        if rests is not None and "" in rests:
            f = {**f, "type": VOID}
        elif rests is not None and isinstance(f["type"], dict) and f["type"].get("type") == "struct":
            f = {**f, "type": marked_voids(f["type"], rests)}
        fields.append(f)
    return {**schema, "fields": fields}


def lifts(schema: Schema, unwrap: Unwrap) -> bool:
    """Whether a file of (raw) ``schema`` has its envelope unwrapped: a void ``value`` (every record
    a tombstone) counts as a record whose fields are unknown."""
    structs = {
        f["name"]: f["type"] == VOID or (isinstance(f["type"], dict) and f["type"].get("type") == "struct")
        for f in schema["fields"]
    }
    return envelope_shape(structs, unwrap)


def unwrapped(schema: Schema, unwrap: Unwrap) -> Schema:
    """The columns a file of (raw) ``schema`` gives the table: the envelope's value fields and its
    ``_kafka_*`` columns where it is unwrapped, else its own."""
    if not lifts(schema, unwrap):
        return schema
    by_name = {f["name"]: f for f in schema["fields"]}
    value = by_name["value"]["type"]
    if isinstance(value, dict) and value.get("type") == "struct":
        fields = list(value["fields"])
    elif value == VOID:
        fields = []
    else:  # unwrap: value, and a value that is no record: it stays one column
        fields = [by_name["value"]]
    fields += [{**by_name[name], "name": alias} for name, alias in KAFKA_COLUMNS.items() if name in by_name]
    return {"type": "struct", "fields": fields}


def kafka_timestamp(table_schema: dict[str, Any] | None) -> str | None:
    """How a round reads the envelope's ``timestamp``: as the table's ``_kafka_timestamp`` holds it
    (``timestamp``, or ``long`` epoch millis in a table made so before), ``timestamp`` for a new
    column; None (each file's own type) for a table that holds it in another type."""
    for f in (table_schema or {}).get("fields", []):
        if f["name"] == KAFKA_COLUMNS["timestamp"]:
            return f["type"] if f["type"] in ("timestamp", "long") else None
    return "timestamp"


def with_timestamp(schema: Schema, kind: str) -> Schema:
    """An envelope's schema with its ``timestamp`` typed ``kind`` (unless no record has one)."""
    fields = [{**f, "type": kind} if f["name"] == "timestamp" and f["type"] != VOID else f for f in schema["fields"]]
    return {**schema, "fields": fields}


def timestamp_column(col: Any, source: Any, kind: str) -> Any:
    """An envelope's ``timestamp`` column (of type ``source``: ISO-8601 text, epoch millis, or a
    timestamp) as ``kind``: ``timestamp``, or ``long`` epoch millis."""
    from pyspark.sql import functions as F

    if source == kind:
        return col
    as_timestamp = F.to_timestamp(col) if source == "string" else F.timestamp_millis(col) if source == "long" else col
    return as_timestamp if kind == "timestamp" else F.unix_millis(as_timestamp)


class FrameReader:
    """Reads one commit's rewritten files; caches each file's text, records and shape for that commit.

    ``timestamp``: the type every envelope's ``timestamp`` is read as, whatever its format wrote
    (JSON lines ISO-8601 text, CSV and Parquet epoch millis or a timestamp): ``timestamp``, or
    ``long`` (epoch millis) for a table that already holds it so; ``None`` keeps each file's own."""

    def __init__(
        self,
        spark: Any,
        storage: StorageReader,
        unwrap: Unwrap,
        parquet_schemas: SchemaOf,
        avro_schemas: AvroSchemaOf,
        timestamp: str | None = "timestamp",
        staging: str | None = None,
        arrow: bool = True,
    ) -> None:
        self.spark = spark
        self.storage = storage
        self.unwrap = unwrap
        self.parquet_schemas = parquet_schemas
        self.avro_schemas = avro_schemas
        self.timestamp = timestamp
        self._lines: dict[str, list[str]] = {}
        self._records: dict[str, list[dict[str, Any]]] = {}
        self._raw: dict[str, Schema] = {}
        self._json: dict[str, json_types.JsonRecords] = {}  # a JSON file's records as Arrow read them
        # staging: a folder of the table's storage for wrapped Avro containers Spark reads
        # arrow: Avro and rewritten Parquet files read by Arrow where it reads them as Spark does
        # (False: by Spark's sources only, as tests compare)
        self.avro_files = AvroReads(storage, staging, arrow=arrow)
        self.arrow = arrow
        self.parquet_decoded = 0  # rewritten Parquet files of this commit read by Arrow
        self.threads = 1  # how many files are read at once (read_ahead's)
        # one raw shape per Parquet schema and null-string set, shared by the files that have them
        # (a round of 100,000 files of one sink then holds a handful of shapes, not 100,000 copies)
        self._parquet_raw: dict[tuple[int, tuple[str, ...]], tuple[Schema, Schema]] = {}
        self._lifted_shapes: dict[int, tuple[Schema, bool]] = {}  # id of a raw shape -> it, and whether it lifts

    def read_ahead(self, files: Sequence[PendingFile], threads: int) -> None:
        """Read the round's text and Avro files on ``threads`` threads at once: their bytes, and for
        text their records' lines and shape. Reading, decompressing and Arrow's typing run outside
        the interpreter lock; on an object store each read is mostly its latency. What a file's read
        raises is raised here, for the first such file in ``files``' order."""
        self.threads = max(1, threads)
        todo = [p for p in files if p.file.format is not FileFormat.PARQUET]
        if len(todo) < 2 or threads < 2:
            return
        with ThreadPoolExecutor(min(threads, len(todo)), thread_name_prefix="lakegate-read") as pool:
            for _ in pool.map(self._read_one, todo):
                pass

    def _read_one(self, p: PendingFile) -> None:
        if p.file.format is FileFormat.AVRO:
            self.avro_files.load(p)
        else:
            self.raw_shape(p, None)

    def lifts(self, p: PendingFile, facts: FileFacts | None) -> bool:
        """Whether ``p`` is Parquet in the sink's envelope (rewritten: its columns change)."""
        return p.file.format is FileFormat.PARQUET and facts is not None and self._lifted(self.raw_shape(p, facts))

    def _lifted(self, raw: Schema) -> bool:
        """``lifts(raw, unwrap)``, worked out once per shape: the files of one footer schema share
        their shape's object (kept beside its answer, so its id stays its own)."""
        known = self._lifted_shapes.get(id(raw))
        if known is None:
            known = self._lifted_shapes[id(raw)] = (raw, lifts(raw, self.unwrap))
        return known[1]

    def lines(self, p: PendingFile) -> list[str]:
        """The records of a text file as JSON lines: a JSON-lines file's own non-empty lines, a CSV
        file's records (:mod:`commit_service.domain.csv_records`) written as JSON."""
        path = p.file.path
        if path not in self._lines and p.file.format is FileFormat.CSV:
            self._lines[path] = [json.dumps(r) for r in self.records(p)]
        return self._lines[path] if p.file.format is FileFormat.CSV else self._text_lines(p)

    def _text_lines(self, p: PendingFile) -> list[str]:
        """A text file's lines, decompressed whatever its name says: JSON lines' non-empty ones, a
        CSV file's every line but an empty last one (a record whose fields are all null is an
        empty line)."""
        path = p.file.path
        key = f"text:{path}"
        if key not in self._lines:
            try:
                text = decode_text(self.storage.read_bytes(path))
            except ContentError as exc:
                raise DataFileError(path, str(exc)) from None
            try:
                decoded = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFileError(path, f"is not UTF-8 text: {exc}") from None
            # records end at "\n" only: str.splitlines would also cut inside a JSON string holding
            # U+2028 or U+0085, which sinks write unescaped
            pieces = decoded.split("\n")
            if p.file.format is FileFormat.CSV:  # an empty line is a record (a null value alone)
                self._lines[key] = pieces[:-1] if pieces[-1] == "" else pieces
            elif p.file.format is FileFormat.JSON:
                try:
                    self._lines[key] = json_infer.array_lines(decoded)
                except ValueError as exc:
                    raise DataFileError(path, f"is not a JSON array of records: {exc}") from None
            else:
                self._lines[key] = [line for line in pieces if line.strip()]
        return self._lines[key]

    def records(self, p: PendingFile) -> list[dict[str, Any]]:
        """A text file's records; a line that is not one refuses the file."""
        path = p.file.path
        if path not in self._records:
            try:
                if p.file.format is FileFormat.CSV:
                    layout = p.file.csv or CsvLayout()
                    self._records[path] = csv_records.records(self._text_lines(p), layout)
                else:
                    self._records[path] = json_infer.parse_lines(self._text_lines(p))
            except json_infer.LineError as exc:
                what = p.file.format.value
                raise DataFileError(
                    path, f"has lines that are not {what} records as the sink writes them: {exc}"
                ) from None
        return self._records[path]

    def close(self) -> None:
        """Delete what this reader spooled and staged."""
        self.avro_files.close()

    def rows(self, p: PendingFile, facts: FileFacts | None) -> int:
        """How many records ``p`` holds, counted from the file itself (each line of a text file is
        one record: sinks write no header): what the round guard expects written."""
        if p.file.format is FileFormat.PARQUET:
            return facts.num_records if facts is not None and facts.num_records is not None else 0
        if p.file.format is FileFormat.AVRO:
            return self.avro_files.summary(p).records
        return len(self._text_lines(p))

    def raw_shape(self, p: PendingFile, facts: FileFacts | None) -> Schema:
        """``p``'s columns as the sink wrote them (envelope kept), null-only values typed :data:`VOID`."""
        path = p.file.path
        if path not in self._raw:
            if p.file.format is FileFormat.PARQUET:
                physical = self.parquet_schemas(path, facts.schema_key if facts else None)
                nulls = facts.null_strings if facts else ()
                key = (id(physical), nulls)  # the physical schema is kept beside its shape: its id stays its own
                if key not in self._parquet_raw:
                    self._parquet_raw[key] = (physical, marked_voids(physical, nulls))
                self._raw[path] = self._parquet_raw[key][1]
            elif p.file.format is FileFormat.AVRO:
                writer = self.avro_files.summary(p).schema_key
                self._raw[path] = self.avro_schemas(functools.partial(self.avro_files.readable, path), writer)
            else:  # Arrow types and reads JSON records without a Python object per record, where it can
                arrow = json_types.read_records(self._text_lines(p)) if p.file.format is not FileFormat.CSV else None
                if arrow is not None:
                    self._json[path] = arrow
                self._raw[path] = arrow.shape if arrow is not None else json_infer.infer(self.records(p))
        return self._raw[path]

    def envelope_shape(self, p: PendingFile, facts: FileFacts | None) -> Schema:
        """:meth:`raw_shape` with the envelope's ``timestamp`` as this reader reads it (upsert
        tables read every file as the envelope)."""
        raw = self.raw_shape(p, facts)
        return raw if self.timestamp is None else with_timestamp(raw, self.timestamp)

    def shape(self, p: PendingFile, facts: FileFacts | None) -> Schema:
        """``p``'s columns as the table gets them (after unwrapping), voids marked."""
        raw = self.raw_shape(p, facts)
        return unwrapped(self.envelope_shape(p, facts), self.unwrap) if self._lifted(raw) else raw

    def frame(
        self, files: Sequence[PendingFile], facts: dict[str, FileFacts], target: Schema, *, raw: bool = False
    ) -> Any:
        """``files`` as one DataFrame of ``target``'s columns: unwrapped (``raw``: envelope kept, for
        upsert tables), conformed (:func:`commit_service.round.conform.conform`), unioned. Files of one
        format and one raw schema (Avro: one writer schema, which Spark reads the group by) are read
        together."""
        groups: dict[tuple[FileFormat, str], list[PendingFile]] = {}
        for p in files:
            shape = json.dumps(self.raw_shape(p, facts.get(p.file.path)), sort_keys=True)
            key = (p.file.format, self.avro_files.summary(p).schema_key if p.file.format is FileFormat.AVRO else shape)
            groups.setdefault(key, []).append(p)
        frames = []
        for (fmt, _), group in groups.items():
            source = self.raw_shape(group[0], facts.get(group[0].file.path))
            df = self._read(fmt, group, source, facts)
            if raw or lifts(source, self.unwrap):
                df, source = self._timestamps(df, source), self.envelope_shape(group[0], facts.get(group[0].file.path))
            if not raw:
                df, source = self._unwrapped(df, source), unwrapped(source, self.unwrap)
            frames.append(conform(df, source, target))
        # coalesced whatever the groups: Spark packs small files ~32 to a task (its open cost), so a
        # round of 300 sink files read as Parquet or Avro was written as ~10 table files, not one
        # per slice
        return functools.reduce(lambda a, b: a.union(b), frames).coalesce(self._slices(files, facts))

    def _slices(self, files: Sequence[PendingFile], facts: dict[str, FileFacts]) -> int:
        """How many tasks (and so files) a round's frame is written by: one per LINES_PER_SLICE
        records, at most one per core."""
        rows = sum(self.rows(p, facts.get(p.file.path)) for p in files)
        return max(1, min(self.spark.sparkContext.defaultParallelism, rows // LINES_PER_SLICE))

    def _read(self, fmt: FileFormat, files: list[PendingFile], source: Schema, facts: dict[str, FileFacts]) -> Any:
        if fmt is FileFormat.PARQUET:
            return self._parquet(files, facts)
        from pyspark.sql.types import StructType

        schema = StructType.fromJson(devoid(source))
        if fmt is FileFormat.AVRO:
            decoded = self.avro_files.table(files, source)
            if decoded is not None:
                return self.spark.createDataFrame(decoded, schema=schema).coalesce(self._slices(files, {}))
            return self.spark.read.format("avro").load(
                [table_location(self.avro_files.readable(p.file.path)) for p in files]
            )
        # Arrow reads JSON records in C++ and hands Spark columns: each file's as it was typed, or
        # (CSV records, records typed in Python) the group's lines at once. What Arrow might read
        # otherwise than Spark (json_types says None), Spark parses from the lines, failing on any
        # line that does not fit
        read = [self._json.get(p.file.path) for p in files]
        parts = [r for r in read if r is not None]
        if len(parts) == len(files):
            table = json_types.joined(parts)
            lines: list[str] = []
        else:
            lines = [line for p in files for line in self.lines(p)] or [""]
            table = json_types.read_lines(lines, devoid(source))
        rows = table.num_rows if table is not None else len(lines)
        slices = max(1, min(self.spark.sparkContext.defaultParallelism, rows // LINES_PER_SLICE))
        if table is not None:
            return self.spark.createDataFrame(table, schema=schema).coalesce(slices)
        rdd = self.spark.sparkContext.parallelize(lines, slices)
        return self.spark.read.schema(schema).option("mode", "FAILFAST").json(rdd)

    def _parquet(self, files: list[PendingFile], facts: dict[str, FileFacts]) -> Any:
        """A group of Parquet files of one footer schema: read by Arrow in the service
        (:mod:`commit_service.round.parquet_reads`), or by Spark."""
        from pyspark.sql.types import StructType

        first = facts.get(files[0].file.path)
        same = first is not None and all(
            getattr(facts.get(p.file.path), "schema_key", None) == first.schema_key for p in files
        )
        if self.arrow and first is not None and same:
            physical = self.parquet_schemas(files[0].file.path, first.schema_key)
            rows = sum(self.rows(p, facts[p.file.path]) for p in files)
            table = arrow_table(self.storage, [p.file.path for p in files], rows, physical, self.threads)
            if table is not None:
                self.parquet_decoded += len(files)
                frame = self.spark.createDataFrame(table, schema=StructType.fromJson(physical))
                return frame.coalesce(self._slices(files, facts))
        return self.spark.read.parquet(*[table_location(p.file.path) for p in files])

    def _timestamps(self, df: Any, source: Schema) -> Any:
        """``df`` (an envelope of ``source``) with its ``timestamp`` as :attr:`timestamp`."""
        kind = next((f["type"] for f in source["fields"] if f["name"] == "timestamp"), VOID)
        if self.timestamp is None or kind == VOID:
            return df
        return df.withColumn("timestamp", timestamp_column(df["timestamp"], kind, self.timestamp))

    def _unwrapped(self, df: Any, source: Schema) -> Any:
        from pyspark.sql import functions as F

        if not lifts(source, self.unwrap):
            return df
        by_name = {f["name"]: f["type"] for f in source["fields"]}
        value = by_name["value"]
        cols = []
        if isinstance(value, dict) and value.get("type") == "struct":
            cols.append(F.col("value.*"))
        elif value != VOID:
            cols.append(F.col("value"))
        cols += [F.col(name).alias(alias) for name, alias in KAFKA_COLUMNS.items() if name in by_name]
        return df.select(*cols)
