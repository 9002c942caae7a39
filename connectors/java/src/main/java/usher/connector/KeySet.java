package usher.connector;

import java.security.PublicKey;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.LongSupplier;

/**
 * The JWKS cache: usher's public keys, fetched once, kept for the max-age
 * usher serves them with, refreshed in the background when stale, and
 * fetched again at once when a pass names a kid the set lacks. Safe for
 * concurrent use: callers share one fetch.
 */
public final class KeySet {
    /** What usher serves: public, max-age=300. */
    public static final long DEFAULT_MAX_AGE_MS = 300_000;

    /** A fetched JWKS (parsed by {@link Json}) and its max-age (null if none). */
    public record Loaded(Object jwks, Long maxAgeMs) {}

    /** Loader fetches the JWKS or throws. */
    @FunctionalInterface
    public interface Loader {
        Loaded load() throws Exception;
    }

    private final Loader loader;
    private final LongSupplier now;
    private volatile long refetchAfterMs;
    private final long cap;
    private volatile Map<String, PublicKey> keys; // once a fetch succeeded
    private long freshUntil;
    private long fetchedAt = Long.MIN_VALUE / 2; // last attempt, successful or not
    private CompletableFuture<Void> inflight;
    private volatile int fetches;
    private volatile Exception lastError;

    /**
     * @param loader fetches the JWKS.
     * @param now the clock, in milliseconds.
     * @param refetchAfterMs the least time between two fetches made for an
     *     unknown kid, so that passes with made-up kids cannot make the
     *     connector hammer usher.
     * @param maxAgeMs the longest a set is kept (the JWKS's max-age, capped).
     */
    public KeySet(Loader loader, LongSupplier now, long refetchAfterMs, long maxAgeMs) {
        this.loader = loader;
        this.now = now;
        this.refetchAfterMs = refetchAfterMs;
        this.cap = maxAgeMs;
    }

    /** get returns the key of kid in the set held now, or null. */
    public PublicKey get(String kid) {
        Map<String, PublicKey> k = keys;
        return k == null ? null : k.get(kid);
    }

    /** fetches counts the fetches begun. */
    public int fetches() {
        return fetches;
    }

    /** lastError is why the last fetch failed (null after a success). */
    public Exception lastError() {
        return lastError;
    }

    /** refreshing reports whether a fetch is under way. */
    public synchronized boolean refreshing() {
        return inflight != null;
    }

    /** setRefetchAfterMs changes the least time between refetches. */
    public void setRefetchAfterMs(long ms) {
        refetchAfterMs = ms;
    }

    /** replace sets the keys held, as a fetch would (for tests and benchmarks). */
    public void replace(Map<String, PublicKey> set) {
        keys = set;
    }

    /**
     * ready returns once a set is held: at once when one is (a stale one
     * starts a refresh in the background and is used meanwhile), else after
     * the first fetch, which throws when it fails (and so does every call
     * within a second of a failure).
     */
    public void ready() throws Exception {
        CompletableFuture<Void> wait;
        synchronized (this) {
            long t = now.getAsLong();
            if (keys != null) {
                if (t >= freshUntil && inflight == null) {
                    start(true); // keep serving the stale set; lastError says why
                }
                return;
            }
            // Never had one: a failure within the last second is the answer,
            // so that a usher that is down is not asked once per request.
            if (inflight == null && lastError != null && t - fetchedAt < 1000) throw lastError;
            wait = inflight != null ? inflight : start(false);
        }
        join(wait);
    }

    /**
     * refetch fetches the set again for a pass whose kid is unknown, unless
     * one was fetched within refetchAfterMs. It returns whether a fetch was
     * made and succeeded; it never throws.
     */
    public boolean refetch() {
        CompletableFuture<Void> wait;
        synchronized (this) {
            if (inflight != null) {
                wait = inflight;
            } else if (now.getAsLong() - fetchedAt < refetchAfterMs) {
                return false;
            } else {
                wait = start(false);
            }
        }
        try {
            join(wait);
            return true;
        } catch (Exception e) {
            return false;
        }
    }

    // start begins a fetch, in the background or on the caller's thread
    // (run by join); the caller holds the lock.
    private CompletableFuture<Void> start(boolean background) {
        fetchedAt = now.getAsLong();
        fetches++;
        CompletableFuture<Void> f = new CompletableFuture<>();
        inflight = f;
        Runnable run = () -> {
            try {
                Loaded l = loader.load();
                Map<String, PublicKey> set = Pass.keysFromJwks(l.jwks());
                if (set.isEmpty()) throw new IllegalStateException("usher: the JWKS holds no Ed25519 key");
                synchronized (this) {
                    keys = set;
                    long age = l.maxAgeMs() == null ? cap : Math.min(l.maxAgeMs(), cap);
                    freshUntil = now.getAsLong() + age;
                    lastError = null;
                    inflight = null;
                }
                f.complete(null);
            } catch (Exception e) {
                synchronized (this) {
                    lastError = e;
                    inflight = null;
                }
                f.completeExceptionally(e);
            }
        };
        if (background) {
            Thread t = new Thread(run, "usher-jwks");
            t.setDaemon(true);
            t.start();
        } else {
            CompletableFuture.runAsync(run, r -> {
                Thread t = new Thread(r, "usher-jwks");
                t.setDaemon(true);
                t.start();
            });
        }
        return f;
    }

    private static void join(CompletableFuture<Void> f) throws Exception {
        try {
            f.join();
        } catch (CompletionException e) {
            if (e.getCause() instanceof Exception x) throw x;
            throw e;
        }
    }

    /** maxAgeMs reads Cache-Control's max-age, in milliseconds (null if none). */
    public static Long maxAgeMs(String cacheControl) {
        if (cacheControl == null) return null;
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("(?:^|,)\\s*max-age\\s*=\\s*\"?(\\d+)\"?\\s*(?:,|$)",
                java.util.regex.Pattern.CASE_INSENSITIVE).matcher(cacheControl);
        return m.find() ? Long.parseLong(m.group(1)) * 1000 : null;
    }
}
