"""Arrow tables a round hands to Spark in place of a file-source scan: their checks and casts.

Used by :mod:`commit_service.storage.avro_arrow` (Avro records decoded by DataFusion) and by
:mod:`commit_service.round.parquet_reads` (the Parquet files a round rewrites, read by pyarrow on
the round's read threads). Every table is cast to Spark's own schema of the files (what Spark's
file source would give, as Arrow types) and its rows counted against what the files' headers or
footers hold; where either fails, :class:`ArrowReadError` says why and Spark reads the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from commit_service.storage.reader import StorageReader


class ArrowReadError(ValueError):
    """Files could not be read into Arrow as Spark's file source reads them (the message says why)."""


def spark_typed(table: pa.Table, target: pa.Schema) -> pa.Table:
    """``table``'s records as ``target`` (Spark's schema of them as Arrow types);
    :class:`ArrowReadError` where a column is missing or a type does not cast."""
    if table.schema.names != target.names:
        raise ArrowReadError(f"Arrow's columns {table.schema.names} are not Spark's {target.names}")
    try:
        return table.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise ArrowReadError(f"Arrow's types do not cast to Spark's: {exc}") from None


def bounds(table: pa.Table, by: str, field: str) -> dict[int, tuple[int, int]]:
    """The least and greatest ``field`` of ``table``'s rows for each value of column ``by``."""
    if not table.num_rows:
        return {}
    grouped = table.group_by(by).aggregate([(field, "min"), (field, "max")])
    return {r[by]: (r[f"{field}_min"], r[f"{field}_max"]) for r in grouped.to_pylist()}


def rows_of(parts: Sequence[tuple[pa.Table, Sequence[int]]], by: str, target: pa.Schema) -> pa.Table:
    """The rows of each table whose column ``by`` is one of its numbers, that column dropped, as one
    table of ``target``."""
    kept = []
    for table, numbers in parts:
        if len(set(numbers)) != pc.count_distinct(table[by]).as_py():
            table = table.filter(pc.is_in(table[by], pa.array(numbers, pa.int64())))
        kept.append(table.drop_columns([by]))
    return spark_typed(pa.concat_tables(kept), target)


def parquet_table(storage: StorageReader, paths: Sequence[str], rows: int, target: pa.Schema, threads: int) -> pa.Table:
    """The rows of the Parquet files ``paths`` (of one footer schema, ``rows`` in all) read on
    ``threads`` threads at once (on an object store a read is mostly its latency), ``INT96`` as
    microseconds as Spark reads it, as one table of ``target``."""

    def read(path: str) -> pa.Table:
        return pq.read_table(pa.BufferReader(storage.read_bytes(path)), coerce_int96_timestamp_unit="us")

    with ThreadPoolExecutor(max(1, min(threads, len(paths))), thread_name_prefix="lakegate-parquet") as pool:
        tables = list(pool.map(read, paths))
    try:
        table = pa.concat_tables([spark_typed(t.select(target.names), target) for t in tables])
    except KeyError as exc:
        raise ArrowReadError(f"the files' columns are not Spark's {target.names}: {exc}") from None
    if table.num_rows != rows:
        raise ArrowReadError(f"Arrow read {table.num_rows} rows where the footers count {rows}")
    return table
