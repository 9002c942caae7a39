package usher.connector;

import java.nio.charset.StandardCharsets;
import java.io.InputStream;
import java.net.http.HttpResponse;
import java.net.http.HttpClient;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.regex.Pattern;

/**
 * A Gate checks usher's passes for one {@code usher auth}: it decides on a
 * request the way usher's Go gate does, without asking usher while the
 * request's pass is valid and in the first half of its life, and through
 * usher auth's forward-auth protocol otherwise (connectors/README.md). It
 * decides and writes nothing: the servlet filter, or the caller, writes the
 * decision. Safe for concurrent use.
 */
public final class Gate {
    public static final String PREFIX = "/_usher/";
    static final String AUTH_PATH = "/_usher/auth";
    static final String RELEASE_PATH = "/_usher/auth/release";
    static final String JWKS_PATH = "/_usher/.well-known/jwks.json";

    /** The pass cookie and the headers of usher's protocol (internal/wire). */
    public static final String PASS_COOKIE = "usher_pass";
    public static final String PASS_HEADER = "Usher-Pass";
    public static final String PASS_TTL_HEADER = "Usher-Pass-TTL";
    public static final String VISITOR_HEADER = "Usher-Visitor";
    public static final String ROOM_HEADER = "Usher-Room";
    public static final String RELEASE_HEADER = "Usher-Release";
    /** The Cache-Control of an answer that carries a pass or usher's cookies. */
    public static final String CREDENTIAL_CACHE = "private, no-store";

    static final int UNAVAILABLE_RETRY = 5; // seconds, as the nginx and Caddy edges answer
    static final String UNAVAILABLE_JSON = "{\"error\":{\"code\":\"unavailable\",\"message\":\"a backend is unavailable; retry later\"}}";
    static final String UNAVAILABLE_HTML = "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            + "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            + "<meta http-equiv='refresh' content='" + UNAVAILABLE_RETRY + "'>"
            + "<title>High demand</title></head>"
            + "<body style='font-family:system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;line-height:1.5'>"
            + "<h1>High demand</h1>"
            + "<p>So many people are visiting right now that we cannot let you in yet."
            + " This page tries again by itself every " + UNAVAILABLE_RETRY + " seconds.</p>"
            + "</body></html>";

    // Headers a client sends that never reach usher: hop-by-hop ones, the
    // body's, and those only the connector may set or that name the client
    // or the public URL (internal/wire's header table, "to usher").
    private static final Set<String> NOT_TO_USHER = Set.of(
            "host", "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
            "transfer-encoding", "upgrade", "http2-settings", "expect", "content-length", "content-type",
            "forwarded", "x-real-ip", "true-client-ip", "x-client-ip", "cf-connecting-ip", "fastly-client-ip",
            "x-cluster-client-ip", "x-proxyuser-ip", "usher-visitor", "usher-room", "usher-pass", "usher-pass-ttl",
            "usher-release");
    // Headers of usher's answer that the connector does not pass on: the
    // connection's own, and those its server writes itself.
    private static final Set<String> NOT_FROM_USHER = Set.of("connection", "keep-alive", "transfer-encoding",
            "content-length", "date", "server", "trailer", "upgrade");
    private static final Pattern ROOM_ID = Pattern.compile("[a-z0-9][a-z0-9-]{0,63}");

    /**
     * A decision on a request. Allowed: {@code room} and {@code visitor}
     * (both null on a path usher auth keeps open), {@code expiresAt},
     * {@code pass} (the one to use from now on; {@code renewed} when new),
     * {@code headers} to add to the response and {@code cacheControl}
     * ("private, no-store": it carries a pass, and must win over the site's;
     * "private": for one visitor, unless the site says otherwise). Refused:
     * the whole answer, {@code status}, {@code headers} and {@code body}.
     */
    public record Decision(boolean allowed, String room, String visitor, Instant expiresAt, String pass, boolean renewed,
                           List<Header> headers, String cacheControl, int status, byte[] body) {}

    /** Counts of what the gate did. */
    public static final class Stats {
        public final AtomicLong offline = new AtomicLong();
        public final AtomicLong asked = new AtomicLong();
        public final AtomicLong renewed = new AtomicLong();
        public final AtomicLong unavailable = new AtomicLong();
        public final AtomicLong released = new AtomicLong();
    }

    /** Options for a Gate; see README.md. */
    public static final class Builder {
        private final String url;
        private Function<UsherRequest, String> room;
        private long timeoutMs = 5000;
        private boolean failOpen;
        private String jwksUrl;
        private long refetchAfterMs = 5000;
        private int cacheSize = 10_000;
        private Consumer<String> logger = m -> System.getLogger("usher.connector").log(System.Logger.Level.WARNING, m);
        private LongSupplier clock = System::currentTimeMillis;
        private HttpClient http;

