package usher.connector;

import static usher.connector.T.check;
import static usher.connector.T.eq;
import static usher.connector.T.test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java connector's tests, with the JDK alone: the conformance table
 * (connectors/testdata/vectors.json) and the pure parts. Then, when the
 * servlet tests are on the class path, those against a live usher
 * (usher.connector.servlet.LiveTests).
 *
 * <pre>java -cp BUILD usher.connector.Tests [path/to/vectors.json]</pre>
 */
public final class Tests {
    public static void main(String[] args) throws Exception {
        Path vectors = Path.of(args.length > 0 ? args[0] : "../testdata/vectors.json");
        vectors(vectors);
        units();
        Class<?> live;
        try {
            live = Class.forName("usher.connector.servlet.LiveTests");
        } catch (ClassNotFoundException e) {
            live = null;
        }
        if (live != null) {
            live.getMethod("run").invoke(null);
        } else if (System.getenv("CI") != null && !System.getenv("CI").isEmpty()) {
            T.test("the servlet filter against a live usher", () -> {
                throw new AssertionError("usher.connector.servlet.LiveTests is not on the class path under CI");
            });
        } else {
            T.skip("the servlet filter against a live usher", "not compiled: go test ./cmd/usher -run TestConnectorJava");
        }
        T.summary();
    }

    // gateFor returns a Gate whose JWKS comes from the case: jwks at first,
    // jwks_refetched on any later fetch; fetches counts them.
    static Gate gateFor(Map<String, Object> c, AtomicInteger fetches) {
        long now = Instant.parse((String) c.get("now")).toEpochMilli();
        Gate g = Gate.builder("http://127.0.0.1:9").room(r -> (String) c.get("room")).clock(() -> now).logger(null).build();
        Object refetched = c.containsKey("jwks_refetched") ? c.get("jwks_refetched") : c.get("jwks");
        g.setKeys(new KeySet(() -> new KeySet.Loaded(fetches.getAndIncrement() == 0 ? c.get("jwks") : refetched, 300_000L),
                () -> now, 0, KeySet.DEFAULT_MAX_AGE_MS));
        return g;
    }

