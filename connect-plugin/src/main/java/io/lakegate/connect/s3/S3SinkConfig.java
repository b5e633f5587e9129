/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;

/**
 * Configuration of the connector and its tasks. The key names are those of Aiven's S3 sink
 * ({@code io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector}) for the subset we support.
 *
 * <p>Built by {@link S3SinkConnector#start} (to fail fast on a bad config) and by every
 * {@link S3SinkTask#start}. Single-key checks live in {@link ConfigDef} validators, so the Connect
 * REST {@code PUT /connector-plugins/.../config/validate} reports them per key; the cross-key checks
 * run in the constructor and are surfaced by {@link S3SinkConnector#validate}.
 */
public final class S3SinkConfig extends AbstractConfig {

    public static final String AWS_ACCESS_KEY_ID = "aws.access.key.id";
    public static final String AWS_SECRET_ACCESS_KEY = "aws.secret.access.key";
    public static final String AWS_S3_BUCKET_NAME = "aws.s3.bucket.name";
    public static final String AWS_S3_REGION = "aws.s3.region";
    public static final String AWS_S3_ENDPOINT = "aws.s3.endpoint";
    public static final String AWS_S3_PREFIX = "aws.s3.prefix";
    public static final String FILE_NAME_TEMPLATE = "file.name.template";
    public static final String FORMAT_OUTPUT_TYPE = "format.output.type";
    public static final String FORMAT_OUTPUT_FIELDS = "format.output.fields";
    public static final String FILE_COMPRESSION_TYPE = "file.compression.type";

    /** Output file formats ({@code format.output.type}). */
    public enum Format { JSONL, PARQUET }

    /** File compression ({@code file.compression.type}); for Parquet it selects the page codec. */
    public enum Compression { NONE, GZIP, SNAPPY }

    public static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(AWS_ACCESS_KEY_ID, Type.PASSWORD, null, Importance.MEDIUM,
                    "AWS access key id. If neither it nor aws.secret.access.key is set, the AWS SDK "
                            + "default credential chain is used (environment, system properties, profile, ...).")
            .define(AWS_SECRET_ACCESS_KEY, Type.PASSWORD, null, Importance.MEDIUM,
                    "AWS secret access key; must be set together with aws.access.key.id.")
            .define(AWS_S3_BUCKET_NAME, Type.STRING, ConfigDef.NO_DEFAULT_VALUE,
                    new ConfigDef.NonEmptyString(), Importance.HIGH, "Bucket the objects are written to.")
            .define(AWS_S3_REGION, Type.STRING, "us-east-1", new ConfigDef.NonEmptyString(),
                    Importance.MEDIUM, "AWS region of the bucket.")
            .define(AWS_S3_ENDPOINT, Type.STRING, null, S3SinkConfig::validateEndpoint, Importance.LOW,
                    "S3-compatible endpoint URL (e.g. http://127.0.0.1:9000). When set, path-style "
                            + "access is used.")
            .define(AWS_S3_PREFIX, Type.STRING, "", Importance.MEDIUM,
                    "Prefix prepended verbatim to every object key (include a trailing '/' for a folder).")
            .define(FILE_NAME_TEMPLATE, Type.STRING, FileNameTemplate.DEFAULT,
                    S3SinkConfig::validateTemplate, Importance.MEDIUM,
                    "Object name template; must use {{topic}}, {{partition}} and {{start_offset}} "
                            + "(the last two accept ':padding=true').")
            .define(FORMAT_OUTPUT_TYPE, Type.STRING, "jsonl",
                    ConfigDef.CaseInsensitiveValidString.in("jsonl", "parquet"), Importance.MEDIUM,
                    "Output file format: jsonl or parquet.")
            .define(FORMAT_OUTPUT_FIELDS, Type.LIST, "value", S3SinkConfig::validateFields,
                    Importance.MEDIUM, "Comma-separated record fields to write, in order: "
                            + "key, value, offset, timestamp, headers. Exactly 'value' writes the value "
                            + "alone, without an envelope.")
            .define(FILE_COMPRESSION_TYPE, Type.STRING, "gzip",
                    ConfigDef.CaseInsensitiveValidString.in("none", "gzip", "snappy"), Importance.MEDIUM,
                    "none or gzip for jsonl (gzip appends '.gz' to the key); none, gzip or snappy for "
                            + "parquet (the Parquet page codec, no key suffix).");

