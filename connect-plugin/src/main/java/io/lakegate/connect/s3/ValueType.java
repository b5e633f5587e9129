/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;

/**
 * The column type of a value across all records of one Parquet file, derived from Connect schemas
 * (schemaful data) or inferred from the values themselves (schemaless {@code Map}s), and merged
 * record by record. {@link ParquetRecordWriter} renders it as an Avro schema via {@link AvroSchemas}.
 *
 * <p>Merging: null merges with anything; int/long widen to long, float/double to double, integral
 * with floating to double; records take the union of their fields; any other conflict becomes
 * {@link Kind#JSON} (a string column holding the JSON text).
 */
final class ValueType {

    enum Kind { NULL, BOOLEAN, INT, LONG, FLOAT, DOUBLE, STRING, BYTES, JSON, TIMESTAMP, DATE, TIME, RECORD, ARRAY, MAP }

    static final ValueType NULL = new ValueType(Kind.NULL, null, false, null);
    static final ValueType JSON = new ValueType(Kind.JSON, null, false, null);

    final Kind kind;
    /** RECORD only: field name to type, in column order. */
    final Map<String, ValueType> fields;
    /** RECORD only: fields come from schemaless maps and are kept sorted by name. */
    final boolean sorted;
    /** ARRAY items or MAP values. */
    final ValueType element;

    private ValueType(Kind kind, Map<String, ValueType> fields, boolean sorted, ValueType element) {
        this.kind = kind;
        this.fields = fields == null ? null : Collections.unmodifiableMap(fields);
        this.sorted = sorted;
        this.element = element;
    }

    private static ValueType of(Kind kind) {
        return kind == Kind.NULL ? NULL : kind == Kind.JSON ? JSON : new ValueType(kind, null, false, null);
    }

    /** The type of one record value; {@code cache} avoids re-converting the same Connect schema instance. */
    static ValueType ofValue(Object value, Schema schema, Map<Schema, ValueType> cache) {
        if (value instanceof Struct) {
            schema = ((Struct) value).schema();
        }
        if (schema != null) {
            return cache.computeIfAbsent(schema, ValueType::ofSchema);
        }
        return infer(value);
    }

    /** A fresh cache for {@link #ofValue}. */
    static Map<Schema, ValueType> newCache() {
        return new IdentityHashMap<>();
    }

    /** The type of a Connect schema (INT8/16/32 → int, INT64 → long, FLOAT32 → float, ...). */
    static ValueType ofSchema(Schema schema) {
        if (schema.name() != null) {
            switch (schema.name()) {
                case Timestamp.LOGICAL_NAME:
                    return of(Kind.TIMESTAMP);
                case Date.LOGICAL_NAME:
                    return of(Kind.DATE);
                case Time.LOGICAL_NAME:
                    return of(Kind.TIME);
                case Decimal.LOGICAL_NAME:
                    return of(Kind.STRING);
                default:
                    break;
            }
        }
        switch (schema.type()) {
            case INT8:
            case INT16:
            case INT32:
                return of(Kind.INT);
            case INT64:
                return of(Kind.LONG);
            case FLOAT32:
                return of(Kind.FLOAT);
            case FLOAT64:
                return of(Kind.DOUBLE);
            case BOOLEAN:
                return of(Kind.BOOLEAN);
            case STRING:
                return of(Kind.STRING);
            case BYTES:
                return of(Kind.BYTES);
            case ARRAY:
                return new ValueType(Kind.ARRAY, null, false, ofSchema(schema.valueSchema()));
            case MAP:
                return schema.keySchema().type() == Schema.Type.STRING
                        ? new ValueType(Kind.MAP, null, false, ofSchema(schema.valueSchema()))
                        : JSON;
            case STRUCT:
                Map<String, ValueType> fields = new LinkedHashMap<>();
                for (Field field : schema.fields()) {
                    fields.put(field.name(), ofSchema(field.schema()));
                }
                return new ValueType(Kind.RECORD, fields, false, null);
            default:
                return JSON;
        }
    }

    /**
     * The type of a schemaless value: Long/Integer → long, Double/Float → double, Boolean, String,
     * nested Map → record (fields sorted), anything else (lists, ...) → JSON text.
     */
    static ValueType infer(Object value) {
        if (value == null) {
            return NULL;
        }
        if (value instanceof Map) {
            Map<String, ValueType> fields = new TreeMap<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                String name = String.valueOf(e.getKey());
                fields.put(name, merge(fields.get(name), infer(e.getValue())));
            }
            return new ValueType(Kind.RECORD, fields, true, null);
        }
        if (value instanceof Long || value instanceof Integer || value instanceof Short || value instanceof Byte) {
            return of(Kind.LONG);
        }
        if (value instanceof Double || value instanceof Float || value instanceof java.math.BigDecimal) {
            return of(Kind.DOUBLE);
        }
        if (value instanceof Boolean) {
            return of(Kind.BOOLEAN);
        }
        if (value instanceof String) {
            return of(Kind.STRING);
        }
        if (value instanceof byte[] || value instanceof java.nio.ByteBuffer) {
            return of(Kind.BYTES);
        }
        return JSON;
    }

    /** The type able to hold values of both {@code a} and {@code b} (either may be null). */
    static ValueType merge(ValueType a, ValueType b) {
        if (a == null || a.kind == Kind.NULL) {
            return b == null ? a : b;
        }
        if (b == null || b.kind == Kind.NULL) {
            return a;
        }
        if (a.kind == b.kind) {
            switch (a.kind) {
                case RECORD:
                    boolean sorted = a.sorted && b.sorted;
                    Map<String, ValueType> fields = sorted ? new TreeMap<>() : new LinkedHashMap<>();
                    fields.putAll(a.fields);
                    b.fields.forEach((name, type) -> fields.put(name, merge(fields.get(name), type)));
                    return new ValueType(Kind.RECORD, fields, sorted, null);
                case ARRAY:
                case MAP:
                    return new ValueType(a.kind, null, false, merge(a.element, b.element));
                default:
                    return a;
            }
        }
        boolean aIntegral = a.kind == Kind.INT || a.kind == Kind.LONG;
        boolean bIntegral = b.kind == Kind.INT || b.kind == Kind.LONG;
        boolean aFloating = a.kind == Kind.FLOAT || a.kind == Kind.DOUBLE;
        boolean bFloating = b.kind == Kind.FLOAT || b.kind == Kind.DOUBLE;
        if (aIntegral && bIntegral) {
            return of(Kind.LONG);
        }
        if ((aIntegral || aFloating) && (bIntegral || bFloating)) {
            return of(Kind.DOUBLE);
        }
        return JSON;
    }

    /** True for a record with at least one field (Parquet cannot store an empty group). */
    boolean isNonEmptyRecord() {
        return kind == Kind.RECORD && !fields.isEmpty();
    }
}
