"""A round's rows as Iceberg data files: written by Spark as Parquet under the table's ``data/``,
then described to Iceberg (path, size, and the column metrics from each file's footer).

Called by :class:`~commit_service.iceberg.committer.IcebergCommitter` for each round, before the
append that commits them: nothing written here is in the table until that append lands (a
round that fails leaves files no snapshot names; orphan removal deletes them).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

THREADS = 8  # footers read at once for a round's DataFiles


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
    ``ParquetUtil.fileMetrics`` (columns found by ``mapping``, the table's name mapping), on up to
    :data:`THREADS` threads: each footer is one more read in the JVM, and one after another they
    cost 13 ms a file (docs/performance.md)."""
    jvm = spark._jvm
    metrics_config = jvm.org.apache.iceberg.MetricsConfig.forTable(table)
    io = table.io()
    spec = table.spec()

    def one(item: tuple[str, int]) -> tuple[Any, int]:
        path, size = item
        source = io.newInputFile(path, size)
        metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(source, metrics_config, mapping)
        built = jvm.org.apache.iceberg.DataFiles.builder(spec).withInputFile(source).withFormat("PARQUET")
        return built.withMetrics(metrics).build(), int(metrics.recordCount())

    if len(files) <= 1:
        results = [one(f) for f in files]
    else:
        with ThreadPoolExecutor(min(THREADS, len(files)), thread_name_prefix="lakegate-iceberg-metrics") as pool:
            results = list(pool.map(one, files))
    return Written([f for f, _ in results], sum(rows for _, rows in results))


def delete_files(spark: Any, table: Any, files: list[tuple[str, int]]) -> list[Any]:
    """Iceberg position ``DeleteFile`` of each Parquet file holding ``file_path`` and ``pos`` (with
    the field ids the spec reserves for them), its metrics from its footer: the bounds of
    ``file_path`` tell readers which data files it touches. Files with no rows are left out."""
    jvm = spark._jvm
    metrics_config = jvm.org.apache.iceberg.MetricsConfig.forPositionDelete(table)
    io = table.io()
    spec = table.spec()
    out = []
    for path, size in files:
        source = io.newInputFile(path, size)
        metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(source, metrics_config)
        if int(metrics.recordCount()) == 0:
            continue
        built = jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(spec).ofPositionDeletes()
        out.append(built.withInputFile(source).withFormat("PARQUET").withMetrics(metrics).build())
    return out
