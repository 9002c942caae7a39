package usher.connector;

import java.nio.charset.StandardCharsets;
import java.security.KeyFactory;
import java.security.PublicKey;
import java.security.Signature;
import java.security.spec.X509EncodedKeySpec;
import java.time.Instant;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Offline verification of usher's passes: EdDSA (Ed25519) JWS checked by
 * the rules of usher's internal/token ParsePass, which the Go gate runs, with
 * the JDK's own Ed25519. No clock-skew allowance, as in Go. Pure: no I/O, no
 * clock of its own.
 */
public final class Pass {
    private Pass() {}

    /** The verdicts: "valid", or the API's error code for the pass. */
    public static final String VALID = "valid";
    public static final String INVALID = "token_invalid";
    public static final String EXPIRED = "token_expired";
    public static final String WRONG_ROOM = "token_wrong_room";

    /** The longest pass accepted, in bytes (a browser keeps cookies up to 4096). */
    public static final int MAX_TOKEN_BYTES = 4096;
    /** Why a pass is invalid when its kid is not among the keys: fetch them again. */
    public static final String UNKNOWN_KID = "unknown kid";

    private static final ThreadLocal<Signature> VERIFIER = ThreadLocal.withInitial(() -> {
        try {
            return Signature.getInstance("Ed25519");
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JDK has no Ed25519 (Java 15 or later has)", e);
        }
    });
    private static final String ISSUER = "usher";
    private static final String ALG = "EdDSA";
    private static final String ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    // The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410), before the 32 key bytes.
    private static final byte[] SPKI_PREFIX = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};

    /**
     * A verdict: {@code verdict} is one of the four; for a valid pass,
     * {@code visitor}, {@code room}, {@code expiresAt} and {@code issuedAt}
     * (null without iat); for an invalid one, {@code reason}.
     */
    public record Verdict(String verdict, String reason, String visitor, String room, Instant expiresAt, Instant issuedAt) {
        static Verdict of(String verdict, String reason) {
            return new Verdict(verdict, reason, null, null, null, null);
        }

        /** valid reports whether the verdict is "valid". */
        public boolean valid() {
            return VALID.equals(verdict);
        }
    }

    /**
     * A pass whose signature checked out, not yet judged for a room and a
     * time: what a cache may keep while {@code key} is still its kid's.
     */
    public record Opened(String kid, PublicKey key, Object iss, Object sub, List<String> auds, Long exp, Long nbf, Long iat) {}

    /**
     * decode reads strict base64url without padding: the one canonical
     * spelling of the bytes (no "=", no "+" or "/", the last character's
     * unused bits zero), as Go's base64.RawURLEncoding.Strict(). null when
     * it is not.
     */
    public static byte[] decode(String segment) {
        for (int k = 0; k < segment.length(); k++) {
            char c = segment.charAt(k);
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return null;
        }
        int rest = segment.length() % 4;
        if (rest == 1) return null;
        if (rest != 0) {
            int last = ALPHABET.indexOf(segment.charAt(segment.length() - 1));
            if ((last & (rest == 2 ? 0x0f : 0x03)) != 0) return null;
        }
        try {
            return Base64.getUrlDecoder().decode(segment);
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    /**
     * keysFromJwks returns the Ed25519 verification keys of a JSON Web Key
     * Set (parsed by {@link Json}) by kid. Keys of another type, curve,
     * algorithm or use are left out, and so is a kid seen before.
     */
    public static Map<String, PublicKey> keysFromJwks(Object jwks) {
        Map<String, PublicKey> keys = new HashMap<>();
        Map<String, Object> set = Json.object(jwks);
        if (set == null || !(set.get("keys") instanceof List<?> list)) return keys;
        for (Object o : list) {
            Map<String, Object> k = Json.object(o);
            if (k == null || !(k.get("kid") instanceof String kid) || keys.containsKey(kid)) continue;
            if (!"OKP".equals(k.get("kty")) || !"Ed25519".equals(k.get("crv")) || !(k.get("x") instanceof String x)) continue;
            if ((k.containsKey("alg") && !ALG.equals(k.get("alg"))) || (k.containsKey("use") && !"sig".equals(k.get("use")))) continue;
            byte[] raw = decode(x);
            if (raw == null || raw.length != 32) continue;
            PublicKey key = publicKey(raw);
            if (key != null) keys.put(kid, key);
        }
        return keys;
    }

    /** publicKey makes the JDK's Ed25519 key of 32 raw bytes (RFC 8032), or null. */
    public static PublicKey publicKey(byte[] raw) {
        byte[] der = new byte[SPKI_PREFIX.length + raw.length];
        System.arraycopy(SPKI_PREFIX, 0, der, 0, SPKI_PREFIX.length);
        System.arraycopy(raw, 0, der, SPKI_PREFIX.length, raw.length);
        try {
            return KeyFactory.getInstance("Ed25519").generatePublic(new X509EncodedKeySpec(der));
        } catch (Exception e) {
            return null;
        }
    }

    private static Object parseObject(byte[] bytes) {
        if (bytes == null) return null;
        try {
            return Json.object(Json.parse(bytes));
        } catch (Json.ParseException e) {
            return null;
        }
    }

    // A NumericDate's whole seconds, truncated as Go's jwt.NumericDate keeps
    // it; null when absent or JSON null. Throws for a non-number.
    private static final class NotNumber extends Exception {
        private static final long serialVersionUID = 1L;
        NotNumber() {
            super(null, null, false, false);
        }
    }

    private static Long seconds(Object v) throws NotNumber {
        if (v == null || v == Json.NULL) return null;
        if (v instanceof Double d) return (long) Math.floor(d);
        throw new NotNumber();
    }

    private static boolean stringOrNull(Object v) {
        return v == null || v == Json.NULL || v instanceof String;
    }

    /**
     * verify checks token as a pass for room at nowMs (milliseconds since the
     * epoch), with keyFor giving the key of a kid (null if unknown). A bad
     * signature or a malformed token is invalid whatever else is wrong; then
     * a wrong room wins over an expiry. The reason is {@link #UNKNOWN_KID}
     * when only the key was missing.
     */
    public static Verdict verify(String token, String room, Function<String, PublicKey> keyFor, long nowMs) {
        Object opened = open(token, keyFor);
        return opened instanceof Opened o ? judge(o, room, nowMs) : (Verdict) opened;
    }

    /**
     * open does what verify does before the clock and the room count:
     * decoding and the signature, the costly part. It returns a Verdict for
     * a token that is invalid whatever the room and time, else the signed
     * claims as an {@link Opened}.
     */
    public static Object open(String token, Function<String, PublicKey> keyFor) {
        if (token == null || token.length() > MAX_TOKEN_BYTES) return Verdict.of(INVALID, "malformed");
        int first = token.indexOf('.');
        int second = first < 0 ? -1 : token.indexOf('.', first + 1);
        if (first < 0 || second < 0 || token.indexOf('.', second + 1) >= 0) return Verdict.of(INVALID, "malformed");
        Map<String, Object> header = Json.object(parseObject(decode(token.substring(0, first))));
        Map<String, Object> claims = Json.object(parseObject(decode(token.substring(first + 1, second))));
        byte[] signature = decode(token.substring(second + 1));
        if (header == null || claims == null || signature == null) return Verdict.of(INVALID, "malformed");
        if (!ALG.equals(header.get("alg"))) return Verdict.of(INVALID, "alg");

        // Claim types, as Go's decoder checks them before anything else.
        Object iss = claims.get("iss");
        Object sub = claims.get("sub");
        Object aud = claims.get("aud");
        Long exp, nbf, iat;
        try {
            exp = seconds(claims.get("exp"));
            nbf = seconds(claims.get("nbf"));
            iat = seconds(claims.get("iat"));
        } catch (NotNumber e) {
            return Verdict.of(INVALID, "malformed");
        }
        List<String> auds;
        if (aud instanceof String a) {
            auds = List.of(a);
        } else if (aud == null || aud == Json.NULL) {
            auds = List.of();
        } else if (aud instanceof List<?> l && l.stream().allMatch(x -> x instanceof String)) {
            auds = l.stream().map(x -> (String) x).toList();
        } else {
            return Verdict.of(INVALID, "malformed");
        }
        if (!stringOrNull(iss) || !stringOrNull(sub) || !stringOrNull(claims.get("jti"))) return Verdict.of(INVALID, "malformed");

        if (!(header.get("kid") instanceof String kid)) return Verdict.of(INVALID, "kid");
        PublicKey key = keyFor.apply(kid);
        if (key == null) return Verdict.of(INVALID, UNKNOWN_KID);
        boolean ok = false;
        if (signature.length == 64) {
            try {
                Signature v = VERIFIER.get();
                v.initVerify(key);
                v.update(token.substring(0, second).getBytes(StandardCharsets.ISO_8859_1));
                ok = v.verify(signature);
            } catch (Exception e) {
                ok = false;
            }
        }
        if (!ok) return Verdict.of(INVALID, "signature");
        return new Opened(kid, key, iss, sub, auds, exp, nbf, iat);
    }

    /** judge gives the verdict on claims open returned, for room at nowMs. */
    public static Verdict judge(Opened c, String room, long nowMs) {
        if (c.exp() == null || (c.nbf() != null && nowMs < c.nbf() * 1000)) return Verdict.of(INVALID, "claims");
        if (!ISSUER.equals(c.iss()) || !(c.sub() instanceof String sub) || sub.isEmpty()) return Verdict.of(INVALID, "claims");
        if (c.auds().isEmpty() || (c.auds().size() == 1 && c.auds().get(0).isEmpty())) return Verdict.of(INVALID, "claims");
        if (!c.auds().contains(room)) return Verdict.of(WRONG_ROOM, null);
        if (!(nowMs < c.exp() * 1000)) return Verdict.of(EXPIRED, null);
        return new Verdict(VALID, null, sub, room, Instant.ofEpochSecond(c.exp()),
                c.iat() == null ? null : Instant.ofEpochSecond(c.iat()));
    }

    /**
     * renewalDue reports whether a valid pass has used half its life at
     * nowMs, measured from iat to exp: usher is then asked for a fresh one.
     * A pass without iat is always due (usher decides).
     */
    public static boolean renewalDue(Verdict pass, long nowMs) {
        if (pass.issuedAt() == null) return true;
        long exp = pass.expiresAt().toEpochMilli();
        return exp - nowMs < (exp - pass.issuedAt().toEpochMilli()) / 2.0;
    }

    /**
     * claims returns the claims of a token without verifying anything (null
     * if it has none): for a pass usher itself just handed over.
     */
    public static Map<String, Object> claims(String token) {
        if (token == null) return null;
        String[] parts = token.split("\\.", -1);
        return parts.length == 3 ? Json.object(parseObject(decode(parts[1]))) : null;
    }
}
