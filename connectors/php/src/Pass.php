<?php

declare(strict_types=1);

namespace Usher\Connector;

/**
 * Offline verification of usher's passes: EdDSA (Ed25519) JWS checked by
 * the rules of usher's internal/token ParsePass, which the Go gate runs,
 * with ext-sodium. No clock-skew allowance, as in Go. Pure: no I/O, no
 * clock of its own.
 */
final class Pass
{
    public const VALID = 'valid';
    public const INVALID = 'token_invalid';
    public const EXPIRED = 'token_expired';
    public const WRONG_ROOM = 'token_wrong_room';

    /** The longest pass accepted, in bytes (a browser keeps cookies up to 4096). */
    public const MAX_TOKEN_BYTES = 4096;
    /** Why a pass is invalid when its kid is not among the keys: fetch them again. */
    public const UNKNOWN_KID = 'unknown kid';

    private const ISSUER = 'usher';
    private const ALG = 'EdDSA';
    private const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    private const MAX_DEPTH = 512;

    /**
     * decode reads strict base64url without padding: the one canonical
     * spelling of the bytes (no "=", no "+" or "/", the last character's
     * unused bits zero), as Go's base64.RawURLEncoding.Strict(). null when
     * it is not.
     */
    public static function decode(string $segment): ?string
    {
        if (preg_match('/^[A-Za-z0-9_-]*$/D', $segment) !== 1) {
            return null;
        }
        $rest = strlen($segment) % 4;
        if ($rest === 1) {
            return null;
        }
        if ($rest !== 0) {
            $last = strpos(self::ALPHABET, $segment[strlen($segment) - 1]);
            if (($last & ($rest === 2 ? 0x0f : 0x03)) !== 0) {
                return null;
            }
        }
        $bytes = base64_decode(strtr($segment, '-_', '+/'), true);
        return $bytes === false ? null : $bytes;
    }

    /** json reads a JSON object (as \stdClass), or null when bytes are not one. */
    public static function json(?string $bytes): ?\stdClass
    {
        if ($bytes === null) {
            return null;
        }
        try {
            $v = json_decode($bytes, false, self::MAX_DEPTH, JSON_THROW_ON_ERROR);
        } catch (\JsonException) {
            return null;
        }
        return $v instanceof \stdClass ? $v : null;
    }

    /**
     * keysFromJwks returns the Ed25519 verification keys of a JSON Web Key
     * Set (decoded as objects) by kid: 32 raw bytes each. Keys of another
     * type, curve, algorithm or use are left out, and so is a kid seen before.
     *
     * @return array<string, string>
     */
    public static function keysFromJwks(mixed $jwks): array
    {
        $keys = [];
        if (!$jwks instanceof \stdClass || !isset($jwks->keys) || !is_array($jwks->keys)) {
            return $keys;
        }
        foreach ($jwks->keys as $k) {
            if (!$k instanceof \stdClass || !isset($k->kid) || !is_string($k->kid) || array_key_exists($k->kid, $keys)) {
                continue;
            }
            if (($k->kty ?? null) !== 'OKP' || ($k->crv ?? null) !== 'Ed25519' || !is_string($k->x ?? null)) {
                continue;
            }
            if ((property_exists($k, 'alg') && $k->alg !== self::ALG) || (property_exists($k, 'use') && $k->use !== 'sig')) {
                continue;
            }
            $x = self::decode($k->x);
            if ($x === null || strlen($x) !== SODIUM_CRYPTO_SIGN_PUBLICKEYBYTES) {
                continue;
            }
            $keys[$k->kid] = $x;
        }
        return $keys;
    }

    // A NumericDate's whole seconds, truncated as Go's jwt.NumericDate
    // keeps it; null when absent or JSON null; false when not a number.
    private static function seconds(\stdClass $c, string $name): int|float|null|false
    {
        if (!property_exists($c, $name) || $c->$name === null) {
            return null;
        }
        $v = $c->$name;
        if (is_int($v)) {
            return $v;
        }
        if (is_float($v) && is_finite($v)) {
            return floor($v);
        }
        return false;
    }

    /**
     * verify checks token as a pass for room at nowMs (milliseconds since
     * the epoch), with keyFor(kid) giving a kid's key (null if unknown). It
     * returns ['verdict' => 'valid', 'visitor', 'room', 'expiresAt',
     * 'issuedAt'] (seconds; issuedAt null without iat) or ['verdict',
     * 'reason']. A bad signature or a malformed token is invalid whatever
     * else is wrong; then a wrong room wins over an expiry. The reason is
     * UNKNOWN_KID when only the key was missing.
     *
     * @param callable(string): ?string $keyFor
     * @return array<string, mixed>
     */
    public static function verify(mixed $token, string $room, callable $keyFor, int|float $nowMs): array
    {
        $opened = self::open($token, $keyFor);
        return isset($opened['verdict']) ? $opened : self::judge($opened, $room, $nowMs);
    }

