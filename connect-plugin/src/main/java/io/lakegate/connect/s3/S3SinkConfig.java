/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Path;
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
    public static final String FORMAT_OUTPUT_ENVELOPE = "format.output.envelope";
    public static final String FORMAT_OUTPUT_VALUE_ENCODING = "format.output.fields.value.encoding";
    public static final String AVRO_CODEC = "avro.codec";
    public static final String FILE_COMPRESSION_TYPE = "file.compression.type";
    public static final String AWS_S3_PART_SIZE = "aws.s3.part.size.bytes";
    // Confluent's S3 sink: format.class selects its layout, names and contents (ConfluentLayout)
    public static final String FORMAT_CLASS = "format.class";
    public static final String S3_BUCKET_NAME = "s3.bucket.name";
    public static final String STORE_URL = "store.url";
    public static final String TOPICS_DIR = "topics.dir";
    public static final String PARTITIONER_CLASS = "partitioner.class";
    public static final String PATH_FORMAT = "path.format";
    public static final String PARTITION_DURATION_MS = "partition.duration.ms";
    public static final String LOCALE = "locale";
    public static final String TIMEZONE = "timezone";
    public static final String TIMESTAMP_EXTRACTOR = "timestamp.extractor";
    public static final String TIMESTAMP_FIELD = "timestamp.field";
    public static final String PARTITION_FIELD_NAME = "partition.field.name";
    public static final String ZERO_PAD_WIDTH = "filename.offset.zero.pad.width";
    public static final String DIRECTORY_DELIM = "directory.delim";
    public static final String FILE_DELIM = "file.delim";
    public static final String S3_COMPRESSION_TYPE = "s3.compression.type";
    public static final String PARQUET_CODEC = "parquet.codec";
    public static final String FLUSH_SIZE = "flush.size";
    public static final String BEHAVIOR_ON_NULL_VALUES = "behavior.on.null.values";
    /** Test-only fault switch (see {@link S3SinkTask}); not a key of Aiven's sink. */
    public static final String LAKEGATE_TEST_FAULT_DIR = "lakegate.test.fault.dir";

    /** S3's smallest part (all parts but the last); also Aiven's default part size. */
    public static final int MIN_PART_SIZE = 5 * 1024 * 1024;
    /** Aiven's upper bound for {@code aws.s3.part.size.bytes} (one part is buffered in memory). */
    public static final int MAX_PART_SIZE = 2_000_000_000;

    /** Output file formats ({@code format.output.type}). */
    public enum Format { CSV, JSONL, JSON, PARQUET, AVRO }

    /**
     * File compression ({@code file.compression.type}): the stream codec of a jsonl file, the page
     * codec of a Parquet file. {@link #extension()} is what the default file name template appends.
     */
    public enum Compression {
        NONE(""), GZIP(".gz"), SNAPPY(".snappy"), ZSTD(".zst");

        private final String extension;

        Compression(String extension) {
            this.extension = extension;
        }

        public String extension() {
            return extension;
        }
    }

    public static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(AWS_ACCESS_KEY_ID, Type.PASSWORD, null, Importance.MEDIUM,
                    "AWS access key id. If neither it nor aws.secret.access.key is set, the AWS SDK "
                            + "default credential chain is used (environment, system properties, profile, ...).")
            .define(AWS_SECRET_ACCESS_KEY, Type.PASSWORD, null, Importance.MEDIUM,
                    "AWS secret access key; must be set together with aws.access.key.id.")
            .define(AWS_S3_BUCKET_NAME, Type.STRING, null, Importance.HIGH,
                    "Bucket the objects are written to (required, or Confluent's s3.bucket.name).")
            .define(AWS_S3_REGION, Type.STRING, "us-east-1", new ConfigDef.NonEmptyString(),
                    Importance.MEDIUM, "AWS region of the bucket.")
            .define(AWS_S3_ENDPOINT, Type.STRING, null, S3SinkConfig::validateEndpoint, Importance.LOW,
                    "S3-compatible endpoint URL (e.g. http://127.0.0.1:9000). When set, path-style "
                            + "access is used.")
            .define(AWS_S3_PART_SIZE, Type.INT, MIN_PART_SIZE, ConfigDef.Range.between(MIN_PART_SIZE, MAX_PART_SIZE),
                    Importance.MEDIUM, "Part size of the S3 multipart upload of each object, in bytes (one part "
                            + "is buffered in memory). S3 requires at least 5 MiB for every part but the last.")
            .define(AWS_S3_PREFIX, Type.STRING, null, S3SinkConfig::validatePrefix, Importance.MEDIUM,
                    "When set (non-empty), objects are named <prefix><topic>-<partition>-<start offset padded to "
                            + "20 digits> plus the compression's extension, and file.name.template is ignored "
                            + "(Aiven's legacy naming). The prefix is used verbatim (no templating).")
            .define(FILE_NAME_TEMPLATE, Type.STRING, null, S3SinkConfig::validateTemplate, Importance.MEDIUM,
                    "Object name template, used as is (no extension added); must use {{topic}}, {{partition}} "
                            + "and {{start_offset}} (the last two accept ':padding=true'). Unset: "
                            + FileNameTemplate.DEFAULT + " plus the compression's extension (.gz, .snappy, .zst).")
            .define(FORMAT_OUTPUT_TYPE, Type.STRING, "csv",
                    ConfigDef.CaseInsensitiveValidString.in("csv", "jsonl", "json", "parquet", "avro"), Importance.MEDIUM,
                    "Output file format: csv (Aiven's default: no header, key and value base64), jsonl, json "
                            + "(one array of the records), parquet or avro (container files; records need key and "
                            + "value schemas).")
            .define(AVRO_CODEC, Type.STRING, "null", S3SinkConfig::validateAvroCodec, Importance.LOW,
                    "avro: the container file's codec (null, deflate, snappy, zstandard, bzip2, xz); the file "
                            + "is also wrapped in file.compression.type's stream, as Aiven's sink does.")
            .define(FORMAT_OUTPUT_VALUE_ENCODING, Type.STRING, "base64",
                    ConfigDef.CaseInsensitiveValidString.in("base64", "none"), Importance.LOW,
                    "csv: the value's encoding: base64 (default) or none (its bytes as they are).")
            .define(FORMAT_OUTPUT_FIELDS, Type.LIST, "value", S3SinkConfig::validateFields,
                    Importance.MEDIUM, "Comma-separated record fields to write, in order: "
                            + "key, value, offset, timestamp, headers.")
            .define(FORMAT_OUTPUT_ENVELOPE, Type.BOOLEAN, true, Importance.MEDIUM,
                    "Wrap each record's fields in an envelope ({\"value\": ...}) even when there is only one "
                            + "field. false writes the single field bare; it requires exactly one field.")
            .define(FILE_COMPRESSION_TYPE, Type.STRING, null, S3SinkConfig::validateCompression, Importance.MEDIUM,
                    "none, gzip, snappy or zstd; unset means gzip. jsonl: the file's stream codec (snappy is the "
                            + "Snappy framed format). parquet: the page codec (unset: uncompressed pages, as "
                            + "Aiven's sink does, though the default name still ends in .gz).")
            .define(FORMAT_CLASS, Type.STRING, null, S3SinkConfig::validateFormatClass, Importance.HIGH,
                    "Confluent's S3 sink: io.confluent.connect.s3.format.{avro.AvroFormat, json.JsonFormat, "
                            + "parquet.ParquetFormat}. When set, the sink writes as Confluent's does: the value alone, "
                            + "named and placed by topics.dir and partitioner.class, and the format.output.* and "
                            + "aws.s3.prefix/file.name.template keys are ignored.")
            .define(S3_BUCKET_NAME, Type.STRING, null, Importance.HIGH, "Confluent's name for aws.s3.bucket.name.")
            .define(STORE_URL, Type.STRING, null, S3SinkConfig::validateEndpoint, Importance.LOW,
                    "Confluent's name for aws.s3.endpoint.")
            .define(TOPICS_DIR, Type.STRING, "topics", Importance.MEDIUM, "Confluent: the top directory of every key.")
            .define(PARTITIONER_CLASS, Type.STRING, "io.confluent.connect.storage.partitioner.DefaultPartitioner",
                    Importance.MEDIUM, "Confluent: DefaultPartitioner, FieldPartitioner, TimeBasedPartitioner, "
                            + "DailyPartitioner or HourlyPartitioner (package io.confluent.connect.storage.partitioner).")
            .define(PATH_FORMAT, Type.STRING, "", Importance.MEDIUM,
                    "Confluent, TimeBasedPartitioner: the Joda-Time pattern of the directories, e.g. "
                            + "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH.")
            .define(PARTITION_DURATION_MS, Type.LONG, -1L, Importance.MEDIUM,
                    "Confluent, TimeBasedPartitioner: the length of a time partition.")
            .define(LOCALE, Type.STRING, "en", Importance.LOW, "Confluent, time-based: the locale of path.format.")
            .define(TIMEZONE, Type.STRING, "UTC", Importance.LOW, "Confluent, time-based: the time zone of path.format.")
            .define(TIMESTAMP_EXTRACTOR, Type.STRING, "Wallclock",
                    ConfigDef.CaseInsensitiveValidString.in("Wallclock", "Record", "RecordField"), Importance.MEDIUM,
                    "Confluent, time-based: whose time places a record: Wallclock, Record or RecordField.")
            .define(TIMESTAMP_FIELD, Type.STRING, "timestamp", Importance.LOW,
                    "Confluent, RecordField: the value's field holding the time.")
            .define(PARTITION_FIELD_NAME, Type.LIST, "", Importance.MEDIUM,
                    "Confluent, FieldPartitioner: the value's fields that name the directories.")
            .define(ZERO_PAD_WIDTH, Type.INT, 10, ConfigDef.Range.atLeast(0), Importance.LOW,
                    "Confluent: the start offset's digits in a file name.")
            .define(DIRECTORY_DELIM, Type.STRING, "/", Importance.LOW, "Confluent: between directories.")
            .define(FILE_DELIM, Type.STRING, "+", Importance.LOW, "Confluent: between a file name's parts.")
            .define(S3_COMPRESSION_TYPE, Type.STRING, "none", ConfigDef.CaseInsensitiveValidString.in("none", "gzip"),
                    Importance.LOW, "Confluent, JsonFormat: none or gzip (the name gets .gz).")
            .define(PARQUET_CODEC, Type.STRING, "snappy",
                    ConfigDef.CaseInsensitiveValidString.in("none", "uncompressed", "snappy", "gzip", "zstd"),
                    Importance.LOW, "Confluent, ParquetFormat: the page codec (the name gets .<codec>.parquet).")
            .define(FLUSH_SIZE, Type.INT, 0, ConfigDef.Range.atLeast(0), Importance.MEDIUM,
                    "Confluent: records of a partition after which its files are written (0: at each offset commit).")
            .define(BEHAVIOR_ON_NULL_VALUES, Type.STRING, "fail", ConfigDef.CaseInsensitiveValidString.in("fail", "ignore"),
                    Importance.LOW, "Confluent: a record with a null value fails the task or is skipped.")
            .define(LAKEGATE_TEST_FAULT_DIR, Type.STRING, null, Importance.LOW,
                    "TEST-ONLY fault switch, not a key of Aiven's sink; unset in production. A local directory: "
                            + "when a task's offset-commit flush finds and atomically deletes the file "
                            + "<dir>/crash-after-upload (one task of any worker on the machine wins), it writes each "
                            + "buffered partition of 2+ records as two objects split at the middle record, uploads "
                            + "them, appends '<topic>-<partition> <first> <split> <last>' to <dir>/claimed.log, and "
                            + "fails the flush, so Connect rewinds and the rewrite leaves the second object as an "
                            + "orphan overlapping the new one (a crash between upload and offset commit).");

    private static final FileNameTemplate DEFAULT_TEMPLATE = FileNameTemplate.parse(FileNameTemplate.DEFAULT);

    /** The custom {@code file.name.template}, or null when unset. */
    private final FileNameTemplate template;
    private final Format format;
    private final Compression compression;
    private final Compression parquetCodec;
    private final List<OutputField> fields;
    private final boolean envelope;
    /** Confluent's layout when {@code format.class} is set, else null (Aiven's). */
    private final ConfluentLayout confluent;

    public S3SinkConfig(Map<?, ?> props) {
        super(CONFIG_DEF, props);
        String templateText = getString(FILE_NAME_TEMPLATE);
        template = templateText == null ? null : FileNameTemplate.parse(templateText);
        String formatClass = getString(FORMAT_CLASS);
        if (formatClass != null) {
            format = confluentFormat(formatClass);
            compression = format == Format.JSONL && "gzip".equalsIgnoreCase(getString(S3_COMPRESSION_TYPE))
                    ? Compression.GZIP : Compression.NONE;
            String codec = getString(PARQUET_CODEC).toUpperCase(Locale.ROOT);
            parquetCodec = codec.equals("UNCOMPRESSED") ? Compression.NONE : Compression.valueOf(codec);
            fields = List.of(OutputField.VALUE);
            envelope = false;
            confluent = new ConfluentLayout(this, confluentExtension());
        } else {
            format = Format.valueOf(getString(FORMAT_OUTPUT_TYPE).toUpperCase(Locale.ROOT));
            String compressionName = getString(FILE_COMPRESSION_TYPE);
            compression = compressionName == null ? Compression.GZIP
                    : Compression.valueOf(compressionName.trim().toUpperCase(Locale.ROOT));
            // Aiven's Parquet writer picks its page codec from the raw connector properties, where an
            // unset file.compression.type means "none" (while the file name still gets gzip's ".gz").
            parquetCodec = compressionName == null ? Compression.NONE : compression;
            fields = OutputField.parseAll(getList(FORMAT_OUTPUT_FIELDS));
            envelope = getBoolean(FORMAT_OUTPUT_ENVELOPE);
            confluent = null;
        }
        if (bucket() == null || bucket().isEmpty()) {
            throw new ConfigException(AWS_S3_BUCKET_NAME + " (or " + S3_BUCKET_NAME + ") is required");
        }
        if (!envelope && fields.size() != 1) {
            throw new ConfigException("When " + FORMAT_OUTPUT_ENVELOPE + " is false, " + FORMAT_OUTPUT_FIELDS
                    + " must contain only one field");
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
        String aiven = getString(AWS_S3_BUCKET_NAME);
        return aiven != null ? aiven : getString(S3_BUCKET_NAME);
    }

    /** Confluent's layout ({@code format.class} set), or null for Aiven's naming. */
    ConfluentLayout confluent() {
        return confluent;
    }

    /** Confluent: records of a partition after which its files are written (0: at each offset commit). */
    public int flushSize() {
        return confluent == null ? 0 : getInt(FLUSH_SIZE);
    }

    /** Confluent: whether a null value is skipped ({@code behavior.on.null.values=ignore}) rather than failing. */
    public boolean ignoreNullValues() {
        return "ignore".equalsIgnoreCase(getString(BEHAVIOR_ON_NULL_VALUES));
    }

    public String region() {
        return getString(AWS_S3_REGION);
    }

    /** The endpoint override, or null for the AWS endpoint of {@link #region()}. */
    public URI endpoint() {
        String value = getString(AWS_S3_ENDPOINT) != null ? getString(AWS_S3_ENDPOINT) : getString(STORE_URL);
        return value == null || value.isBlank() ? null : URI.create(value.trim());
    }

    /** The {@code aws.s3.prefix}, or null when unset (then object names come from the file name template). */
    public String prefix() {
        return getString(AWS_S3_PREFIX);
    }

    /** The custom {@code file.name.template}, or null when unset. */
    public FileNameTemplate template() {
        return template;
    }

    public int partSize() {
        return getInt(AWS_S3_PART_SIZE);
    }

    /** The {@code lakegate.test.fault.dir} (test-only fault switch), or null when unset or blank. */
    public Path testFaultDir() {
        String value = getString(LAKEGATE_TEST_FAULT_DIR);
        return value == null || value.isBlank() ? null : Path.of(value.trim());
    }

    /** Whether each record's fields are wrapped in an object; false only with exactly one field. */
    public boolean envelope() {
        return envelope;
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

    /** The page codec of Parquet files: {@code file.compression.type} if set, else none (as Aiven). */
    public Compression parquetCodec() {
        return parquetCodec;
    }

    /**
     * The object key of a file of {@code topic}/{@code partition} starting at {@code startOffset},
     * by Aiven's rules, whatever the format:
     * <ol>
     *   <li>{@code aws.s3.prefix} set: {@code <prefix><topic>-<partition>-<startOffset padded to 20 digits>}
     *       + the compression's extension ({@code file.name.template} is ignored);</li>
     *   <li>no {@code file.name.template}: {@code <topic>-<partition>-<startOffset>} + the compression's
     *       extension ({@code .gz}, {@code .snappy}, {@code .zst}, or nothing for none);</li>
     *   <li>otherwise the rendered template, nothing appended.</li>
     * </ol>
     */
    public String objectKey(String topic, int partition, long startOffset, String encodedPartition) {
        if (confluent != null) {
            return confluent.objectKey(topic, partition, startOffset, encodedPartition);
        }
        if (prefix() != null) {
            return prefix() + topic + "-" + partition + "-" + String.format(Locale.ROOT, "%020d", startOffset)
                    + compression.extension();
        }
        if (template == null) {
            return DEFAULT_TEMPLATE.render(topic, partition, startOffset)
                    + compression.extension();
        }
        return template.render(topic, partition, startOffset);
    }

    /** A new writer for the configured format; called once per task start. */
    RecordFileWriter newWriter() {
        switch (format) {
            case PARQUET:
                return new ParquetRecordWriter(fields, envelope, parquetCodec);
            case JSON:
                return new JsonlRecordWriter(fields, envelope, compression, true, false);
            case AVRO:
                return new AvroRecordWriter(fields, envelope, compression, getString(AVRO_CODEC), confluent != null);
            case CSV:
                boolean base64 = "base64".equalsIgnoreCase(getString(FORMAT_OUTPUT_VALUE_ENCODING));
                return new CsvRecordWriter(fields, base64, compression);
            default:
                return new JsonlRecordWriter(fields, envelope, compression, false, confluent != null);
        }
    }

    /** What Confluent's formats append to a name: .avro, .json (.json.gz), .<codec>.parquet. */
    private String confluentExtension() {
        switch (format) {
            case AVRO:
                return ".avro";
            case PARQUET:
                String[] codecs = {"", ".snappy", ".gz", ".zstd"};
                return codecs[List.of(Compression.NONE, Compression.SNAPPY, Compression.GZIP, Compression.ZSTD)
                        .indexOf(parquetCodec)] + ".parquet";
            default:
                return ".json" + compression.extension();
        }
    }

    private static Format confluentFormat(String formatClass) {
        switch (formatClass.substring(formatClass.lastIndexOf('.') + 1)) {
            case "AvroFormat":
                return Format.AVRO;
            case "JsonFormat":
                return Format.JSONL;
            case "ParquetFormat":
                return Format.PARQUET;
            default:
                throw new ConfigException(FORMAT_CLASS, formatClass, "this stand-in writes AvroFormat, JsonFormat "
                        + "and ParquetFormat");
        }
    }

    private static void validateFormatClass(String name, Object value) {
        if (value != null) {
            confluentFormat(value.toString());
        }
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

    /** Non-empty when set, as Aiven's {@code NonEmptyString}; templating is not supported, so no "{{". */
    private static void validatePrefix(String name, Object value) {
        if (value == null) {
            return;
        }
        if (value.toString().isEmpty()) {
            throw new ConfigException(name, value, "String must be non-empty (leave " + name + " unset for no prefix)");
        }
        if (value.toString().contains("{{")) {
            throw new ConfigException(name, value, "prefix templating ({{...}}) is not supported by this sink");
        }
    }

    private static void validateCompression(String name, Object value) {
        if (value == null) {
            return;
        }
        try {
            Compression.valueOf(value.toString().trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new ConfigException(name, value, "supported values are: 'none', 'gzip', 'snappy', 'zstd'");
        }
    }

    private static void validateAvroCodec(String name, Object value) {
        try {
            org.apache.avro.file.CodecFactory.fromString(String.valueOf(value));
        } catch (org.apache.avro.AvroRuntimeException e) {
            throw new ConfigException(name, value, "Unknown or not supported codec " + value);
        }
    }

    private static void validateTemplate(String name, Object value) {
        if (value == null) {
            return;
        }
        try {
            FileNameTemplate.parse(value.toString());
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
