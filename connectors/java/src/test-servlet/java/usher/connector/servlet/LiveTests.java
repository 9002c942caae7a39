package usher.connector.servlet;

import static usher.connector.T.check;
import static usher.connector.T.eq;
import static usher.connector.T.test;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.catalina.Context;
import org.apache.catalina.startup.Tomcat;
import org.apache.tomcat.util.descriptor.web.FilterDef;
import org.apache.tomcat.util.descriptor.web.FilterMap;
import usher.connector.Gate;
import usher.connector.Header;
import usher.connector.Json;
import usher.connector.Pass;
import usher.connector.T;
import usher.connector.UsherRequest;

/**
 * The servlet filter in front of a site in Tomcat (embedded, as Debian's
 * libtomcat10-embed-java ships it), against a live usher auth: go test
 * ./cmd/usher -run TestConnectorJava starts one built from the tree and
 * sets USHER_TEST_URL (usher auth), USHER_TEST_ADMIN_URL and
 * USHER_TEST_ADMIN_KEY (its admin listener) and USHER_TEST_CONTROL (POST
 * /rotate: a new signing key, usher auth restarted). Without them these
 * tests skip, except under CI, where they fail.
 */
public final class LiveTests {
    private LiveTests() {}

    static final String USHER = System.getenv("USHER_TEST_URL");
    static final String ADMIN = System.getenv("USHER_TEST_ADMIN_URL");
    static final String ADMIN_KEY = System.getenv("USHER_TEST_ADMIN_KEY");
    static final String CONTROL = System.getenv("USHER_TEST_CONTROL");
    static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .followRedirects(HttpClient.Redirect.NEVER).build();

    // Jar keeps one client's cookies, as a browser would.
    static final class Jar {
        final Map<String, String> cookies = new LinkedHashMap<>();

        void take(HttpHeaders h) {
            for (String c : h.allValues("set-cookie")) {
                String[] parts = c.split(";");
                int eq = parts[0].indexOf('=');
                String name = parts[0].substring(0, eq).trim(), value = parts[0].substring(eq + 1).trim();
                boolean expired = false;
                for (int i = 1; i < parts.length; i++) {
                    if (parts[i].trim().toLowerCase().matches("max-age=(0|-).*")) expired = true;
                }
                if (value.isEmpty() || expired) cookies.remove(name);
                else cookies.put(name, value);
            }
        }

        String get(String name) {
            return cookies.get(name);
        }

        String header() {
            List<String> out = new ArrayList<>();
            cookies.forEach((k, v) -> out.add(k + "=" + v));
            return String.join("; ", out);
        }
    }

    record Reply(int status, HttpHeaders headers, String body) {
        String header(String name) {
            return headers.firstValue(name).orElse(null);
        }

        Map<String, Object> json() throws Json.ParseException {
            return Json.object(Json.parse(body));
        }
    }

