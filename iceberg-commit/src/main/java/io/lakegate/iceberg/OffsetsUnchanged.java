package io.lakegate.iceberg;

import java.util.Map;
import java.util.Objects;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.SnapshotAncestryValidator;

/**
 * Accepts the table's head only while its Lakegate offsets are the ones a round was planned from.
 *
 * <p>Made by the commit service's IcebergCommitter (commit_service/iceberg/committer.py) for each
 * round and handed to the round's append as {@code validateWith}. Iceberg calls {@link #validate}
 * inside {@code commit()}, after it has re-read the table and before it swaps the table's metadata,
 * on every attempt of its own retries, with the ancestry of the head it will commit onto (newest
 * first). The offsets are the {@code property} of the newest snapshot that has it; the round
 * lands only if that text is exactly the one the round was planned from ({@code expected}, null:
 * no snapshot had it). Otherwise Iceberg throws {@code ValidationException}, and the committer
 * reads {@link #found} to tell a moved table from another refusal.
 */
public final class OffsetsUnchanged implements SnapshotAncestryValidator {
  private final String property;
  private final String expected;
  private volatile String found;
  private volatile boolean checked;

  public OffsetsUnchanged(String property, String expected) {
    this.property = Objects.requireNonNull(property, "property");
    this.expected = expected;
  }

  @Override
  public boolean validate(Iterable<Snapshot> baseSnapshots) {
    String newest = null;
    for (Snapshot snapshot : baseSnapshots) {
      Map<String, String> summary = snapshot.summary();
      if (summary != null && summary.containsKey(property)) {
        newest = summary.get(property);
        break;
      }
    }
    found = newest;
    checked = true;
    return Objects.equals(newest, expected);
  }

  /** Whether {@link #validate} ran and saw other offsets than the planned ones. */
  public boolean moved() {
    return checked && !Objects.equals(found, expected);
  }

  /** The offsets text the last {@link #validate} found (null: none). */
  public String found() {
    return found;
  }

  @Override
  public String errorMessage() {
    return "the table's " + property + " moved since the round was planned";
  }
}
