<?php

declare(strict_types=1);

// The PHP connector's tests, in plain PHP: the conformance table
// (connectors/testdata/vectors.json), the pure parts, and the PSR-15
// middleware and the plain-PHP gate in front of a site under `php -S`
// against a live usher (live.php).
//
//   php tests/run.php
//
// go test ./cmd/usher -run TestConnectorPHP starts a usher auth built from
// the tree for the live tests; without it they skip, except under CI.

use Usher\Connector\Gate;
use Usher\Connector\KeySet;
use Usher\Connector\Pass;

require __DIR__ . '/../autoload.php';
require __DIR__ . '/T.php';

if (!extension_loaded('sodium')) {
    fwrite(STDERR, "ext-sodium is missing\n");
    exit(1);
}

$table = json_decode((string) file_get_contents(__DIR__ . '/../../testdata/vectors.json'), false, 512, JSON_THROW_ON_ERROR);

T::test('the table is one this connector reads', function () use ($table) {
    T::eq($table->alg, 'EdDSA', 'alg');
    T::eq($table->issuer, 'usher', 'issuer');
    T::eq($table->leeway_seconds, 0, 'the connector has no clock-skew allowance, as Go');
    T::eq($table->max_token_bytes, Pass::MAX_TOKEN_BYTES, 'max_token_bytes');
    T::check(count($table->cases) >= 40, 'only ' . count($table->cases) . ' cases');
});

function ms(string $rfc3339): float
{
    $d = DateTimeImmutable::createFromFormat('Y-m-d\TH:i:s.v\Z', $rfc3339, new DateTimeZone('UTC'))
        ?: new DateTimeImmutable($rfc3339);
    return (float) $d->format('Uv');
}

// gateFor returns a Gate whose JWKS comes from the case: jwks at first,
// jwks_refetched on any later fetch.
function gateFor(stdClass $c, int &$fetches): Gate
{
    $now = ms($c->now);
    $g = new Gate(['url' => 'http://127.0.0.1:9', 'room' => $c->room, 'now' => fn () => $now, 'logger' => null, 'cacheFile' => null]);
    $g->setKeys(new KeySet(function () use ($c, &$fetches) {
        return ['jwks' => $fetches++ === 0 ? $c->jwks : ($c->jwks_refetched ?? $c->jwks), 'maxAgeMs' => 300_000];
    }, fn () => $now, 0));
    return $g;
}

foreach ($table->cases as $c) {
    T::test("vector {$c->name}", function () use ($c) {
        $fetches = 0;
        $g = gateFor($c, $fetches);
        $got = $g->verify($c->token, $c->room);
        T::eq($got['verdict'], $c->verdict, "{$c->name}: " . ($c->about ?? '') . ' (reason ' . ($got['reason'] ?? '') . ')');
        if ($c->verdict === Pass::VALID) {
            T::eq($got['visitor'], $c->visitor, 'visitor');
            T::eq(gmdate('Y-m-d\TH:i:s\Z', $got['expiresAt']), $c->expires_at, 'expires_at');
            T::eq($got['room'], $c->room, 'room');
        }
        T::eq($fetches, isset($c->jwks_refetched) ? 2 : 1, 'fetches (a kid the first JWKS lacks fetches it again, once)');
        T::eq($g->verify($c->token, $c->room), $got, 'the same the second time');
        $keys = Pass::keysFromJwks($c->jwks_refetched ?? $c->jwks);
        T::eq(Pass::verify($c->token, $c->room, fn ($kid) => $keys[$kid] ?? null, ms($c->now))['verdict'], $c->verdict, 'Pass::verify alone');
    });
}

T::test('a kid the first JWKS lacks is invalid without the refetch', function () use ($table) {
    $c = array_values(array_filter($table->cases, fn ($v) => $v->name === 'rotated_key'))[0];
    $keys = Pass::keysFromJwks($c->jwks);
    T::eq(Pass::verify($c->token, $c->room, fn ($kid) => $keys[$kid] ?? null, ms($c->now)), ['verdict' => Pass::INVALID, 'reason' => Pass::UNKNOWN_KID], 'verdict');
});

