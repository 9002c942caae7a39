package usher.connector;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.PublicKey;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * Verifications per second of the Java connector, on one thread:
 *
 * <pre>java -cp BUILD usher.connector.Bench [--mode verify|middleware|middleware-uncached]
 *     [--n N] [--input FILE] [--serve]</pre>
 *
 * verify: Pass.verify alone, on a pass and its key. middleware: Gate.check,
 * what the servlet filter decides with, on a new UsherRequest carrying the
 * pass in Authorization each time (no container, no call to usher: the
 * pass is in the first half of its life), the same pass each time, as a
 * visitor's page views bring it: its signature is checked once.
 * middleware-uncached: the same with every signature checked (cacheSize
 * 0). FILE is JSON {jwks, token, room, now?}; without it, the conformance
 * table's "valid" case. It prints one JSON line; with --serve it warms up,
 * prints {"ready":true}, then answers each count read on stdin with the
 * line of that many passes, as connectors/node/bench/verify.js does for
 * the Go benchmark (go test ./cmd/usher -run '^$' -bench Connector).
 */
public final class Bench {
    public static void main(String[] args) throws Exception {
        String mode = "verify", input = null;
        long n = 0;
        boolean serve = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--mode" -> mode = args[++i];
                case "--n" -> n = Long.parseLong(args[++i]);
                case "--input" -> input = args[++i];
                case "--serve" -> serve = true;
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        Map<String, Object> in;
        if (input != null) {
            in = Json.object(Json.parse(Files.readAllBytes(Path.of(input))));
        } else {
            Map<String, Object> table = Json.object(Json.parse(Files.readAllBytes(Path.of("../testdata/vectors.json"))));
            in = ((List<?>) table.get("cases")).stream().map(Json::object).filter(c -> "valid".equals(c.get("name"))).findFirst().orElseThrow();
        }
        String token = (String) in.get("token"), room = (String) in.get("room");
        LongSupplier now = in.get("now") instanceof String at ? () -> Instant.parse(at).toEpochMilli() : System::currentTimeMillis;
        Map<String, PublicKey> keys = Pass.keysFromJwks(in.get("jwks"));
        Runnable once;
        if (mode.equals("verify")) {
            once = () -> {
                if (!Pass.verify(token, room, keys::get, now.getAsLong()).valid()) throw new IllegalStateException("the pass does not verify");
            };
        } else if (mode.equals("middleware") || mode.equals("middleware-uncached")) {
            Gate gate = Gate.builder("http://127.0.0.1:9").room(room).clock(now).logger(null)
                    .cacheSize(mode.equals("middleware") ? 10_000 : 0).build();
            KeySet ks = new KeySet(() -> new KeySet.Loaded(in.get("jwks"), null), now, 5000, KeySet.DEFAULT_MAX_AGE_MS);
            ks.ready();
            gate.setKeys(ks);
            String authorization = "Bearer " + token;
            once = () -> {
                UsherRequest r = UsherRequest.of("GET", "/shop/",
                        List.of(new Header("Host", "shop.test"), new Header("Authorization", authorization)), "10.0.0.1", "http");
                Gate.Decision d = gate.check(r);
                if (!d.allowed() || d.visitor() == null) throw new IllegalStateException("the request did not pass offline");
            };
        } else {
            throw new IllegalArgumentException("--mode " + mode + ": want verify, middleware or middleware-uncached");
        }
        // Warm the JIT for 2 s.
        for (long until = System.currentTimeMillis() + 2000; System.currentTimeMillis() < until; ) loop(once, 1000);
        if (serve) {
            System.out.println("{\"ready\":true}");
            BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = r.readLine()) != null; ) {
                long count = Long.parseLong(line.trim());
                System.out.println(report(mode, count, loop(once, count)));
            }
            return;
        }
        if (n == 0) {
            n = 1000; // about a second: calibrated on a tenth
            long[] t = loop(once, n);
            n = Math.max(n, n * 1_000_000_000L / Math.max(1, t[0]));
        }
        System.out.println(report(mode, n, loop(once, n)));
    }

    // loop runs n passes and returns the time they took and the CPU time the
    // process spent on them, in nanoseconds.
    static long[] loop(Runnable once, long n) {
        com.sun.management.OperatingSystemMXBean os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        long cpu = os.getProcessCpuTime();
        long start = System.nanoTime();
        for (long i = 0; i < n; i++) once.run();
        return new long[] {System.nanoTime() - start, os.getProcessCpuTime() - cpu};
    }

    static String report(String mode, long n, long[] t) {
        return String.format(java.util.Locale.ROOT,
                "{\"mode\":\"%s\",\"java\":\"%s\",\"n\":%d,\"ns_per_op\":%.1f,\"cpu_ns_per_op\":%.1f,\"per_second\":%d}",
                mode, Runtime.version(), n, (double) t[0] / n, (double) t[1] / n, Math.round(n * 1e9 / t[0]));
    }
}