    // visit asks the site for path as one client: its jar, its Accept, its
    // Bearer token if any. Redirects are not followed.
    static Reply visit(String base, String path, Jar jar, boolean json, String bearer, String method) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + path))
                .header("Accept", json ? "application/json" : "text/html,application/xhtml+xml")
                .method(method, HttpRequest.BodyPublishers.noBody());
        if (jar != null && !jar.cookies.isEmpty()) b.header("Cookie", jar.header());
        if (bearer != null) b.header("Authorization", "Bearer " + bearer);
        HttpResponse<String> r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
        if (jar != null) jar.take(r.headers());
        return new Reply(r.statusCode(), r.headers(), r.body());
    }

    static Reply visit(String base, String path, Jar jar) throws Exception {
        return visit(base, path, jar, false, null, "GET");
    }

    static void admin(String method, String path, String body) throws Exception {
        HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(ADMIN + path))
                .header("Authorization", "Bearer " + ADMIN_KEY).header("Content-Type", "application/json")
                .method(method, HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
        check(r.statusCode() / 100 == 2, method + " " + path + ": " + r.statusCode() + " " + r.body());
    }

    static Map<String, Object> claims(String pass) {
        return Pass.claims(pass);
    }

    static String sub(String pass) {
        return (String) claims(pass).get("sub");
    }

    static double exp(String pass) {
        return (Double) claims(pass).get("exp");
    }

    static String kidOf(String pass) throws Exception {
        return (String) Json.object(Json.parse(Base64.getUrlDecoder().decode(pass.split("\\.")[0]))).get("kid");
    }

    // forge flips one bit in the middle of a token's signature.
    static String forge(String pass) {
        String[] p = pass.split("\\.");
        byte[] sig = Base64.getUrlDecoder().decode(p[2]);
        sig[10] ^= 1;
        return p[0] + "." + p[1] + "." + Base64.getUrlEncoder().withoutPadding().encodeToString(sig);
    }

    static <V> V until(String what, Supplier<V> cond) throws Exception {
        long deadline = System.currentTimeMillis() + 20_000;
        for (;;) {
            V v = cond.get();
            if (v != null) return v;
            if (System.currentTimeMillis() > deadline) throw new AssertionError("timed out waiting for " + what);
            Thread.sleep(100);
        }
    }

    // The site: a servlet behind the filter, as the Node test's app.
    static final class Site extends HttpServlet {
        private static final long serialVersionUID = 1L;
        final List<String> hits = java.util.Collections.synchronizedList(new ArrayList<>());

        @Override
        protected void service(HttpServletRequest req, HttpServletResponse res) throws IOException {
            String path = req.getRequestURI();
            hits.add(path);
            if (path.equals("/shop/checkout")) {
                try {
                    UsherFilter.release(req, res);
                } catch (Exception e) {
                    res.sendError(500, e.toString());
                    return;
                }
                res.getWriter().write("thanks");
                return;
            }
            if (path.equals("/shop/done")) res.setHeader("Usher-Release", "1"); // as behind usher proxy
            UsherFilter.Admission a = (UsherFilter.Admission) req.getAttribute(UsherFilter.ATTRIBUTE);
            res.setContentType("application/json");
            res.getOutputStream().write(("{\"path\":" + quote(path) + ",\"visitor\":" + quote(a == null ? null : a.visitor())
                    + ",\"room\":" + quote(a == null ? null : a.room()) + ",\"header\":" + quote(req.getHeader("Usher-Visitor")) + "}")
                    .getBytes(StandardCharsets.UTF_8));
        }

        static String quote(String s) {
            return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
        }
    }

    /** run runs the live tests, or skips them without a usher. */
    @SuppressWarnings("deprecation") // addServletMappingDecoded: Tomcat 10.1's way, renamed in 11
    public static void run() throws Exception {
        if (USHER == null || ADMIN == null || ADMIN_KEY == null || CONTROL == null) {
            if (System.getenv("CI") != null && !System.getenv("CI").isEmpty()) {
                test("the servlet filter against a live usher", () -> {
                    throw new AssertionError("USHER_TEST_URL, USHER_TEST_ADMIN_URL, USHER_TEST_ADMIN_KEY and USHER_TEST_CONTROL"
                            + " are unset under CI: run go test ./cmd/usher -run TestConnectorJava");
                });
            } else {
                T.skip("the servlet filter against a live usher", "no usher: run go test ./cmd/usher -run TestConnectorJava");
            }
            return;
        }
        Gate gate = Gate.builder(USHER).room(r -> r.target().startsWith("/brief/") ? "brief" : "sale")
                .refetchAfterMs(0).logger(null).build();
        Site site = new Site();
        Tomcat tomcat = new Tomcat();
        tomcat.setBaseDir(Files.createTempDirectory("usher-tomcat").toString());
        tomcat.setPort(0);
        tomcat.setHostname("127.0.0.1");
        tomcat.getConnector().setProperty("address", "127.0.0.1");
        Context ctx = tomcat.addContext("", null);
        Tomcat.addServlet(ctx, "site", site);
        ctx.addServletMappingDecoded("/", "site");
        FilterDef def = new FilterDef();
        def.setFilterName("usher");
        def.setFilter(new UsherFilter(gate));
        ctx.addFilterDef(def);
        FilterMap map = new FilterMap();
        map.setFilterName("usher");
        map.addURLPattern("/*");
        ctx.addFilterMap(map);
        // A second application at /web, its filter made by Tomcat from
        // init parameters, as web.xml would declare it.
        Context web = tomcat.addContext("/web", null);
        Tomcat.addServlet(web, "site", new Site());
        web.addServletMappingDecoded("/", "site");
        FilterDef byName = new FilterDef();
        byName.setFilterName("usher");
        byName.setFilterClass(UsherFilter.class.getName());
        byName.addInitParameter("url", USHER);
        byName.addInitParameter("room", "sale");
        web.addFilterDef(byName);
        FilterMap all = new FilterMap();
        all.setFilterName("usher");
        all.addURLPattern("/*");
        web.addFilterMap(all);
        tomcat.start();
        String s = "http://127.0.0.1:" + tomcat.getConnector().getLocalPort();
        try {
            live(gate, site, s);
        } finally {
            tomcat.stop();
            tomcat.destroy();
        }
    }

    static void live(Gate gate, Site site, String s) throws Exception {
        // One visitor at a time in sale, admitted within 100 ms of a free
        // slot; brief's slots last 3 s.
        admin("PUT", "/api/v1/rooms/sale", "{\"max_active\":1,\"interval_ms\":100,\"admit_rate\":100}");
        admin("PUT", "/api/v1/rooms/brief", "{\"active_ttl_seconds\":3,\"claim_window_seconds\":3}");
        Jar a = new Jar(), b = new Jar(), c = new Jar();
        String[] p = new String[5]; // passes A, C, D, E

        test("live: a browser is admitted at once, then passes offline", () -> {
            Reply first = visit(s, "/shop/?seat=1", a);
            eq(first.status(), 303, "first visit: " + first.body());
            eq(first.header("location"), "/shop/?seat=1", "Location");
            p[0] = a.get("usher_pass");
            check(p[0] != null, "the pass cookie, on the site's own domain");
            eq(gate.verify(p[0], "sale").verdict(), Pass.VALID, "offline");
            long asked = gate.stats.asked.get();
            Reply page = visit(s, "/shop/?seat=1", a);
            eq(page.status(), 200, page.body());
            Map<String, Object> j = page.json();
            eq(j.get("path"), "/shop/", "path");
            eq(j.get("visitor"), sub(p[0]), "the Admission's visitor");
            eq(j.get("room"), "sale", "room");
            eq(j.get("header"), sub(p[0]), "Usher-Visitor");
            eq(gate.stats.asked.get(), asked, "a pass in the first half of its life is checked offline: usher is not asked");
            check(page.header("cache-control").contains("private"), "Cache-Control " + page.header("cache-control"));
            check(String.join(",", page.headers().allValues("vary")).contains("Cookie"), "Vary");
        });

        test("live: while the slot is taken, JSON clients get the protocol and browsers the waiting page", () -> {
            int hits = site.hits.size();
            Reply json = visit(s, "/shop/items", b, true, null, "GET");
            eq(json.status(), 429, json.body());
            check(Integer.parseInt(json.header("retry-after")) >= 1, "Retry-After");
            Map<String, Object> entry = json.json();
            eq(entry.get("state"), "waiting", "state");
            eq(entry.get("position"), 1.0, "position");
            check(entry.get("ticket") != null && b.get("usher_ticket_sale") != null && b.get("usher_vid") != null,
                    "the ticket, in the body and the cookie");
            Reply page = visit(s, "/shop/", c);
            eq(page.status(), 429, "waiting page");
            check(page.header("content-type").startsWith("text/html"), "Content-Type " + page.header("content-type"));
            check(page.body().contains("id=\"usher-state\""), "the waiting page");
            check(page.header("cache-control").contains("no-store"), "no-store");
            eq(site.hits.size(), hits, "the site saw none of them");
        });

        test("live offline: another room, expired, forged, alg none", () -> {
            long exp = (long) exp(p[0]);
            eq(gate.verify(p[0], "brief").verdict(), Pass.WRONG_ROOM, "other room");
            eq(gate.verify(p[0], "sale", exp * 1000).verdict(), Pass.EXPIRED, "at exp");
            eq(gate.verify(forge(p[0]), "sale").verdict(), Pass.INVALID, "forged");
            String none = Base64.getUrlEncoder().withoutPadding().encodeToString(
                    ("{\"alg\":\"none\",\"kid\":\"" + kidOf(p[0]) + "\"}").getBytes(StandardCharsets.UTF_8)) + "." + p[0].split("\\.")[1] + ".";
            eq(gate.verify(none, "sale").verdict(), Pass.INVALID, "alg none");
            int hits = site.hits.size();
            for (String bad : List.of(forge(p[0]), none)) {
                Reply r = visit(s, "/shop/", null, true, bad, "GET");
                eq(r.status(), 429, "a forged pass waits like anyone: " + r.body());
            }
            eq(site.hits.size(), hits, "the site saw none of them");
        });

        test("live renewal: past half its life, the pass is renewed through usher", () -> {
            Reply first = visit(s, "/brief/x", null, true, null, "GET");
            eq(first.status(), 200, "a JSON client admitted at once is served at once: " + first.body());
            p[2] = first.header("usher-pass");
            check(p[2] != null, "Usher-Pass");
            check(Integer.parseInt(first.header("usher-pass-ttl")) <= 3, "Usher-Pass-TTL " + first.header("usher-pass-ttl"));
            eq(first.header("cache-control"), "private, no-store", "Cache-Control");
            double iat = (Double) claims(p[2]).get("iat"), exp = exp(p[2]);
            long asked = gate.stats.asked.get();
            eq(visit(s, "/brief/x", null, false, p[2], "GET").status(), 200, "offline");
            eq(gate.stats.asked.get(), asked, "not asked");
            Thread.sleep(Math.max(0, (long) (exp * 1000 - (exp - iat) * 1000 / 2) - System.currentTimeMillis()) + 100);
            Reply renewed = visit(s, "/brief/x", null, false, p[2], "GET");
            eq(renewed.status(), 200, renewed.body());
            eq(gate.stats.asked.get(), asked + 1, "asked once");
            String fresh = renewed.header("usher-pass");
            check(fresh != null && !fresh.equals(p[2]), "a new pass in Usher-Pass");
            check(exp(fresh) > exp, "that lasts longer");
            eq(renewed.header("cache-control"), "private, no-store", "Cache-Control");
            p[2] = fresh;
        });

        test("live: an expired pass is refused: the visitor waits again", () -> {
            admin("PUT", "/api/v1/rooms/brief", "{\"state\":\"paused\"}");
            Thread.sleep(Math.max(0, (long) (exp(p[2]) * 1000) - System.currentTimeMillis()) + 100);
            eq(gate.verify(p[2], "brief").verdict(), Pass.EXPIRED, "offline");
            int hits = site.hits.size();
            Reply r = visit(s, "/brief/x", null, true, p[2], "GET");
            eq(r.status(), 429, r.body());
            eq(r.json().get("room_state"), "paused", "room_state");
            eq(site.hits.size(), hits, "the site saw none");
        });

        test("live: release after a purchase frees the slot for the next visitor", () -> {
            Reply done = visit(s, "/shop/checkout", a, false, null, "POST");
            eq(done.status(), 200, done.body());
            eq(done.body(), "thanks", "body");
            eq(a.get("usher_pass"), null, "the pass cookie is cleared");
            eq(done.header("cache-control"), "private, no-store", "Cache-Control");
            Reply admitted = until("b admitted", () -> {
                try {
                    Reply r = visit(s, "/shop/items", b, true, null, "GET");
                    return r.status() == 200 ? r : null;
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            check(admitted.header("usher-pass") != null, "Usher-Pass");
            check(b.get("usher_pass") != null, "the pass cookie");
        });

        test("live: Usher-Release from the site does the same", () -> {
            Reply done = visit(s, "/shop/done", b);
            eq(done.status(), 200, done.body());
            eq(done.header("usher-release"), null, "the header stays between site and connector");
            eq(b.get("usher_pass"), null, "the pass cookie is cleared");
            eq(done.header("cache-control"), "private, no-store", "Cache-Control");
            until("c admitted", () -> {
                try {
                    return visit(s, "/shop/", c).status() == 303 ? Boolean.TRUE : null;
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            p[1] = c.get("usher_pass");
            eq(visit(s, "/shop/", c).status(), 200, "c passes");
        });

        test("live: usher's own routes go to usher, its edge routes do not", () -> {
            Reply worker = visit(s, "/_usher/pow.js", null);
            eq(worker.status(), 200, "pow.js");
            check(worker.header("content-type").contains("javascript"), "Content-Type " + worker.header("content-type"));
            Reply jwks = visit(s, "/_usher/.well-known/jwks.json", null, true, null, "GET");
            eq(jwks.status(), 200, "jwks");
            check(Pass.keysFromJwks(Json.parse(jwks.body())).containsKey(kidOf(p[1])), "the JWKS holds the pass's key");
            for (String path : List.of("/_usher/auth", "/_usher/auth/release", "/_usher/%61uth", "/_usher/x/../auth")) {
                int st = visit(s, path, null, true, null, "GET").status();
                // Tomcat refuses a dot segment that climbs by itself (400); the filter refuses the rest.
                check(st == 404 || (st == 400 && path.contains("..")), path + ": status " + st);
            }
        });

        test("live key rotation: old passes still verify, new ones after one JWKS fetch", () -> {
            HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(URI.create(CONTROL + "/rotate"))
                    .POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
            eq(res.statusCode(), 204, res.body());
            long asked = gate.stats.asked.get();
            eq(visit(s, "/shop/", c).status(), 200, "the old key's pass, offline");
            eq(gate.stats.asked.get(), asked, "not asked");
            Reply e = visit(s, "/shop/", null, true, null, "GET"); // usher restarted: its slots are gone
            eq(e.status(), 200, e.body());
            p[3] = e.header("usher-pass");
            check(!kidOf(p[3]).equals(kidOf(p[1])), "signed by the new key");
            int fetches = gate.keys().fetches();
            Reply again = visit(s, "/shop/", null, false, p[3], "GET");
            eq(again.status(), 200, again.body());
            eq(gate.keys().fetches(), fetches + 1, "the unknown kid fetched the JWKS again, once");
            eq(gate.stats.asked.get(), asked + 1, "and the pass passed offline");
            eq(gate.verify(p[1], "sale").verdict(), Pass.VALID, "the old key is still in the JWKS");
        });

        test("live: the filter from init parameters, under a context path", () -> {
            Reply r = visit(s, "/web/shop/", null, false, p[3], "GET");
            eq(r.status(), 200, r.body());
            Map<String, Object> j = r.json();
            eq(j.get("path"), "/web/shop/", "path");
            eq(j.get("visitor"), sub(p[3]), "the Admission's visitor");
            eq(j.get("room"), "sale", "room");
            eq(visit(s, "/web/shop/", null, true, null, "GET").status(), 429, "no pass: usher's answer");
            eq(visit(s, "/web/_usher/pow.js", null).status(), 200, "usher's routes, below the context path");
        });

        test("live: the plain function takes an UsherRequest", () -> {
            Gate.Decision d = gate.check(UsherRequest.of("GET", s + "/shop/", List.of(new Header("Authorization", "Bearer " + p[3])), null, null));
            eq(d.allowed(), true, "allowed");
            eq(d.visitor(), sub(p[3]), "visitor");
            eq(d.room(), "sale", "room");
        });

        test("live: usher down: a valid pass passes, others get 503, or pass with failOpen", () -> {
            String jwksUrl = USHER + "/_usher/.well-known/jwks.json";
            Gate down = Gate.builder("http://127.0.0.1:1").jwksUrl(jwksUrl).room("sale").logger(null).build();
            Gate.Decision json = down.check(UsherRequest.of("GET", "/shop/", List.of(new Header("Accept", "application/json")), null, null));
            eq(json.status(), 503, "JSON");
            eq(Header.first(json.headers(), "Retry-After"), "5", "Retry-After");
            eq(Json.object(Json.object(Json.parse(json.body())).get("error")).get("code"), "unavailable", "error code");
            Gate.Decision page = down.check(UsherRequest.of("GET", "/shop/", List.of(new Header("Accept", "text/html")), null, null));
            eq(page.status(), 503, "page");
            check(new String(page.body(), StandardCharsets.UTF_8).contains("High demand"), "High demand");
            Gate.Decision passed = down.check(UsherRequest.of("GET", "/shop/", List.of(new Header("Authorization", "Bearer " + p[3])), null, null));
            eq(passed.allowed(), true, "a valid pass passes");
            eq(passed.visitor(), sub(p[3]), "visitor");
            Gate open = Gate.builder("http://127.0.0.1:1").jwksUrl(jwksUrl).room("sale").logger(null).failOpen(true).build();
            Gate.Decision d = open.check(UsherRequest.of("GET", "/shop/", List.of(), null, null));
            eq(d.allowed(), true, "failOpen");
            eq(d.visitor(), null, "no visitor");
        });
    }
}
