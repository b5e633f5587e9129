/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.zip.GZIPOutputStream;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.sink.SinkRecord;

/**
 * JSON Lines output: one JSON document per record, '\n'-terminated, optionally gzip-compressed.
 *
 * <p>With {@code format.output.fields=value} the line is the value itself; otherwise it is an object
 * with the configured fields in order: {@code key} (string or null), {@code value} (nested JSON),
 * {@code offset} (number), {@code timestamp} (epoch millis or null), {@code headers}
 * (list of {@code {"key", "value"}}).
 */
final class JsonlRecordWriter implements RecordFileWriter {

    private final List<OutputField> fields;
    private final boolean valueOnly;
    private final boolean gzip;

    JsonlRecordWriter(List<OutputField> fields, boolean gzip) {
        this.fields = fields;
        this.valueOnly = OutputField.valueOnly(fields);
        this.gzip = gzip;
    }

    @Override
    public void write(List<SinkRecord> records, Path file) throws IOException {
        OutputStream raw = new BufferedOutputStream(Files.newOutputStream(file), 64 * 1024);
        try (OutputStream out = gzip ? new GZIPOutputStream(raw, 64 * 1024) : raw) {
            for (SinkRecord record : records) {
                out.write(JsonValues.MAPPER.writeValueAsBytes(line(record)));
                out.write('\n');
            }
        }
    }

    private JsonNode line(SinkRecord record) {
        if (valueOnly) {
            return JsonValues.toJson(record.value(), record.valueSchema());
        }
        ObjectNode node = JsonNodeFactory.instance.objectNode();
        for (OutputField field : fields) {
            switch (field) {
                case KEY:
                    node.put("key", JsonValues.asString(record.key(), record.keySchema()));
                    break;
                case VALUE:
                    node.set("value", JsonValues.toJson(record.value(), record.valueSchema()));
                    break;
                case OFFSET:
                    node.put("offset", record.kafkaOffset());
                    break;
                case TIMESTAMP:
                    node.put("timestamp", record.timestamp());
                    break;
                case HEADERS:
                    ArrayNode headers = node.putArray("headers");
                    for (Header header : record.headers()) {
                        headers.add(JsonValues.header(header));
                    }
                    break;
                default:
                    throw new IllegalStateException("unhandled field " + field);
            }
        }
        return node;
    }
}
