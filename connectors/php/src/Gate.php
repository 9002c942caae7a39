<?php

declare(strict_types=1);

namespace Usher\Connector;

/**
 * A Gate checks usher's passes for one usher auth: it decides on a request
 * the way usher's Go gate does, without asking usher while the request's
 * pass is valid and in the first half of its life, and through usher auth's
 * forward-auth protocol otherwise (connectors/README.md).
 *
 * check() decides and writes nothing (a request is ['method', 'target',
 * 'headers' => [[name, value]], 'ip', 'scheme']); handle() gates a plain
 * PHP request ($_SERVER, header(), echo); Middleware is the PSR-15 one.
 */
final class Gate
{
    public const PREFIX = '/_usher/';
    public const AUTH_PATH = '/_usher/auth';
    public const RELEASE_PATH = '/_usher/auth/release';
    public const JWKS_PATH = '/_usher/.well-known/jwks.json';

    public const PASS_COOKIE = 'usher_pass';
    public const PASS_HEADER = 'Usher-Pass';
    public const PASS_TTL_HEADER = 'Usher-Pass-TTL';
    public const VISITOR_HEADER = 'Usher-Visitor';
    public const ROOM_HEADER = 'Usher-Room';
    public const RELEASE_HEADER = 'Usher-Release';
    /** The Cache-Control of an answer that carries a pass or usher's cookies. */
    public const CREDENTIAL_CACHE = 'private, no-store';

    private const UNAVAILABLE_RETRY = 5; // seconds, as the nginx and Caddy edges answer
    private const UNAVAILABLE_JSON = '{"error":{"code":"unavailable","message":"a backend is unavailable; retry later"}}';
    private const UNAVAILABLE_HTML = "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        . "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        . "<meta http-equiv='refresh' content='5'>"
        . '<title>High demand</title></head>'
        . "<body style='font-family:system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;line-height:1.5'>"
        . '<h1>High demand</h1>'
        . '<p>So many people are visiting right now that we cannot let you in yet.'
        . ' This page tries again by itself every 5 seconds.</p>'
        . '</body></html>';
    public const NOT_FOUND_JSON = '{"error":{"code":"not_found","message":"no such route"}}';

    // Headers a client sends that never reach usher (internal/wire's header
    // table, "to usher").
    private const NOT_TO_USHER = [
        'host', 'connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailer',
        'transfer-encoding', 'upgrade', 'http2-settings', 'expect', 'content-length', 'content-type',
        'forwarded', 'x-real-ip', 'true-client-ip', 'x-client-ip', 'cf-connecting-ip', 'fastly-client-ip',
        'x-cluster-client-ip', 'x-proxyuser-ip', 'usher-visitor', 'usher-room', 'usher-pass', 'usher-pass-ttl',
        'usher-release',
    ];
    // Headers of usher's answer that the connector does not pass on.
    private const NOT_FROM_USHER = ['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date', 'server', 'trailer', 'upgrade'];

    public readonly Client $client;
    /** @var callable(array): string */
    private $room;
    /** @var callable(): (int|float) */
    private $now;
    private int $timeoutMs;
    private bool $failOpen;
    /** @var callable(string): void|null */
    private $logger;
    private KeySet $keys;
    /** @var array<string, int> what the gate did, in this process */
    public array $stats = ['offline' => 0, 'asked' => 0, 'renewed' => 0, 'unavailable' => 0, 'released' => 0];
    /** @var array<string, mixed>|null plain PHP: the admitted request's room, visitor, expiresAt, pass, renewed */
    public ?array $admission = null;

