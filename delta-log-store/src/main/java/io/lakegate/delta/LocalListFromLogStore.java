package io.lakegate.delta;

import io.delta.storage.LocalLogStore;
import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * Delta's {@link LocalLogStore} whose {@link #listFrom} reads only the log entries it returns.
 *
 * <p>Delta and Delta Kernel list a table's {@code _delta_log} folder before every commit, from the
 * last checkpoint's version on. Delta's own store does that with {@code FileSystem.listStatus} of
 * the whole folder and keeps the names at or after the start: on a local file system that is one
 * {@code stat} per entry, and the folder keeps {@code delta.logRetentionDuration} (30 days) of
 * commits, four entries each (the commit, Delta's checksum, and Hadoop's hidden {@code .crc} of
 * both). This store reads the folder's names (one {@code readdir}) and stats only those at or after
 * the start, so a commit's listing costs the same at version 10 and at version 50,000.
 *
 * <p>What it returns is what {@code LocalLogStore} returns: the entries whose name sorts at or
 * after the start name, sorted by name, without Hadoop's checksum files; an entry removed between
 * the read of the names and its {@code stat} is left out, as {@code listStatus} leaves it out; a
 * missing folder is a {@link FileNotFoundException}. On any file system but the local one it is
 * {@code LocalLogStore} unchanged.
 *
 * <p>Set by the Lakegate commit service for {@code file:} tables ({@code
 * spark.delta.logStore.file.impl} for Delta, {@code io.delta.kernel.logStore.file.impl} for
 * Kernel's checkpoints).
 *
 * <p>A new log entry is put only if absent across processes, not within one JVM alone: {@code
 * LocalLogStore} checks that the entry does not exist and then renames its temporary file onto it,
 * and a local rename replaces what is there, so two services committing the same version of one
 * table each believed they had (one's commit lost). Here the temporary file is hard-linked to the
 * entry's name, which fails when the name exists.
 */
public class LocalListFromLogStore extends LocalLogStore {

  public LocalListFromLogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException {
    FileSystem fs = path.getFileSystem(hadoopConf);
    File folder = localFile(fs, path.getParent());
    if (folder == null) {
      return super.listFrom(path, hadoopConf);
    }
    String[] names = folder.list();
    if (names == null) {
      throw new FileNotFoundException("File " + path.getParent() + " does not exist");
    }
    String start = path.getName();
    List<String> from = new ArrayList<>();
    for (String name : names) {
      if (name.compareTo(start) >= 0 && !isChecksumFile(fs, name)) {
        from.add(name);
      }
    }
    from.sort(null);
    List<FileStatus> statuses = new ArrayList<>(from.size());
    for (String name : from) {
      try {
        // A Path of the name alone, as listStatus builds it: a name with a colon is no URI scheme.
        statuses.add(fs.getFileStatus(new Path(path.getParent(), new Path(null, null, name))));
      } catch (FileNotFoundException removed) {
        // deleted since the names were read (log clean-up): not listed, as listStatus does
      }
    }
    return statuses.iterator();
  }

  @Override
  public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
      throws IOException {
    FileSystem fs = path.getFileSystem(hadoopConf);
    File target = overwrite ? null : localFile(fs, path);
    if (target == null) {
      super.write(path, actions, overwrite, hadoopConf);
      return;
    }
    File folder = target.getParentFile();
    Files.createDirectories(folder.toPath());
    File temp = new File(folder, "." + target.getName() + "." + UUID.randomUUID() + ".tmp");
    try {
      try (Writer out = Files.newBufferedWriter(temp.toPath(), StandardCharsets.UTF_8)) {
        while (actions.hasNext()) {
          out.write(actions.next());
          out.write('\n');
        }
      }
      Files.createLink(target.toPath(), temp.toPath());
    } catch (FileAlreadyExistsException exists) {
      throw new FileAlreadyExistsException(path.toString());
    } finally {
      Files.deleteIfExists(temp.toPath());
    }
  }

  /** The local folder behind {@code folder}, or null when {@code fs} is not the local file system. */
  private static File localFile(FileSystem fs, Path folder) {
    if (fs instanceof LocalFileSystem local) {
      return local.pathToFile(folder);
    }
    if (fs instanceof RawLocalFileSystem raw) {
      return raw.pathToFile(folder);
    }
    return null;
  }

  /** Hadoop's hidden checksum files, which the checksummed local file system's listing leaves out. */
  private static boolean isChecksumFile(FileSystem fs, String name) {
    return fs instanceof LocalFileSystem && name.startsWith(".") && name.endsWith(".crc");
  }
}
