<?php

declare(strict_types=1);

namespace Usher\Connector;

/**
 * The JWKS cache: usher's public keys, fetched once, kept for the max-age
 * usher serves them with, and fetched again when a pass names a kid the
 * set lacks, at most every refetchAfterMs. PHP forgets everything between
 * requests, so the set is kept in a file (one per JWKS URL, written
 * atomically) that every worker of the site shares, with a lock so that
 * one fetch runs at a time; without a file, in memory for the process.
 */
final class KeySet
{
    /** What usher serves: public, max-age=300. */
    public const DEFAULT_MAX_AGE_MS = 300_000;

    /** @var callable(): array{jwks: mixed, maxAgeMs: ?int} */
    private $load;
    /** @var callable(): (int|float) */
    private $now;
    /** @var array<string, string>|null kid → 32 key bytes, once a fetch succeeded */
    private ?array $keys = null;
    private float $freshUntil = 0;
    private float $fetchedAt = -INF; // last attempt, successful or not
    private ?string $error = null; // why the last attempt failed
    /** Fetches this process made. */
    public int $fetches = 0;

    /**
     * @param callable(): array{jwks: mixed, maxAgeMs: ?int} $load fetches the JWKS or throws.
     * @param callable(): (int|float) $now the clock, in milliseconds.
     * @param int $refetchAfterMs the least time between two fetches made for an unknown
     *     kid, so that passes with made-up kids cannot make the site hammer usher.
     * @param int $maxAgeMs the longest a set is kept (the JWKS's max-age, capped).
     * @param string|null $file where the set is kept between requests; null: memory only.
     */
    public function __construct(
        callable $load,
        callable $now,
        public int $refetchAfterMs = 5000,
        private int $maxAgeMs = self::DEFAULT_MAX_AGE_MS,
        private ?string $file = null,
    ) {
        $this->load = $load;
        $this->now = $now;
    }

    /** get returns the key of kid in the set held now, or null. */
    public function get(string $kid): ?string
    {
        return $this->keys[$kid] ?? null;
    }

    /** lastError is why the last fetch failed (null after a success). */
    public function lastError(): ?string
    {
        return $this->error;
    }

    /** replace sets the keys held, as a fetch would (tests, benchmarks). */
    public function replace(array $keys): void
    {
        $this->keys = $keys;
        $this->freshUntil = INF;
    }

    /**
     * ready returns once a set is held, fetching it when there is none or
     * it is stale (a failed refresh keeps the stale set). Without any set
     * it throws when the fetch fails, and within a second of a failure
     * without fetching again.
     */
    public function ready(): void
    {
        $now = ($this->now)();
        if ($this->keys === null || $now >= $this->freshUntil) {
            $this->read();
        }
        if ($this->keys !== null) {
            // Stale: fetched again, at most once a second (or every
            // refetchAfterMs) while usher does not answer; a failure keeps
            // the stale set, and lastError says why.
            if ($now >= $this->freshUntil && $now - $this->fetchedAt >= max(1000, $this->refetchAfterMs)) {
                $this->fetch();
            }
            return;
        }
        // Never had one: a failure within the last second is the answer,
        // so that a usher that is down is not asked once per request.
        if ($this->error !== null && $now - $this->fetchedAt < 1000) {
            throw new UsherException($this->error);
        }
        if (!$this->fetch()) {
            throw new UsherException((string) $this->error);
        }
    }

    /**
     * refetch fetches the set again for a pass whose kid is unknown, unless
     * one was fetched within refetchAfterMs. It returns whether a fetch was
     * made (here or by another worker meanwhile) and succeeded.
     */
    public function refetch(): bool
    {
        $this->read();
        if (($this->now)() - $this->fetchedAt < $this->refetchAfterMs) {
            return false;
        }
        return $this->fetch();
    }

    // fetch loads the set, one worker at a time: one that waited for the
    // lock takes what the other fetched.
    private function fetch(): bool
    {
        $started = ($this->now)();
        $lock = null;
        if ($this->file !== null) {
            $lock = @fopen($this->file . '.lock', 'c');
            if ($lock !== false) {
                flock($lock, LOCK_EX);
                $before = $this->fetchedAt;
                $this->read();
                if ($this->fetchedAt > $before && $this->fetchedAt >= $started - 1000) {
                    flock($lock, LOCK_UN);
                    fclose($lock);
                    return $this->error === null;
                }
            }
        }
        try {
            $this->fetchedAt = ($this->now)();
            $this->fetches++;
            try {
                $loaded = ($this->load)();
                $keys = Pass::keysFromJwks($loaded['jwks']);
                if (count($keys) === 0) {
                    throw new UsherException('usher: the JWKS holds no Ed25519 key');
                }
                $this->keys = $keys;
                $age = $loaded['maxAgeMs'] ?? null;
                $this->freshUntil = ($this->now)() + ($age === null ? $this->maxAgeMs : min($age, $this->maxAgeMs));
                $this->error = null;
            } catch (\Throwable $e) {
                $this->error = $e->getMessage();
            }
            $this->write();
            return $this->error === null;
        } finally {
            if (is_resource($lock)) {
                flock($lock, LOCK_UN);
                fclose($lock);
            }
        }
    }

    private function read(): void
    {
        if ($this->file === null) {
            return;
        }
        $raw = @file_get_contents($this->file);
        $s = $raw === false ? null : json_decode($raw, true);
        if (!is_array($s) || !isset($s['fetched_at']) || $s['fetched_at'] <= $this->fetchedAt) {
            return;
        }
        $keys = [];
        foreach ((array) ($s['keys'] ?? []) as $kid => $x) {
            $b = base64_decode((string) $x, true);
            if ($b !== false && strlen($b) === SODIUM_CRYPTO_SIGN_PUBLICKEYBYTES) {
                $keys[(string) $kid] = $b;
            }
        }
        $this->keys = count($keys) > 0 ? $keys : $this->keys;
        $this->freshUntil = (float) ($s['fresh_until'] ?? 0);
        $this->fetchedAt = (float) $s['fetched_at'];
        $this->error = $s['error'] ?? null;
    }

    private function write(): void
    {
        if ($this->file === null) {
            return;
        }
        $s = json_encode([
            'keys' => array_map('base64_encode', $this->keys ?? []),
            'fresh_until' => $this->freshUntil,
            'fetched_at' => $this->fetchedAt,
            'error' => $this->error,
        ]);
        $tmp = $this->file . '.' . getmypid() . '.tmp';
        if (@file_put_contents($tmp, $s) !== false) {
            @rename($tmp, $this->file);
        }
    }

    /** maxAgeMs reads Cache-Control's max-age, in milliseconds (null if none). */
    public static function maxAgeMs(?string $cacheControl): ?int
    {
        if ($cacheControl !== null && preg_match('/(?:^|,)\s*max-age\s*=\s*"?(\d+)"?\s*(?:,|$)/i', $cacheControl, $m) === 1) {
            return (int) $m[1] * 1000;
        }
        return null;
    }
}