        Builder(String url) {
            this.url = Objects.requireNonNull(url, "usher: url is required (usher auth's address)");
        }

        /** room is the room of every request. */
        public Builder room(String id) {
            if (id == null || !ROOM_ID.matcher(id).matches()) {
                throw new IllegalArgumentException("usher: room " + id + ": want [a-z0-9][a-z0-9-]{0,63}");
            }
            this.room = r -> id;
            return this;
        }

        /** room gives the room of a request. */
        public Builder room(Function<UsherRequest, String> of) {
            this.room = Objects.requireNonNull(of);
            return this;
        }

        public Builder timeoutMs(long ms) { this.timeoutMs = ms; return this; }
        public Builder failOpen(boolean b) { this.failOpen = b; return this; }
        public Builder jwksUrl(String u) { this.jwksUrl = u; return this; }
        public Builder refetchAfterMs(long ms) { this.refetchAfterMs = ms; return this; }
        public Builder cacheSize(int n) { this.cacheSize = n; return this; }
        /** logger gets warnings, at most one every 10 s per kind; null for none. */
        public Builder logger(Consumer<String> l) { this.logger = l; return this; }
        /** clock is the time in milliseconds since the epoch. */
        public Builder clock(LongSupplier c) { this.clock = c; return this; }
        public Builder httpClient(HttpClient c) { this.http = c; return this; }

        public Gate build() {
            if (room == null) throw new IllegalArgumentException("usher: room is required: a room id, or a function of the request");
            return new Gate(this);
        }
    }

    /** builder starts the options of a gate for usher auth at url (http://127.0.0.1:8092). */
    public static Builder builder(String url) {
        return new Builder(url);
    }

    final Client client;
    private final Function<UsherRequest, String> room;
    private final LongSupplier now;
    final long timeoutMs;
    private final boolean failOpen;
    private final Consumer<String> logger;
    private final int cacheSize;
    private final Map<String, Long> warned = new ConcurrentHashMap<>();
    private final Map<String, Long> quiet = new ConcurrentHashMap<>(); // pass → not asked to renew before
    private final LinkedHashMap<String, Pass.Opened> opened = new LinkedHashMap<>(); // checked signatures, oldest first
    private volatile KeySet keys;
    /** What the gate did. */
    public final Stats stats = new Stats();

    private Gate(Builder o) {
        this.client = new Client(o.url, o.http);
        this.room = o.room;
        this.now = o.clock;
        this.timeoutMs = o.timeoutMs;
        this.failOpen = o.failOpen;
        this.logger = o.logger;
        this.cacheSize = o.cacheSize;
        String jwksUrl = o.jwksUrl != null ? o.jwksUrl : client.base + JWKS_PATH;
        Client jwksClient = o.jwksUrl != null ? new Client(o.jwksUrl, o.http) : client;
        String jwksTarget = o.jwksUrl != null ? "" : JWKS_PATH;
        this.keys = new KeySet(() -> {
            Client.Answer a = jwksClient.call(jwksTarget, "GET", List.of(new Header("Accept", "application/json")), timeoutMs);
            if (a.status() != 200) throw new UsherException("usher: GET " + jwksUrl + ": status " + a.status(), a.status(), null, null);
            return new KeySet.Loaded(Json.parse(a.body()), KeySet.maxAgeMs(a.header("Cache-Control")));
        }, now, o.refetchAfterMs, KeySet.DEFAULT_MAX_AGE_MS);
    }

    /** keys is the JWKS cache. */
    public KeySet keys() {
        return keys;
    }

    /** setKeys replaces the JWKS cache (tests, benchmarks: a set from elsewhere). */
    public void setKeys(KeySet k) {
        keys = k;
        synchronized (opened) {
            opened.clear();
        }
    }

    /** openedSize counts the passes whose checked signature is kept. */
    public int openedSize() {
        synchronized (opened) {
            return opened.size();
        }
    }

    /** verify is verify(token, room, now). */
    public Pass.Verdict verify(String token, String room) throws Exception {
        return verify(token, room, now.getAsLong());
    }

