"""A round's rows as Iceberg data files: written by Spark as Parquet under the table's ``data/``,
then described to Iceberg (path, size, and the column metrics from each file's footer).

Called by :class:`~commit_service.iceberg.committer.IcebergCommitter` for each round, before the
append that commits them: nothing written here is in the table until that append lands (a
round that fails leaves files no snapshot names; orphan removal deletes them).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from commit_service.iceberg.partitions import HIVE_NULL, partition_text, timestamp_micros
from commit_service.spark.jvm_classes import java_class

THREADS = 8  # footers read at once for a round's DataFiles


@dataclass(frozen=True)
class Written:
    """The data files of one round and the rows they hold (from their footers)."""

    files: Any  # java.util.List<org.apache.iceberg.DataFile>: a round's files cross the gateway as one
    rows: int


Placed = tuple[str, int, "list[str] | None"]  # a file's URI, size, and partition values (None: unpartitioned)
Footed = tuple[str, int, "list[str] | None", "bytes | None"]  # a Placed file and its footer as Thrift (None: unread)
TEXT, MICROS = 0, 1  # a partition value's kind in a batch of io.lakegate.iceberg.RoundDataFiles


def write(
    frame: Any,
    directory: str,
    split: Sequence[tuple[str, str]] = (),
    drop: Sequence[str] = (),
    order: Sequence[str] = (),
) -> None:
    """Write ``frame`` as Parquet files into ``directory`` (new: a round's own); with ``split``
    (name, SQL expression of each partition value), one directory per partition, Hive style,
    without the ``drop`` columns, each file sorted by ``order`` (when given)."""
    if not split:
        frame = frame.sortWithinPartitions(*order) if order else frame
        frame.write.mode("errorifexists").parquet(directory)
        return
    from pyspark.sql import functions as F  # noqa: N812 (Spark's own idiom)

    names = [n for n, _ in split]
    out = frame.select("*", *[F.expr(expression).alias(name) for name, expression in split]).drop(*drop)
    if order:  # the split columns first: Spark's writer then keeps this order instead of sorting by them alone
        out = out.sortWithinPartitions(*names, *order)
    out.write.mode("errorifexists").partitionBy(*names).parquet(directory)


def parquet_files(spark: Any, directory: str, split: Sequence[tuple[str, str]] = ()) -> list[Placed]:
    """The Parquet files Spark wrote in ``directory``, their sizes and (with ``split``) the
    partition values their directories name, in ``split``'s order, through Hadoop's file system
    (``s3a://`` or ``file:``, as Spark wrote them)."""
    jvm = spark._jvm
    path = java_class(jvm, "org.apache.hadoop.fs.Path")(directory)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not split:
        return sorted(
            (str(s.getPath().toString()), int(s.getLen()), None)
            for s in fs.listStatus(path)
            if s.isFile() and s.getPath().getName().endswith(".parquet")
        )
    unescape = java_class(jvm, "org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils").unescapePathName
    root = str(fs.makeQualified(path).toString()).rstrip("/") + "/"
    found = []
    listing = fs.listFiles(path, True)
    while listing.hasNext():
        status = listing.next()
        uri = str(status.getPath().toString())
        if not uri.endswith(".parquet"):
            continue
        named = dict(part.split("=", 1) for part in uri[len(root) :].split("/")[:-1])
        found.append((uri, int(status.getLen()), [partition_text(str(unescape(named[n]))) for n, _ in split]))
    return sorted(found)


def data_files(spark: Any, table: Any, files: Sequence[Placed], mapping: Any) -> Written:
    """Iceberg ``DataFile`` of each Parquet file (in its partition of the table's spec), its metrics
    read from its footer by Iceberg's own ``ParquetUtil.fileMetrics`` (columns found by
    ``mapping``, the table's name mapping), on up to :data:`THREADS` threads: each footer is one
    more read in the JVM, and one after another they cost 13 ms a file (docs/performance.md)."""
    jvm = spark._jvm
    metrics_config = java_class(jvm, "org.apache.iceberg.MetricsConfig").forTable(table)
    io = table.io()
    spec = table.spec()
    stamps = _timestamp_fields(spec)

    def one(item: Placed) -> tuple[Any, int]:
        path, size, values = item
        source = io.newInputFile(path, size)
        metrics = java_class(jvm, "org.apache.iceberg.parquet.ParquetUtil").fileMetrics(source, metrics_config, mapping)
        built = (
            java_class(jvm, "org.apache.iceberg.DataFiles").builder(spec).withInputFile(source).withFormat("PARQUET")
        )
        if values is not None and stamps:
            built = built.withPartition(_partition(jvm, spec, values, stamps))
        elif values is not None:
            built = built.withPartitionValues(_listed(jvm, values))
        return built.withMetrics(metrics).build(), int(metrics.recordCount())

    if len(files) <= 1:
        results = [one(f) for f in files]
    else:
        with ThreadPoolExecutor(min(THREADS, len(files)), thread_name_prefix="lakegate-iceberg-metrics") as pool:
            results = list(pool.map(one, files))
    listed = java_class(jvm, "java.util.ArrayList")()
    for data_file, _ in results:
        listed.add(data_file)
    return Written(listed, sum(rows for _, rows in results))


def footer_files(spark: Any, table: Any, files: Sequence[Footed], mapping: Any) -> Written:
    """Iceberg ``DataFile`` of each in-place Parquet file, as :func:`data_files` builds it, but its
    metrics from the footer the service read ahead: every file is handed to
    ``io.lakegate.iceberg.RoundDataFiles`` in one call, where Iceberg's own ``footerMetrics``
    reads each footer's Thrift bytes. Nothing is read from storage again (a file whose footer was
    not kept is read by :func:`data_files`)."""
    known = [f for f in files if f[3] is not None]
    again = data_files(
        spark, table, [(uri, size, values) for uri, size, values, footer in files if footer is None], mapping
    )
    if not known:
        return again
    helper = round_data_files(spark)
    built = helper.fromFooters(table, mapping, _batch(known, _timestamp_fields(table.spec())))
    rows = int(helper.rows(built)) + again.rows
    built.addAll(again.files)
    return Written(built, rows)


def round_data_files(spark: Any) -> Any:
    """``io.lakegate.iceberg.RoundDataFiles`` (iceberg-commit/): a round's files built and handed on in one call."""
    return java_class(spark._jvm, "io.lakegate.iceberg.RoundDataFiles")


def _batch(files: Sequence[Footed], stamps: Sequence[int]) -> bytes:
    """``files`` as ``RoundDataFiles.fromFooters`` reads them (its class comment), their partition values
    at ``stamps`` as microseconds (see :func:`_partition`)."""
    out = [struct.pack(">i", len(files))]
    for uri, size, values, footer in files:
        assert footer is not None
        out.append(_sized(uri.encode()))
        out.append(struct.pack(">q", size))
        out.append(_sized(footer))
        if values is None:
            out.append(struct.pack(">i", -1))
            continue
        out.append(struct.pack(">i", len(values)))
        for i, value in enumerate(values):
            if i in stamps and value != HIVE_NULL:
                out.append(struct.pack(">bq", MICROS, timestamp_micros(value)))
            else:
                out.append(struct.pack(">b", TEXT) + _sized(value.encode()))
    return b"".join(out)


def _sized(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def delete_files(spark: Any, table: Any, files: Sequence[Placed], spec: Any = None) -> list[Any]:
    """Iceberg position ``DeleteFile`` of each Parquet file holding ``file_path`` and ``pos`` (with
    the field ids the spec reserves for them), in its partition of ``spec`` (the table's current
    one by default), which must be that of the data files it points into; its metrics from its
    footer: the bounds of ``file_path`` tell readers which data files it touches. Files with no
    rows are left out."""
    jvm = spark._jvm
    metrics_config = java_class(jvm, "org.apache.iceberg.MetricsConfig").forPositionDelete(table)
    io = table.io()
    spec = spec if spec is not None else table.spec()
    out = []
    for path, size, values in files:
        source = io.newInputFile(path, size)
        metrics = java_class(jvm, "org.apache.iceberg.parquet.ParquetUtil").fileMetrics(source, metrics_config)
        if int(metrics.recordCount()) == 0:
            continue
        built = java_class(jvm, "org.apache.iceberg.FileMetadata").deleteFileBuilder(spec).ofPositionDeletes()
        if values is not None:
            built = built.withPartition(_partition(jvm, spec, values, _timestamp_fields(spec)))
        out.append(built.withInputFile(source).withFormat("PARQUET").withMetrics(metrics).build())
    return out


def _partition(jvm: Any, spec: Any, values: Sequence[str], stamps: Sequence[int]) -> Any:
    """The partition tuple of ``spec`` that ``values`` (as ``withPartitionValues`` reads them) name.
    A delete file's builder takes only a tuple or a path (whose text cannot hold every string), so
    the tuple is parsed by a data file's builder, as a round's data files are. Iceberg parses no
    timestamp from text (``Conversions.fromPartitionString``): the ``stamps`` fields (an identity
    partition of a timestamp column) are parsed here and set as microseconds since the epoch."""
    parsed_as_null = [HIVE_NULL if i in stamps else v for i, v in enumerate(values)]
    parsed = (
        java_class(jvm, "org.apache.iceberg.DataFiles")
        .builder(spec)
        .withPath("partition-only.parquet")
        .withFormat("PARQUET")
    )
    built = parsed.withFileSizeInBytes(0).withRecordCount(0).withPartitionValues(_listed(jvm, parsed_as_null))
    partition = built.build().partition()
    for i in stamps:
        if values[i] != HIVE_NULL:
            partition.set(i, java_class(jvm, "java.lang.Long").valueOf(str(timestamp_micros(values[i]))))
    return partition


def _listed(jvm: Any, values: Sequence[str]) -> Any:
    listed = java_class(jvm, "java.util.ArrayList")()
    for value in values:
        listed.add(value)
    return listed


def _timestamp_fields(spec: Any) -> list[int]:
    """The positions of ``spec``'s partition fields whose values are timestamps."""
    fields = spec.partitionType().fields()
    return [i for i in range(fields.size()) if str(fields.get(i).type().typeId().toString()).startswith("TIMESTAMP")]
