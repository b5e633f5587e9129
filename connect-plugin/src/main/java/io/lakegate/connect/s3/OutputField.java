/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** A record field that can be written ({@code format.output.fields}). */
public enum OutputField {
    KEY, VALUE, OFFSET, TIMESTAMP, HEADERS;

    /** The name used in the config and as the column / JSON property name. */
    public String fieldName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * Parses the configured list, keeping its order.
     *
     * @throws IllegalArgumentException on an empty list, an unknown name or a duplicate
     */
    static List<OutputField> parseAll(List<String> names) {
        List<OutputField> fields = new ArrayList<>();
        for (String raw : names) {
            String name = raw.trim().toLowerCase(Locale.ROOT);
            OutputField field;
            try {
                field = OutputField.valueOf(name.toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("unknown field '" + raw
                        + "'; allowed: key, value, offset, timestamp, headers");
            }
            if (fields.contains(field)) {
                throw new IllegalArgumentException("field '" + name + "' is listed twice");
            }
            fields.add(field);
        }
        if (fields.isEmpty()) {
            throw new IllegalArgumentException("at least one field is required");
        }
        return List.copyOf(fields);
    }
}
