/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.time.Instant;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Date;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.sink.SinkRecord;

/**
 * Where Confluent's S3 sink ({@code io.confluent.connect.s3.S3SinkConnector}) puts a record's file
 * and how it names it, for the partitioners of {@code kafka-connect-storage-common}:
 * {@code <topics.dir><d><topic><d><encoded partition><d><topic><f><partition><f><start offset, zero-padded>
 * <extension>}, {@code <d>} being {@code directory.delim} ("/") and {@code <f>} {@code file.delim} ("+").
 *
 * <ul>
 *   <li>{@code DefaultPartitioner}: {@code partition=<kafka partition>};</li>
 *   <li>{@code FieldPartitioner}: {@code <field>=<value>} for each of {@code partition.field.name},
 *       joined by the directory delimiter (a number, string or boolean field of a struct or map value);</li>
 *   <li>{@code TimeBasedPartitioner}: the record's time floored to {@code partition.duration.ms} in
 *       {@code timezone} and formatted by {@code path.format} (a Joda-Time pattern) in {@code locale};
 *       the time from {@code timestamp.extractor}: {@code Wallclock} (now), {@code Record} (the Kafka
 *       record's timestamp) or {@code RecordField} ({@code timestamp.field} of the value: epoch millis,
 *       a Connect {@code Timestamp}/{@code Date}); {@code DailyPartitioner} and {@code HourlyPartitioner}
 *       are the same with their fixed {@code path.format} and duration.</li>
 * </ul>
 */
final class ConfluentLayout {

    private static final String DAILY = "'year'=YYYY/'month'=MM/'day'=dd";
    private static final String HOURLY = DAILY + "/'hour'=HH";

    private enum Kind { DEFAULT, FIELD, TIME }

    private enum Extractor { WALLCLOCK, RECORD, RECORDFIELD }

    private final Kind kind;
    private final String topicsDir;
    private final String directoryDelim;
    private final String fileDelim;
    private final int padWidth;
    private final String extension;
    private final List<String> fields;
    private final long durationMs;
    private final ZoneId zone;
    private final DateTimeFormatter formatter;
    private final Extractor extractor;
    private final String timestampField;

    ConfluentLayout(S3SinkConfig config, String extension) {
        String partitioner = simpleName(config.getString(S3SinkConfig.PARTITIONER_CLASS));
        this.topicsDir = config.getString(S3SinkConfig.TOPICS_DIR);
        this.directoryDelim = config.getString(S3SinkConfig.DIRECTORY_DELIM);
        this.fileDelim = config.getString(S3SinkConfig.FILE_DELIM);
        this.padWidth = config.getInt(S3SinkConfig.ZERO_PAD_WIDTH);
        this.extension = extension;
        this.fields = config.getList(S3SinkConfig.PARTITION_FIELD_NAME);
        String pathFormat = config.getString(S3SinkConfig.PATH_FORMAT);
        long duration = config.getLong(S3SinkConfig.PARTITION_DURATION_MS);
        switch (partitioner) {
            case "DefaultPartitioner":
                kind = Kind.DEFAULT;
                break;
            case "FieldPartitioner":
                kind = Kind.FIELD;
                if (fields.isEmpty()) {
                    throw new ConfigException(S3SinkConfig.PARTITION_FIELD_NAME, "", "FieldPartitioner needs field names");
                }
                break;
            case "DailyPartitioner":
                kind = Kind.TIME;
                pathFormat = DAILY;
                duration = 24L * 3600 * 1000;
                break;
            case "HourlyPartitioner":
                kind = Kind.TIME;
                pathFormat = HOURLY;
                duration = 3600L * 1000;
                break;
            case "TimeBasedPartitioner":
                kind = Kind.TIME;
                break;
            default:
                throw new ConfigException(S3SinkConfig.PARTITIONER_CLASS, partitioner,
                        "this stand-in knows Default, Field, TimeBased, Daily and Hourly partitioners");
        }
        if (kind == Kind.TIME && (pathFormat == null || pathFormat.isBlank() || duration <= 0)) {
            throw new ConfigException(S3SinkConfig.PATH_FORMAT, pathFormat,
                    "a time-based partitioner needs path.format and partition.duration.ms > 0");
        }
        this.durationMs = duration;
        this.zone = ZoneId.of(config.getString(S3SinkConfig.TIMEZONE));
        Locale locale = Locale.forLanguageTag(config.getString(S3SinkConfig.LOCALE).replace('_', '-'));
        this.formatter = kind == Kind.TIME ? DateTimeFormatter.ofPattern(javaPattern(pathFormat), locale).withZone(zone)
                : null;
        this.extractor = Extractor.valueOf(simpleName(config.getString(S3SinkConfig.TIMESTAMP_EXTRACTOR))
                .toUpperCase(Locale.ROOT));
        this.timestampField = config.getString(S3SinkConfig.TIMESTAMP_FIELD);
    }

