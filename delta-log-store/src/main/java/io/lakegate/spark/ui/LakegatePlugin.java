/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.spark.ui;

import java.util.Map;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;
import org.apache.spark.util.kvstore.KVStore;

/**
 * The service's Spark plugin ({@code spark.plugins=io.lakegate.spark.ui.LakegatePlugin}, set by the
 * service's Spark factory): on the driver it adds a {@link CommitListener} to the status queue and
 * the "Lakegate" tab to the live UI. Nothing runs on executors.
 */
public final class LakegatePlugin implements SparkPlugin {
    @Override
    public DriverPlugin driverPlugin() {
        return new DriverPlugin() {
            @Override
            public Map<String, String> init(SparkContext sc, PluginContext context) {
                KVStore store = sc.statusStore().store();
                sc.listenerBus().addToStatusQueue(new CommitListener(store));
                if (sc.ui().isDefined()) {
                    sc.ui().get().attachTab(new CommitsTab(sc.ui().get(), store));
                }
                return Map.of();
            }
        };
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return null;
    }
}
