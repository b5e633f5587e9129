/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.spark.ui;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import org.apache.spark.scheduler.SparkListenerEvent;

/**
 * One commit the Lakegate service made, as it posts it on Spark's listener bus ({@link CommitEvents#post}).
 *
 * <p>Read by {@link CommitListener}, which keeps it in the application's status store for the
 * "Lakegate" tab; with {@code spark.eventLog.enabled} Spark's event log holds it too (as JSON,
 * through Jackson: public fields), so the History Server replays it into the same tab after the
 * service stopped. Every field is what the service's commit record says; {@code -1} where it
 * holds nothing ({@code durationMs}, {@code vtts}).
 */
@JsonIgnoreProperties(ignoreUnknown = true)
public final class CommitEvent implements SparkListenerEvent {
    public String table = "";
    public String format = "";
    public long version;
    public String commitId = "";
    public long files;
    public long records;
    /** Per partition, the next offset after this commit: {@code {"topic": {"0": 120}}} as JSON text. */
    public String offsets = "{}";
    /** Per partition, where this commit's range starts (the same form); empty when not recorded. */
    public String starts = "{}";
    public long durationMs = -1;
    /** Valid-through time (epoch ms): every partition reported up to it; -1 when not every one had. */
    public long vtts = -1;
    public long committedAtMs;
    /** The ids of the Spark jobs this commit ran in this application; none for a zero-copy commit. */
    public long[] sparkJobs = new long[0];
    /** The dead letters whose ranges this commit skipped (an admin's release). */
    public String[] released = new String[0];
    /** Of {@code files}, those added where they lay (zero copy); -1 when not recorded. */
    public long inPlace = -1;
    /** Of {@code files}, those whose rows Spark rewrote; -1 when not recorded. */
    public long rewritten = -1;
    /** Of those rewritten, Parquet files split because their rows spanned partitions; -1 when not recorded. */
    public long split = -1;

    public CommitEvent() {
        // for Jackson (the event log, the History Server's replay)
    }

    /** Whether the commit ran no Spark job: files added where they lie, only the log written. */
    public boolean zeroCopy() {
        return sparkJobs.length == 0;
    }
}
