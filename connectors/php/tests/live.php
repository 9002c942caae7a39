<?php

declare(strict_types=1);

// The connector against a live usher auth, in front of a site under
// `php -S` (site.php): go test ./cmd/usher -run TestConnectorPHP starts one
// built from the tree and sets USHER_TEST_URL (usher auth),
// USHER_TEST_ADMIN_URL and USHER_TEST_ADMIN_KEY (its admin listener) and
// USHER_TEST_CONTROL (POST /rotate: a new signing key, usher auth
// restarted). Without them these tests skip, except under CI, where they
// fail.

use Usher\Connector\Client;
use Usher\Connector\Gate;
use Usher\Connector\Pass;

$usher = getenv('USHER_TEST_URL') ?: null;
$adminUrl = getenv('USHER_TEST_ADMIN_URL') ?: null;
$adminKey = getenv('USHER_TEST_ADMIN_KEY') ?: null;
$control = getenv('USHER_TEST_CONTROL') ?: null;
if ($usher === null || $adminUrl === null || $adminKey === null || $control === null) {
    if (getenv('CI')) {
        T::test('the connector against a live usher', function () {
            throw new AssertionError('USHER_TEST_URL, USHER_TEST_ADMIN_URL, USHER_TEST_ADMIN_KEY and USHER_TEST_CONTROL are unset under CI: run go test ./cmd/usher -run TestConnectorPHP');
        });
    } else {
        T::skip('the connector against a live usher', 'no usher: run go test ./cmd/usher -run TestConnectorPHP');
    }
    return;
}

// Jar keeps one client's cookies, as a browser would.
final class Jar
{
    /** @var array<string, string> */
    public array $cookies = [];

    public function take(array $headers): void
    {
        foreach ($headers as [$k, $v]) {
            if (strcasecmp($k, 'Set-Cookie') !== 0) {
                continue;
            }
            $parts = explode(';', $v);
            [$name, $value] = array_map('trim', explode('=', $parts[0], 2)) + [1 => ''];
            $expired = false;
            foreach (array_slice($parts, 1) as $a) {
                if (preg_match('/^\s*max-age=(0|-)/i', $a) === 1) {
                    $expired = true;
                }
            }
            if ($value === '' || $expired) {
                unset($this->cookies[$name]);
            } else {
                $this->cookies[$name] = $value;
            }
        }
    }

    public function get(string $name): ?string
    {
        return $this->cookies[$name] ?? null;
    }

    public function header(): string
    {
        $out = [];
        foreach ($this->cookies as $k => $v) {
            $out[] = "$k=$v";
        }
        return implode('; ', $out);
    }
}

final class Reply
{
    public function __construct(public int $status, public array $headers, public string $body)
    {
    }

    public function header(string $name): ?string
    {
        return Client::header($this->headers, $name);
    }

    /** all is every value of a header, joined with ", ". */
    public function all(string $name): string
    {
        return implode(', ', array_map(fn ($h) => $h[1], array_filter($this->headers, fn ($h) => strcasecmp($h[0], $name) === 0)));
    }

    public function json(): mixed
    {
        return json_decode($this->body, true);
    }
}

// visit asks the site for path as one client: its jar, its Accept, its
// Bearer token if any, its front door (PSR-15, or plain). Redirects are not
// followed.
function visit(string $base, string $path, ?Jar $jar = null, bool $json = false, ?string $bearer = null, string $method = 'GET', bool $plain = false): Reply
{
    $h = [['Accept', $json ? 'application/json' : 'text/html,application/xhtml+xml']];
    if ($jar !== null && count($jar->cookies) > 0) {
        $h[] = ['Cookie', $jar->header()];
    }
    if ($bearer !== null) {
        $h[] = ['Authorization', "Bearer $bearer"];
    }
    if ($plain) {
        $h[] = ['X-Site-Mode', 'plain'];
    }
    $a = (new Client($base))->call($path, $method, $h, 20_000, $method === 'POST' ? '' : null);
    $jar?->take($a['headers']);
    return new Reply($a['status'], $a['headers'], $a['body']);
}