    /**
     * verify checks a pass for room offline at nowMs, against usher's JWKS
     * (fetched when needed, and again when the pass names a kid it lacks).
     * It throws only when no JWKS could ever be had.
     */
    public Pass.Verdict verify(String token, String room, long nowMs) throws Exception {
        KeySet ks = keys;
        ks.ready();
        // A visitor shows the same pass on every request: its signature is
        // checked once, while the key that signed it is still the one held;
        // the clock and the room are judged every time.
        Pass.Opened seen;
        synchronized (opened) {
            seen = opened.get(token);
        }
        if (seen != null && ks.get(seen.kid()) == seen.key()) return judge(token, seen, room, nowMs);
        Object o = Pass.open(token, ks::get);
        if (o instanceof Pass.Verdict v && Pass.UNKNOWN_KID.equals(v.reason()) && ks.refetch()) o = Pass.open(token, ks::get);
        if (o instanceof Pass.Verdict v) return v;
        Pass.Opened op = (Pass.Opened) o;
        if (cacheSize > 0) {
            synchronized (opened) {
                if (opened.size() >= cacheSize) {
                    Iterator<String> it = opened.keySet().iterator();
                    it.next();
                    it.remove();
                }
                opened.put(token, op);
            }
        }
        return judge(token, op, room, nowMs);
    }

    private Pass.Verdict judge(String token, Pass.Opened o, String room, long nowMs) {
        Pass.Verdict v = Pass.judge(o, room, nowMs);
        if (Pass.EXPIRED.equals(v.verdict())) {
            synchronized (opened) {
                opened.remove(token);
            }
        }
        return v;
    }

    /** roomOf is the room the gate checks request's pass for. */
    public String roomOf(UsherRequest request) {
        return room.apply(request);
    }

    /** check decides on a request. */
    public Decision check(UsherRequest rq) {
        String room = this.room.apply(rq);
        long t = now.getAsLong();
        String token = passFrom(rq.header("Authorization"), rq.header("Cookie"));
        Pass.Verdict pass = null; // valid offline, due for renewal
        if (!token.isEmpty()) {
            Pass.Verdict v = null;
            try {
                v = verify(token, room, t);
            } catch (Exception e) {
                warn("jwks", "usher: no JWKS (" + e.getMessage() + "): usher is asked about every pass");
            }
            if (v != null && v.valid()) {
                Long q = quiet.get(token);
                if (!Pass.renewalDue(v, t) || (q != null && q > t)) {
                    stats.offline.incrementAndGet();
                    return allowed(v.room(), v.visitor(), v.expiresAt(), token, false, new ArrayList<>());
                }
                pass = v;
            }
        }
        Client.Answer a;
        try {
            stats.asked.incrementAndGet();
            a = client.call(AUTH_PATH, "GET", forwarded(rq), timeoutMs + waitMs(rq));
        } catch (UsherException e) {
            return unreachable(rq, token, pass, e);
        }
        if (a.status() >= 200 && a.status() < 300) return passed(a, rq, room, token, pass, t);
        String fresh = a.header(PASS_HEADER);
        if (a.status() == 429 && fresh != null) {
            // A JSON client admitted by this very request: served at once, as
            // usher proxy does, with its pass and how long its slot lasts.
            Map<String, Object> c = Pass.claims(fresh);
            double exp = c != null && c.get("exp") instanceof Double d ? d * 1000 : t;
            long ttl = Math.max(0, (long) Math.floor((exp - t) / 1000));
            List<Header> headers = credentialHeaders(a.headers());
            headers.add(new Header(PASS_TTL_HEADER, Long.toString(ttl)));
            return allowedFresh(fresh, room, a.headers(), headers);
        }
        if (pass != null && a.status() >= 500) {
            return unreachable(rq, token, pass, new UsherException("usher: status " + a.status(), a.status(), null, null));
        }
        List<Header> out = new ArrayList<>();
        for (Header h : a.headers()) if (fromUsher(h.name())) out.add(h);
        return new Decision(false, null, null, null, null, false, out, null, a.status(), a.body());
    }

    // passed makes the decision for usher's 2xx: the request passes, with
    // the renewed pass if usher gave one.
    private Decision passed(Client.Answer a, UsherRequest rq, String room, String token, Pass.Verdict pass, long t) {
        String fresh = a.header(PASS_HEADER);
        String visitor = a.header(VISITOR_HEADER);
        String usherRoom = a.header(ROOM_HEADER);
        if (usherRoom != null && !usherRoom.equals(room)) {
            warn("room " + usherRoom + " " + room, "usher: usher auth puts " + rq.target() + " in room " + usherRoom
                    + ", the connector in " + room + ": usher is asked about every pass");
        }
        if (fresh != null) {
            stats.renewed.incrementAndGet();
            return allowedFresh(fresh, usherRoom != null ? usherRoom : room, a.headers(), credentialHeaders(a.headers()));
        }
        if (pass != null) {
            // Not renewed yet (usher's clock or the slot's ttl differ a little
            // from the pass's): not asked again for a second.
            if (quiet.size() >= 10_000) quiet.clear();
            quiet.put(token, t + 1000);
            return allowed(pass.room(), pass.visitor(), pass.expiresAt(), token, false, new ArrayList<>());
        }
        if (visitor == null) return new Decision(true, null, null, null, null, false, List.of(), null, 0, null); // an open path, or a bypass
        return allowed(usherRoom != null ? usherRoom : room, visitor, null, token.isEmpty() ? null : token, false, new ArrayList<>());
    }

