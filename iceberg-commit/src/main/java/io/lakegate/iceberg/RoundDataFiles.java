package io.lakegate.iceberg;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.Metrics;
import org.apache.iceberg.MetricsConfig;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.hadoop.HadoopInputFile;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.InputFile;
import org.apache.iceberg.mapping.NameMapping;
import org.apache.iceberg.parquet.ParquetUtil;
import org.apache.iceberg.shaded.org.apache.parquet.ParquetReadOptions;
import org.apache.iceberg.shaded.org.apache.parquet.format.converter.ParquetMetadataConverter;
import org.apache.iceberg.shaded.org.apache.parquet.hadoop.metadata.ParquetMetadata;

/**
 * A round's data files on the Java side of the gateway: in-place Parquet files made {@code
 * DataFile}s with metrics from the footers the commit service already read, and a round's files
 * handed to its snapshot, each as one call.
 *
 * <p>Called by commit_service/iceberg/datafiles.py and committer.py. Through the Python gateway
 * every call costs a round trip: a round of 1,000 files built and appended one call at a time spent
 * more in those trips than in Iceberg. Iceberg's {@code ParquetUtil.fileMetrics} would also open
 * each file again to read the same footer; {@link #fromFooters} parses the footer's Thrift bytes
 * (as the service read them ahead) with Parquet's own converter, under the options {@code
 * ParquetFileReader} reads a file's footer with, so the metrics are those {@code fileMetrics} gives
 * (tests/integration/test_iceberg_footers.py compares them field by field).
 *
 * <p>The batch {@link #fromFooters} reads, big-endian: the file count; then for each file its
 * location (UTF-8, length first), its size, its footer (length first), and its partition values:
 * -1 for an unpartitioned table, or the count and each value as a kind byte, 0 followed by its text
 * (parsed as {@code withPartitionValues} does; {@code __HIVE_DEFAULT_PARTITION__} is null) or 1
 * followed by a timestamp in microseconds since the epoch (Iceberg parses no timestamp from text).
 */
public final class RoundDataFiles {
  static final byte TEXT = 0;
  static final byte MICROS = 1;
  private static final String HIVE_NULL = "__HIVE_DEFAULT_PARTITION__";

  private RoundDataFiles() {}

  /**
   * The batch's data files, in its order, in the table's current spec: the batch is read in order,
   * then the files are built on the common fork-join pool (parsing a footer and working out its
   * metrics is most of a file's cost; the files are independent). Each task runs with the caller's
   * context class loader: the pool's threads have the JVM's system loader, which cannot see the
   * jars Spark added (Iceberg's {@code S3FileIO} loads its HTTP client by name through the context
   * loader when it first makes its client, which may be in one of these tasks).
   */
  public static List<DataFile> fromFooters(Table table, NameMapping mapping, byte[] batch) throws IOException {
    MetricsConfig config = MetricsConfig.forTable(table);
    PartitionSpec spec = table.spec();
    FileIO io = table.io();
    List<Entry> entries = entries(batch);
    DataFile[] out = new DataFile[entries.size()];
    ClassLoader loader = Thread.currentThread().getContextClassLoader();
    IntStream.range(0, out.length)
        .parallel()
        .forEach(i -> out[i] = withLoader(loader, () -> entries.get(i).dataFile(spec, io, config, mapping)));
    return new ArrayList<>(Arrays.asList(out));
  }

  /** {@code work} run with {@code loader} as the thread's context class loader, then the thread's own again. */
  private static <T> T withLoader(ClassLoader loader, Supplier<T> work) {
    Thread thread = Thread.currentThread();
    ClassLoader own = thread.getContextClassLoader();
    thread.setContextClassLoader(loader);
    try {
      return work.get();
    } finally {
      thread.setContextClassLoader(own);
    }
  }

  /**
   * The location a data file is recorded at, as {@code withInputFile} records it, without its stat:
   * a Hadoop file's path qualified by its file system ({@code file:/x} for {@code file:///x}), which
   * its status would name; any other file's location as given. ({@code withInputFile} stats a
   * Hadoop file for its path and length, a HEAD request per file on S3, while the length is known.)
   */
  private static String recorded(InputFile file) {
    if (file instanceof HadoopInputFile) {
      HadoopInputFile hadoop = (HadoopInputFile) file;
      return hadoop.getFileSystem().makeQualified(hadoop.getPath()).toString();
    }
    return file.location();
  }