    /**
     * @param array<string, mixed> $o url (usher auth's address), room (an id, or a
     *     function of the request), and optionally timeoutMs, failOpen, jwksUrl,
     *     refetchAfterMs, cacheFile (null: memory only), logger, now (ms).
     */
    public function __construct(array $o)
    {
        if (!is_string($o['url'] ?? null)) {
            throw new \InvalidArgumentException("usher: option url is required (usher auth's address)");
        }
        $room = $o['room'] ?? null;
        if (is_string($room)) {
            if (preg_match('/^[a-z0-9][a-z0-9-]{0,63}$/D', $room) !== 1) {
                throw new \InvalidArgumentException("usher: room $room: want [a-z0-9][a-z0-9-]{0,63}");
            }
            $this->room = fn () => $room;
        } elseif (is_callable($room)) {
            $this->room = $room;
        } else {
            throw new \InvalidArgumentException('usher: option room is required: a room id, or a function of the request');
        }
        $this->client = new Client($o['url']);
        $this->now = $o['now'] ?? fn () => microtime(true) * 1000;
        $this->timeoutMs = $o['timeoutMs'] ?? 5000;
        $this->failOpen = ($o['failOpen'] ?? false) === true;
        $this->logger = array_key_exists('logger', $o) ? $o['logger'] : fn (string $m) => error_log($m);
        $jwksUrl = $o['jwksUrl'] ?? $this->client->base . self::JWKS_PATH;
        $jwksClient = isset($o['jwksUrl']) ? new Client($o['jwksUrl']) : $this->client;
        $jwksTarget = isset($o['jwksUrl']) ? '' : self::JWKS_PATH;
        $file = array_key_exists('cacheFile', $o) ? $o['cacheFile']
            : sys_get_temp_dir() . '/usher-jwks-' . substr(sha1($jwksUrl), 0, 16) . '.json';
        $this->keys = new KeySet(function () use ($jwksClient, $jwksTarget, $jwksUrl) {
            $a = $jwksClient->call($jwksTarget, 'GET', [['Accept', 'application/json']], $this->timeoutMs);
            if ($a['status'] !== 200) {
                throw new UsherException("usher: GET $jwksUrl: status {$a['status']}", $a['status']);
            }
            return ['jwks' => json_decode($a['body'], false, 64), 'maxAgeMs' => KeySet::maxAgeMs(Client::header($a['headers'], 'Cache-Control'))];
        }, $this->now, $o['refetchAfterMs'] ?? 5000, KeySet::DEFAULT_MAX_AGE_MS, $file);
    }

    public function keys(): KeySet
    {
        return $this->keys;
    }

    /** setKeys replaces the JWKS cache (tests, benchmarks). */
    public function setKeys(KeySet $k): void
    {
        $this->keys = $k;
    }

    /**
     * verify checks a pass for room offline, against usher's JWKS (fetched
     * when needed, and again when the pass names a kid it lacks). It throws
     * only when no JWKS could be had.
     *
     * @return array<string, mixed> Pass::verify's result
     */
    public function verify(string $token, string $room, int|float|null $nowMs = null): array
    {
        $nowMs ??= ($this->now)();
        $this->keys->ready();
        $get = fn (string $kid) => $this->keys->get($kid);
        $opened = Pass::open($token, $get);
        if (($opened['reason'] ?? null) === Pass::UNKNOWN_KID && $this->keys->refetch()) {
            $opened = Pass::open($token, $get);
        }
        return isset($opened['verdict']) ? $opened : Pass::judge($opened, $room, $nowMs);
    }

