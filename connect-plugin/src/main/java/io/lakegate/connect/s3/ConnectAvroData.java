/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.avro.JsonProperties;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;
import org.apache.kafka.connect.errors.DataException;

/**
 * Connect schemas and values as Avro, by the conventions of Confluent's {@code AvroData} (which
 * Aiven's and Confluent's sinks use to write Avro; it is not on Maven Central, so its observable
 * output is followed here with Apache Avro's own library):
 *
 * <ul>
 *   <li>an optional schema is the union {@code ["null", T]} (a field of it defaults to null);</li>
 *   <li>{@code int8}/{@code int16} are Avro ints with {@code "connect.type"};</li>
 *   <li>a struct is a record named by its Connect name ({@code "connect.name"} too), or
 *       {@code io.confluent.connect.avro.ConnectDefault} (then {@code ConnectDefault2}, ... for the
 *       next unnamed ones of one schema); {@code connect.doc}, {@code connect.version},
 *       {@code connect.parameters} and {@code connect.default} carry the rest of the Connect schema;</li>
 *   <li>Decimal is {@code bytes} with the {@code decimal} logical type (precision from the
 *       {@code connect.decimal.precision} parameter, else 64, AvroData's default), Date
 *       {@code int}/{@code date}, Time {@code int}/{@code time-millis}, Timestamp
 *       {@code long}/{@code timestamp-millis};</li>
 *   <li>a map with string keys is an Avro map; any other map an array of {@code MapEntry}
 *       records of {@code key} and {@code value}.</li>
 * </ul>
 *
 * One instance per file schema: it numbers the default record names.
 */
final class ConnectAvroData {

    static final String NAMESPACE = "io.confluent.connect.avro";
    private static final Schema NULL = Schema.create(Schema.Type.NULL);
    private static final int DEFAULT_DECIMAL_PRECISION = 64;
    private static final String PRECISION_PARAMETER = "connect.decimal.precision";

    private final Map<org.apache.kafka.connect.data.Schema, Schema> done = new HashMap<>();
    private int defaults;
    private int mapEntries;

    /** The Avro schema of Connect schema {@code schema}. */
    Schema schema(org.apache.kafka.connect.data.Schema schema) {
        Schema base = done.get(schema);
        if (base == null) {
            base = plain(schema);
            done.put(schema, base);
        }
        return schema.isOptional() ? Schema.createUnion(NULL, base) : base;
    }

    private Schema plain(org.apache.kafka.connect.data.Schema schema) {
        Schema avro = logical(schema);
        if (avro == null) {
            avro = byType(schema);
        }
        if (schema.type() != org.apache.kafka.connect.data.Schema.Type.STRUCT) {
            connectProps(avro, schema);
        }
        return avro;
    }

    private static Schema logical(org.apache.kafka.connect.data.Schema schema) {
        String name = schema.name();
        if (Decimal.LOGICAL_NAME.equals(name)) {
            Map<String, String> params = schema.parameters() == null ? Map.of() : schema.parameters();
            int scale = Integer.parseInt(params.getOrDefault(Decimal.SCALE_FIELD, "0"));
            int precision = params.containsKey(PRECISION_PARAMETER)
                    ? Integer.parseInt(params.get(PRECISION_PARAMETER)) : DEFAULT_DECIMAL_PRECISION;
            return LogicalTypes.decimal(precision, scale).addToSchema(Schema.create(Schema.Type.BYTES));
        }
        if (Date.LOGICAL_NAME.equals(name)) {
            return LogicalTypes.date().addToSchema(Schema.create(Schema.Type.INT));
        }
        if (Time.LOGICAL_NAME.equals(name)) {
            return LogicalTypes.timeMillis().addToSchema(Schema.create(Schema.Type.INT));
        }
        if (Timestamp.LOGICAL_NAME.equals(name)) {
            return LogicalTypes.timestampMillis().addToSchema(Schema.create(Schema.Type.LONG));
        }
        return null;
    }

    private Schema byType(org.apache.kafka.connect.data.Schema schema) {
        switch (schema.type()) {
            case INT8:
            case INT16:
                Schema small = Schema.create(Schema.Type.INT);
                small.addProp("connect.type", schema.type().getName());
                return small;
            case INT32:
                return Schema.create(Schema.Type.INT);
            case INT64:
                return Schema.create(Schema.Type.LONG);
            case FLOAT32:
                return Schema.create(Schema.Type.FLOAT);
            case FLOAT64:
                return Schema.create(Schema.Type.DOUBLE);
            case BOOLEAN:
                return Schema.create(Schema.Type.BOOLEAN);
            case STRING:
                return Schema.create(Schema.Type.STRING);
            case BYTES:
                return Schema.create(Schema.Type.BYTES);
            case ARRAY:
                return Schema.createArray(schema(schema.valueSchema()));
            case MAP:
                if (schema.keySchema().type() == org.apache.kafka.connect.data.Schema.Type.STRING
                        && !schema.keySchema().isOptional()) {
                    return Schema.createMap(schema(schema.valueSchema()));
                }
                String entry = "MapEntry" + (mapEntries++ == 0 ? "" : String.valueOf(mapEntries));
                Schema pair = Schema.createRecord(entry, null, NAMESPACE, false, List.of(
                        new Schema.Field("key", schema(schema.keySchema())),
                        new Schema.Field("value", schema(schema.valueSchema()))));
                return Schema.createArray(pair);
            case STRUCT:
                return record(schema);
            default:
                throw new DataException("no Avro type for Connect type " + schema.type());
        }
    }

