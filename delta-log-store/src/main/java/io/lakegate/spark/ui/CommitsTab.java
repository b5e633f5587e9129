/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.spark.ui;

import org.apache.spark.ui.SparkUI;
import org.apache.spark.ui.SparkUITab;
import org.apache.spark.util.kvstore.KVStore;

/**
 * The "Lakegate" tab of a Spark UI ({@code /lakegate/}): attached to the service's live UI by
 * {@link LakegatePlugin} and to a replayed application's UI by {@link LakegateHistoryPlugin}.
 */
public final class CommitsTab extends SparkUITab {
    public CommitsTab(SparkUI ui, KVStore store) {
        super(ui, "lakegate");
        attachPage(new CommitsPage(this, store));
    }
}