    /**
     * check decides on a request: ['method', 'target' (raw path and query),
     * 'headers' => [[name, value]], 'ip', 'scheme'].
     *
     * @param array<string, mixed> $rq
     * @return array<string, mixed> allowed, and room, visitor, expiresAt, pass, renewed,
     *     headers (to add), cacheControl; or status, headers, body (the whole answer).
     */
    public function check(array $rq): array
    {
        $rq = self::normalize($rq);
        $room = ($this->room)($rq);
        $now = ($this->now)();
        $token = self::passFrom(self::first($rq['headers'], 'Authorization'), self::first($rq['headers'], 'Cookie'));
        $pass = null; // valid offline, due for renewal
        if ($token !== '') {
            $v = null;
            try {
                $v = $this->verify($token, $room, $now);
            } catch (\Throwable $e) {
                $this->warn('usher: no JWKS (' . $e->getMessage() . '): usher is asked about every pass');
            }
            if (($v['verdict'] ?? null) === Pass::VALID) {
                if (!Pass::renewalDue($v, $now)) {
                    $this->stats['offline']++;
                    return self::allowed($v, $token, false, []);
                }
                $pass = $v;
            }
        }
        try {
            $this->stats['asked']++;
            $a = $this->client->call(self::AUTH_PATH, 'GET', self::forwarded($rq), $this->timeoutMs + self::waitMs($rq));
        } catch (UsherException $e) {
            return $this->unreachable($rq, $token, $pass, $e);
        }
        if ($a['status'] >= 200 && $a['status'] < 300) {
            return $this->passed($a, $rq, $room, $token, $pass);
        }
        $fresh = Client::header($a['headers'], self::PASS_HEADER);
        if ($a['status'] === 429 && $fresh !== null) {
            // A JSON client admitted by this very request: served at once, as
            // usher proxy does, with its pass and how long its slot lasts.
            $exp = Pass::claims($fresh)->exp ?? null;
            $ttl = max(0, (int) floor(((is_int($exp) || is_float($exp) ? $exp * 1000 : $now) - $now) / 1000));
            $headers = self::credentialHeaders($a['headers']);
            $headers[] = [self::PASS_TTL_HEADER, (string) $ttl];
            return self::allowed(self::passOf($fresh, $room, $a['headers']), $fresh, true, $headers);
        }
        if ($pass !== null && $a['status'] >= 500) {
            return $this->unreachable($rq, $token, $pass, new UsherException("usher: status {$a['status']}", $a['status']));
        }
        $out = array_values(array_filter($a['headers'], fn ($h) => self::fromUsher($h[0])));
        return ['allowed' => false, 'status' => $a['status'], 'headers' => $out, 'body' => $a['body']];
    }

    private function passed(array $a, array $rq, string $room, string $token, ?array $pass): array
    {
        $fresh = Client::header($a['headers'], self::PASS_HEADER);
        $visitor = Client::header($a['headers'], self::VISITOR_HEADER);
        $usherRoom = Client::header($a['headers'], self::ROOM_HEADER);
        if ($usherRoom !== null && $usherRoom !== $room) {
            $this->warn("usher: usher auth puts {$rq['target']} in room $usherRoom, the connector in $room: usher is asked about every pass");
        }
        if ($fresh !== null) {
            $this->stats['renewed']++;
            return self::allowed(self::passOf($fresh, $usherRoom ?? $room, $a['headers']), $fresh, true, self::credentialHeaders($a['headers']));
        }
        if ($pass !== null) {
            return self::allowed($pass, $token, false, []);
        }
        if ($visitor === null) {
            return ['allowed' => true, 'headers' => [], 'cacheControl' => null]; // an open path, or a bypass
        }
        return self::allowed(['room' => $usherRoom ?? $room, 'visitor' => $visitor, 'expiresAt' => null], $token === '' ? null : $token, false, []);
    }

    // unreachable decides when usher gave no usable answer: a pass valid
    // offline passes (its renewal is best effort), else fail open or closed.
    private function unreachable(array $rq, string $token, ?array $pass, UsherException $e): array
    {
        $this->stats['unavailable']++;
        $this->warn($e->getMessage() . ($pass !== null ? ' (a valid pass passes)' : ($this->failOpen ? ' (failing open)' : '')));
        if ($pass !== null) {
            return self::allowed($pass, $token, false, []);
        }
        if ($this->failOpen) {
            return ['allowed' => true, 'headers' => [], 'cacheControl' => null];
        }
        $json = self::wantsJSON(self::first($rq['headers'], 'Accept'));
        return [
            'allowed' => false,
            'status' => 503,
            'headers' => [
                ['Content-Type', $json ? 'application/json' : 'text/html; charset=utf-8'],
                ['Cache-Control', 'no-store'],
                ['Retry-After', (string) self::UNAVAILABLE_RETRY],
                ['Vary', 'Accept'],
            ],
            'body' => $json ? self::UNAVAILABLE_JSON : self::UNAVAILABLE_HTML,
        ];
    }