    @SuppressWarnings("unchecked")
    static void vectors(Path file) throws Exception {
        Map<String, Object> table = Json.object(Json.parse(Files.readAllBytes(file)));
        List<Object> cases = (List<Object>) table.get("cases");
        test("the table is one this connector reads", () -> {
            eq(table.get("alg"), "EdDSA", "alg");
            eq(table.get("issuer"), "usher", "issuer");
            eq(table.get("leeway_seconds"), 0.0, "the connector has no clock-skew allowance, as Go");
            eq(table.get("max_token_bytes"), (double) Pass.MAX_TOKEN_BYTES, "max_token_bytes");
            check(cases.size() >= 40, "only " + cases.size() + " cases");
        });
        for (Object o : cases) {
            Map<String, Object> c = Json.object(o);
            String name = (String) c.get("name");
            test("vector " + name, () -> {
                AtomicInteger fetches = new AtomicInteger();
                Gate g = gateFor(c, fetches);
                String token = (String) c.get("token"), room = (String) c.get("room");
                Pass.Verdict got = g.verify(token, room);
                eq(got.verdict(), c.get("verdict"), name + ": " + c.get("about") + " (reason " + got.reason() + ")");
                if (got.valid()) {
                    eq(got.visitor(), c.get("visitor"), "visitor");
                    eq(got.expiresAt().toString(), c.get("expires_at"), "expires_at");
                    eq(got.room(), room, "room");
                }
                eq(fetches.get(), c.containsKey("jwks_refetched") ? 2 : 1,
                        "fetches (a kid the first JWKS lacks fetches it again, once; one it holds needs no second)");
                eq(g.verify(token, room), got, "the second time, from the cache of checked signatures");
                var keys = Pass.keysFromJwks(c.containsKey("jwks_refetched") ? c.get("jwks_refetched") : c.get("jwks"));
                long now = Instant.parse((String) c.get("now")).toEpochMilli();
                eq(Pass.verify(token, room, keys::get, now).verdict(), c.get("verdict"), "Pass.verify alone");
            });
        }
        Map<String, Object> valid = Json.object(cases.stream().filter(o -> "valid".equals(Json.object(o).get("name"))).findFirst().orElseThrow());
        test("the cache judges the clock and the room every time, and forgets a key that left", () -> {
            Gate g = gateFor(valid, new AtomicInteger());
            String token = (String) valid.get("token");
            long now = Instant.parse((String) valid.get("now")).toEpochMilli();
            eq(g.verify(token, "sale", now).verdict(), Pass.VALID, "valid");
            eq(g.openedSize(), 1, "kept");
            eq(g.verify(token, "other", now).verdict(), Pass.WRONG_ROOM, "other room");
            eq(g.verify(token, "sale", Instant.parse((String) valid.get("expires_at")).toEpochMilli()).verdict(), Pass.EXPIRED, "at exp");
            eq(g.openedSize(), 0, "an expired pass is forgotten");
            g.verify(token, "sale", now);
            g.keys().replace(Map.of()); // the key retired: the set no longer holds it
            g.keys().setRefetchAfterMs(Long.MAX_VALUE);
            eq(g.verify(token, "sale", now).verdict(), Pass.INVALID, "after the key left");
        });
        Map<String, Object> rotated = Json.object(cases.stream().filter(o -> "rotated_key".equals(Json.object(o).get("name"))).findFirst().orElseThrow());
        test("a kid the first JWKS lacks is invalid without the refetch", () -> {
            var keys = Pass.keysFromJwks(rotated.get("jwks"));
            Pass.Verdict v = Pass.verify((String) rotated.get("token"), "sale", keys::get, Instant.parse((String) rotated.get("now")).toEpochMilli());
            eq(v.verdict(), Pass.INVALID, "verdict");
            eq(v.reason(), Pass.UNKNOWN_KID, "reason");
        });
    }