T::test('passFrom: the Authorization header wins, else the cookie', function () {
    $cases = [
        [null, null, ''],
        ['Bearer abc', 'usher_pass=def', 'abc'],
        ['bearer  abc ', null, 'abc'],
        ['BEARER abc', null, 'abc'],
        ['Bearer ', 'usher_pass=def', 'def'],
        ['Bearer  ', 'usher_pass=def', ''],
        ['Basic dXNlcg==', 'usher_pass=def', 'def'],
        [null, 'a=1; usher_pass=def; b=2', 'def'],
        [null, 'usher_pass="def"', 'def'],
        [null, 'usher_pass=first; usher_pass=second', 'first'],
        [null, 'xusher_pass=no', ''],
    ];
    foreach ($cases as [$auth, $cookie, $want]) {
        T::eq(Gate::passFrom($auth, $cookie), $want, "Authorization $auth, Cookie $cookie");
    }
});

T::test('wantsJSON: application/json listed before any text/html', function () {
    T::eq(Gate::wantsJSON('application/json'), true, 'json');
    T::eq(Gate::wantsJSON('application/json;q=0.9, text/html'), true, 'json first');
    T::eq(Gate::wantsJSON('text/html, application/json'), false, 'html first');
    T::eq(Gate::wantsJSON('*/*'), false, '*/*');
    T::eq(Gate::wantsJSON(null), false, 'none');
});

T::test('renewalDue: once half the pass\'s life, iat to exp, is used', function () {
    $p = ['issuedAt' => 0, 'expiresAt' => 300];
    T::eq(Pass::renewalDue($p, 149_999), false, 'before half');
    T::eq(Pass::renewalDue($p, 150_000), false, 'at half');
    T::eq(Pass::renewalDue($p, 150_001), true, 'after half');
    T::eq(Pass::renewalDue(['issuedAt' => null, 'expiresAt' => 300], 0), true, 'no iat');
});

T::test('maxAgeMs reads Cache-Control', function () {
    T::eq(KeySet::maxAgeMs('public, max-age=300'), 300_000, '300');
    T::eq(KeySet::maxAgeMs('max-age=0'), 0, '0');
    T::eq(KeySet::maxAgeMs('no-store'), null, 'no-store');
    T::eq(KeySet::maxAgeMs('s-maxage=10'), null, 's-maxage');
    T::eq(KeySet::maxAgeMs(null), null, 'none');
});

T::test('toUsher: what a client sent that usher auth may read', function () {
    foreach (['Cookie', 'Authorization', 'Accept', 'Accept-Language', 'Usher-Wait', 'Usher-Shown', 'Usher-Challenge', 'Usher-Bypass', 'User-Agent'] as $h) {
        T::eq(Gate::toUsher($h), true, $h);
    }
    foreach (['Host', 'Connection', 'Content-Length', 'X-Forwarded-For', 'X-Forwarded-Uri', 'X-Original-URI', 'X-Real-IP',
        'Forwarded', 'Usher-Visitor', 'Usher-Room', 'Usher-Pass', 'Usher-Release', 'X_Real_IP', 'Upgrade'] as $h) {
        T::eq(Gate::toUsher($h), false, $h);
    }
});

T::test('normalize: pairs, a header map, an absolute URL', function () {
    $r = Gate::normalize(['target' => 'https://shop.test/a/b?c=d', 'headers' => ['Authorization' => 'Bearer p', 'Set-Cookie' => ['x', 'y']]]);
    T::eq([$r['target'], $r['host'], $r['scheme']], ['/a/b?c=d', 'shop.test', 'https'], 'target, host, scheme');
    T::eq($r['headers'], [['Authorization', 'Bearer p'], ['Set-Cookie', 'x'], ['Set-Cookie', 'y']], 'headers');
    T::eq(Gate::waitMs(Gate::normalize(['headers' => [['Usher-Wait', '10']]])), 10_000, 'Usher-Wait');
    T::eq(Gate::waitMs(Gate::normalize(['headers' => [['Usher-Wait', '99']]])), 0, 'Usher-Wait over 20');
});

T::test('isOwn: usher\'s routes are /_usher and below', function () {
    T::eq(Gate::isOwn('/_usher/pow.js'), true, '/_usher/pow.js');
    T::eq(Gate::isOwn('/_usher'), true, '/_usher');
    T::eq(Gate::isOwn('/_usher?x'), true, '/_usher?x');
    T::eq(Gate::isOwn('/_usherx'), false, '/_usherx');
    T::eq(Gate::isOwn('/shop/_usher/'), false, '/shop/_usher/');
});

// A JWKS cache over a loader that counts and can fail, on a settable clock,
// kept in a file as a site's workers share it.
final class Cache
{
    public float $now = 0;
    public bool $fail = false;
    public int $loads = 0;
    public KeySet $keys;