    // unreachable decides when usher gave no usable answer: a pass valid
    // offline passes (its renewal is best effort), else fail open or closed.
    private Decision unreachable(UsherRequest rq, String token, Pass.Verdict pass, UsherException e) {
        stats.unavailable.incrementAndGet();
        warn("unreachable", e.getMessage() + (pass != null ? " (a valid pass passes)" : failOpen ? " (failing open)" : ""));
        if (pass != null) return allowed(pass.room(), pass.visitor(), pass.expiresAt(), token, false, new ArrayList<>());
        if (failOpen) return new Decision(true, null, null, null, null, false, List.of(), null, 0, null);
        boolean json = wantsJSON(rq.header("Accept"));
        return new Decision(false, null, null, null, null, false, List.of(
                new Header("Content-Type", json ? "application/json" : "text/html; charset=utf-8"),
                new Header("Cache-Control", "no-store"),
                new Header("Retry-After", Integer.toString(UNAVAILABLE_RETRY)),
                new Header("Vary", "Accept")), null, 503,
                (json ? UNAVAILABLE_JSON : UNAVAILABLE_HTML).getBytes(StandardCharsets.UTF_8));
    }

    /**
     * release ends the slot of the visitor whose pass the request carries,
     * after a purchase, so that the next visitor is admitted at once. It
     * returns the headers to add to the response (the pass cookie cleared)
     * and throws when usher did not end it (the slot then lapses after the
     * room's active_ttl by itself).
     */
    public List<Header> release(UsherRequest rq) throws UsherException {
        Client.Answer a = client.call(RELEASE_PATH, "POST", forwarded(rq), timeoutMs);
        if (a.status() != 204) {
            String code = null;
            try {
                Map<String, Object> err = Json.object(Json.object(Json.parse(a.body())).get("error"));
                if (err != null && err.get("code") instanceof String s) code = s;
            } catch (Exception ignored) {
                // no error JSON
            }
            throw new UsherException("usher: release: status " + a.status() + (code != null ? " " + code : ""), a.status(), code, null);
        }
        stats.released.incrementAndGet();
        List<Header> out = new ArrayList<>();
        for (Header h : a.headers()) if (h.name().equalsIgnoreCase("Set-Cookie")) out.add(h);
        out.add(new Header("Cache-Control", CREDENTIAL_CACHE));
        return out;
    }

    /** warn logs message, at most once every 10 s for each kind. */
    void warn(String kind, String message) {
        if (logger == null) return;
        long t = System.currentTimeMillis();
        Long last = warned.get(kind);
        if (last != null && t - last < 10_000) return;
        if (warned.size() >= 100) warned.clear();
        warned.put(kind, t);
        logger.accept(message);
    }

    private static Decision allowed(String room, String visitor, Instant expiresAt, String token, boolean renewed, List<Header> headers) {
        boolean credentials = renewed;
        for (Header h : headers) if (h.name().equalsIgnoreCase("Set-Cookie")) credentials = true;
        if (visitor != null) {
            headers.add(new Header("Vary", "Cookie"));
            headers.add(new Header("Vary", "Authorization"));
        }
        String cc = credentials ? CREDENTIAL_CACHE : visitor != null ? "private" : null;
        return new Decision(true, room, visitor, expiresAt, token, renewed, List.copyOf(headers), cc, 0, null);
    }

    // allowedFresh passes with a pass usher just handed over (not verified:
    // it is usher's own answer on the connector's connection).
    private static Decision allowedFresh(String fresh, String room, List<Header> answer, List<Header> headers) {
        Map<String, Object> c = Pass.claims(fresh);
        String visitor = Header.first(answer, VISITOR_HEADER);
        if (visitor == null && c != null && c.get("sub") instanceof String s) visitor = s;
        Instant exp = c != null && c.get("exp") instanceof Double d ? Instant.ofEpochSecond((long) Math.floor(d)) : null;
        return allowed(room, visitor, exp, fresh, true, headers);
    }