function admin(string $method, string $path, array $body): void
{
    global $adminUrl, $adminKey;
    $a = (new Client($adminUrl))->call($path, $method, [['Authorization', "Bearer $adminKey"], ['Content-Type', 'application/json']], 10_000, json_encode($body));
    T::check(intdiv($a['status'], 100) === 2, "$method $path: {$a['status']} {$a['body']}");
}

function kidOf(string $pass): string
{
    return Pass::json(Pass::decode(explode('.', $pass)[0]))->kid;
}

function forge(string $pass): string
{
    [$h, $c, $s] = explode('.', $pass);
    $sig = Pass::decode($s);
    $sig[10] = chr(ord($sig[10]) ^ 1);
    return "$h.$c." . rtrim(strtr(base64_encode($sig), '+/', '-_'), '=');
}

function until(string $what, callable $cond, int $ms = 20_000): mixed
{
    $deadline = microtime(true) + $ms / 1000;
    for (;;) {
        $v = $cond();
        if ($v) {
            return $v;
        }
        if (microtime(true) > $deadline) {
            throw new RuntimeException("timed out waiting for $what");
        }
        usleep(100_000);
    }
}

function sleepUntil(float $ms): void
{
    $wait = $ms - microtime(true) * 1000;
    if ($wait > 0) {
        usleep((int) ($wait * 1000));
    }
}

// The site under php -S, on a free loopback port.
$dir = sys_get_temp_dir() . '/usher-php-test-' . getmypid();
@mkdir($dir);
$hits = "$dir/hits";
touch($hits);
$sock = stream_socket_server('tcp://127.0.0.1:0');
$port = (int) substr(strrchr(stream_socket_get_name($sock, false), ':'), 1);
fclose($sock);
$env = getenv() + ['USHER_TEST_HITS' => $hits, 'USHER_TEST_JWKS_CACHE' => "$dir/jwks.json"];
$env['USHER_TEST_HITS'] = $hits;
$env['USHER_TEST_JWKS_CACHE'] = "$dir/jwks.json";
$server = proc_open([PHP_BINARY, '-S', "127.0.0.1:$port", __DIR__ . '/site.php'], [0 => ['file', '/dev/null', 'r'], 1 => ['file', "$dir/server.log", 'a'], 2 => ['file', "$dir/server.log", 'a']], $pipes, null, $env);
register_shutdown_function(function () use ($server, $dir) {
    proc_terminate($server);
    proc_close($server);
    array_map('unlink', glob("$dir/*") ?: []);
    @rmdir($dir);
});
$s = "http://127.0.0.1:$port";
until('the site', function () use ($port) {
    $c = @fsockopen('127.0.0.1', $port, $errno, $errstr, 0.2);
    if ($c) {
        fclose($c);
    }
    return (bool) $c;
});
$hitCount = fn () => count(file($hits));
$gate = new Gate(['url' => $usher, 'room' => 'sale', 'refetchAfterMs' => 0, 'logger' => null, 'cacheFile' => null]);
$claims = fn (string $p) => Pass::claims($p);

// One visitor at a time in sale, admitted within 100 ms of a free slot;
// brief's slots last 3 s.
admin('PUT', '/api/v1/rooms/sale', ['max_active' => 1, 'interval_ms' => 100, 'admit_rate' => 100]);
admin('PUT', '/api/v1/rooms/brief', ['active_ttl_seconds' => 3, 'claim_window_seconds' => 3]);
$a = new Jar();
$b = new Jar();
$c = new Jar();
$p = ['A' => null, 'C' => null, 'D' => null, 'E' => null];