    /**
     * release ends the slot of the visitor whose pass the request carries,
     * after a purchase, so that the next visitor is admitted at once. It
     * returns the headers to add to the response (the pass cookie cleared)
     * and throws an UsherException when usher did not end it (the slot then
     * lapses after the room's active_ttl by itself).
     *
     * @param array<string, mixed> $rq
     * @return list<array{0: string, 1: string}>
     */
    public function release(array $rq): array
    {
        $rq = self::normalize($rq);
        $a = $this->client->call(self::RELEASE_PATH, 'POST', self::forwarded($rq), $this->timeoutMs);
        if ($a['status'] !== 204) {
            $code = json_decode($a['body'], true)['error']['code'] ?? null;
            throw new UsherException("usher: release: status {$a['status']}" . (is_string($code) ? " $code" : ''), $a['status'], is_string($code) ? $code : null);
        }
        $this->stats['released']++;
        $out = array_values(array_filter($a['headers'], fn ($h) => strcasecmp($h[0], 'Set-Cookie') === 0));
        $out[] = ['Cache-Control', self::CREDENTIAL_CACHE];
        return $out;
    }

    /**
     * relay asks usher for one of its own routes (/_usher/: the waiting
     * page's proof-of-work worker, the visitors' API) and returns its whole
     * answer, or null when the target may not be relayed: /_usher/auth*
     * (usher's question to edges) and targets usher would decode into
     * another path (escapes, dot segments, backslashes), which get a 404.
     *
     * @param array<string, mixed> $rq
     * @return array{status: int, headers: list<array{0: string, 1: string}>, body: string}
     */
    public function relay(array $rq, ?string $body): array
    {
        $rq = self::normalize($rq);
        $path = explode('?', $rq['target'], 2)[0];
        if (preg_match('#%|\\\\|//|/\.\.?(/|$)#', $path) === 1 || preg_match('#^/_usher/auth(/|$)#i', $path) === 1) {
            return ['status' => 404, 'headers' => [['Content-Type', 'application/json'], ['Cache-Control', 'no-store']], 'body' => self::NOT_FOUND_JSON];
        }
        $headers = array_values(array_filter($rq['headers'], fn ($h) => self::toUsher($h[0]) || strcasecmp($h[0], 'Content-Type') === 0));
        $headers[] = ['X-Forwarded-Host', $rq['host']];
        $headers[] = ['X-Forwarded-Proto', $rq['scheme']];
        if ($rq['ip'] !== null) {
            $headers[] = ['X-Forwarded-For', $rq['ip']];
        }
        try {
            $a = $this->client->call($rq['target'], $rq['method'], $headers, 30_000, $body);
        } catch (UsherException $e) {
            $this->warn($e->getMessage());
            return ['status' => 503, 'headers' => [['Content-Type', 'application/json'], ['Retry-After', '2']], 'body' => self::UNAVAILABLE_JSON];
        }
        $a['headers'] = array_values(array_filter($a['headers'], fn ($h) => self::fromUsher($h[0])));
        return $a;
    }

    // ---- plain PHP: $_SERVER in, header() and echo out ----

    /**
     * requestFromGlobals describes the request PHP is serving.
     *
     * @return array<string, mixed>
     */
    public static function requestFromGlobals(): array
    {
        $headers = [];
        if (function_exists('getallheaders')) {
            foreach (getallheaders() as $k => $v) {
                $headers[] = [(string) $k, (string) $v];
            }
        } else {
            foreach ($_SERVER as $k => $v) {
                if (str_starts_with($k, 'HTTP_')) {
                    $headers[] = [str_replace(' ', '-', ucwords(strtolower(str_replace('_', ' ', substr($k, 5))))), (string) $v];
                }
            }
        }
        $https = !empty($_SERVER['HTTPS']) && $_SERVER['HTTPS'] !== 'off';
        return [
            'method' => $_SERVER['REQUEST_METHOD'] ?? 'GET',
            'target' => $_SERVER['REQUEST_URI'] ?? '/',
            'headers' => $headers,
            'ip' => $_SERVER['REMOTE_ADDR'] ?? null,
            'scheme' => $https ? 'https' : 'http',
        ];
    }

