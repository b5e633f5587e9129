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
import java.util.Map;

import org.apache.avro.Schema;
import org.apache.avro.SchemaBuilder;
import org.apache.avro.file.CodecFactory;
import org.apache.avro.file.DataFileWriter;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.sink.SinkRecord;

/**
 * Avro container files as Aiven's {@code AvroOutputWriter} writes them:
 *
 * <ul>
 *   <li>every record needs a key schema and a value schema, even when the key is not written
 *       ({@code DataException} "Record key without schema" / "Record value without schema": a
 *       schemaless record or a tombstone fails the task, as Aiven's does);</li>
 *   <li>with the envelope: a record {@code io.aiven.avro.output.schema.connector_records} of the
 *       configured fields in order: {@code key} and {@code value} in their Connect schemas' Avro
 *       form ({@link ConnectAvroData}), {@code offset} and {@code timestamp} longs (epoch millis),
 *       {@code headers} a map of the headers' schema (the {@code null} type without headers);</li>
 *   <li>without it ({@code format.output.envelope=false}, the value alone): a struct value's own
 *       record; any other value (an optional struct, too) a {@code connector_records} record of one
 *       field named {@code value};</li>
 *   <li>one schema per file, taken from its first record: a record of another schema fails the
 *       write ("Illegal schema change");</li>
 *   <li>the container's codec from {@code avro.codec} (default {@code null}), and the whole file
 *       wrapped in {@code file.compression.type}'s stream (default gzip), as Aiven wraps every
 *       format but Parquet.</li>
 * </ul>
 *
 * <p>As Confluent's {@code AvroFormat} ({@code confluent}: the value alone, no stream around the
 * container): no key schema is needed, and the container's schema is the value's own whatever its
 * type; the task starts a new file where the value schema changes.
 */
final class AvroRecordWriter implements RecordFileWriter {

    static final String NAMESPACE = "io.aiven.avro.output.schema";

    private final List<OutputField> fields;
    private final boolean envelope;
    private final S3SinkConfig.Compression compression;
    private final String codec;
    private final boolean confluent;

    AvroRecordWriter(List<OutputField> fields, boolean envelope, S3SinkConfig.Compression compression, String codec) {
        this(fields, envelope, compression, codec, false);
    }

    AvroRecordWriter(List<OutputField> fields, boolean envelope, S3SinkConfig.Compression compression, String codec,
            boolean confluent) {
        this.fields = fields;
        this.envelope = envelope;
        this.compression = compression;
        this.codec = codec;
        this.confluent = confluent;
    }

    @Override
    public void write(List<SinkRecord> records, Path file) throws IOException {
        ConnectAvroData data = new ConnectAvroData();
        Schema schema = schemaOf(records.get(0), data);
        boolean bare = !envelope && (confluent
                || data.schema(records.get(0).valueSchema()).getType() == Schema.Type.RECORD);
        OutputStream raw = new BufferedOutputStream(Files.newOutputStream(file), 64 * 1024);
        try (DataFileWriter<Object> writer = new DataFileWriter<>(new GenericDatumWriter<>(schema))) {
            writer.setCodec(CodecFactory.fromString(codec));
            writer.create(schema, JsonlRecordWriter.compressed(raw, compression));
            for (SinkRecord record : records) {
                ConnectAvroData own = new ConnectAvroData();
                if (!schemaOf(record, own).equals(schema)) {
                    throw new IOException("Illegal schema change");
                }
                writer.append(bare ? data.value(record.value(), record.valueSchema(), schema)
                        : datum(record, schema, data));
            }
        }
    }

    private Schema schemaOf(SinkRecord record, ConnectAvroData data) {
        if (record.keySchema() == null && !confluent) {
            throw new DataException("Record key without schema");
        }
        if (record.valueSchema() == null) {
            throw new DataException("Record value without schema");
        }
        if (!envelope) {
            Schema value = data.schema(record.valueSchema());
            if (value.getType() == Schema.Type.RECORD || confluent) {
                return value;
            }
            return SchemaBuilder.builder(NAMESPACE).record("connector_records").fields()
                    .name(fields.get(0).fieldName()).type(value).noDefault().endRecord();
        }
        SchemaBuilder.FieldAssembler<Schema> columns = SchemaBuilder.builder(NAMESPACE).record("connector_records").fields();
        for (OutputField field : fields) {
            columns = columns.name(field.fieldName()).type(fieldSchema(field, record, data)).noDefault();
        }
        return columns.endRecord();
    }

    private static Schema fieldSchema(OutputField field, SinkRecord record, ConnectAvroData data) {
        switch (field) {
            case KEY:
                return data.schema(record.keySchema());
            case VALUE:
                return data.schema(record.valueSchema());
            case OFFSET:
            case TIMESTAMP:
                return Schema.create(Schema.Type.LONG);
            case HEADERS:
                org.apache.kafka.connect.data.Schema headerSchema = null;
                for (Header h : record.headers()) {
                    if (h.schema() == null) {
                        throw new DataException("Header " + h + " without schema");
                    }
                    if (headerSchema != null && headerSchema.type() != h.schema().type()) {
                        throw new DataException("Header schema " + h.schema() + " is not the same as " + headerSchema);
                    }
                    headerSchema = h.schema();
                }
                return headerSchema == null ? Schema.create(Schema.Type.NULL)
                        : Schema.createMap(data.schema(headerSchema));
            default:
                throw new IllegalStateException("unhandled field " + field);
        }
    }

    private static GenericRecord datum(SinkRecord record, Schema schema, ConnectAvroData data) {
        GenericData.Record row = new GenericData.Record(schema);
        for (Schema.Field column : schema.getFields()) {
            row.put(column.pos(), column(record, column, data));
        }
        return row;
    }

    private static Object column(SinkRecord record, Schema.Field column, ConnectAvroData data) {
        switch (column.name()) {
            case "key":
                return data.value(record.key(), record.keySchema(), column.schema());
            case "offset":
                return record.kafkaOffset();
            case "timestamp":
                return record.timestamp();
            case "headers":
                if (column.schema().getType() == Schema.Type.NULL) {
                    return null;
                }
                Map<String, Object> headers = new java.util.LinkedHashMap<>();
                for (Header h : record.headers()) {
                    headers.put(h.key(), data.value(h.value(), h.schema(), column.schema().getValueType()));
                }
                return headers;
            default:
                return data.value(record.value(), record.valueSchema(), column.schema());
        }
    }
}
