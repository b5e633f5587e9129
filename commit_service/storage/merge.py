"""Small Parquet files of one table partition merged into one file by Arrow, for the merges of an
append table's small files (``commit_service.coordination.table_maintenance``).

Called by each format's maintainer (:mod:`commit_service.delta.maintenance`,
:mod:`commit_service.iceberg.maintenance`), which lists the files, and commits the merged file in
their place with a rewrite that changes no data. A merge through Spark (Delta's ``OPTIMIZE``,
Iceberg's ``rewriteDataFiles``) cost 2.3-6.6 CPU-seconds for 10 MB of small files
(docs/performance.md, "Merging small files with the rounds"): planning, tasks and a code
generation, for what is here a read of each file and one write.

The rows are written as they were read: files in the order given, each file's rows in its order,
the same Arrow schema (field ids and Spark's schema metadata kept), so a reader of the table sees
the same values. Only files of one schema merge here: :func:`refusal` says why a group is left to
Spark instead (schemas that differ between files, and the types whose Parquet form Arrow would
write otherwise than it read them: lists and maps, whose element names differ between writers,
nanosecond timestamps, and columns of no type). Spark's INT96 timestamps are written as the UTC
microseconds they hold (INT64 ``TIMESTAMP(MICROS)``), which Spark reads as the same ``timestamp``.

Memory is bounded by ``ROW_GROUP_BYTES`` of decoded rows (written as row groups of at most
``ROW_GROUP_ROWS``), ``READ_AHEAD`` files in flight and the merged file itself (compressed, no
larger than the group's files together: below the target).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from commit_service.errors import DataFileError
from commit_service.storage.facts import FileFacts
from commit_service.storage.reader import StorageReader

logger = logging.getLogger(__name__)

ROW_GROUP_BYTES = 128 * 1024 * 1024  # decoded rows held before they are written
# The most rows a row group holds (Arrow's own default): a merged file keeps its rows' time order,
# and a query of a time range reads only the row groups whose bounds meet it. Row groups of 128 MiB
# decoded held 3.3 million of the long benchmark's rows, so a one-minute range of 300,000 read
# eleven times its rows (docs/performance.md, "Beside Apache Iceberg's Kafka Connect sink").
ROW_GROUP_ROWS = 1024 * 1024
READ_AHEAD = 8  # files read at once (on S3 each is a request or two; they wait on the network)
# the table format's codec names (Spark's spark.sql.parquet.compression.codec, Iceberg's
# write.parquet.compression-codec) as Arrow's; a codec not here leaves the merge to Spark
CODECS = {
    "uncompressed": "none",
    "none": "none",
    "snappy": "snappy",
    "gzip": "gzip",
    "zstd": "zstd",
    "lz4": "lz4",
    "lz4_raw": "lz4",
    "lz4raw": "lz4",
    "brotli": "brotli",
}


@dataclass(frozen=True)
class Merged:
    """The file a merge wrote: where, what storage says of it, and the rows it read."""

    uri: str
    facts: FileFacts  # its footer's facts (Delta statistics; the footer itself, for Iceberg's metrics)
    rows: int


def refusal(schema: pa.Schema) -> str | None:
    """Why files of ``schema`` are not merged by Arrow (None: they may be)."""
    for field in schema:
        reason = _type_refusal(field.type)
        if reason is not None:
            return f"column {field.name}: {reason}"
    return None


def _type_refusal(t: pa.DataType) -> str | None:
    if pa.types.is_struct(t):
        return next((r for r in (_type_refusal(t.field(i).type) for i in range(t.num_fields)) if r), None)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) or pa.types.is_fixed_size_list(t):
        return "lists and maps are merged by Spark (their element names differ between writers)"
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return "nanosecond timestamps are merged by Spark"
    if pa.types.is_null(t):
        return "a column of no type is merged by Spark"
    return None


def merge_files(storage: StorageReader, sources: Sequence[str], target: str, codec: str) -> Merged | None:
    """Write the rows of the Parquet files ``sources`` (canonical URIs, in this order) into the new
    file ``target``, compressed with the table's ``codec`` (its format's name for it), or None
    (nothing written) when they are not of one schema that Arrow merges as it read it
    (:func:`refusal`) or the codec is not one Arrow writes (logged). The file is put whole when
    written (no reader sees it half written). Raises what storage raises."""
    compression = CODECS.get(codec.lower())
    if compression is None:
        logger.info(
            "merge of %d files into %s left to Spark: Arrow does not write codec %s", len(sources), target, codec
        )
        return None
    tables = _read(storage, sources)
    first = next(tables, None)
    if first is None:
        return None
    schema = first.schema
    reason = refusal(schema)
    plain = schema.remove_metadata()
    out = pa.BufferOutputStream()
    rows, held, held_bytes = 0, [first], first.nbytes
    with pq.ParquetWriter(out, schema, compression=compression) as writer:
        for table in tables if reason is None else ():
            if not table.schema.remove_metadata().equals(plain, check_metadata=True):  # field ids compared too
                reason = "their schemas differ"
                break
            if held_bytes + table.nbytes > ROW_GROUP_BYTES:
                rows += _write(writer, held)
                held, held_bytes = [], 0
            held.append(table)
            held_bytes += table.nbytes
        if reason is None:
            rows += _write(writer, held)
    if reason is not None:
        logger.info("merge of %d files into %s left to Spark: %s", len(sources), target, reason)
        return None
    storage.put(target, out.getvalue().to_pybytes())
    facts = storage.facts(target, parquet=True, keep_footer=True)
    if facts.num_records != rows:  # never commit a merge that lost or gained a row
        raise DataFileError(target, f"the merged file holds {facts.num_records} rows where {rows} were read")
    return Merged(target, facts, rows)


def _write(writer: pq.ParquetWriter, held: list[pa.Table]) -> int:
    if not held:
        return 0
    table = pa.concat_tables(held)
    writer.write_table(table, row_group_size=max(1, min(table.num_rows, ROW_GROUP_ROWS)))
    return table.num_rows


def _read(storage: StorageReader, sources: Sequence[str]) -> Iterator[pa.Table]:
    """Each file's rows, in order, ``READ_AHEAD`` files read at once."""
    with ThreadPoolExecutor(READ_AHEAD, thread_name_prefix="lakegate-merge-read") as pool:
        for start in range(0, len(sources), READ_AHEAD):
            for data in pool.map(storage.read_bytes, sources[start : start + READ_AHEAD]):
                yield _table(data)


def _table(data: bytes) -> pa.Table:
    """A file's rows, read by one ``ParquetFile`` (``pq.read_table`` builds a dataset for each
    file, which a merge of a hundred small files paid for in the interpreter). Top-level INT96
    timestamps (Spark's default for Parquet: UTC instants, to the microsecond as Spark writes
    them) are read as UTC microseconds and so written as INT64 ``TIMESTAMP(MICROS, UTC)``, the
    same ``timestamp`` to Spark; INT96 inside a struct stays in nanoseconds, which :func:`refusal`
    leaves to Spark."""
    file = pq.ParquetFile(pa.BufferReader(data))
    schema = file.metadata.schema
    int96 = [schema.column(i).path for i in range(len(schema)) if schema.column(i).physical_type == "INT96"]
    if not int96 or any("." in path for path in int96):
        return file.read()
    table = pq.ParquetFile(pa.BufferReader(data), coerce_int96_timestamp_unit="us").read()
    utc = pa.timestamp("us", tz="UTC")
    for name in int96:
        i = table.schema.get_field_index(name)
        table = table.set_column(i, table.schema.field(i).with_type(utc), table.column(i).cast(utc))
    return table
