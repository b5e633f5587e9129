"""The audit's questions to a table's rows, asked through Spark: how many rows per offset against
the ledger, each data file's offsets, the rows at chosen offsets.

Shared by both table formats' ledgers (``delta.ledger``, ``iceberg.ledger``), which give the table
as a DataFrame and name the column holding each row's file. Runs on the HTTP thread that asked
for the audit, beside the commit thread: reads only.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from typing import Any

from commit_service.domain.history import OFFSET_COLUMNS, FileSpan, OffsetRun, OffsetTally, Row

FILE = "_lakegate_file"


class RowAudit:
    """``frame()``: the table as a DataFrame (read anew each call); ``file_of(df)``: the column of
    each row's data file."""

    def __init__(self, spark: Any, frame: Callable[[], Any], file_of: Callable[[Any], Any]) -> None:
        self.spark = spark
        self.frame = frame
        self.file_of = file_of

    def columns(self) -> list[str]:
        return list(self.frame().columns)

    def derived(self) -> frozenset[str]:
        return frozenset()

    def offset_column(self, df: Any) -> str | None:
        return next((c for c in OFFSET_COLUMNS if c in df.columns), None)

    def tally(self, ranges: list[tuple[int, int]], limit: int) -> OffsetTally:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        df = self.frame()
        column = self.offset_column(df)
        if column is None:
            return OffsetTally(int(df.count()), ())
        held = df.groupBy(F.col(column).alias("o")).agg(F.count(F.lit(1)).alias("held")).cache()
        try:
            rows = int(held.agg(F.sum("held")).first()[0] or 0)
            spans = [(int(s), int(e)) for s, e in ranges if e > s]
            if spans:
                bounds = self.spark.createDataFrame(spans, "start long, end long")
                ids = self.spark.range(min(s for s, _ in spans), max(e for _, e in spans))
                expected = (
                    ids.join(F.broadcast(bounds), (ids.id >= bounds.start) & (ids.id < bounds.end))
                    .groupBy("id")
                    .agg(F.count(F.lit(1)).alias("expected"))
                )
                both = expected.join(held, expected.id == held.o, "full_outer").select(
                    F.coalesce("id", "o").alias("x"),
                    F.coalesce("expected", F.lit(0)).alias("expected"),
                    F.coalesce("held", F.lit(0)).alias("held"),
                )
            else:
                both = held.select(F.col("o").alias("x"), F.lit(0).alias("expected"), "held")
            diff = both.where((F.col("expected") != F.col("held")) & F.col("x").isNotNull())
            order = Window.partitionBy("expected", "held").orderBy("x")
            runs = (
                diff.withColumn("g", F.col("x") - F.row_number().over(order))
                .groupBy("expected", "held", "g")
                .agg(F.min("x").alias("start"), (F.max("x") + 1).alias("end"))
                .cache()
            )
            try:
                total = int(runs.count())
                first = runs.orderBy("start").limit(limit).collect()
            finally:
                runs.unpersist()
        finally:
            held.unpersist()
        found = tuple(OffsetRun(int(r.start), int(r.end), int(r.expected), int(r.held)) for r in first)
        return OffsetTally(rows, found, max(0, total - len(found)))

    def file_spans(self) -> list[FileSpan]:
        from pyspark.sql import functions as F

        df = self.frame()
        column = self.offset_column(df)
        low = F.min(column) if column else F.lit(None)
        high = F.max(column) if column else F.lit(None)
        grouped = (
            df.select(self.file_of(df).alias(FILE), *([column] if column else []))
            .groupBy(FILE)
            .agg(F.count(F.lit(1)).alias("rows"), low.alias("low"), high.alias("high"))
        )
        return [
            FileSpan(
                str(r[FILE]),
                int(r.rows),
                None if r.low is None else int(r.low),
                None if r.high is None else int(r.high),
            )
            for r in grouped.collect()
        ]

    def rows_at(self, offsets: list[int]) -> dict[int, list[Row]]:
        from pyspark.sql import functions as F
        from pyspark.sql.types import TimestampNTZType, TimestampType

        df = self.frame()
        column = self.offset_column(df)
        if column is None or not offsets:
            return {}
        cols = [
            F.unix_millis(F.col(f.name)).alias(f.name)
            if isinstance(f.dataType, (TimestampType, TimestampNTZType))
            else F.col(f.name)
            for f in df.schema.fields
        ]
        out: dict[int, list[Row]] = {}
        for row in df.where(F.col(column).isin(sorted(set(offsets)))).select(*cols).collect():
            data = plain(row.asDict(recursive=True))
            out.setdefault(int(data[column]), []).append(data)
        return out


def plain(value: Any) -> Any:
    """A collected Spark value as JSON's kinds: nested timestamps as epoch millis, dates as ISO
    text, decimals as floats, maps as dicts."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, datetime.datetime):
        aware = value if value.tzinfo else value.astimezone()
        return int(aware.timestamp() * 1000)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return value
