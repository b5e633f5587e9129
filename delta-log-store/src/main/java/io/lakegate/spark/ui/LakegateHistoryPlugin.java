/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.spark.ui;

import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.status.AppHistoryServerPlugin;
import org.apache.spark.status.ElementTrackingStore;
import org.apache.spark.ui.SparkUI;
import org.apache.spark.util.kvstore.KVStore;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The History Server's side (found through {@code META-INF/services}): replays each application's
 * {@link CommitEvent}s into its store and gives an application that made commits the "Lakegate" tab,
 * so a service's commits can be read after it stopped. The History Server needs this jar on its
 * class path.
 */
public final class LakegateHistoryPlugin implements AppHistoryServerPlugin {
    @Override
    public Seq<SparkListener> createListeners(SparkConf conf, ElementTrackingStore store) {
        List<SparkListener> one = List.of(new CommitListener(store));
        return CollectionConverters.asScala(one).toSeq();
    }

    @Override
    public void setupUI(SparkUI ui) {
        KVStore store = ui.store().store();
        try {
            if (store.count(CommitRow.class) > 0) {
                ui.attachTab(new CommitsTab(ui, store));
            }
        } catch (Exception e) {
            throw new IllegalStateException("cannot read the Lakegate commits of a replayed application", e);
        }
    }
}