    /**
     * handle gates the request PHP is serving. It returns true when the
     * request may be served ($this->admission names the visitor, the
     * renewed pass is on the response), false when it has been answered
     * (the waiting page, JSON, a refusal, or usher's own route): then stop.
     * An Usher-Release: 1 header the site sends ends the slot after the
     * response and clears the pass.
     */
    public function handle(): bool
    {
        $rq = self::requestFromGlobals();
        if (self::isOwn($rq['target'])) {
            $body = null;
            if (($rq['method'] !== 'GET' && $rq['method'] !== 'HEAD') || isset($_SERVER['CONTENT_LENGTH'])) {
                $body = (string) file_get_contents('php://input', false, null, 0, Client::MAX_ANSWER_BYTES);
            }
            self::emit($this->relay($rq, $body));
            return false;
        }
        $d = $this->check($rq);
        if (!$d['allowed']) {
            self::emit($d);
            return false;
        }
        $this->admission = ['room' => $d['room'] ?? null, 'visitor' => $d['visitor'] ?? null, 'expiresAt' => $d['expiresAt'] ?? null,
            'pass' => $d['pass'] ?? null, 'renewed' => $d['renewed'] ?? false];
        // The visitor and room as nginx and Caddy hand them to an origin.
        unset($_SERVER['HTTP_USHER_VISITOR'], $_SERVER['HTTP_USHER_ROOM']);
        if (($d['visitor'] ?? null) !== null) {
            $_SERVER['HTTP_USHER_VISITOR'] = $d['visitor'];
            $_SERVER['HTTP_USHER_ROOM'] = $d['room'];
        }
        foreach ($d['headers'] as [$k, $v]) {
            header("$k: $v", false);
        }
        $cache = $d['cacheControl'];
        if ($cache !== null) {
            header("Cache-Control: $cache");
        }
        $secure = $rq['scheme'] === 'https';
        $releasing = false;
        // guard applies what the answer needs once the site has set its
        // headers: Cache-Control, and Usher-Release, which clears the pass.
        $guard = function () use ($cache, $secure, &$releasing): void {
            $release = null;
            foreach (headers_list() as $line) {
                [$k, $v] = array_map('trim', explode(':', $line, 2)) + [1 => ''];
                if (strcasecmp($k, self::RELEASE_HEADER) === 0) {
                    $release = $v;
                }
            }
            header_remove(self::RELEASE_HEADER);
            if ($release !== null && preg_match('/^(1|true)$/i', $release) === 1) {
                $releasing = true;
                header_remove(self::PASS_HEADER);
                self::keepCookiesBut(self::PASS_COOKIE);
                header('Set-Cookie: ' . self::PASS_COOKIE . '=; Path=/; Max-Age=0; HttpOnly;' . ($secure ? ' Secure;' : '') . ' SameSite=Lax', false);
                header('Cache-Control: ' . self::CREDENTIAL_CACHE);
            } elseif ($cache === self::CREDENTIAL_CACHE || $releasing) {
                header('Cache-Control: ' . self::CREDENTIAL_CACHE);
            }
        };
        // The headers go out when the output starts, or, when all of it was
        // buffered, after the shutdown functions: the guard runs at either.
        header_register_callback($guard);
        register_shutdown_function(function () use ($guard, $rq, &$releasing) {
            if (!headers_sent()) {
                $guard();
            }
            if (!$releasing) {
                return;
            }
            // The answer first, then the release.
            while (ob_get_level() > 0) {
                ob_end_flush();
            }
            flush();
            if (function_exists('fastcgi_finish_request')) {
                fastcgi_finish_request();
            }
            try {
                $this->release($rq);
            } catch (UsherException $e) {
                $this->warn('usher: Usher-Release: ' . $e->getMessage());
            }
        });
        return true;
    }

