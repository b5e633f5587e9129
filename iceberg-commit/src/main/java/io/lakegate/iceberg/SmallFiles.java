package io.lakegate.iceberg;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.MetricsConfig;
import org.apache.iceberg.PartitionField;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RewriteFiles;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.expressions.Expression;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.expressions.UnboundTerm;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.mapping.NameMapping;
import org.apache.iceberg.transforms.Transform;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.util.StructLikeWrapper;

/**
 * A table's small data files by partition, read from one snapshot's manifests in one call, and the
 * merge of one partition's files committed in their place: the Java side of the merges of small
 * files (commit_service/iceberg/maintenance.py and merge.py).
 *
 * <p>Through the Python gateway every call costs a round trip on both sides, and pyspark's handler
 * converts every Java exception on the way. A look at the small files used to be a Spark job over
 * the {@code files} metadata table (planning, a shuffle for the grouping), and a merge planned the
 * partition's files again and read five or more properties of each file through the gateway, then
 * read back the merged file's footer in the JVM for its metrics. Here the look is one scan of the
 * manifests; a merge keeps the files it read; the merged file's metrics come from the footer the
 * service already holds (as {@link RoundDataFiles} builds a round's files).
 *
 * <p>{@link #listing} hands the groups to Python, big-endian: the group count; for each, its spec's
 * id, its partition fields (count, then each field's name, a byte 1 and the value as Iceberg prints
 * it, or a byte 0 for null) and its files (count, then each file's size and location), the files in the
 * order their rounds added them (data sequence number). Texts are UTF-8, length first.
 */
public final class SmallFiles {
  private final Table table;
  private final long snapshotId;
  private final List<Group> groups;

  private SmallFiles(Table table, long snapshotId, List<Group> groups) {
    this.table = table;
    this.snapshotId = snapshotId;
    this.groups = groups;
  }

  /** The live data files of the table's current snapshot smaller than {@code below} bytes, by partition. */
  public static SmallFiles of(Table table, long below) throws IOException {
    Snapshot head = table.currentSnapshot();
    if (head == null) {
      return new SmallFiles(table, -1, List.of());
    }
    Map<Integer, Map<StructLikeWrapper, Group>> bySpec = new HashMap<>();
    List<Group> groups = new ArrayList<>();
    try (CloseableIterable<FileScanTask> tasks = table.newScan().useSnapshot(head.snapshotId()).planFiles()) {
      for (FileScanTask task : tasks) {
        DataFile file = task.file();
        if (file.fileSizeInBytes() >= below) {
          continue;
        }
        PartitionSpec spec = table.specs().get(file.specId());
        Map<StructLikeWrapper, Group> ofSpec = bySpec.computeIfAbsent(file.specId(), id -> new LinkedHashMap<>());
        StructLikeWrapper key = StructLikeWrapper.forType(spec.partitionType()).set(file.partition());
        Group group = ofSpec.get(key);
        if (group == null) {
          group = new Group(spec, file.partition());
          ofSpec.put(key, group);
          groups.add(group);
        }
        group.files.add(new Small(file, !task.deletes().isEmpty()));
      }
    }
    Comparator<Small> added = Comparator.comparingLong(s -> sequence(s.file));
    for (Group group : groups) {
      group.files.sort(added); // stable: files of one round keep the scan's order
    }
    return new SmallFiles(table, head.snapshotId(), groups);
  }

  private static long sequence(DataFile file) {
    Long number = file.dataSequenceNumber();
    return number == null ? 0 : number;
  }

