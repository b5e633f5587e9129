/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.spark.ui;

import org.apache.spark.util.kvstore.KVIndex;

/**
 * A {@link CommitEvent} as the application's status store keeps it (written by {@link CommitListener},
 * read by {@link CommitsPage}): keyed by table and version, ordered by arrival.
 */
public final class CommitRow {
    @KVIndex
    public String id = "";

    @KVIndex("arrival")
    public long arrival;

    public CommitEvent commit = new CommitEvent();

    public CommitRow() {
        // for the store's Jackson serializer (the History Server's disk store)
    }

    CommitRow(CommitEvent commit, long arrival) {
        this.commit = commit;
        this.arrival = arrival;
        this.id = commit.table + "\u0000" + String.format("%020d", commit.version);
    }
}