T::test('live: a browser is admitted at once, then passes offline', function () use ($s, $a, &$p, $gate, $claims) {
    $first = visit($s, '/shop/?seat=1', $a);
    T::eq($first->status, 303, "first visit: {$first->body}");
    T::eq($first->header('Location'), '/shop/?seat=1', 'Location');
    $p['A'] = $a->get('usher_pass');
    T::check($p['A'] !== null, 'the pass cookie, on the site\'s own domain');
    T::eq($gate->verify($p['A'], 'sale')['verdict'], Pass::VALID, 'offline');
    $page = visit($s, '/shop/?seat=1', $a);
    T::eq($page->status, 200, $page->body);
    $sub = $claims($p['A'])->sub;
    T::eq($page->json(), ['path' => '/shop/', 'visitor' => $sub, 'room' => 'sale', 'header' => $sub, 'mode' => 'psr15'], 'what the handler saw');
    T::eq($page->header('X-Test-Asked'), '0', 'a pass in the first half of its life is checked offline: usher is not asked');
    T::check(str_contains((string) $page->header('Cache-Control'), 'private'), 'Cache-Control ' . $page->header('Cache-Control'));
    T::check(str_contains($page->all('Vary'), 'Cookie'), 'Vary ' . $page->all('Vary'));
});

T::test('live: while the slot is taken, JSON clients get the protocol and browsers the waiting page', function () use ($s, $b, $c, $hitCount) {
    $hits = $hitCount();
    $json = visit($s, '/shop/items', $b, true);
    T::eq($json->status, 429, $json->body);
    T::check((int) $json->header('Retry-After') >= 1, 'Retry-After');
    $entry = $json->json();
    T::eq($entry['state'], 'waiting', 'state');
    T::eq($entry['position'], 1, 'position');
    T::check(isset($entry['ticket']) && $b->get('usher_ticket_sale') !== null && $b->get('usher_vid') !== null, 'the ticket, in the body and the cookie');
    $page = visit($s, '/shop/', $c);
    T::eq($page->status, 429, 'the waiting page');
    T::check(str_starts_with((string) $page->header('Content-Type'), 'text/html'), 'Content-Type');
    T::check(str_contains($page->body, 'id="usher-state"'), 'the waiting page\'s state');
    T::check(str_contains((string) $page->header('Cache-Control'), 'no-store'), 'no-store');
    T::eq($hitCount(), $hits, 'the site saw none of them');
});

T::test('live offline: another room, expired, forged, alg none', function () use ($s, &$p, $gate, $claims, $hitCount) {
    $exp = $claims($p['A'])->exp;
    T::eq($gate->verify($p['A'], 'brief')['verdict'], Pass::WRONG_ROOM, 'other room');
    T::eq($gate->verify($p['A'], 'sale', $exp * 1000)['verdict'], Pass::EXPIRED, 'at exp');
    T::eq($gate->verify(forge($p['A']), 'sale')['verdict'], Pass::INVALID, 'forged');
    $none = rtrim(strtr(base64_encode(json_encode(['alg' => 'none', 'kid' => kidOf($p['A'])])), '+/', '-_'), '=') . '.' . explode('.', $p['A'])[1] . '.';
    T::eq($gate->verify($none, 'sale')['verdict'], Pass::INVALID, 'alg none');
    $hits = $hitCount();
    foreach ([forge($p['A']), $none] as $bad) {
        $r = visit($s, '/shop/', null, true, $bad);
        T::eq($r->status, 429, "a forged pass waits like anyone: {$r->body}");
    }
    T::eq($hitCount(), $hits, 'the site saw none of them');
});

T::test('live renewal: past half its life, the pass is renewed through usher', function () use ($s, &$p, $claims) {
    $first = visit($s, '/brief/x', null, true);
    T::eq($first->status, 200, "a JSON client admitted at once is served at once: {$first->body}");
    $p['D'] = $first->header('Usher-Pass');
    T::check($p['D'] !== null, 'Usher-Pass');
    T::check((int) $first->header('Usher-Pass-TTL') <= 3, 'Usher-Pass-TTL');
    T::eq($first->header('Cache-Control'), 'private, no-store', 'Cache-Control');
    $iat = $claims($p['D'])->iat;
    $exp = $claims($p['D'])->exp;
    $again = visit($s, '/brief/x', null, false, $p['D']);
    T::eq([$again->status, $again->header('X-Test-Asked')], [200, '0'], 'offline, usher not asked');
    sleepUntil($exp * 1000 - ($exp - $iat) * 1000 / 2 + 100);
    $renewed = visit($s, '/brief/x', null, false, $p['D']);
    T::eq($renewed->status, 200, $renewed->body);
    T::eq($renewed->header('X-Test-Asked'), '1', 'asked once');
    $fresh = $renewed->header('Usher-Pass');
    T::check($fresh !== null && $fresh !== $p['D'], 'a new pass in Usher-Pass');
    T::check($claims($fresh)->exp > $exp, 'that lasts longer');
    T::eq($renewed->header('Cache-Control'), 'private, no-store', 'Cache-Control');
    $p['D'] = $fresh;
});

