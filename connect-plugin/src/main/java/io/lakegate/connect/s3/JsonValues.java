/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.header.Header;

/**
 * Converts Connect data (a {@link Struct} with its schema, or schemaless {@link Map}s, lists and
 * primitives as produced by {@code JsonConverter}) to Jackson trees. Bytes become base64 text;
 * Connect {@code Timestamp} becomes epoch millis, {@code Date} days since the epoch and
 * {@code Time} millis of the day, as {@code JsonConverter} encodes them.
 */
final class JsonValues {

    static final ObjectMapper MAPPER = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private JsonValues() {
    }

    /** The JSON tree of {@code value}; {@code schema} may be null (schemaless data). */
    static JsonNode toJson(Object value, Schema schema) {
        if (value == null) {
            return NODES.nullNode();
        }
        if (value instanceof Struct) {
            Struct struct = (Struct) value;
            ObjectNode node = NODES.objectNode();
            for (Field field : struct.schema().fields()) {
                node.set(field.name(), toJson(struct.get(field), field.schema()));
            }
            return node;
        }
        if (value instanceof Map) {
            Schema valueSchema = schema != null && schema.type() == Schema.Type.MAP ? schema.valueSchema() : null;
            ObjectNode node = NODES.objectNode();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                node.set(String.valueOf(e.getKey()), toJson(e.getValue(), valueSchema));
            }
            return node;
        }
        if (value instanceof Collection) {
            Schema itemSchema = schema != null && schema.type() == Schema.Type.ARRAY ? schema.valueSchema() : null;
            ArrayNode node = NODES.arrayNode();
            for (Object item : (Collection<?>) value) {
                node.add(toJson(item, itemSchema));
            }
            return node;
        }
        if (value instanceof String) {
            return NODES.textNode((String) value);
        }
        if (value instanceof Boolean) {
            return NODES.booleanNode((Boolean) value);
        }
        if (value instanceof Byte || value instanceof Short || value instanceof Integer || value instanceof Long) {
            return NODES.numberNode(((Number) value).longValue());
        }
        if (value instanceof Float || value instanceof Double) {
            return NODES.numberNode(((Number) value).doubleValue());
        }
        if (value instanceof BigDecimal) {
            return NODES.numberNode((BigDecimal) value);
        }
        if (value instanceof BigInteger) {
            return NODES.numberNode((BigInteger) value);
        }
        if (value instanceof byte[] || value instanceof ByteBuffer) {
            return NODES.textNode(base64(value));
        }
        if (value instanceof java.util.Date) {
            return NODES.numberNode(dateToNumber((java.util.Date) value, schema));
        }
        return NODES.textNode(value.toString());
    }

    /** The JSON text of {@code value} (compact). */
    static String toJsonText(Object value, Schema schema) {
        try {
            return MAPPER.writeValueAsString(toJson(value, schema));
        } catch (JsonProcessingException e) {
            throw new DataException("Cannot encode value as JSON", e);
        }
    }

    /**
     * A record key or header value as a string: strings as they are, bytes as base64, null as null,
     * anything else (numbers, structs, maps) as its JSON text.
     */
    static String asString(Object value, Schema schema) {
        if (value == null || value instanceof String) {
            return (String) value;
        }
        if (value instanceof byte[] || value instanceof ByteBuffer) {
            return base64(value);
        }
        return toJsonText(value, schema);
    }

    /** A header as {@code {"key": ..., "value": ...}} (the value as JSON). */
    static ObjectNode header(Header header) {
        ObjectNode node = NODES.objectNode();
        node.put("key", header.key());
        node.set("value", toJson(header.value(), header.schema()));
        return node;
    }

    /** A {@link java.util.Date} as the number Connect's logical type for {@code schema} uses. */
    static long dateToNumber(java.util.Date date, Schema schema) {
        String logical = schema == null ? null : schema.name();
        if (Date.LOGICAL_NAME.equals(logical)) {
            return Math.floorDiv(date.getTime(), TimeUnit.DAYS.toMillis(1));
        }
        if (Time.LOGICAL_NAME.equals(logical)) {
            return Math.floorMod(date.getTime(), TimeUnit.DAYS.toMillis(1));
        }
        return date.getTime();
    }

    static String base64(Object bytes) {
        if (bytes instanceof ByteBuffer) {
            ByteBuffer buffer = ((ByteBuffer) bytes).duplicate();
            byte[] copy = new byte[buffer.remaining()];
            buffer.get(copy);
            return Base64.getEncoder().encodeToString(copy);
        }
        return Base64.getEncoder().encodeToString((byte[]) bytes);
    }
}
