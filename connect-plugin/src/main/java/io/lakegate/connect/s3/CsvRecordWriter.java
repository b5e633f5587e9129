/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;

import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.sink.SinkRecord;

/**
 * CSV output as Aiven's plain writer makes it: no header; per record the configured fields in
 * order, separated by {@code ,}; records separated by {@code \n} (none after the last); the whole
 * file compressed like JSON lines ({@link JsonlRecordWriter#compressed}).
 *
 * <p>Fields: {@code key} base64 of its bytes (a BYTES or STRING key; a string as UTF-8);
 * {@code value} base64 of its bytes, or the bytes as they are with
 * {@code format.output.fields.value.encoding=none} (a BYTES value, i.e. the ByteArrayConverter);
 * {@code offset} and {@code timestamp} (epoch millis) as decimal numbers; {@code headers} as
 * {@code b64(key):b64(value);} for each header. A null is an empty field. A value of any other type
 * is a DataException, as in Aiven's sink.
 */
final class CsvRecordWriter implements RecordFileWriter {

    private static final Base64.Encoder BASE64 = Base64.getEncoder();

    private final List<OutputField> fields;
    private final boolean valueBase64;
    private final S3SinkConfig.Compression compression;

    CsvRecordWriter(List<OutputField> fields, boolean valueBase64, S3SinkConfig.Compression compression) {
        this.fields = fields;
        this.valueBase64 = valueBase64;
        this.compression = compression;
    }

    @Override
    public void write(List<SinkRecord> records, Path file) throws IOException {
        OutputStream raw = new BufferedOutputStream(Files.newOutputStream(file), 64 * 1024);
        try (OutputStream out = JsonlRecordWriter.compressed(raw, compression)) {
            boolean first = true;
            for (SinkRecord record : records) {
                if (!first) {
                    out.write('\n');
                }
                first = false;
                for (int i = 0; i < fields.size(); i++) {
                    if (i > 0) {
                        out.write(',');
                    }
                    out.write(field(record, fields.get(i)));
                }
            }
        }
    }

    private byte[] field(SinkRecord record, OutputField field) {
        switch (field) {
            case KEY:
                return record.key() == null ? new byte[0] : BASE64.encode(bytes(record.key(), "key"));
            case VALUE:
                if (record.value() == null) {
                    return new byte[0];
                }
                byte[] value = bytes(record.value(), "value");
                return valueBase64 ? BASE64.encode(value) : value;
            case OFFSET:
                return Long.toString(record.kafkaOffset()).getBytes(StandardCharsets.US_ASCII);
            case TIMESTAMP:
                return record.timestamp() == null ? new byte[0]
                        : Long.toString(record.timestamp()).getBytes(StandardCharsets.US_ASCII);
            case HEADERS:
                StringBuilder text = new StringBuilder();
                for (Header header : record.headers()) {
                    text.append(BASE64.encodeToString(header.key().getBytes(StandardCharsets.UTF_8))).append(':');
                    if (header.value() != null) {
                        text.append(BASE64.encodeToString(bytes(header.value(), "header value")));
                    }
                    text.append(';');
                }
                return text.toString().getBytes(StandardCharsets.US_ASCII);
            default:
                throw new IllegalStateException("unhandled field " + field);
        }
    }

    private static byte[] bytes(Object value, String what) {
        if (value instanceof byte[]) {
            return (byte[]) value;
        }
        if (value instanceof String) {
            return ((String) value).getBytes(StandardCharsets.UTF_8);
        }
        throw new DataException("csv output needs a BYTES or STRING " + what + " (e.g. value.converter="
                + "org.apache.kafka.connect.converters.ByteArrayConverter), got " + value.getClass().getName());
    }
}