T::test('live: an expired pass is refused: the visitor waits again', function () use ($s, &$p, $gate, $claims, $hitCount) {
    admin('PUT', '/api/v1/rooms/brief', ['state' => 'paused']);
    sleepUntil($claims($p['D'])->exp * 1000 + 100);
    T::eq($gate->verify($p['D'], 'brief')['verdict'], Pass::EXPIRED, 'offline');
    $hits = $hitCount();
    $r = visit($s, '/brief/x', null, true, $p['D']);
    T::eq($r->status, 429, $r->body);
    T::eq($r->json()['room_state'], 'paused', 'room_state');
    T::eq($hitCount(), $hits, 'the site saw none');
});

T::test('live: release after a purchase frees the slot for the next visitor', function () use ($s, $a, $b) {
    $done = visit($s, '/shop/checkout', $a, false, null, 'POST');
    T::eq($done->status, 200, $done->body);
    T::eq($done->body, 'thanks', 'body');
    T::eq($a->get('usher_pass'), null, 'the pass cookie is cleared');
    T::eq($done->header('Cache-Control'), 'private, no-store', 'Cache-Control');
    $admitted = until('b admitted', function () use ($s, $b) {
        $r = visit($s, '/shop/items', $b, true);
        return $r->status === 200 ? $r : null;
    });
    T::check($admitted->header('Usher-Pass') !== null, 'Usher-Pass');
    T::check($b->get('usher_pass') !== null, 'the pass cookie');
});

T::test('live: Usher-Release from the site does the same', function () use ($s, $b, $c, &$p) {
    $done = visit($s, '/shop/done', $b);
    T::eq($done->status, 200, $done->body);
    T::eq($done->header('Usher-Release'), null, 'the header stays between site and connector');
    T::eq($b->get('usher_pass'), null, 'the pass cookie is cleared');
    T::eq($done->header('Cache-Control'), 'private, no-store', 'Cache-Control');
    until('c admitted', fn () => visit($s, '/shop/', $c)->status === 303);
    $p['C'] = $c->get('usher_pass');
    T::eq(visit($s, '/shop/', $c)->status, 200, 'c passes');
});

T::test('live: usher\'s own routes go to usher, its edge routes do not', function () use ($s, &$p) {
    $worker = visit($s, '/_usher/pow.js');
    T::eq($worker->status, 200, 'pow.js');
    T::check(str_contains((string) $worker->header('Content-Type'), 'javascript'), 'Content-Type');
    $jwks = visit($s, '/_usher/.well-known/jwks.json', null, true);
    T::eq($jwks->status, 200, 'jwks');
    T::check(array_key_exists(kidOf($p['C']), Pass::keysFromJwks(json_decode($jwks->body))), 'the JWKS holds the pass\'s key');
    foreach (['/_usher/auth', '/_usher/auth/release', '/_usher/%61uth', '/_usher/x/../auth'] as $path) {
        T::eq(visit($s, $path, null, true)->status, 404, $path);
    }
});

T::test('live key rotation: old passes still verify, new ones after one JWKS fetch', function () use ($s, $c, &$p, $gate, $control) {
    $res = (new Client($control))->call('/rotate', 'POST', [], 60_000, '');
    T::eq($res['status'], 204, $res['body']);
    $old = visit($s, '/shop/', $c);
    T::eq([$old->status, $old->header('X-Test-Asked')], [200, '0'], 'the old key\'s pass, offline');
    $e = visit($s, '/shop/', null, true); // usher restarted: its slots are gone
    T::eq($e->status, 200, $e->body);
    $p['E'] = $e->header('Usher-Pass');
    T::check(kidOf($p['E']) !== kidOf($p['C']), 'signed by the new key');
    $again = visit($s, '/shop/', null, false, $p['E']);
    T::eq($again->status, 200, $again->body);
    T::eq($again->header('X-Test-Fetches'), '1', 'the unknown kid fetched the JWKS again, once');
    T::eq($again->header('X-Test-Asked'), '0', 'and the pass passed offline');
    T::eq(visit($s, '/shop/', null, false, $p['E'])->header('X-Test-Fetches'), '0', 'the next request reads the shared set');
    T::eq($gate->verify($p['C'], 'sale')['verdict'], Pass::VALID, 'the old key is still in the JWKS');
});