    /**
     * open does what verify does before the clock and the room count:
     * decoding and the signature. It returns ['verdict', 'reason'] for a
     * token that is invalid whatever the room and time, else the signed
     * claims ['kid', 'iss', 'sub', 'auds', 'exp', 'nbf', 'iat'].
     *
     * @param callable(string): ?string $keyFor
     * @return array<string, mixed>
     */
    public static function open(mixed $token, callable $keyFor): array
    {
        $invalid = fn (string $reason) => ['verdict' => self::INVALID, 'reason' => $reason];
        if (!is_string($token) || strlen($token) > self::MAX_TOKEN_BYTES) {
            return $invalid('malformed');
        }
        $parts = explode('.', $token);
        if (count($parts) !== 3) {
            return $invalid('malformed');
        }
        $header = self::json(self::decode($parts[0]));
        $claims = self::json(self::decode($parts[1]));
        $signature = self::decode($parts[2]);
        if ($header === null || $claims === null || $signature === null) {
            return $invalid('malformed');
        }
        if (($header->alg ?? null) !== self::ALG) {
            return $invalid('alg');
        }

        // Claim types, as Go's decoder checks them before anything else.
        $iss = $claims->iss ?? null;
        $sub = $claims->sub ?? null;
        $jti = $claims->jti ?? null;
        $aud = $claims->aud ?? null;
        $exp = self::seconds($claims, 'exp');
        $nbf = self::seconds($claims, 'nbf');
        $iat = self::seconds($claims, 'iat');
        $auds = is_string($aud) ? [$aud] : ($aud ?? []);
        $strings = is_array($auds) && array_reduce($auds, fn ($ok, $a) => $ok && is_string($a), true);
        if (($iss !== null && !is_string($iss)) || ($sub !== null && !is_string($sub)) || ($jti !== null && !is_string($jti))
            || !$strings || $exp === false || $nbf === false || $iat === false) {
            return $invalid('malformed');
        }

        $kid = $header->kid ?? null;
        if (!is_string($kid)) {
            return $invalid('kid');
        }
        $key = $keyFor($kid);
        if ($key === null) {
            return $invalid(self::UNKNOWN_KID);
        }
        $ok = false;
        if (strlen($signature) === SODIUM_CRYPTO_SIGN_BYTES) {
            try {
                $ok = sodium_crypto_sign_verify_detached($signature, $parts[0] . '.' . $parts[1], $key);
            } catch (\SodiumException) {
                $ok = false;
            }
        }
        if (!$ok) {
            return $invalid('signature');
        }
        return ['kid' => $kid, 'iss' => $iss, 'sub' => $sub, 'auds' => $auds, 'exp' => $exp, 'nbf' => $nbf, 'iat' => $iat];
    }

    /**
     * judge gives the verdict on claims open returned, for room at nowMs.
     *
     * @param array<string, mixed> $c
     * @return array<string, mixed>
     */
    public static function judge(array $c, string $room, int|float $nowMs): array
    {
        $invalid = ['verdict' => self::INVALID, 'reason' => 'claims'];
        if ($c['exp'] === null || ($c['nbf'] !== null && $nowMs < $c['nbf'] * 1000)) {
            return $invalid;
        }
        if ($c['iss'] !== self::ISSUER || !is_string($c['sub']) || $c['sub'] === '') {
            return $invalid;
        }
        if (count($c['auds']) === 0 || (count($c['auds']) === 1 && $c['auds'][0] === '')) {
            return $invalid;
        }
        if (!in_array($room, $c['auds'], true)) {
            return ['verdict' => self::WRONG_ROOM];
        }
        if (!($nowMs < $c['exp'] * 1000)) {
            return ['verdict' => self::EXPIRED];
        }
        return [
            'verdict' => self::VALID,
            'visitor' => $c['sub'],
            'room' => $room,
            'expiresAt' => (int) $c['exp'],
            'issuedAt' => $c['iat'] === null ? null : (int) $c['iat'],
        ];
    }

    /**
     * renewalDue reports whether a valid pass has used half its life at
     * nowMs, measured from iat to exp: usher is then asked for a fresh one.
     * A pass without iat is always due (usher decides).
     *
     * @param array<string, mixed> $pass
     */
    public static function renewalDue(array $pass, int|float $nowMs): bool
    {
        if ($pass['issuedAt'] === null) {
            return true;
        }
        $exp = $pass['expiresAt'] * 1000;
        return $exp - $nowMs < ($exp - $pass['issuedAt'] * 1000) / 2;
    }

    /** claims returns the claims of a token without verifying anything (null if it has none). */
    public static function claims(mixed $token): ?\stdClass
    {
        $parts = is_string($token) ? explode('.', $token) : [];
        return count($parts) === 3 ? self::json(self::decode($parts[1])) : null;
    }
}
