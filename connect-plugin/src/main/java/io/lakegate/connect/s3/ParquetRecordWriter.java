/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.parquet.avro.AvroParquetWriter;
import org.apache.parquet.avro.AvroWriteSupport;
import org.apache.parquet.conf.PlainParquetConfiguration;
import org.apache.parquet.hadoop.ParquetFileWriter;
import org.apache.parquet.hadoop.ParquetWriter;
import org.apache.parquet.hadoop.metadata.CompressionCodecName;
import org.apache.parquet.io.LocalOutputFile;

/**
 * Parquet output through parquet-avro, without Hadoop ({@link LocalOutputFile},
 * {@link PlainParquetConfiguration}, {@link ParquetCodecs}). The Avro schema is built per file:
 *
 * <ul>
 *   <li>with the envelope (the default): the columns are the configured fields in order: {@code key}
 *       (nullable string), {@code offset} (long), {@code timestamp} (nullable timestamp-millis),
 *       {@code headers} (list of {key, value} strings), {@code value} (nullable nested record or
 *       scalar). So the default fields give one nullable nested {@code value} column.</li>
 *   <li>{@code format.output.envelope=false} with {@code format.output.fields=value}: the columns are
 *       the value's fields; a value that is not a record (e.g. a string) stays in a single nullable
 *       column {@code value}. With another single field, that field is the one column.</li>
 * </ul>
 *
 * <p>The value type is the merge of every record's {@link ValueType}: a Struct's Connect schema, or,
 * for schemaless maps, the union of their keys (fields sorted). Lists use the standard 3-level
 * Parquet LIST layout.
 */
final class ParquetRecordWriter implements RecordFileWriter {

    private final List<OutputField> fields;
    /** True when the value's own fields are the columns (no envelope, the single field is the value). */
    private final boolean valueOnly;
    private final CompressionCodecName codec;

    ParquetRecordWriter(List<OutputField> fields, boolean envelope, S3SinkConfig.Compression codec) {
        if (!envelope && fields.size() != 1) {
            throw new IllegalArgumentException("an unwrapped row needs exactly one field, got " + fields);
        }
        this.fields = fields;
        this.valueOnly = !envelope && fields.get(0) == OutputField.VALUE;
        switch (codec) {
            case GZIP:
                this.codec = CompressionCodecName.GZIP;
                break;
            case SNAPPY:
                this.codec = CompressionCodecName.SNAPPY;
                break;
            case ZSTD:
                this.codec = CompressionCodecName.ZSTD;
                break;
            default:
                this.codec = CompressionCodecName.UNCOMPRESSED;
                break;
        }
    }

    @Override
    public void write(List<SinkRecord> records, Path file) throws IOException {
        ValueType valueType = valueType(records);
        Schema schema = AvroSchemas.parse(fileSchema(valueType));
        PlainParquetConfiguration conf = new PlainParquetConfiguration(
                Map.of(AvroWriteSupport.WRITE_OLD_LIST_STRUCTURE, "false"));
        try (ParquetWriter<GenericRecord> writer = AvroParquetWriter.<GenericRecord>builder(new LocalOutputFile(file))
                .withSchema(schema)
                .withConf(conf)
                .withDataModel(GenericData.get())
                .withCodecFactory(new ParquetCodecs())
                .withCompressionCodec(codec)
                .withWriteMode(ParquetFileWriter.Mode.OVERWRITE)
                .build()) {
            for (SinkRecord record : records) {
                writer.write(row(record, schema, valueType));
            }
        }
    }

    private static ValueType valueType(List<SinkRecord> records) {
        Map<org.apache.kafka.connect.data.Schema, ValueType> cache = ValueType.newCache();
        ValueType merged = ValueType.NULL;
        for (SinkRecord record : records) {
            merged = ValueType.merge(merged, ValueType.ofValue(record.value(), record.valueSchema(), cache));
        }
        return merged;
    }

    /** The Avro schema JSON of the file's rows. */
    private JsonNode fileSchema(ValueType valueType) {
        AvroSchemas schemas = new AvroSchemas();
        if (valueOnly) {
            return valueType.isNonEmptyRecord()
                    ? schemas.record("Value", schemas.fieldsOf(valueType))
                    : schemas.record("Value", List.of(AvroSchemas.field("value",
                            AvroSchemas.nullable(schemas.render(valueType)))));
        }
        JsonNodeFactory nodes = JsonNodeFactory.instance;
        List<ObjectNode> columns = new ArrayList<>();
        for (OutputField field : fields) {
            switch (field) {
                case KEY:
                    columns.add(AvroSchemas.field("key", AvroSchemas.nullable(nodes.textNode("string"))));
                    break;
                case OFFSET:
                    columns.add(AvroSchemas.field("offset", nodes.textNode("long")));
                    break;
                case TIMESTAMP:
                    columns.add(AvroSchemas.field("timestamp", AvroSchemas.nullable(
                            nodes.objectNode().put("type", "long").put("logicalType", "timestamp-millis"))));
                    break;
                case HEADERS:
                    ObjectNode header = schemas.record("Header", List.of(
                            AvroSchemas.field("key", nodes.textNode("string")),
                            AvroSchemas.field("value", AvroSchemas.nullable(nodes.textNode("string")))));
                    columns.add(AvroSchemas.field("headers", nodes.objectNode().put("type", "array").set("items", header)));
                    break;
                case VALUE:
                    columns.add(AvroSchemas.field("value", AvroSchemas.nullable(schemas.render(valueType))));
                    break;
                default:
                    throw new IllegalStateException("unhandled field " + field);
            }
        }
        return schemas.record("SinkRecord", columns);
    }

    private GenericRecord row(SinkRecord record, Schema schema, ValueType valueType) {
        if (valueOnly && valueType.isNonEmptyRecord()) {
            return AvroValues.record(record.value(), schema);
        }
        GenericData.Record row = new GenericData.Record(schema);
        for (Schema.Field column : schema.getFields()) {
            row.put(column.pos(), column(record, column));
        }
        return row;
    }

    private static Object column(SinkRecord record, Schema.Field column) {
        switch (column.name()) {
            case "key":
                return JsonValues.asString(record.key(), record.keySchema());
            case "offset":
                return record.kafkaOffset();
            case "timestamp":
                return record.timestamp();
            case "headers":
                Schema headerSchema = column.schema().getElementType();
                List<GenericRecord> headers = new ArrayList<>();
                for (Header header : record.headers()) {
                    GenericData.Record h = new GenericData.Record(headerSchema);
                    h.put("key", header.key());
                    h.put("value", JsonValues.asString(header.value(), header.schema()));
                    headers.add(h);
                }
                return headers;
            default:
                return AvroValues.convert(record.value(), record.valueSchema(), column.schema());
        }
    }
}
