<?php

declare(strict_types=1);

// Verifications per second of the PHP connector, in one process:
//
//   php bench/verify.php [--mode verify|middleware] [--n N] [--input FILE] [--serve]
//
// verify: Pass::verify alone, on a pass and its key. middleware: what one
// PHP request does: a new Gate, its JWKS read from the file the site's
// workers share, and Gate::check on a request carrying the pass in
// Authorization (no call to usher: the pass is in the first half of its
// life). PHP keeps nothing between requests, so every signature is
// checked. FILE is JSON {jwks, token, room, now?}; without it, the
// conformance table's "valid" case. It prints one JSON line; with --serve
// it warms up, prints {"ready":true}, then answers each count read on
// stdin with the line of that many passes, as connectors/node/bench does
// for the Go benchmark (go test ./cmd/usher -run '^$' -bench Connector).

use Usher\Connector\Gate;
use Usher\Connector\KeySet;
use Usher\Connector\Pass;

require __DIR__ . '/../autoload.php';

$o = getopt('', ['mode:', 'n:', 'input:', 'serve']);
$mode = $o['mode'] ?? 'verify';
if (isset($o['input'])) {
    $in = json_decode((string) file_get_contents($o['input']));
} else {
    $table = json_decode((string) file_get_contents(__DIR__ . '/../../testdata/vectors.json'));
    $in = array_values(array_filter($table->cases, fn ($c) => $c->name === 'valid'))[0];
}
$now = isset($in->now) ? (float) (new DateTimeImmutable($in->now))->format('Uv') : null;
$clock = $now !== null ? fn () => $now : fn () => microtime(true) * 1000;
$token = $in->token;
$room = $in->room;

if ($mode === 'verify') {
    $keys = Pass::keysFromJwks($in->jwks);
    $once = function () use ($token, $room, $keys, $clock) {
        if (Pass::verify($token, $room, fn ($kid) => $keys[$kid] ?? null, $clock())['verdict'] !== Pass::VALID) {
            throw new RuntimeException('the pass does not verify');
        }
    };
} elseif ($mode === 'middleware') {
    $file = tempnam(sys_get_temp_dir(), 'usher-bench-jwks-');
    register_shutdown_function(fn () => @unlink($file) && @unlink("$file.lock"));
    (new KeySet(fn () => ['jwks' => $in->jwks, 'maxAgeMs' => null], $clock, 5000, KeySet::DEFAULT_MAX_AGE_MS, $file))->ready();
    $rq = ['method' => 'GET', 'target' => '/shop/', 'headers' => [['Host', 'shop.test'], ['Authorization', "Bearer $token"]], 'ip' => '10.0.0.1', 'scheme' => 'http'];
    $once = function () use ($room, $clock, $file, $rq) {
        $gate = new Gate(['url' => 'http://127.0.0.1:9', 'room' => $room, 'now' => $clock, 'logger' => null, 'cacheFile' => $file]);
        $d = $gate->check($rq);
        if (!$d['allowed'] || $d['visitor'] === null || $gate->stats['asked'] !== 0) {
            throw new RuntimeException('the request did not pass offline');
        }
    };
} else {
    fwrite(STDERR, "--mode $mode: want verify or middleware\n");
    exit(2);
}

// loop runs n passes and returns the time they took and the CPU time the
// process spent on them, in nanoseconds.
function loop(callable $once, int $n): array
{
    $cpu = getrusage();
    $start = hrtime(true);
    for ($i = 0; $i < $n; $i++) {
        $once();
    }
    $ns = hrtime(true) - $start;
    $end = getrusage();
    $us = fn ($r) => $r['ru_utime.tv_sec'] * 1e6 + $r['ru_utime.tv_usec'] + $r['ru_stime.tv_sec'] * 1e6 + $r['ru_stime.tv_usec'];
    return [$ns, ($us($end) - $us($cpu)) * 1000];
}

$report = fn (int $n, array $t) => json_encode([
    'mode' => $mode, 'php' => PHP_VERSION, 'n' => $n,
    'ns_per_op' => $t[0] / $n, 'cpu_ns_per_op' => $t[1] / $n, 'per_second' => (int) round($n * 1e9 / $t[0]),
]);

for ($until = microtime(true) + 0.3; microtime(true) < $until;) {
    loop($once, 100);
}
if (isset($o['serve'])) {
    echo json_encode(['ready' => true]), "\n";
    while (($line = fgets(STDIN)) !== false) {
        $n = (int) $line;
        echo $report($n, loop($once, $n)), "\n";
    }
    exit(0);
}
$n = (int) ($o['n'] ?? 0);
if ($n === 0) {
    $n = 1000; // about a second: calibrated on a tenth
    [$ns] = loop($once, $n);
    $n = max($n, (int) round($n * 1e9 / $ns));
}
echo $report($n, loop($once, $n)), "\n";
