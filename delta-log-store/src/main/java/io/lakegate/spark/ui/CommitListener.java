/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.spark.ui;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.util.kvstore.KVStore;
import org.apache.spark.util.kvstore.KVStoreIterator;

/**
 * Keeps each {@link CommitEvent} in the application's status store, the newest {@link #RETAINED}.
 *
 * <p>Added to the live application's status queue by {@link LakegatePlugin}, and made by
 * {@link LakegateHistoryPlugin} for each application the History Server replays from its event log.
 */
public final class CommitListener extends SparkListener {
    /** Commits kept (over every table): enough for weeks of rounds at a 10 s interval per table. */
    public static final int RETAINED = 10_000;

    private final KVStore store;
    private long arrivals;

    public CommitListener(KVStore store) {
        this.store = store;
    }

    @Override
    public void onOtherEvent(SparkListenerEvent event) {
        if (!(event instanceof CommitEvent)) {
            return;
        }
        try {
            store.write(new CommitRow((CommitEvent) event, arrivals++));
            trim();
        } catch (Exception e) {
            throw new IllegalStateException("cannot keep a Lakegate commit in the status store", e);
        }
    }

    private void trim() throws Exception {
        long excess = store.count(CommitRow.class) - RETAINED;
        if (excess <= 0) {
            return;
        }
        List<String> oldest = new ArrayList<>();
        try (KVStoreIterator<CommitRow> it = store.view(CommitRow.class).index("arrival").closeableIterator()) {
            while (oldest.size() < excess && it.hasNext()) {
                oldest.add(it.next().id);
            }
        }
        for (String id : oldest) {
            store.delete(CommitRow.class, id);
        }
    }
}