    static void units() {
        test("passFrom: the Authorization header wins, else the cookie", () -> {
            String[][] cases = {
                {null, null, ""},
                {"Bearer abc", "usher_pass=def", "abc"},
                {"bearer  abc ", null, "abc"},
                {"BEARER abc", null, "abc"},
                {"Bearer ", "usher_pass=def", "def"},
                {"Bearer  ", "usher_pass=def", ""},
                {"Basic dXNlcg==", "usher_pass=def", "def"},
                {null, "a=1; usher_pass=def; b=2", "def"},
                {null, "usher_pass=\"def\"", "def"},
                {null, "usher_pass=first; usher_pass=second", "first"},
                {null, "xusher_pass=no", ""},
            };
            for (String[] c : cases) eq(Gate.passFrom(c[0], c[1]), c[2], "Authorization " + c[0] + ", Cookie " + c[1]);
        });
        test("wantsJSON: application/json listed before any text/html", () -> {
            eq(Gate.wantsJSON("application/json"), true, "json");
            eq(Gate.wantsJSON("application/json;q=0.9, text/html"), true, "json first");
            eq(Gate.wantsJSON("text/html, application/json"), false, "html first");
            eq(Gate.wantsJSON("*/*"), false, "*/*");
            eq(Gate.wantsJSON(null), false, "none");
        });
        test("renewalDue: once half the pass's life, iat to exp, is used", () -> {
            Pass.Verdict p = new Pass.Verdict(Pass.VALID, null, "v", "sale", Instant.ofEpochMilli(300_000), Instant.ofEpochMilli(0));
            eq(Pass.renewalDue(p, 149_999), false, "before half");
            eq(Pass.renewalDue(p, 150_000), false, "at half");
            eq(Pass.renewalDue(p, 150_001), true, "after half");
            eq(Pass.renewalDue(new Pass.Verdict(Pass.VALID, null, "v", "sale", Instant.ofEpochMilli(300_000), null), 0), true, "no iat");
        });
        test("maxAgeMs reads Cache-Control", () -> {
            eq(KeySet.maxAgeMs("public, max-age=300"), 300_000L, "300");
            eq(KeySet.maxAgeMs("max-age=0"), 0L, "0");
            eq(KeySet.maxAgeMs("no-store"), null, "no-store");
            eq(KeySet.maxAgeMs("s-maxage=10"), null, "s-maxage");
            eq(KeySet.maxAgeMs(null), null, "none");
        });
        test("toUsher: what a client sent that usher auth may read", () -> {
            for (String h : List.of("Cookie", "Authorization", "Accept", "Accept-Language", "Usher-Wait", "Usher-Shown", "Usher-Challenge", "Usher-Bypass", "User-Agent")) {
                eq(Gate.toUsher(h), true, h);
            }
            for (String h : List.of("Host", "Connection", "Content-Length", "X-Forwarded-For", "X-Forwarded-Uri", "X-Original-URI", "X-Real-IP",
                    "Forwarded", "Usher-Visitor", "Usher-Room", "Usher-Pass", "Usher-Release", "X_Real_IP", "Upgrade")) {
                eq(Gate.toUsher(h), false, h);
            }
        });
        test("UsherRequest.of: an absolute URL gives the target and host", () -> {
            UsherRequest r = UsherRequest.of("GET", "https://shop.test/a/b?c=d", List.of(new Header("Authorization", "Bearer p")), null, null);
            eq(r.target(), "/a/b?c=d", "target");
            eq(r.host(), "shop.test", "host");
            eq(r.scheme(), "https", "scheme");
            eq(Gate.waitMs(UsherRequest.of("GET", "/p", List.of(new Header("Usher-Wait", "10")), null, null)), 10_000L, "Usher-Wait");
            eq(Gate.waitMs(UsherRequest.of("GET", "/p", List.of(new Header("Usher-Wait", "99")), null, null)), 0L, "Usher-Wait over 20");
        });
        test("isOwn: usher's routes are /_usher and below", () -> {
            eq(Gate.isOwn("/_usher/pow.js"), true, "/_usher/pow.js");
            eq(Gate.isOwn("/_usher"), true, "/_usher");
            eq(Gate.isOwn("/_usher?x"), true, "/_usher?x");
            eq(Gate.isOwn("/_usherx"), false, "/_usherx");
            eq(Gate.isOwn("/shop/_usher/"), false, "/shop/_usher/");
        });
        test("Json: bounded, strict", () -> {
            eq(Json.parse("{\"a\":[1,2.5,\"x\\u00e9\"],\"a\":true}").toString(), "{a=true}", "a repeated name keeps its last value");
            for (String bad : List.of("", "{", "{\"a\":1,}", "[1 2]", "01", "1.", "\"\\x\"", "{\"a\":1}x", "1e999", "nul", "\"a\u0001\"")) {
                try {
                    Json.parse(bad);
                    throw new AssertionError("parsed " + bad);
                } catch (Json.ParseException expected) {
                    // refused
                }
            }
            try {
                Json.parse("[".repeat(Json.MAX_DEPTH + 2) + "]".repeat(Json.MAX_DEPTH + 2));
                throw new AssertionError("parsed a document nested too deep");
            } catch (Json.ParseException expected) {
                // refused
            }
            try {
                Json.parse(new byte[] {'"', (byte) 0xff, '"'});
                throw new AssertionError("parsed invalid UTF-8");
            } catch (Json.ParseException expected) {
                // refused
            }
        });
        units2();
    }

    // A JWKS cache over a loader that counts and can fail, on a settable clock.
    static final class Cache {
        final AtomicLong now = new AtomicLong();
        volatile boolean fail;
        final AtomicInteger loads = new AtomicInteger();
        final KeySet keys;
        static final Object JWKS;