  /**
   * The converter {@code ParquetFileReader} reads a footer with, under its default options (string
   * bounds unsigned, Thrift's message size limit); made once: building the options makes a Hadoop
   * {@code Configuration}, which parses Hadoop's default XML resources again (6% of a round's JVM
   * time in a profile of 15-file rounds). The converter holds no state between footers; the batch's
   * threads already share it.
   */
  private static final class Converter {
    static final ParquetMetadataConverter INSTANCE =
        new ParquetMetadataConverter(ParquetReadOptions.builder().build());
  }

  /**
   * The data file of the Parquet file at {@code location} ({@code size} bytes) in {@code
   * partition} of {@code spec} (null: unpartitioned), its metrics Iceberg's {@code footerMetrics}
   * of {@code footer} (Thrift), as {@link #fromFooters} builds each file of a batch.
   */
  static DataFile fromFooter(
      PartitionSpec spec,
      FileIO io,
      MetricsConfig config,
      NameMapping mapping,
      String location,
      long size,
      byte[] footer,
      StructLike partition) {
    ParquetMetadata parsed;
    try {
      parsed =
          Converter.INSTANCE.readParquetMetadata(new ByteArrayInputStream(footer), ParquetMetadataConverter.NO_FILTER);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read the footer of " + location, e);
    }
    DataFiles.Builder built =
        DataFiles.builder(spec)
            .withPath(recorded(io.newInputFile(location, size)))
            .withFileSizeInBytes(size)
            .withFormat(FileFormat.PARQUET)
            .withMetrics(ParquetUtil.footerMetrics(parsed, Stream.empty(), config, mapping));
    return partition == null ? built.build() : built.withPartition(partition).build();
  }

  /** {@code files} appended by {@code append}. */
  public static void append(AppendFiles append, List<DataFile> files) {
    for (DataFile file : files) {
      append.appendFile(file);
    }
  }

  /** {@code files} added as rows by {@code delta}. */
  public static void addRows(RowDelta delta, List<DataFile> files) {
    for (DataFile file : files) {
      delta.addRows(file);
    }
  }

  /** The files of {@code files} that hold rows (Spark writes an empty frame as one empty file). */
  public static List<DataFile> holdingRows(List<DataFile> files) {
    List<DataFile> out = new ArrayList<>(files.size());
    for (DataFile file : files) {
      if (file.recordCount() > 0) {
        out.add(file);
      }
    }
    return out;
  }

  /** The rows of {@code files} (their record counts, summed). */
  public static long rows(List<DataFile> files) {
    long total = 0;
    for (DataFile file : files) {
      total += file.recordCount();
    }
    return total;
  }

  private static List<Entry> entries(byte[] batch) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(batch));
    int count = in.readInt();
    List<Entry> entries = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      String location = text(in);
      long size = in.readLong();
      byte[] footer = bytes(in);
      int values = in.readInt();
      List<String> texts = values < 0 ? null : new ArrayList<>(values);
      Map<Integer, Long> stamps = new HashMap<>();
      for (int v = 0; v < values; v++) {
        byte kind = in.readByte();
        if (kind == MICROS) {
          stamps.put(v, in.readLong());
          texts.add(HIVE_NULL);
        } else if (kind == TEXT) {
          texts.add(text(in));
        } else {
          throw new IOException("unknown partition value kind " + kind);
        }
      }
      entries.add(new Entry(location, size, footer, texts, stamps));
    }
    return entries;
  }

  /** One file of a batch: where it lies, its size, its footer, its partition values (null: none). */
  private record Entry(String location, long size, byte[] footer, List<String> texts, Map<Integer, Long> stamps) {
    DataFile dataFile(PartitionSpec spec, FileIO io, MetricsConfig config, NameMapping mapping) {
      return fromFooter(spec, io, config, mapping, location, size, footer, texts == null ? null : partition(spec));
    }

    /** The tuple {@code withPartitionValues} parses from the texts (a stamp's as null), the stamps then set. */
    private StructLike partition(PartitionSpec spec) {
      StructLike partition =
          DataFiles.builder(spec)
              .withPath("partition-only.parquet")
              .withFormat(FileFormat.PARQUET)
              .withFileSizeInBytes(0)
              .withRecordCount(0)
              .withPartitionValues(texts)
              .build()
              .partition();
      for (Map.Entry<Integer, Long> stamp : stamps.entrySet()) {
        partition.set(stamp.getKey(), stamp.getValue());
      }
      return partition;
    }
  }

  private static byte[] bytes(DataInputStream in) throws IOException {
    byte[] read = new byte[in.readInt()];
    in.readFully(read);
    return read;
  }

  private static String text(DataInputStream in) throws IOException {
    return new String(bytes(in), StandardCharsets.UTF_8);
  }
}