T::test('live: the plain function takes a request array', function () use ($s, &$p, $gate, $claims) {
    $d = $gate->check(['target' => "$s/shop/", 'headers' => ['Authorization' => "Bearer {$p['E']}"]]);
    T::eq([$d['allowed'], $d['visitor'], $d['room']], [true, $claims($p['E'])->sub, 'sale'], 'allowed, visitor, room');
});

T::test('live plain PHP: handle() passes offline, answers the rest, and honours Usher-Release', function () use ($s, &$p, $claims) {
    admin('PUT', '/api/v1/rooms/sale', ['max_active' => 1, 'interval_ms' => 100, 'admit_rate' => 100]);
    $sub = $claims($p['E'])->sub;
    $page = visit($s, '/shop/', null, false, $p['E'], 'GET', true);
    T::eq($page->status, 200, $page->body);
    T::eq($page->json(), ['path' => '/shop/', 'visitor' => $sub, 'room' => 'sale', 'header' => $sub, 'mode' => 'plain'], 'what the page saw');
    T::eq($page->header('X-Test-Asked'), '0', 'offline');
    $f = new Jar();
    $wait = visit($s, '/shop/', $f, true, null, 'GET', true);
    T::eq($wait->status, 429, "E holds the slot: {$wait->body}");
    T::eq($wait->json()['state'], 'waiting', 'state');
    $done = visit($s, '/shop/done', null, false, $p['E'], 'GET', true);
    T::eq($done->status, 200, $done->body);
    T::eq($done->header('Usher-Release'), null, 'the header stays between site and connector');
    T::check(str_contains($done->all('Set-Cookie'), 'usher_pass=; Path=/; Max-Age=0'), 'the pass cookie is cleared: ' . $done->all('Set-Cookie'));
    T::eq($done->header('Cache-Control'), 'private, no-store', 'Cache-Control');
    until('f admitted', fn () => visit($s, '/shop/', $f, true, null, 'GET', true)->status === 200);
    T::check($f->get('usher_pass') !== null, 'f\'s pass cookie');
});

T::test('live: usher down: a valid pass passes, others get 503, or pass with failOpen', function () use ($usher, &$p, $claims) {
    $jwksUrl = "$usher/_usher/.well-known/jwks.json";
    $down = new Gate(['url' => 'http://127.0.0.1:1', 'jwksUrl' => $jwksUrl, 'room' => 'sale', 'logger' => null, 'cacheFile' => null]);
    $json = $down->check(['target' => '/shop/', 'headers' => ['Accept' => 'application/json']]);
    T::eq($json['status'], 503, 'JSON');
    T::eq(Gate::first($json['headers'], 'Retry-After'), '5', 'Retry-After');
    T::eq(json_decode($json['body'], true)['error']['code'], 'unavailable', 'error code');
    $page = $down->check(['target' => '/shop/', 'headers' => ['Accept' => 'text/html']]);
    T::eq($page['status'], 503, 'page');
    T::check(str_contains($page['body'], 'High demand'), 'High demand');
    $passed = $down->check(['target' => '/shop/', 'headers' => ['Authorization' => "Bearer {$p['E']}"]]);
    T::eq([$passed['allowed'], $passed['visitor']], [true, $claims($p['E'])->sub], 'a valid pass passes');
    $open = new Gate(['url' => 'http://127.0.0.1:1', 'jwksUrl' => $jwksUrl, 'room' => 'sale', 'logger' => null, 'cacheFile' => null, 'failOpen' => true]);
    $d = $open->check(['target' => '/shop/', 'headers' => []]);
    T::eq([$d['allowed'], $d['visitor'] ?? null], [true, null], 'failOpen');
});
