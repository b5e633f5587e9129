/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.avro.LogicalType;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.DataException;

/**
 * Converts Connect values ({@link Struct}s or schemaless maps, lists and primitives) to Avro datums
 * for {@link ParquetRecordWriter}, directed by the Avro schema built by {@link AvroSchemas}: record
 * fields are looked up by name (absent means null), numbers are widened to the column type, and a
 * string column takes strings as they are, bytes as base64 and anything else as its JSON text.
 */
final class AvroValues {

    private AvroValues() {
    }

    /**
     * {@code value} (whose Connect schema is {@code connectSchema}, possibly null) as a datum of
     * {@code avro} (possibly a {@code ["null", T]} union).
     */
    static Object convert(Object value, org.apache.kafka.connect.data.Schema connectSchema, Schema avro) {
        if (avro.getType() == Schema.Type.UNION) {
            if (value == null) {
                return null;
            }
            avro = avro.getTypes().get(avro.getTypes().size() - 1);
        }
        if (value == null) {
            if (avro.getType() == Schema.Type.RECORD) {
                return record(null, avro);
            }
            throw new DataException("null for non-nullable Avro type " + avro);
        }
        LogicalType logical = avro.getLogicalType();
        switch (avro.getType()) {
            case RECORD:
                return record(value, avro);
            case STRING:
                return JsonValues.asString(value, connectSchema);
            case LONG:
                if (value instanceof java.util.Date) {
                    return ((java.util.Date) value).getTime();
                }
                return number(value, avro).longValue();
            case INT:
                if (value instanceof java.util.Date) {
                    return (int) JsonValues.dateToNumber((java.util.Date) value, connectSchema == null
                            ? logicalConnectSchema(logical) : connectSchema);
                }
                return number(value, avro).intValue();
            case FLOAT:
                return number(value, avro).floatValue();
            case DOUBLE:
                return number(value, avro).doubleValue();
            case BOOLEAN:
                if (value instanceof Boolean) {
                    return value;
                }
                throw mismatch(value, avro);
            case BYTES:
                if (value instanceof byte[]) {
                    return ByteBuffer.wrap((byte[]) value);
                }
                if (value instanceof ByteBuffer) {
                    return value;
                }
                throw mismatch(value, avro);
            case ARRAY:
                if (!(value instanceof Collection)) {
                    throw mismatch(value, avro);
                }
                org.apache.kafka.connect.data.Schema itemSchema = childSchema(connectSchema);
                List<Object> items = new ArrayList<>();
                for (Object item : (Collection<?>) value) {
                    items.add(convert(item, itemSchema, avro.getElementType()));
                }
                return items;
            case MAP:
                if (!(value instanceof Map)) {
                    throw mismatch(value, avro);
                }
                org.apache.kafka.connect.data.Schema valueSchema = childSchema(connectSchema);
                Map<String, Object> map = new HashMap<>();
                for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                    map.put(String.valueOf(e.getKey()), convert(e.getValue(), valueSchema, avro.getValueType()));
                }
                return map;
            default:
                throw mismatch(value, avro);
        }
    }

    /** A record of {@code avro} from a Struct or Map (fields looked up by name); all-null for null. */
    static GenericData.Record record(Object value, Schema avro) {
        if (value != null && !(value instanceof Struct) && !(value instanceof Map)) {
            throw mismatch(value, avro);
        }
        GenericData.Record record = new GenericData.Record(avro);
        for (Schema.Field field : avro.getFields()) {
            Object child = null;
            org.apache.kafka.connect.data.Schema childSchema = null;
            if (value instanceof Struct) {
                Struct struct = (Struct) value;
                Field connectField = struct.schema().field(field.name());
                if (connectField != null) {
                    child = struct.get(connectField);
                    childSchema = connectField.schema();
                }
            } else if (value instanceof Map) {
                child = ((Map<?, ?>) value).get(field.name());
            }
            record.put(field.pos(), convert(child, childSchema, field.schema()));
        }
        return record;
    }

    private static org.apache.kafka.connect.data.Schema childSchema(org.apache.kafka.connect.data.Schema schema) {
        if (schema == null) {
            return null;
        }
        switch (schema.type()) {
            case ARRAY:
            case MAP:
                return schema.valueSchema();
            default:
                return null;
        }
    }

    private static org.apache.kafka.connect.data.Schema logicalConnectSchema(LogicalType logical) {
        if (logical != null && "date".equals(logical.getName())) {
            return org.apache.kafka.connect.data.Date.SCHEMA;
        }
        return org.apache.kafka.connect.data.Time.SCHEMA;
    }

    private static Number number(Object value, Schema avro) {
        if (value instanceof Number) {
            return (Number) value;
        }
        throw mismatch(value, avro);
    }

    private static DataException mismatch(Object value, Schema avro) {
        return new DataException("Cannot write " + value.getClass().getName() + " value as Avro/Parquet "
                + avro.getType().getName());
    }
}