    /**
     * releaseNow ends the slot of the visitor PHP is serving, after a
     * purchase, and clears the pass cookie on the response (unless headers
     * were sent). It throws an UsherException when usher did not end it.
     */
    public function releaseNow(): void
    {
        $headers = $this->release(self::requestFromGlobals());
        if (headers_sent()) {
            return;
        }
        header_remove(self::PASS_HEADER);
        self::keepCookiesBut(self::PASS_COOKIE);
        foreach ($headers as [$k, $v]) {
            header("$k: $v", strcasecmp($k, 'Cache-Control') === 0);
        }
        if ($this->admission !== null) {
            $this->admission['released'] = true;
        }
    }

    // keepCookiesBut drops the Set-Cookie headers that set the cookie name.
    private static function keepCookiesBut(string $name): void
    {
        $keep = [];
        foreach (headers_list() as $line) {
            if (stripos($line, 'Set-Cookie:') === 0 && !str_starts_with(ltrim(substr($line, 11)), $name . '=')) {
                $keep[] = $line;
            }
        }
        header_remove('Set-Cookie');
        foreach ($keep as $c) {
            header($c, false);
        }
    }

    /** emit writes a whole answer (status, headers, body) with header() and echo. */
    public static function emit(array $a): void
    {
        http_response_code($a['status']);
        foreach ($a['headers'] as [$k, $v]) {
            header("$k: $v", false);
        }
        header('Content-Length: ' . strlen($a['body']));
        echo $a['body'];
    }

    // ---- the protocol's pure parts ----

    /** @param array<string, mixed> $rq */
    public static function normalize(array $rq): array
    {
        $headers = [];
        foreach ($rq['headers'] ?? [] as $k => $v) {
            if (is_int($k) && is_array($v) && count($v) === 2) {
                $headers[] = [$v[0], (string) $v[1]];
            } else {
                foreach ((array) $v as $one) {
                    $headers[] = [(string) $k, (string) $one];
                }
            }
        }
        $target = (string) ($rq['target'] ?? '/');
        $host = self::first($headers, 'Host');
        $scheme = $rq['scheme'] ?? null;
        if (preg_match('#^[a-z][a-z0-9+.-]*://#i', $target) === 1) {
            $u = parse_url($target);
            $host ??= ($u['host'] ?? '') . (isset($u['port']) ? ':' . $u['port'] : '');
            $scheme ??= $u['scheme'] ?? null;
            $target = ($u['path'] ?? '/') . (isset($u['query']) ? '?' . $u['query'] : '');
        }
        return [
            'method' => $rq['method'] ?? 'GET',
            'target' => $target === '' ? '/' : $target,
            'headers' => $headers,
            'ip' => $rq['ip'] ?? null,
            'scheme' => $scheme ?? 'http',
            'host' => $host ?? '',
        ];
    }

    /** @param list<array{0: string, 1: string}> $headers */
    public static function first(array $headers, string $name): ?string
    {
        return Client::header($headers, $name);
    }

    private static function allowed(array $p, ?string $token, bool $renewed, array $headers): array
    {
        $credentials = $renewed;
        foreach ($headers as [$k]) {
            if (strcasecmp($k, 'Set-Cookie') === 0) {
                $credentials = true;
            }
        }
        $visitor = $p['visitor'] ?? null;
        if ($visitor !== null) {
            $headers[] = ['Vary', 'Cookie'];
            $headers[] = ['Vary', 'Authorization'];
        }
        return [
            'allowed' => true,
            'room' => $p['room'] ?? null,
            'visitor' => $visitor,
            'expiresAt' => $p['expiresAt'] ?? null,
            'pass' => $token,
            'renewed' => $renewed,
            'headers' => $headers,
            'cacheControl' => $credentials ? self::CREDENTIAL_CACHE : ($visitor !== null ? 'private' : null),
        ];
    }