        static {
            try {
                JWKS = Json.parse("{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"ExXeCW-EvMqnT6YpJEQHVVx1pX4iJO-bakJpLoq7CDE\",\"kid\":\"a\",\"alg\":\"EdDSA\",\"use\":\"sig\"}]}");
            } catch (Json.ParseException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        Cache(long maxAgeMs) {
            keys = new KeySet(() -> {
                loads.incrementAndGet();
                if (fail) throw new Exception("down");
                return new KeySet.Loaded(JWKS, 60_000L);
            }, now::get, 5000, maxAgeMs);
        }

        // settle waits for a background refresh begun by ready to end.
        void settle() throws InterruptedException {
            for (int i = 0; i < 500 && keys.refreshing(); i++) Thread.sleep(2);
        }
    }

    static void units2() {
        test("KeySet: one fetch, then the cache until max-age, then a refresh behind", () -> {
            Cache c = new Cache(KeySet.DEFAULT_MAX_AGE_MS);
            c.keys.ready();
            c.keys.ready();
            eq(c.loads.get(), 1, "loads");
            check(c.keys.get("a") != null, "the key");
            c.now.addAndGet(59_999);
            c.keys.ready();
            eq(c.loads.get(), 1, "fresh for the JWKS's max-age");
            c.now.addAndGet(1);
            c.keys.ready(); // stale: served at once, refreshed behind
            c.settle();
            eq(c.loads.get(), 2, "refreshed");
        });
        test("KeySet: the max-age is capped", () -> {
            Cache c = new Cache(1000);
            c.keys.ready();
            c.now.addAndGet(1000);
            c.keys.ready();
            c.settle();
            eq(c.loads.get(), 2, "loads");
        });
        test("KeySet: a refetch for an unknown kid at most every refetchAfterMs", () -> {
            Cache c = new Cache(KeySet.DEFAULT_MAX_AGE_MS);
            c.keys.ready();
            eq(c.keys.refetch(), false, "just fetched");
            c.now.addAndGet(5000);
            eq(c.keys.refetch(), true, "after refetchAfterMs");
            eq(c.keys.refetch(), false, "again at once");
            eq(c.loads.get(), 2, "loads");
        });
        test("KeySet: a failed fetch keeps the set held, and a first failure throws", () -> {
            Cache c = new Cache(KeySet.DEFAULT_MAX_AGE_MS);
            c.fail = true;
            try {
                c.keys.ready();
                throw new AssertionError("ready without a set");
            } catch (Exception e) {
                eq(e.getMessage(), "down", "the loader's error");
            }
            c.fail = false;
            c.now.addAndGet(5000);
            c.keys.ready();
            c.fail = true;
            c.now.addAndGet(5000);
            eq(c.keys.refetch(), false, "failed refetch");
            check(c.keys.get("a") != null, "the old set is kept");
            eq(c.keys.lastError().getMessage(), "down", "lastError");
        });
        test("KeySet: without any set, a failure is the answer for a second", () -> {
            Cache c = new Cache(KeySet.DEFAULT_MAX_AGE_MS);
            c.fail = true;
            for (int i = 0; i < 2; i++) {
                try {
                    c.keys.ready();
                    throw new AssertionError("ready without a set");
                } catch (Exception expected) {
                    // down
                }
            }
            eq(c.loads.get(), 1, "not asked again within the second");
            c.now.addAndGet(1000);
            c.fail = false;
            c.keys.ready();
            eq(c.loads.get(), 2, "asked after it");
        });
        test("KeySet: a JWKS without an Ed25519 key is refused", () -> {
            KeySet k = new KeySet(() -> new KeySet.Loaded(Json.parse("{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"r\",\"n\":\"x\",\"e\":\"AQAB\"}]}"), null),
                    System::currentTimeMillis, 0, KeySet.DEFAULT_MAX_AGE_MS);
            try {
                k.ready();
                throw new AssertionError("ready");
            } catch (IllegalStateException e) {
                check(e.getMessage().contains("no Ed25519 key"), e.getMessage());
            }
        });
    }
}
