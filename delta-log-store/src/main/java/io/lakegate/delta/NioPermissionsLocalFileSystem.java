package io.lakegate.delta;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Hadoop's {@link LocalFileSystem} whose files and folders get their permissions through {@code
 * java.nio} instead of a {@code chmod} child process.
 *
 * <p>Without Hadoop's native library (pyspark ships none) {@code RawLocalFileSystem.setPermission}
 * runs {@code chmod} through {@code Shell}, and every file it creates gets its permission that way:
 * a Delta commit on a {@code file:} table wrote four files (the version, the version checksum, and
 * Hadoop's hidden {@code .crc} of each), so the JVM forked and waited for four processes per
 * commit. A background checkpoint forks too, and a commit beside one waited longer for its own
 * (JFR recording of {@code scripts/bench --parts checkpoints}). Here the same permission bits are
 * set with {@code Files.setPosixFilePermissions}, which is the same {@code chmod(2)} call without
 * the process. A permission with the sticky bit, a file system without POSIX permissions, or a
 * JVM with Hadoop's native library go to {@code RawLocalFileSystem} unchanged.
 *
 * <p>Set by the Lakegate commit service as {@code fs.file.impl} ({@code spark.hadoop.fs.file.impl}),
 * so Delta, Delta Kernel and Spark's own local writes all use it. Everything else, checksum files
 * included, is {@code LocalFileSystem}'s.
 */
public class NioPermissionsLocalFileSystem extends LocalFileSystem {

  public NioPermissionsLocalFileSystem() {
    super(new Raw());
  }

  /** {@link RawLocalFileSystem} with {@link #setPermission} through {@code java.nio}. */
  public static class Raw extends RawLocalFileSystem {

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (NativeIO.isAvailable() || permission.getStickyBit()) {
        super.setPermission(p, permission);
        return;
      }
      try {
        Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission));
      } catch (UnsupportedOperationException e) { // no POSIX permissions here: Hadoop's way
        super.setPermission(p, permission);
      }
    }
  }

  /** The nine permission bits of {@code permission} as {@code java.nio} names them. */
  static Set<PosixFilePermission> posix(FsPermission permission) {
    Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
    add(out, permission.getUserAction(), PosixFilePermission.OWNER_READ,
        PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE);
    add(out, permission.getGroupAction(), PosixFilePermission.GROUP_READ,
        PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE);
    add(out, permission.getOtherAction(), PosixFilePermission.OTHERS_READ,
        PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);
    return out;
  }

  private static void add(
      Set<PosixFilePermission> out,
      FsAction action,
      PosixFilePermission read,
      PosixFilePermission write,
      PosixFilePermission execute) {
    if (action.implies(FsAction.READ)) {
      out.add(read);
    }
    if (action.implies(FsAction.WRITE)) {
      out.add(write);
    }
    if (action.implies(FsAction.EXECUTE)) {
      out.add(execute);
    }
  }
}