    private final FileNameTemplate template;
    private final Format format;
    private final Compression compression;
    private final List<OutputField> fields;

    public S3SinkConfig(Map<?, ?> props) {
        super(CONFIG_DEF, props);
        template = FileNameTemplate.parse(getString(FILE_NAME_TEMPLATE));
        format = Format.valueOf(getString(FORMAT_OUTPUT_TYPE).toUpperCase(Locale.ROOT));
        compression = Compression.valueOf(getString(FILE_COMPRESSION_TYPE).toUpperCase(Locale.ROOT));
        fields = OutputField.parseAll(getList(FORMAT_OUTPUT_FIELDS));
        if (format == Format.JSONL && compression == Compression.SNAPPY) {
            throw new ConfigException(FILE_COMPRESSION_TYPE, "snappy",
                    "jsonl output supports only 'none' or 'gzip'");
        }
        if ((accessKeyId() == null) != (secretAccessKey() == null)) {
            throw new ConfigException(AWS_ACCESS_KEY_ID + " and " + AWS_SECRET_ACCESS_KEY
                    + " must be set together (or both left unset to use the default credential chain)");
        }
    }

    public String accessKeyId() {
        return passwordOrNull(AWS_ACCESS_KEY_ID);
    }

    public String secretAccessKey() {
        return passwordOrNull(AWS_SECRET_ACCESS_KEY);
    }

    public String bucket() {
        return getString(AWS_S3_BUCKET_NAME);
    }

    public String region() {
        return getString(AWS_S3_REGION);
    }

    /** The endpoint override, or null for the AWS endpoint of {@link #region()}. */
    public URI endpoint() {
        String value = getString(AWS_S3_ENDPOINT);
        return value == null || value.isBlank() ? null : URI.create(value.trim());
    }

    public String prefix() {
        return getString(AWS_S3_PREFIX);
    }

    public FileNameTemplate template() {
        return template;
    }

    public Format format() {
        return format;
    }

    public Compression compression() {
        return compression;
    }

    public List<OutputField> fields() {
        return fields;
    }

    /** The object key for a file starting at {@code startOffset}: prefix + template (+ ".gz" for gzip jsonl). */
    public String objectKey(String topic, int partition, long startOffset) {
        String suffix = format == Format.JSONL && compression == Compression.GZIP ? ".gz" : "";
        return prefix() + template.render(topic, partition, startOffset) + suffix;
    }

    /** A new writer for the configured format; called once per task start. */
    RecordFileWriter newWriter() {
        return format == Format.PARQUET
                ? new ParquetRecordWriter(fields, compression)
                : new JsonlRecordWriter(fields, compression == Compression.GZIP);
    }

    private String passwordOrNull(String key) {
        Password password = getPassword(key);
        return password == null || password.value().isEmpty() ? null : password.value();
    }

    private static void validateEndpoint(String name, Object value) {
        if (value == null || value.toString().isBlank()) {
            return;
        }
        try {
            URI uri = new URI(value.toString().trim());
            String scheme = uri.getScheme() == null ? "" : uri.getScheme().toLowerCase(Locale.ROOT);
            if (!scheme.equals("http") && !scheme.equals("https") || uri.getHost() == null) {
                throw new ConfigException(name, value, "must be an http:// or https:// URL with a host");
            }
        } catch (URISyntaxException e) {
            throw new ConfigException(name, value, "is not a valid URL: " + e.getMessage());
        }
    }

    private static void validateTemplate(String name, Object value) {
        try {
            FileNameTemplate.parse(value == null ? null : value.toString());
        } catch (IllegalArgumentException e) {
            throw new ConfigException(name, value, e.getMessage());
        }
    }

    private static void validateFields(String name, Object value) {
        @SuppressWarnings("unchecked")
        List<String> names = value == null ? List.of() : (List<String>) value;
        try {
            OutputField.parseAll(names);
        } catch (IllegalArgumentException e) {
            throw new ConfigException(name, value, e.getMessage());
        }
    }

    /** Every error of {@code props} that the per-key validators cannot see (cross-key checks). */
    static List<String> crossKeyErrors(Map<String, String> props) {
        List<String> errors = new ArrayList<>();
        try {
            new S3SinkConfig(props);
        } catch (ConfigException e) {
            errors.add(e.getMessage());
        }
        return errors;
    }
}
