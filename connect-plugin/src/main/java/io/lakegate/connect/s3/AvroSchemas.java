/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.avro.Schema;

/**
 * Renders {@link ValueType}s as Avro schema JSON for one Parquet file. Every value field is nullable
 * ({@code ["null", T]}, default null). Field names are kept verbatim (JSON keys need not be Avro
 * identifiers), so the schema is parsed with Avro's name validation off. One instance per file:
 * it numbers the nested record types to keep their Avro names unique.
 */
final class AvroSchemas {

    static final String NAMESPACE = "io.lakegate.connect.s3";
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private int records;

    /** A record type named {@code name} with the given fields (from {@link #field}). */
    ObjectNode record(String name, Iterable<? extends JsonNode> fields) {
        ObjectNode node = NODES.objectNode();
        node.put("type", "record");
        node.put("name", name);
        node.put("namespace", NAMESPACE);
        ArrayNode list = node.putArray("fields");
        fields.forEach(list::add);
        return node;
    }

    /** A field of Avro type {@code type}, with a null default if the type is a union with null first. */
    static ObjectNode field(String name, JsonNode type) {
        ObjectNode node = NODES.objectNode();
        node.put("name", name);
        node.set("type", type);
        if (type.isArray()) {
            node.putNull("default");
        }
        return node;
    }

    /** {@code ["null", type]}. */
    static ArrayNode nullable(JsonNode type) {
        return NODES.arrayNode().add("null").add(type);
    }

    /** The nullable fields of a non-empty record type, in its order. */
    java.util.List<ObjectNode> fieldsOf(ValueType record) {
        java.util.List<ObjectNode> out = new java.util.ArrayList<>();
        for (Map.Entry<String, ValueType> e : record.fields.entrySet()) {
            out.add(field(e.getKey(), nullable(render(e.getValue()))));
        }
        return out;
    }

    /** The Avro type of {@code type} (not nullable itself). */
    JsonNode render(ValueType type) {
        switch (type.kind) {
            case BOOLEAN:
                return NODES.textNode("boolean");
            case INT:
                return NODES.textNode("int");
            case LONG:
                return NODES.textNode("long");
            case FLOAT:
                return NODES.textNode("float");
            case DOUBLE:
                return NODES.textNode("double");
            case BYTES:
                return NODES.textNode("bytes");
            case TIMESTAMP:
                return logical("long", "timestamp-millis");
            case DATE:
                return logical("int", "date");
            case TIME:
                return logical("int", "time-millis");
            case RECORD:
                if (!type.isNonEmptyRecord()) {
                    return NODES.textNode("string");
                }
                return record("record_" + (++records), fieldsOf(type));
            case ARRAY:
                return NODES.objectNode().put("type", "array").set("items", nullable(elementOf(type)));
            case MAP:
                return NODES.objectNode().put("type", "map").set("values", nullable(elementOf(type)));
            case NULL:
            case STRING:
            case JSON:
            default:
                return NODES.textNode("string");
        }
    }

    private JsonNode elementOf(ValueType container) {
        return render(container.element == null ? ValueType.NULL : container.element);
    }

    private static ObjectNode logical(String base, String logicalType) {
        return NODES.objectNode().put("type", base).put("logicalType", logicalType);
    }

    /** Parses schema JSON with name validation off (column names are kept verbatim). */
    static Schema parse(JsonNode json) {
        return new Schema.Parser().setValidate(false).setValidateDefaults(false).parse(json.toString());
    }
}