  /** The groups, as the class comment describes. */
  public byte[] listing() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeInt(groups.size());
      for (Group group : groups) {
        List<PartitionField> fields = group.spec.fields();
        out.writeInt(group.spec.specId());
        out.writeInt(fields.size());
        for (int i = 0; i < fields.size(); i++) {
          text(out, fields.get(i).name());
          String value = group.human(i);
          out.writeByte(value == null ? 0 : 1);
          if (value != null) {
            text(out, value);
          }
        }
        out.writeInt(group.files.size());
        for (Small small : group.files) {
          out.writeLong(small.file.fileSizeInBytes());
          text(out, small.file.location());
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  /**
   * Group {@code g}'s partition as a filter of {@code rewriteDataFiles}: each field's transform of
   * its column equal to the value (or null). A field whose transform or value this cannot express
   * is left out (more files are candidates: still only those below the size the rewrite is given).
   */
  public Expression filter(int g) {
    Group group = groups.get(g);
    Expression where = Expressions.alwaysTrue();
    List<PartitionField> fields = group.spec.fields();
    for (int i = 0; i < fields.size(); i++) {
      PartitionField field = fields.get(i);
      String column = table.schema().findColumnName(field.sourceId());
      UnboundTerm<Object> term = column == null ? null : term(field.transform().toString(), column);
      Object value = group.partition.get(i, Object.class);
      if (term == null) {
        continue;
      }
      if (value == null) {
        where = Expressions.and(where, Expressions.isNull(term));
      } else if (value instanceof Integer || value instanceof Long || value instanceof Boolean
          || value instanceof BigDecimal) {
        where = Expressions.and(where, Expressions.equal(term, value));
      } else if (value instanceof CharSequence) {
        where = Expressions.and(where, Expressions.equal(term, (Object) value.toString()));
      }
    }
    return where;
  }

  @SuppressWarnings("unchecked")
  private static UnboundTerm<Object> term(String transform, String column) {
    switch (transform) {
      case "identity":
        return (UnboundTerm<Object>) (UnboundTerm<?>) Expressions.ref(column);
      case "year":
        return (UnboundTerm<Object>) (UnboundTerm<?>) Expressions.year(column);
      case "month":
        return (UnboundTerm<Object>) (UnboundTerm<?>) Expressions.month(column);
      case "day":
        return (UnboundTerm<Object>) (UnboundTerm<?>) Expressions.day(column);
      case "hour":
        return (UnboundTerm<Object>) (UnboundTerm<?>) Expressions.hour(column);
      default:
        break;
    }
    int open = transform.indexOf('[');
    if (open > 0 && transform.endsWith("]")) {
      int width = Integer.parseInt(transform.substring(open + 1, transform.length() - 1));
      String name = transform.substring(0, open);
      if (name.equals("bucket")) {
        return (UnboundTerm<Object>) (UnboundTerm<?>) Expressions.bucket(column, width);
      }
      if (name.equals("truncate")) {
        return (UnboundTerm<Object>) (UnboundTerm<?>) Expressions.truncate(column, width);
      }
    }
    return null; // void, or a transform this does not know
  }

  /**
   * The merge of group {@code g}'s files smaller than {@code below} bytes (in {@link #listing}'s
   * order), or null when delete files apply to any of them (Spark's rewrite applies those).
   */
  public Merge merge(int g, long below) {
    Group group = groups.get(g);
    List<DataFile> files = new ArrayList<>();
    for (Small small : group.files) {
      if (small.file.fileSizeInBytes() < below) {
        if (small.deleted) {
          return null;
        }
        files.add(small.file);
      }
    }
    return new Merge(this, group, files);
  }

  /** One partition's files replaced by merged files, committed as one {@code replace} snapshot. */
  public static final class Merge {
    private final SmallFiles look;
    private final Group group;
    private final List<DataFile> files;
    private final List<int[]> runs = new ArrayList<>();
    private final List<DataFile> merged = new ArrayList<>();

    private Merge(SmallFiles look, Group group, List<DataFile> files) {
      this.look = look;
      this.group = group;
      this.files = files;
    }

    /** The files this merge may take. */
    public int count() {
      return files.size();
    }

    /**
     * Files {@code from} to {@code to} (exclusive) to be replaced by the merged file at {@code
     * location} of {@code size} bytes, whose footer (Thrift) is {@code footer}: its metrics are
     * Iceberg's {@code footerMetrics} of that footer under the table's metrics config and {@code
     * mapping}; its partition and spec those of the files. Returns the rows it holds.
     */
    public long replace(int from, int to, String location, long size, byte[] footer, NameMapping mapping) {
      if (from < 0 || to > files.size() || to - from < 1) {
        throw new IllegalArgumentException("no files " + from + " to " + to + " of " + files.size());
      }
      Table table = look.table;
      DataFile file =
          RoundDataFiles.fromFooter(
              group.spec, table.io(), MetricsConfig.forTable(table), mapping, location, size, footer, group.partition);
      runs.add(new int[] {from, to});
      merged.add(file);
      return file.recordCount();
    }

    /** The rows of the files replaced so far. */
    public long replacedRows() {
      long rows = 0;
      for (int[] run : runs) {
        for (int i = run[0]; i < run[1]; i++) {
          rows += files.get(i).recordCount();
        }
      }
      return rows;
    }

    /**
     * Commit every replacement in one snapshot, validated from the snapshot the files were read in
     * (Iceberg retries on a new head; a file it deletes that is gone fails the commit). Returns the
     * files removed.
     */
    public int commit() {
      RewriteFiles rewrite = look.table.newRewrite().validateFromSnapshot(look.snapshotId);
      int removed = 0;
      for (int r = 0; r < runs.size(); r++) {
        for (int i = runs.get(r)[0]; i < runs.get(r)[1]; i++) {
          rewrite.deleteFile(files.get(i));
          removed++;
        }
        rewrite.addFile(merged.get(r));
      }
      rewrite.commit();
      return removed;
    }
  }

  /** One partition's small files (of one spec). */
  private static final class Group {
    final PartitionSpec spec;
    final StructLike partition;
    final List<Small> files = new ArrayList<>();

    Group(PartitionSpec spec, StructLike partition) {
      this.spec = spec;
      this.partition = partition;
    }

    /** Field {@code i}'s value as Iceberg prints it (a path's text: a day as 2026-11-27), or null. */
    @SuppressWarnings("unchecked")
    String human(int i) {
      Object value = partition.get(i, Object.class);
      if (value == null) {
        return null;
      }
      Type type = spec.partitionType().fields().get(i).type();
      return ((Transform<Object, Object>) spec.fields().get(i).transform()).toHumanString(type, value);
    }
  }

  private record Small(DataFile file, boolean deleted) {}

  private static void text(DataOutputStream out, String value) throws IOException {
    byte[] utf8 = value.getBytes(StandardCharsets.UTF_8);
    out.writeInt(utf8.length);
    out.write(utf8);
  }
}
