package usher.connector.servlet;

import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.FilterConfig;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Pattern;
import usher.connector.Gate;
import usher.connector.Header;
import usher.connector.UsherException;
import usher.connector.UsherRequest;

/**
 * A servlet filter (Jakarta Servlet 5 or later) that gates a site with
 * usher: it relays usher's own routes under /_usher/, lets a request with
 * a valid pass through to the chain (the request attribute
 * {@value #ATTRIBUTE} holds its {@link Admission}), and answers every other
 * request with usher's answer. Configure it with a {@link Gate}, or with
 * the init parameters {@code url}, {@code room}, and optionally
 * {@code timeoutMs} and {@code failOpen}.
 */
public class UsherFilter implements Filter {
    /** The request attribute that holds the request's {@link Admission}. */
    public static final String ATTRIBUTE = "usher";
    private static final String GATE_ATTRIBUTE = "usher.gate";
    private static final String SNAPSHOT_ATTRIBUTE = "usher.request";
    private static final long RELAY_HEADER_TIMEOUT_MS = 30_000; // usher's own routes; bodies may stream longer
    private static final byte[] NOT_FOUND_JSON =
            "{\"error\":{\"code\":\"not_found\",\"message\":\"no such route\"}}".getBytes(StandardCharsets.UTF_8);
    private static final Pattern NOT_RELAYED = Pattern.compile("%|\\\\|//|/\\.\\.?(/|$)");
    private static final Pattern AUTH = Pattern.compile("(?i)^/_usher/auth(/|$)");

    /**
     * An admitted request: its room and visitor (both null on a path usher
     * auth keeps open), when its pass expires, the pass to use from now on
     * and whether it is new.
     */
    public record Admission(String room, String visitor, Instant expiresAt, String pass, boolean renewed) {}

    private Gate gate;

    /** A filter configured by its init parameters. */
    public UsherFilter() {}

    /** A filter for gate. */
    public UsherFilter(Gate gate) {
        this.gate = gate;
    }

    /** gate is the filter's gate. */
    public Gate gate() {
        return gate;
    }