    /** The directories of {@code record}'s file below its topic's ({@code nowMs}: the wall clock). */
    String encodedPartition(SinkRecord record, long nowMs) {
        switch (kind) {
            case FIELD:
                StringBuilder path = new StringBuilder();
                for (String field : fields) {
                    if (path.length() > 0) {
                        path.append(directoryDelim);
                    }
                    path.append(field).append('=').append(fieldValue(record, field));
                }
                return path.toString();
            case TIME:
                long at = timestamp(record, nowMs);
                long offset = zone.getRules().getOffset(Instant.ofEpochMilli(at)).getTotalSeconds() * 1000L;
                long bucket = Math.floorDiv(at + offset, durationMs) * durationMs - offset;
                return formatter.format(ZonedDateTime.ofInstant(Instant.ofEpochMilli(bucket), zone));
            default:
                return "partition=" + record.kafkaPartition();
        }
    }

    /** The object key of the file of {@code topic}/{@code partition} in {@code encoded} from {@code start}. */
    String objectKey(String topic, int partition, long start, String encoded) {
        String name = topic + fileDelim + partition + fileDelim
                + String.format(Locale.ROOT, "%0" + padWidth + "d", start) + extension;
        String suffix = topic + directoryDelim + encoded + directoryDelim + name;
        return topicsDir == null || topicsDir.isBlank() ? suffix : topicsDir + directoryDelim + suffix;
    }

    private long timestamp(SinkRecord record, long nowMs) {
        switch (extractor) {
            case RECORD:
                if (record.timestamp() == null) {
                    throw new DataException("Unable to determine timestamp using timestamp.extractor Record for record "
                            + record);
                }
                return record.timestamp();
            case RECORDFIELD:
                Object value = fieldValue(record, timestampField);
                if (value instanceof Date) {
                    return ((Date) value).getTime();
                }
                if (value instanceof Number) {
                    return ((Number) value).longValue();
                }
                if (value instanceof String) {
                    return Instant.parse((String) value).toEpochMilli();
                }
                throw new DataException("timestamp.field " + timestampField + " is not a timestamp: " + value);
            default:
                return nowMs;
        }
    }

    private static Object fieldValue(SinkRecord record, String field) {
        Object value = record.value();
        Object found;
        if (value instanceof Struct) {
            found = ((Struct) value).get(field);
        } else if (value instanceof Map) {
            found = ((Map<?, ?>) value).get(field);
        } else {
            throw new DataException("Error encoding partition: the value is not a struct or map: " + value);
        }
        if (found instanceof Number || found instanceof String || found instanceof Boolean || found instanceof Date) {
            return found;
        }
        throw new DataException("Error encoding partition: field " + field + " is " + found);
    }

    /** A Joda-Time pattern as java.time reads it: Joda's {@code Y} (year of era) is {@code y}, its
     * {@code x} (week year) is {@code Y}; quoted text and the other letters are the same. */
    static String javaPattern(String joda) {
        StringBuilder out = new StringBuilder();
        boolean quoted = false;
        for (char c : joda.toCharArray()) {
            if (c == '\'') {
                quoted = !quoted;
            }
            out.append(quoted ? c : c == 'Y' ? 'y' : c == 'x' ? 'Y' : c);
        }
        return out.toString();
    }

    private static String simpleName(String className) {
        return className.substring(className.lastIndexOf('.') + 1);
    }
}
