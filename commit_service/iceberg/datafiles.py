"""A round's rows as Iceberg data files: written by Spark as Parquet under the table's ``data/``,
then described to Iceberg (path, size, and the column metrics from each file's footer).

Called by :class:`~commit_service.iceberg.committer.IcebergCommitter` for each round, before the
append that commits them: nothing written here is in the table until that append lands (a
round that fails leaves files no snapshot names; orphan removal deletes them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Written:
    """The data files of one round and the rows they hold (from their footers)."""

    files: list[Any]  # org.apache.iceberg.DataFile
    rows: int


def write(frame: Any, directory: str) -> None:
    """Write ``frame`` as Parquet files into ``directory`` (new: a round's own)."""
    frame.write.mode("errorifexists").parquet(directory)


def parquet_files(spark: Any, directory: str) -> list[tuple[str, int]]:
    """The Parquet files directly in ``directory`` and their sizes, through Hadoop's file system
    (``s3a://`` or ``file:``, as Spark wrote them)."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(directory)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return sorted(
        (str(s.getPath().toString()), int(s.getLen()))
        for s in fs.listStatus(path)
        if s.isFile() and s.getPath().getName().endswith(".parquet")
    )


def data_files(spark: Any, table: Any, files: list[tuple[str, int]], mapping: Any) -> Written:
    """Iceberg ``DataFile`` of each Parquet file, its metrics read from its footer by Iceberg's own
    ``ParquetUtil.fileMetrics`` (columns found by ``mapping``, the table's name mapping)."""
    jvm = spark._jvm
    metrics_config = jvm.org.apache.iceberg.MetricsConfig.forTable(table)
    io = table.io()
    out = []
    rows = 0
    for path, size in files:
        source = io.newInputFile(path, size)
        metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(source, metrics_config, mapping)
        rows += int(metrics.recordCount())
        out.append(
            jvm.org.apache.iceberg.DataFiles.builder(table.spec())
            .withInputFile(source)
            .withFormat("PARQUET")
            .withMetrics(metrics)
            .build()
        )
    return Written(out, rows)
