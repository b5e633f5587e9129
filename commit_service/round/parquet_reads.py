"""Parquet files a round rewrites (the sink's envelope unwrapped, or types the table's differ
from), read by Arrow in the service rather than by Spark's Parquet source.

Used by :class:`~commit_service.round.convert.FrameReader` for each group of such files of one
footer schema: their bytes are read on ``threads`` threads at once (on an object store a read is
mostly its latency), decoded by pyarrow
(:func:`~commit_service.storage.arrow_tables.parquet_table`), and handed to Spark as one Arrow table of Spark's own
schema of the footer (what ``spark.read.parquet`` gives), as JSON records are. A file-source scan
of hundreds of small files pays for planning and one open per file; on an S3 server a round of
300 enveloped files took 4.5-16 s against 1.8-2.1 s for the same records as JSON lines read so.

The table is used only if it holds the rows the footers count and casts to Spark's types
(``INT96`` read as microseconds, as Spark reads it); otherwise Spark reads the files, and the
reason is logged once per footer schema.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from commit_service.domain.round_schema import Schema
from commit_service.storage.arrow_tables import ArrowReadError, parquet_table
from commit_service.storage.reader import StorageReader

logger = logging.getLogger(__name__)

_LEFT_TO_SPARK: set[str] = set()  # footer schemas Arrow's reading failed for, logged once


def arrow_table(storage: StorageReader, paths: Sequence[str], rows: int, physical: Schema, threads: int) -> Any:
    """The rows of the Parquet files ``paths`` (of one footer schema, ``rows`` in all) as one
    Arrow table of Spark's schema ``physical``; None where Spark reads them instead."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    key = str(physical)
    if key in _LEFT_TO_SPARK:
        return None
    try:
        return parquet_table(storage, paths, rows, to_arrow_schema(StructType.fromJson(physical)), threads)
    except (ArrowReadError, TypeError) as exc:  # TypeError: a Spark type with no Arrow one
        if key not in _LEFT_TO_SPARK:
            if len(_LEFT_TO_SPARK) >= 1_000:
                _LEFT_TO_SPARK.clear()
            _LEFT_TO_SPARK.add(key)
            logger.info("Parquet files of a footer schema are read by Spark's Parquet source: %s", exc)
        return None