    private Schema record(org.apache.kafka.connect.data.Schema schema) {
        String namespace = NAMESPACE;
        String name;
        if (schema.name() != null) {
            int dot = schema.name().lastIndexOf('.');
            namespace = dot < 0 ? null : schema.name().substring(0, dot);
            name = schema.name().substring(dot + 1);
        } else {
            name = "ConnectDefault" + (defaults++ == 0 ? "" : String.valueOf(defaults));
        }
        List<Schema.Field> fields = new ArrayList<>();
        for (Field f : schema.fields()) {
            Schema type = schema(f.schema());
            Object dflt = f.schema().isOptional() ? JsonProperties.NULL_VALUE : defaultOf(f.schema());
            fields.add(new Schema.Field(f.name(), type, f.schema().doc(), dflt));
        }
        Schema record = Schema.createRecord(name, schema.doc(), namespace, false, fields);
        connectProps(record, schema);
        return record;
    }

    /** The Connect schema's name, version, doc, parameters and default, as AvroData keeps them. */
    private static void connectProps(Schema avro, org.apache.kafka.connect.data.Schema schema) {
        if (schema.name() != null) {
            avro.addProp("connect.name", schema.name());
        }
        if (schema.version() != null) {
            avro.addProp("connect.version", (Object) schema.version());
        }
        if (schema.doc() != null && avro.getType() != Schema.Type.RECORD) {
            avro.addProp("connect.doc", schema.doc());
        }
        if (schema.parameters() != null && !schema.parameters().isEmpty()) {
            avro.addProp("connect.parameters", (Object) new LinkedHashMap<String, Object>(schema.parameters()));
        }
        Object dflt = defaultOf(schema);
        if (dflt != null) {
            avro.addProp("connect.default", dflt);
        }
    }

    /** A primitive default value as JSON (null for none, or for a type whose default is not kept). */
    private static Object defaultOf(org.apache.kafka.connect.data.Schema schema) {
        Object value = schema.defaultValue();
        if (value instanceof Number || value instanceof Boolean || value instanceof String) {
            return schema.name() == null ? (value instanceof Byte || value instanceof Short
                    ? ((Number) value).intValue() : value) : null;
        }
        return null;
    }

    /** {@code value} (of Connect schema {@code schema}) as the Avro datum of {@code avro}. */
    Object value(Object value, org.apache.kafka.connect.data.Schema schema, Schema avro) {
        if (value == null) {
            return null;
        }
        if (avro.getType() == Schema.Type.UNION) {
            return value(value, schema, avro.getTypes().get(1));
        }
        String name = schema.name();
        if (Decimal.LOGICAL_NAME.equals(name)) {
            return ByteBuffer.wrap(((BigDecimal) value).unscaledValue().toByteArray());
        }
        if (Date.LOGICAL_NAME.equals(name)) {
            return Date.fromLogical(schema, (java.util.Date) value);
        }
        if (Time.LOGICAL_NAME.equals(name)) {
            return Time.fromLogical(schema, (java.util.Date) value);
        }
        if (Timestamp.LOGICAL_NAME.equals(name)) {
            return Timestamp.fromLogical(schema, (java.util.Date) value);
        }
        switch (schema.type()) {
            case INT8:
            case INT16:
                return ((Number) value).intValue();
            case BYTES:
                return value instanceof byte[] ? ByteBuffer.wrap((byte[]) value) : value;
            case ARRAY:
                List<Object> items = new ArrayList<>();
                for (Object item : (List<?>) value) {
                    items.add(value(item, schema.valueSchema(), avro.getElementType()));
                }
                return items;
            case MAP:
                return map((Map<?, ?>) value, schema, avro);
            case STRUCT:
                Struct struct = (Struct) value;
                GenericData.Record record = new GenericData.Record(avro);
                for (Field f : schema.fields()) {
                    record.put(f.name(), value(struct.get(f), f.schema(), avro.getField(f.name()).schema()));
                }
                return record;
            default:
                return value;
        }
    }

    private Object map(Map<?, ?> value, org.apache.kafka.connect.data.Schema schema, Schema avro) {
        if (avro.getType() == Schema.Type.MAP) {
            Map<String, Object> out = new LinkedHashMap<>();
            for (Map.Entry<?, ?> e : value.entrySet()) {
                out.put((String) e.getKey(), value(e.getValue(), schema.valueSchema(), avro.getValueType()));
            }
            return out;
        }
        Schema pair = avro.getElementType();
        List<Object> entries = new ArrayList<>();
        for (Map.Entry<?, ?> e : value.entrySet()) {
            GenericData.Record entry = new GenericData.Record(pair);
            entry.put("key", value(e.getKey(), schema.keySchema(), pair.getField("key").schema()));
            entry.put("value", value(e.getValue(), schema.valueSchema(), pair.getField("value").schema()));
            entries.add(entry);
        }
        return entries;
    }
}
