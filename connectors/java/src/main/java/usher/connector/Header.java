package usher.connector;

import java.util.List;

/** One header line: Set-Cookie and Vary repeat, so headers are lists of these. */
public record Header(String name, String value) {
    /** first returns the first value of name (any case) in headers, or null. */
    public static String first(List<Header> headers, String name) {
        for (Header h : headers) if (h.name().equalsIgnoreCase(name)) return h.value();
        return null;
    }
}