    public function __construct(?string $file = null, int $maxAgeMs = KeySet::DEFAULT_MAX_AGE_MS)
    {
        $jwks = json_decode('{"keys":[{"kty":"OKP","crv":"Ed25519","x":"ExXeCW-EvMqnT6YpJEQHVVx1pX4iJO-bakJpLoq7CDE","kid":"a","alg":"EdDSA","use":"sig"}]}');
        $this->keys = $this->with($file, $maxAgeMs, $jwks);
    }

    public function with(?string $file, int $maxAgeMs, mixed $jwks): KeySet
    {
        return new KeySet(function () use ($jwks) {
            $this->loads++;
            if ($this->fail) {
                throw new RuntimeException('down');
            }
            return ['jwks' => $jwks, 'maxAgeMs' => 60_000];
        }, fn () => $this->now, 5000, $maxAgeMs, $file);
    }
}

T::test('KeySet: one fetch, then the cache until max-age', function () {
    $c = new Cache();
    $c->keys->ready();
    $c->keys->ready();
    T::eq($c->loads, 1, 'loads');
    T::check($c->keys->get('a') !== null, 'the key');
    $c->now += 59_999;
    $c->keys->ready();
    T::eq($c->loads, 1, 'fresh for the JWKS\'s max-age');
    $c->now += 1;
    $c->keys->ready();
    T::eq($c->loads, 2, 'stale: fetched again');
});

T::test('KeySet: a refetch for an unknown kid at most every refetchAfterMs', function () {
    $c = new Cache();
    $c->keys->ready();
    T::eq($c->keys->refetch(), false, 'just fetched');
    $c->now += 5000;
    T::eq($c->keys->refetch(), true, 'after refetchAfterMs');
    T::eq($c->keys->refetch(), false, 'again at once');
    T::eq($c->loads, 2, 'loads');
});

T::test('KeySet: a failed fetch keeps the set held; without one, a failure is the answer for a second', function () {
    $c = new Cache();
    $c->fail = true;
    foreach ([1, 2] as $i) {
        try {
            $c->keys->ready();
            throw new AssertionError('ready without a set');
        } catch (Usher\Connector\UsherException $e) {
            T::eq($e->getMessage(), 'down', 'the loader\'s error');
        }
    }
    T::eq($c->loads, 1, 'not asked again within the second');
    $c->fail = false;
    $c->now += 5000;
    $c->keys->ready();
    $c->fail = true;
    $c->now += 60_000;
    $c->keys->ready(); // stale, and the refresh fails
    T::check($c->keys->get('a') !== null, 'the old set is kept');
    T::eq($c->keys->lastError(), 'down', 'lastError');
    $loads = $c->loads;
    $c->keys->ready();
    T::eq($c->loads, $loads, 'a usher that is down is not asked again on every request');
    $c->now += 5000;
    $c->keys->ready();
    T::eq($c->loads, $loads + 1, 'but again after refetchAfterMs');
});

T::test('KeySet: workers share the set and the refetch throttle through the file', function () {
    $file = tempnam(sys_get_temp_dir(), 'usher-jwks-test-');
    unlink($file);
    try {
        $a = new Cache($file);
        $a->keys->ready();
        $b = new Cache($file); // another worker, a later request
        $b->now = $a->now;
        $b->keys->ready();
        T::eq([$a->loads, $b->loads], [1, 0], 'the second worker read the file');
        T::check($b->keys->get('a') !== null, 'the key, from the file');
        T::eq($b->keys->refetch(), false, 'fetched by the other worker just now');
        $b->now += 5000;
        T::eq($b->keys->refetch(), true, 'after refetchAfterMs');
        $a->now = $b->now;
        T::eq($a->keys->refetch(), false, 'the first worker sees that fetch');
    } finally {
        @unlink($file);
        @unlink($file . '.lock');
    }
});

T::test('KeySet: a JWKS without an Ed25519 key is refused', function () {
    $c = new Cache();
    $k = $c->with(null, 1000, json_decode('{"keys":[{"kty":"RSA","kid":"r","n":"x","e":"AQAB"}]}'));
    try {
        $k->ready();
        throw new AssertionError('ready');
    } catch (Usher\Connector\UsherException $e) {
        T::check(str_contains($e->getMessage(), 'no Ed25519 key'), $e->getMessage());
    }
});

require __DIR__ . '/live.php';

T::summary();
