/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.spark.ui;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.SparkContext;

/**
 * How the Lakegate service (Python, through py4j) posts a commit on Spark's listener bus: one call
 * per commit with the commit record as JSON ({@code commit_service.spark.ui_events}).
 */
public final class CommitEvents {
    private static final ObjectMapper JSON =
            new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

    private CommitEvents() {
    }

    /**
     * Posts the commit {@code json} describes (the fields of {@link CommitEvent}) on {@code sc}'s
     * listener bus; returns at once (the bus delivers it on its own threads).
     *
     * @throws IllegalArgumentException when {@code json} is not such a commit
     */
    public static void post(SparkContext sc, String json) {
        CommitEvent event;
        try {
            // Spark's events carry their class as "Event" (SparkListenerEvent's Jackson type id),
            // which the event log writes and the History Server's replay reads back.
            ObjectNode fields = (ObjectNode) JSON.readTree(json);
            fields.put("Event", CommitEvent.class.getName());
            event = JSON.treeToValue(fields, CommitEvent.class);
        } catch (Exception e) {
            throw new IllegalArgumentException("not a Lakegate commit: " + e.getMessage(), e);
        }
        sc.listenerBus().post(event);
    }
}