    // credentialHeaders are the headers of usher's answer that hand the
    // client its pass: Usher-Pass and every Set-Cookie.
    private static List<Header> credentialHeaders(List<Header> answer) {
        List<Header> out = new ArrayList<>();
        for (Header h : answer) {
            if (h.name().equalsIgnoreCase("Set-Cookie") || h.name().equalsIgnoreCase(PASS_HEADER)) out.add(h);
        }
        return out;
    }

    /** toUsher reports whether a client's header name may be forwarded to usher. */
    public static boolean toUsher(String name) {
        String n = name.toLowerCase();
        return !NOT_TO_USHER.contains(n) && !n.startsWith("x-forwarded-") && !n.startsWith("x-original-") && !n.contains("_");
    }

    /** fromUsher reports whether a header of usher's answer goes to the client. */
    public static boolean fromUsher(String name) {
        return !NOT_FROM_USHER.contains(name.toLowerCase());
    }

    /** wantsJSON reports whether Accept lists application/json before any text/html. */
    public static boolean wantsJSON(String accept) {
        if (accept == null) return false;
        for (String part : accept.split(",")) {
            String type = part.split(";")[0].trim().toLowerCase();
            if (type.equals("text/html")) return false;
            if (type.equals("application/json")) return true;
        }
        return false;
    }

    /** isOwn reports whether a request target is usher's own route (/_usher/…). */
    public static boolean isOwn(String target) {
        return target.equals("/_usher") || target.startsWith(PREFIX) || target.startsWith("/_usher?");
    }

    /**
     * passFrom returns the pass of a request: from {@code Authorization:
     * Bearer}, else the usher_pass cookie; "" for none. The header wins even
     * when its pass is bad, as in Go's gate.PassFrom.
     */
    public static String passFrom(String authorization, String cookie) {
        if (authorization != null && authorization.length() > 7 && authorization.substring(0, 7).equalsIgnoreCase("bearer ")) {
            return authorization.substring(7).trim();
        }
        if (cookie == null) return "";
        for (String part : cookie.split(";")) {
            int eq = part.indexOf('=');
            if (eq < 0 || !part.substring(0, eq).trim().equals(PASS_COOKIE)) continue;
            String v = part.substring(eq + 1).trim();
            if (v.length() > 1 && v.startsWith("\"") && v.endsWith("\"")) v = v.substring(1, v.length() - 1);
            return v;
        }
        return "";
    }

    // A poll may ask usher to hold it (Usher-Wait, up to 20 s).
    static long waitMs(UsherRequest rq) {
        try {
            int w = Integer.parseInt(Objects.requireNonNullElse(rq.header("Usher-Wait"), "").trim());
            return w >= 0 && w <= 20 ? w * 1000L : 0;
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    // forwarded is what usher auth is sent about rq: the client's headers
    // (toUsher), and the original request as the connector saw it.
    static List<Header> forwarded(UsherRequest rq) {
        List<Header> out = new ArrayList<>();
        for (Header h : rq.headers()) if (toUsher(h.name())) out.add(h);
        out.add(new Header("X-Forwarded-Method", rq.method()));
        out.add(new Header("X-Forwarded-Uri", rq.target()));
        out.add(new Header("X-Forwarded-Host", rq.host()));
        out.add(new Header("X-Forwarded-Proto", rq.scheme()));
        if (rq.clientIp() != null) out.add(new Header("X-Forwarded-For", rq.clientIp()));
        return out;
    }

    /**
     * relayHeaders is what usher is sent with a request for its own routes
     * (/_usher/): the client's headers that may reach usher and the body's
     * type, and the request as the connector saw it.
     */
    public static List<Header> relayHeaders(UsherRequest rq) {
        List<Header> out = new ArrayList<>();
        for (Header h : rq.headers()) if (toUsher(h.name()) || h.name().equalsIgnoreCase("Content-Type")) out.add(h);
        out.add(new Header("X-Forwarded-Host", rq.host()));
        out.add(new Header("X-Forwarded-Proto", rq.scheme()));
        if (rq.clientIp() != null) out.add(new Header("X-Forwarded-For", rq.clientIp()));
        return out;
    }

    /**
     * relay sends a request for usher's own routes to usher, its body from
     * body (null for none), and returns usher's answer once its headers
     * arrive within timeoutMs: the body is the caller's to stream and close.
     */
    public HttpResponse<InputStream> relay(String method, String target, List<Header> headers, Supplier<InputStream> body,
                                           long timeoutMs) throws UsherException {
        return client.open(target, method, headers, body, timeoutMs);
    }
}
