package usher.connector;

import java.net.URI;
import java.util.List;

/**
 * The request a gate decides on: what any framework can tell of it. The
 * servlet filter adapts an HttpServletRequest; other code uses
 * {@link #of}.
 */
public interface UsherRequest {
    /** The method, such as GET. */
    String method();

    /** The target as the client sent it: raw path and query, not decoded. */
    String target();

    /** The header lines as the client sent them. */
    List<Header> headers();

    /** The client's address (sent to usher as X-Forwarded-For), or null. */
    String clientIp();

    /** "https" when the client came over TLS, else "http". */
    String scheme();

    /** The Host the client asked for. */
    default String host() {
        String h = Header.first(headers(), "Host");
        return h == null ? "" : h;
    }

    /** header returns the first value of name (any case), or null. */
    default String header(String name) {
        return Header.first(headers(), name);
    }

    /**
     * of describes a request: target is its raw path and query, or an
     * absolute URL (then its host counts when no Host header is given).
     */
    static UsherRequest of(String method, String target, List<Header> headers, String clientIp, String scheme) {
        String t = target == null || target.isEmpty() ? "/" : target;
        String host = Header.first(headers, "Host");
        if (t.matches("(?i)^[a-z][a-z0-9+.-]*://.*")) {
            URI u = URI.create(t);
            t = (u.getRawPath() == null || u.getRawPath().isEmpty() ? "/" : u.getRawPath())
                    + (u.getRawQuery() == null ? "" : "?" + u.getRawQuery());
            if (host == null) host = u.getRawAuthority();
            if (scheme == null) scheme = u.getScheme();
        }
        final String fTarget = t, fHost = host == null ? "" : host, fScheme = scheme == null ? "http" : scheme;
        final List<Header> fHeaders = List.copyOf(headers);
        final String fMethod = method == null ? "GET" : method;
        return new UsherRequest() {
            public String method() { return fMethod; }
            public String target() { return fTarget; }
            public List<Header> headers() { return fHeaders; }
            public String clientIp() { return clientIp; }
            public String scheme() { return fScheme; }
            public String host() { return fHost; }
        };
    }
}
