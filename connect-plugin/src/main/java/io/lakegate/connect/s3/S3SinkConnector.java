/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * Kafka Connect S3 sink: a stand-in for Aiven's S3 sink connector writing JSONL or Parquet objects
 * named by Aiven's rules ({@link S3SinkConfig#objectKey}), one multipart upload per partition per
 * offset commit.
 *
 * <p>The Connect runtime instantiates it (found through {@code META-INF/services}), calls
 * {@link #validate} on {@code PUT .../config/validate} and before creating the connector, then
 * {@link #start}, {@link #taskConfigs} to configure up to {@code tasks.max} {@link S3SinkTask}s (all
 * with the same config: the consumer group spreads the partitions over them), and {@link #stop}.
 */
public class S3SinkConnector extends SinkConnector {

    static final String VERSION = loadVersion();

    private Map<String, String> props;

    @Override
    public String version() {
        return VERSION;
    }

    @Override
    public void start(Map<String, String> props) {
        new S3SinkConfig(props); // fail fast on an invalid config
        this.props = new HashMap<>(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return S3SinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> configs = new ArrayList<>(maxTasks);
        for (int i = 0; i < maxTasks; i++) {
            configs.add(new HashMap<>(props));
        }
        return configs;
    }

    @Override
    public void stop() {
        props = null;
    }

    @Override
    public ConfigDef config() {
        return S3SinkConfig.CONFIG_DEF;
    }

    /** Per-key checks from the {@link ConfigDef}, plus the cross-key ones of {@link S3SinkConfig}. */
    @Override
    public Config validate(Map<String, String> connectorConfigs) {
        Config config = super.validate(connectorConfigs);
        boolean perKeyErrors = config.configValues().stream().anyMatch(v -> !v.errorMessages().isEmpty());
        if (!perKeyErrors) {
            for (String error : S3SinkConfig.crossKeyErrors(connectorConfigs)) {
                for (ConfigValue value : config.configValues()) {
                    if (error.contains(value.name())) {
                        value.addErrorMessage(error);
                    }
                }
            }
        }
        return config;
    }

    private static String loadVersion() {
        try (InputStream in = S3SinkConnector.class.getResourceAsStream("/lakegate-s3-sink.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }
}