    @Override
    public void init(FilterConfig config) throws ServletException {
        if (gate != null) return;
        String url = config.getInitParameter("url");
        String room = config.getInitParameter("room");
        if (url == null || room == null) throw new ServletException("usher: the init parameters url and room are required");
        Gate.Builder b = Gate.builder(url).room(room);
        String t = config.getInitParameter("timeoutMs");
        if (t != null) b.timeoutMs(Long.parseLong(t));
        b.failOpen(Boolean.parseBoolean(config.getInitParameter("failOpen")));
        gate = b.build();
    }

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain) throws IOException, ServletException {
        if (!(request instanceof HttpServletRequest req) || !(response instanceof HttpServletResponse res)) {
            chain.doFilter(request, response);
            return;
        }
        String path = req.getRequestURI().substring(req.getContextPath().length());
        String query = req.getQueryString();
        if (Gate.isOwn(path + (query == null ? "" : "?" + query))) {
            relay(req, res, path, query);
            return;
        }
        UsherRequest rq = describe(req);
        Gate.Decision d = gate.check(rq);
        if (!d.allowed()) {
            write(res, d.status(), d.headers(), d.body());
            return;
        }
        req.setAttribute(ATTRIBUTE, new Admission(d.room(), d.visitor(), d.expiresAt(), d.pass(), d.renewed()));
        req.setAttribute(GATE_ATTRIBUTE, gate);
        req.setAttribute(SNAPSHOT_ATTRIBUTE, rq);
        for (Header h : d.headers()) res.addHeader(h.name(), h.value());
        Guard guard = new Guard(res, gate, rq, d.cacheControl());
        chain.doFilter(new Visitor(req, d.visitor(), d.room()), guard);
    }

    /**
     * release ends the slot of the visitor whose pass req carries, after a
     * purchase, and clears the pass on res (unless it is committed). It
     * throws when usher did not end the slot (which then lapses after the
     * room's active_ttl by itself), or when req did not pass the filter.
     */
    public static List<Header> release(HttpServletRequest req, HttpServletResponse res) throws UsherException {
        if (!(req.getAttribute(GATE_ATTRIBUTE) instanceof Gate g) || !(req.getAttribute(SNAPSHOT_ATTRIBUTE) instanceof UsherRequest rq)) {
            throw new IllegalStateException("usher: release: the request did not pass UsherFilter");
        }
        List<Header> headers = g.release(rq);
        if (res != null && !res.isCommitted()) {
            res.setHeader(Gate.PASS_HEADER, null);
            keepCookies(res, withoutPass(res.getHeaders("Set-Cookie")));
            for (Header h : headers) {
                if (h.name().equalsIgnoreCase("Cache-Control")) res.setHeader(h.name(), h.value());
                else res.addHeader(h.name(), h.value());
            }
        }
        return headers;
    }

    /** describe snapshots what the gate needs of a servlet request. */
    public static UsherRequest describe(HttpServletRequest req) {
        List<Header> headers = new ArrayList<>();
        for (Enumeration<String> names = req.getHeaderNames(); names.hasMoreElements(); ) {
            String n = names.nextElement();
            for (Enumeration<String> vs = req.getHeaders(n); vs.hasMoreElements(); ) headers.add(new Header(n, vs.nextElement()));
        }
        String q = req.getQueryString();
        String target = req.getRequestURI() + (q == null ? "" : "?" + q);
        if (Header.first(headers, "Host") == null) headers.add(new Header("Host", req.getServerName() + ":" + req.getServerPort()));
        return UsherRequest.of(req.getMethod(), target, headers, req.getRemoteAddr(), req.isSecure() ? "https" : "http");
    }

    // relay passes a request for usher's own routes (/_usher/: the waiting
    // page's proof-of-work worker, the visitors' API) to usher and its
    // answer back, bodies streamed. /_usher/auth* is usher's question to
    // edges, not a client's: 404. Targets that usher would decode into
    // another path (escapes, dot segments, backslashes) are not relayed.
    private void relay(HttpServletRequest req, HttpServletResponse res, String path, String query) throws IOException {
        if (NOT_RELAYED.matcher(path).find() || AUTH.matcher(path).find()) {
            write(res, 404, List.of(new Header("Content-Type", "application/json"), new Header("Cache-Control", "no-store")), NOT_FOUND_JSON);
            return;
        }
        UsherRequest rq = describe(req);
        boolean hasBody = req.getContentLengthLong() > 0 || req.getHeader("Transfer-Encoding") != null;
        HttpResponse<InputStream> a;
        try {
            a = gate.relay(req.getMethod(), path + (query == null ? "" : "?" + query), Gate.relayHeaders(rq),
                    hasBody ? () -> {
                        try {
                            return req.getInputStream();
                        } catch (IOException e) {
                            throw new java.io.UncheckedIOException(e);
                        }
                    } : null, RELAY_HEADER_TIMEOUT_MS);
        } catch (UsherException e) {
            write(res, 503, List.of(new Header("Content-Type", "application/json"), new Header("Retry-After", "2")),
                    "{\"error\":{\"code\":\"unavailable\",\"message\":\"a backend is unavailable; retry later\"}}".getBytes(StandardCharsets.UTF_8));
            return;
        }
        res.setStatus(a.statusCode());
        a.headers().map().forEach((k, vs) -> {
            if (k.startsWith(":") || (!Gate.fromUsher(k) && !k.equalsIgnoreCase("Content-Length"))) return;
            for (String v : vs) res.addHeader(k, v);
        });
        try (InputStream in = a.body(); OutputStream out = res.getOutputStream()) {
            in.transferTo(out);
        }
    }

    private static void write(HttpServletResponse res, int status, List<Header> headers, byte[] body) throws IOException {
        res.setStatus(status);
        for (Header h : headers) res.addHeader(h.name(), h.value());
        res.setContentLength(body.length);
        res.getOutputStream().write(body);
    }

    private static List<String> withoutPass(java.util.Collection<String> cookies) {
        List<String> out = new ArrayList<>();
        for (String c : cookies) if (!c.startsWith(Gate.PASS_COOKIE + "=")) out.add(c);
        return out;
    }

    private static void keepCookies(HttpServletResponse res, List<String> cookies) {
        res.setHeader("Set-Cookie", null);
        for (String c : cookies) res.addHeader("Set-Cookie", c);
    }

    // Visitor is the admitted request as the site reads it: the visitor and
    // room in Usher-Visitor and Usher-Room, as nginx and Caddy hand them to
    // an origin (those a client sent are dropped).
    private static final class Visitor extends HttpServletRequestWrapper {
        private final String visitor, room;

        Visitor(HttpServletRequest r, String visitor, String room) {
            super(r);
            this.visitor = visitor;
            this.room = visitor == null ? null : room;
        }

        private String own(String name) {
            if (name.equalsIgnoreCase(Gate.VISITOR_HEADER)) return visitor;
            if (name.equalsIgnoreCase(Gate.ROOM_HEADER)) return room;
            return "";
        }

        @Override
        public String getHeader(String name) {
            String v = own(name);
            return "".equals(v) ? super.getHeader(name) : v;
        }

        @Override
        public Enumeration<String> getHeaders(String name) {
            String v = own(name);
            if ("".equals(v)) return super.getHeaders(name);
            return Collections.enumeration(v == null ? List.of() : List.of(v));
        }

        @Override
        public Enumeration<String> getHeaderNames() {
            List<String> names = new ArrayList<>();
            for (String n : Collections.list(super.getHeaderNames())) if ("".equals(own(n))) names.add(n);
            if (visitor != null) {
                names.add(Gate.VISITOR_HEADER);
                names.add(Gate.ROOM_HEADER);
            }
            return Collections.enumeration(names);
        }
    }

    // Guard applies what an admitted request's answer needs as the site
    // writes it: Cache-Control (an answer with a pass is stored by no cache,
    // a gated one is private unless the site says otherwise), and
    // Usher-Release: 1 or true from the site, which ends the slot (in the
    // background) and clears the pass.
    private static final class Guard extends HttpServletResponseWrapper {
        private final HttpServletResponse res;
        private final Gate gate;
        private final UsherRequest rq;
        private boolean locked; // Cache-Control is the connector's
        private boolean siteCache;

        Guard(HttpServletResponse res, Gate gate, UsherRequest rq, String cacheControl) {
            super(res);
            this.res = res;
            this.gate = gate;
            this.rq = rq;
            if (cacheControl != null) res.setHeader("Cache-Control", cacheControl);
            locked = Gate.CREDENTIAL_CACHE.equals(cacheControl);
        }

        private boolean intercept(String name, String value) {
            if (name.equalsIgnoreCase(Gate.RELEASE_HEADER)) {
                if (value != null && (value.equals("1") || value.equalsIgnoreCase("true"))) releaseLater();
                return true;
            }
            if (name.equalsIgnoreCase("Cache-Control")) {
                if (locked) return true;
                if (!siteCache) {
                    siteCache = true;
                    res.setHeader(name, value);
                    return true;
                }
            }
            return false;
        }

        private void releaseLater() {
            if (res.isCommitted()) return;
            res.setHeader(Gate.PASS_HEADER, null);
            List<String> cookies = withoutPass(res.getHeaders("Set-Cookie"));
            cookies.add(Gate.PASS_COOKIE + "=; Path=/; Max-Age=0; HttpOnly;" + ("https".equals(rq.scheme()) ? " Secure;" : "") + " SameSite=Lax");
            keepCookies(res, cookies);
            res.setHeader("Cache-Control", Gate.CREDENTIAL_CACHE);
            locked = true;
            CompletableFuture.runAsync(() -> {
                try {
                    gate.release(rq);
                } catch (UsherException e) {
                    // The slot lapses after the room's active_ttl by itself.
                    System.getLogger("usher.connector").log(System.Logger.Level.WARNING, "usher: Usher-Release: " + e.getMessage());
                }
            });
        }

        @Override
        public void setHeader(String name, String value) {
            if (!intercept(name, value)) super.setHeader(name, value);
        }

        @Override
        public void addHeader(String name, String value) {
            if (!intercept(name, value)) super.addHeader(name, value);
        }

        @Override
        public void setIntHeader(String name, int value) {
            if (!intercept(name, Integer.toString(value))) super.setIntHeader(name, value);
        }

        @Override
        public void addIntHeader(String name, int value) {
            if (!intercept(name, Integer.toString(value))) super.addIntHeader(name, value);
        }
    }
}
