/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.zip.GZIPOutputStream;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.github.luben.zstd.ZstdOutputStream;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.sink.SinkRecord;
import org.xerial.snappy.SnappyOutputStream;

/**
 * JSON Lines output: one JSON document per record, separated by '\n' (none after the last, as Aiven's
 * writer), the whole file compressed with {@code file.compression.type}: gzip
 * ({@link GZIPOutputStream}), snappy (snappy-java's own stream, {@link SnappyOutputStream}, as
 * Aiven's sink writes it), zstd (one zstd frame, {@link ZstdOutputStream}) or none.
 *
 * <p>With the envelope (the default) a line is an object with the configured fields in order:
 * {@code key} (nested JSON, as Aiven writes it: a string key is a string, a map or struct key an
 * object; null without a key), {@code value} (nested JSON), {@code offset} (number),
 * {@code timestamp} (ISO-8601 text, {@link DateTimeFormatter#ISO_INSTANT}, or null), {@code headers} (list of {@code {"key", "value"}}); so
 * with the default fields a line is {@code {"value": {...}}}. Without it
 * ({@code format.output.envelope=false}, exactly one field) the line is that field's JSON alone.
 */
final class JsonlRecordWriter implements RecordFileWriter {

    private final List<OutputField> fields;
    private final boolean envelope;
    private final S3SinkConfig.Compression compression;
    /** json (Aiven's JsonOutputStreamWriter): the same records as one array, "[\n" a ",\n" b "\n]". */
    private final boolean array;
    /** Confluent's JsonFormat: a line separator after every record, the last one too. */
    private final boolean terminated;

    JsonlRecordWriter(List<OutputField> fields, boolean envelope, S3SinkConfig.Compression compression) {
        this(fields, envelope, compression, false, false);
    }

    JsonlRecordWriter(List<OutputField> fields, boolean envelope, S3SinkConfig.Compression compression,
            boolean array, boolean terminated) {
        if (!envelope && fields.size() != 1) {
            throw new IllegalArgumentException("an unwrapped line needs exactly one field, got " + fields);
        }
        this.fields = fields;
        this.envelope = envelope;
        this.compression = compression;
        this.array = array;
        this.terminated = terminated;
    }

    @Override
    public void write(List<SinkRecord> records, Path file) throws IOException {
        OutputStream raw = new BufferedOutputStream(Files.newOutputStream(file), 64 * 1024);
        try (OutputStream out = compressed(raw, compression)) {
            boolean first = true;
            if (array) {
                out.write(new byte[] {'[', '\n'});
            }
            for (SinkRecord record : records) {
                if (!first) {
                    if (array) {
                        out.write(',');
                    }
                    out.write('\n');
                }
                first = false;
                out.write(JsonValues.MAPPER.writeValueAsBytes(line(record)));
            }
            if (array) {
                out.write(new byte[] {'\n', ']'});
            } else if (terminated && !records.isEmpty()) {
                out.write('\n');
            }
        }
    }

    /** {@code raw} wrapped in the stream codec of {@code compression} (shared with the CSV writer). */
    static OutputStream compressed(OutputStream raw, S3SinkConfig.Compression compression) throws IOException {
        switch (compression) {
            case GZIP:
                return new GZIPOutputStream(raw, 64 * 1024);
            case SNAPPY:
                return new SnappyOutputStream(raw);
            case ZSTD:
                return new ZstdOutputStream(raw);
            default:
                return raw;
        }
    }

    private JsonNode line(SinkRecord record) {
        if (!envelope) {
            return field(record, fields.get(0));
        }
        ObjectNode node = JsonNodeFactory.instance.objectNode();
        for (OutputField field : fields) {
            node.set(field.fieldName(), field(record, field));
        }
        return node;
    }

    private static JsonNode field(SinkRecord record, OutputField field) {
        JsonNodeFactory nodes = JsonNodeFactory.instance;
        switch (field) {
            case KEY:
                // as Aiven's JSON writers: the key as JSON (a string key stays a string, a map or
                // struct key, e.g. Debezium's {"id": 1}, is an object), null for no key
                return JsonValues.toJson(record.key(), record.keySchema());
            case VALUE:
                return JsonValues.toJson(record.value(), record.valueSchema());
            case OFFSET:
                return nodes.numberNode(record.kafkaOffset());
            case TIMESTAMP:
                return record.timestamp() == null ? nodes.nullNode()
                        : nodes.textNode(DateTimeFormatter.ISO_INSTANT.format(Instant.ofEpochMilli(record.timestamp())));
            case HEADERS:
                ArrayNode headers = nodes.arrayNode();
                for (Header header : record.headers()) {
                    headers.add(JsonValues.header(header));
                }
                return headers;
            default:
                throw new IllegalStateException("unhandled field " + field);
        }
    }
}
