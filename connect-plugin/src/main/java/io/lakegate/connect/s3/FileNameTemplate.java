/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The {@code file.name.template}: text with {@code {{topic}}}, {@code {{partition}}} and
 * {@code {{start_offset}}}, each required. As in Aiven's sink, {@code {{partition:padding=true}}} and
 * {@code {{start_offset:padding=true}}} zero-pad to 10 and 20 digits so keys sort by offset.
 */
public final class FileNameTemplate {

    public static final String DEFAULT = "{{topic}}-{{partition}}-{{start_offset}}";

    private static final Pattern VARIABLE = Pattern.compile("\\{\\{\\s*([^}:\\s]+)\\s*(?::\\s*([^}]*?)\\s*)?}}");

    private enum Variable { TOPIC, PARTITION, START_OFFSET }

    private final String template;

    private FileNameTemplate(String template) {
        this.template = template;
    }

    /**
     * Parses and checks a template.
     *
     * @throws IllegalArgumentException naming what is wrong (missing/unknown variable, bad parameter)
     */
    public static FileNameTemplate parse(String template) {
        if (template == null || template.isBlank()) {
            throw new IllegalArgumentException("must not be empty");
        }
        Set<Variable> seen = EnumSet.noneOf(Variable.class);
        Matcher m = VARIABLE.matcher(template);
        while (m.find()) {
            Variable variable = variable(m.group(1));
            padding(variable, m.group(2));
            seen.add(variable);
        }
        Set<Variable> missing = EnumSet.allOf(Variable.class);
        missing.removeAll(seen);
        if (!missing.isEmpty()) {
            StringBuilder names = new StringBuilder();
            for (Variable v : missing) {
                names.append(names.length() == 0 ? "" : ", ").append("{{").append(lower(v)).append("}}");
            }
            throw new IllegalArgumentException("must contain {{topic}}, {{partition}} and {{start_offset}}; missing "
                    + names);
        }
        String rest = VARIABLE.matcher(template).replaceAll("");
        if (rest.contains("{{") || rest.contains("}}")) {
            throw new IllegalArgumentException("has an unbalanced '{{' or '}}'");
        }
        return new FileNameTemplate(template);
    }

    /** Renders the object name of a file for {@code topic}/{@code partition} whose first record is at {@code startOffset}. */
    public String render(String topic, int partition, long startOffset) {
        Matcher m = VARIABLE.matcher(template);
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            Variable variable = variable(m.group(1));
            boolean pad = padding(variable, m.group(2));
            String value;
            switch (variable) {
                case TOPIC:
                    value = topic;
                    break;
                case PARTITION:
                    value = pad ? String.format("%010d", partition) : Integer.toString(partition);
                    break;
                default:
                    value = pad ? String.format("%020d", startOffset) : Long.toString(startOffset);
                    break;
            }
            m.appendReplacement(out, Matcher.quoteReplacement(value));
        }
        m.appendTail(out);
        return out.toString();
    }

    @Override
    public String toString() {
        return template;
    }

    private static Variable variable(String name) {
        try {
            return Variable.valueOf(name.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("unknown variable {{" + name
                    + "}}; supported: {{topic}}, {{partition}}, {{start_offset}}");
        }
    }

    private static boolean padding(Variable variable, String parameter) {
        if (parameter == null) {
            return false;
        }
        String p = parameter.replace(" ", "").toLowerCase(Locale.ROOT);
        if (variable != Variable.TOPIC && (p.equals("padding=true") || p.equals("padding=false"))) {
            return p.equals("padding=true");
        }
        throw new IllegalArgumentException("unsupported parameter '" + parameter + "' for {{" + lower(variable)
                + "}}; only {{partition}} and {{start_offset}} accept padding=true|false");
    }

    private static String lower(Variable v) {
        return v.name().toLowerCase(Locale.ROOT);
    }
}
