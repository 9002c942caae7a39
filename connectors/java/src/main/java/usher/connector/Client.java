package usher.connector;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * The connector's HTTP client for usher (the JDK's HttpClient, HTTP/1.1):
 * every call has a deadline, and answers keep their headers as a list
 * (Set-Cookie repeats).
 */
public final class Client {
    /** A whole answer of usher's. */
    public record Answer(int status, List<Header> headers, byte[] body) {
        public String header(String name) {
            return Header.first(headers, name);
        }
    }

    static final int MAX_ANSWER_BYTES = 1 << 20; // a waiting page is tens of kilobytes
    // Headers the JDK's client sets itself and refuses from its caller.
    private static final Set<String> RESTRICTED = Set.of("connection", "content-length", "expect", "host", "upgrade",
            "transfer-encoding", "keep-alive", "te", "trailer");

    final String base;
    final String host;
    private final HttpClient http;

    Client(String base, HttpClient http) {
        URI u = URI.create(base);
        if (!"http".equals(u.getScheme()) && !"https".equals(u.getScheme())) {
            throw new IllegalArgumentException("usher: url " + base + ": want http:// or https://");
        }
        String path = u.getRawPath() == null ? "" : u.getRawPath().replaceAll("/+$", "");
        this.base = u.getScheme() + "://" + u.getRawAuthority() + path;
        this.host = u.getRawAuthority();
        this.http = http != null ? http : HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .followRedirects(HttpClient.Redirect.NEVER)
                .connectTimeout(Duration.ofSeconds(5))
                .build();
    }

    private HttpRequest.Builder request(String target, List<Header> headers, long timeoutMs) {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + target)).timeout(Duration.ofMillis(Math.max(1, timeoutMs)));
        for (Header h : headers) {
            if (!RESTRICTED.contains(h.name().toLowerCase())) b.header(h.name(), h.value());
        }
        return b;
    }

    /**
     * call asks usher without a request body and reads the whole answer
     * within timeoutMs.
     */
    public Answer call(String target, String method, List<Header> headers, long timeoutMs) throws UsherException {
        HttpRequest req = request(target, headers, timeoutMs).method(method, HttpRequest.BodyPublishers.noBody()).build();
        CompletableFuture<HttpResponse<byte[]>> f = http.sendAsync(req, info -> new Limited());
        try {
            HttpResponse<byte[]> res = f.get(timeoutMs, TimeUnit.MILLISECONDS);
            return new Answer(res.statusCode(), headersOf(res.headers().map()), res.body());
        } catch (TimeoutException e) {
            f.cancel(true);
            throw new UsherException("usher: " + method + " " + target + ": no answer within " + timeoutMs + " ms", e);
        } catch (ExecutionException e) {
            Throwable c = e.getCause() == null ? e : e.getCause();
            throw new UsherException("usher: " + method + " " + target + ": " + c, c);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UsherException("usher: " + method + " " + target + ": interrupted", e);
        }
    }

    /**
     * open sends a request whose body body supplies (null for none) and
     * returns usher's answer once its headers arrive within timeoutMs; the
     * body is the caller's to read and close.
     */
    public HttpResponse<InputStream> open(String target, String method, List<Header> headers,
                                          Supplier<InputStream> body, long timeoutMs) throws UsherException {
        HttpRequest.BodyPublisher p = body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofInputStream(body);
        HttpRequest req = request(target, headers, timeoutMs).method(method, p).build();
        try {
            return http.send(req, HttpResponse.BodyHandlers.ofInputStream());
        } catch (IOException e) {
            throw new UsherException("usher: " + method + " " + target + ": " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UsherException("usher: " + method + " " + target + ": interrupted", e);
        }
    }

    /** headersOf lists the JDK client's header map, in its order. */
    static List<Header> headersOf(Map<String, List<String>> map) {
        List<Header> out = new ArrayList<>();
        for (Map.Entry<String, List<String>> e : map.entrySet()) {
            if (e.getKey().startsWith(":")) continue; // HTTP/2 pseudo-headers
            for (String v : e.getValue()) out.add(new Header(e.getKey(), v));
        }
        return out;
    }

    /** Limited reads a body of at most MAX_ANSWER_BYTES. */
    private static final class Limited implements HttpResponse.BodySubscriber<byte[]> {
        private final CompletableFuture<byte[]> result = new CompletableFuture<>();
        private final ByteArrayOutputStream buf = new ByteArrayOutputStream();
        private Flow.Subscription sub;

        @Override
        public CompletionStage<byte[]> getBody() {
            return result;
        }

        @Override
        public void onSubscribe(Flow.Subscription s) {
            sub = s;
            s.request(Long.MAX_VALUE);
        }

        @Override
        public void onNext(List<ByteBuffer> items) {
            for (ByteBuffer b : items) {
                if (buf.size() + b.remaining() > MAX_ANSWER_BYTES) {
                    sub.cancel();
                    result.completeExceptionally(new IOException("answer over " + MAX_ANSWER_BYTES + " bytes"));
                    return;
                }
                byte[] a = new byte[b.remaining()];
                b.get(a);
                buf.write(a, 0, a.length);
            }
        }

        @Override
        public void onError(Throwable t) {
            result.completeExceptionally(t);
        }

        @Override
        public void onComplete() {
            result.complete(buf.toByteArray());
        }
    }
}
