package usher.connector;

import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small, bounded JSON reader for what the connector reads: the JWKS and
 * a pass's header and claims. Objects are {@code Map<String, Object>} (a
 * repeated name keeps its last value, as Go and JavaScript do), arrays
 * {@code List<Object>}, numbers {@code Double}, and {@code null}
 * {@link #NULL}. Input over {@link #MAX_BYTES} or nested deeper than
 * {@link #MAX_DEPTH} is refused.
 */
public final class Json {
    /** The largest document read: a JWKS holds a few keys. */
    public static final int MAX_BYTES = 1 << 20;
    /** The deepest nesting read. */
    public static final int MAX_DEPTH = 32;
    /** JSON's null, told apart from a missing name. */
    public static final Object NULL = new Object() {
        @Override
        public String toString() {
            return "null";
        }
    };

    /** Thrown for input that is not one JSON value. */
    public static final class ParseException extends Exception {
        private static final long serialVersionUID = 1L;
        ParseException(String message) {
            super(message);
        }
    }

    private final String s;
    private int i;

    private Json(String s) {
        this.s = s;
    }

    /** parse reads UTF-8 bytes holding one JSON value; invalid UTF-8 is refused. */
    public static Object parse(byte[] utf8) throws ParseException {
        if (utf8.length > MAX_BYTES) throw new ParseException("over " + MAX_BYTES + " bytes");
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(utf8)).toString();
        } catch (CharacterCodingException e) {
            throw new ParseException("invalid UTF-8");
        }
        return parse(text);
    }

    /** parse reads a string holding one JSON value. */
    public static Object parse(String text) throws ParseException {
        if (text.length() > MAX_BYTES) throw new ParseException("over " + MAX_BYTES + " characters");
        Json p = new Json(text);
        p.space();
        Object v = p.value(0);
        p.space();
        if (p.i != text.length()) throw new ParseException("data after the value at " + p.i);
        return v;
    }

    /** object returns v as a JSON object, or null when it is not one. */
    @SuppressWarnings("unchecked")
    public static Map<String, Object> object(Object v) {
        return v instanceof Map ? (Map<String, Object>) v : null;
    }

    private void space() {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
            i++;
        }
    }

    private ParseException error(String what) {
        return new ParseException(what + " at " + i);
    }

    private Object value(int depth) throws ParseException {
        if (depth > MAX_DEPTH) throw error("nested too deep");
        if (i >= s.length()) throw error("unexpected end");
        char c = s.charAt(i);
        switch (c) {
            case '{':
                return object(depth);
            case '[':
                return array(depth);
            case '"':
                return string();
            case 't':
                return literal("true", Boolean.TRUE);
            case 'f':
                return literal("false", Boolean.FALSE);
            case 'n':
                return literal("null", NULL);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) return number();
                throw error("unexpected character");
        }
    }

    private Object literal(String word, Object v) throws ParseException {
        if (!s.startsWith(word, i)) throw error("bad literal");
        i += word.length();
        return v;
    }

    private Map<String, Object> object(int depth) throws ParseException {
        Map<String, Object> m = new LinkedHashMap<>();
        i++; // {
        space();
        if (i < s.length() && s.charAt(i) == '}') {
            i++;
            return m;
        }
        for (;;) {
            space();
            if (i >= s.length() || s.charAt(i) != '"') throw error("want a name");
            String name = string();
            space();
            if (i >= s.length() || s.charAt(i) != ':') throw error("want ':'");
            i++;
            space();
            m.put(name, value(depth + 1));
            space();
            if (i >= s.length()) throw error("unexpected end");
            char c = s.charAt(i++);
            if (c == '}') return m;
            if (c != ',') throw error("want ',' or '}'");
        }
    }

    private List<Object> array(int depth) throws ParseException {
        List<Object> a = new ArrayList<>();
        i++; // [
        space();
        if (i < s.length() && s.charAt(i) == ']') {
            i++;
            return a;
        }
        for (;;) {
            space();
            a.add(value(depth + 1));
            space();
            if (i >= s.length()) throw error("unexpected end");
            char c = s.charAt(i++);
            if (c == ']') return a;
            if (c != ',') throw error("want ',' or ']'");
        }
    }

    private String string() throws ParseException {
        i++; // "
        StringBuilder b = new StringBuilder();
        while (i < s.length()) {
            char c = s.charAt(i++);
            if (c == '"') return b.toString();
            if (c < 0x20) throw error("control character in a string");
            if (c != '\\') {
                b.append(c);
                continue;
            }
            if (i >= s.length()) break;
            char e = s.charAt(i++);
            switch (e) {
                case '"': b.append('"'); break;
                case '\\': b.append('\\'); break;
                case '/': b.append('/'); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'n': b.append('\n'); break;
                case 'r': b.append('\r'); break;
                case 't': b.append('\t'); break;
                case 'u':
                    if (i + 4 > s.length()) throw error("short \\u escape");
                    int cp = 0;
                    for (int k = 0; k < 4; k++) {
                        int d = Character.digit(s.charAt(i++), 16);
                        if (d < 0) throw error("bad \\u escape");
                        cp = cp * 16 + d;
                    }
                    b.append((char) cp);
                    break;
                default:
                    throw error("bad escape");
            }
        }
        throw error("unterminated string");
    }

    private Double number() throws ParseException {
        int start = i;
        if (s.charAt(i) == '-') i++;
        if (i < s.length() && s.charAt(i) == '0') {
            i++;
        } else {
            if (!digits()) throw error("bad number");
        }
        if (i < s.length() && s.charAt(i) == '.') {
            i++;
            if (!digits()) throw error("bad number");
        }
        if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
            i++;
            if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) i++;
            if (!digits()) throw error("bad number");
        }
        double d = Double.parseDouble(s.substring(start, i));
        if (Double.isInfinite(d)) throw error("number out of range");
        return d;
    }

    private boolean digits() {
        int start = i;
        while (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') i++;
        return i > start;
    }
}