    // passOf reads a pass usher just handed over (not verified: it is
    // usher's own answer on the connector's connection).
    private static function passOf(string $token, string $room, array $answer): array
    {
        $c = Pass::claims($token);
        $exp = $c->exp ?? null;
        return [
            'room' => $room,
            'visitor' => Client::header($answer, self::VISITOR_HEADER) ?? (is_string($c->sub ?? null) ? $c->sub : null),
            'expiresAt' => is_int($exp) || is_float($exp) ? (int) floor($exp) : null,
        ];
    }

    private static function credentialHeaders(array $answer): array
    {
        return array_values(array_filter($answer, fn ($h) => strcasecmp($h[0], 'Set-Cookie') === 0 || strcasecmp($h[0], self::PASS_HEADER) === 0));
    }

    /** toUsher reports whether a client's header name may be forwarded to usher. */
    public static function toUsher(string $name): bool
    {
        $n = strtolower($name);
        return !in_array($n, self::NOT_TO_USHER, true) && !str_starts_with($n, 'x-forwarded-') && !str_starts_with($n, 'x-original-') && !str_contains($n, '_');
    }

    /** fromUsher reports whether a header of usher's answer goes to the client. */
    public static function fromUsher(string $name): bool
    {
        return !in_array(strtolower($name), self::NOT_FROM_USHER, true);
    }

    /** wantsJSON reports whether Accept lists application/json before any text/html. */
    public static function wantsJSON(?string $accept): bool
    {
        foreach (explode(',', $accept ?? '') as $part) {
            $type = strtolower(trim(explode(';', $part)[0]));
            if ($type === 'text/html') {
                return false;
            }
            if ($type === 'application/json') {
                return true;
            }
        }
        return false;
    }

    /** isOwn reports whether a request target is usher's own route (/_usher/…). */
    public static function isOwn(string $target): bool
    {
        return $target === '/_usher' || str_starts_with($target, self::PREFIX) || str_starts_with($target, '/_usher?');
    }

    /**
     * passFrom returns the pass of a request: from Authorization: Bearer,
     * else the usher_pass cookie; '' for none. The header wins even when its
     * pass is bad, as in Go's gate.PassFrom.
     */
    public static function passFrom(?string $authorization, ?string $cookie): string
    {
        if ($authorization !== null && strlen($authorization) > 7 && strcasecmp(substr($authorization, 0, 7), 'bearer ') === 0) {
            return trim(substr($authorization, 7));
        }
        foreach (explode(';', $cookie ?? '') as $part) {
            $eq = strpos($part, '=');
            if ($eq === false || trim(substr($part, 0, $eq)) !== self::PASS_COOKIE) {
                continue;
            }
            $v = trim(substr($part, $eq + 1));
            if (strlen($v) > 1 && $v[0] === '"' && $v[-1] === '"') {
                $v = substr($v, 1, -1);
            }
            return $v;
        }
        return '';
    }

    // A poll may ask usher to hold it (Usher-Wait, up to 20 s).
    public static function waitMs(array $rq): int
    {
        $w = self::first($rq['headers'], 'Usher-Wait');
        return $w !== null && preg_match('/^\s*\d+\s*$/', $w) === 1 && (int) $w <= 20 ? (int) $w * 1000 : 0;
    }

    // forwarded is what usher auth is sent about rq.
    private static function forwarded(array $rq): array
    {
        $out = array_values(array_filter($rq['headers'], fn ($h) => self::toUsher($h[0])));
        $out[] = ['X-Forwarded-Method', $rq['method']];
        $out[] = ['X-Forwarded-Uri', $rq['target']];
        $out[] = ['X-Forwarded-Host', $rq['host']];
        $out[] = ['X-Forwarded-Proto', $rq['scheme']];
        if ($rq['ip'] !== null) {
            $out[] = ['X-Forwarded-For', $rq['ip']];
        }
        return $out;
    }

    private function warn(string $message): void
    {
        if ($this->logger !== null) {
            ($this->logger)($message);
        }
    }
}
