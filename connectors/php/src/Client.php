<?php

declare(strict_types=1);

namespace Usher\Connector;

/**
 * The connector's HTTP client for usher, on PHP's own http:// stream
 * wrapper (no extension): every call has a deadline, and answers keep their
 * headers as [name, value] pairs (Set-Cookie repeats).
 */
final class Client
{
    public const MAX_ANSWER_BYTES = 1 << 20; // a waiting page is tens of kilobytes

    public readonly string $base;

    public function __construct(string $url)
    {
        $u = parse_url($url);
        if (!is_array($u) || !in_array($u['scheme'] ?? '', ['http', 'https'], true) || !isset($u['host'])) {
            throw new \InvalidArgumentException("usher: url $url: want http:// or https://");
        }
        $host = str_contains($u['host'], ':') && $u['host'][0] !== '[' ? '[' . $u['host'] . ']' : $u['host'];
        $this->base = $u['scheme'] . '://' . $host . (isset($u['port']) ? ':' . $u['port'] : '') . rtrim($u['path'] ?? '', '/');
    }

    /**
     * call asks usher and reads the whole answer within timeoutMs:
     * ['status' => int, 'headers' => [[name, value]], 'body' => string].
     *
     * @param list<array{0: string, 1: string}> $headers
     * @return array{status: int, headers: list<array{0: string, 1: string}>, body: string}
     */
    public function call(string $target, string $method, array $headers, int $timeoutMs, ?string $body = null): array
    {
        $lines = '';
        foreach ($headers as [$k, $v]) {
            if (strpbrk($k . $v, "\r\n") === false) {
                $lines .= "$k: $v\r\n";
            }
        }
        $lines .= "Connection: close\r\n";
        $http = [
            'method' => $method,
            'header' => $lines,
            'ignore_errors' => true,
            'follow_location' => 0,
            'max_redirects' => 1,
            'protocol_version' => 1.1,
            'timeout' => max(0.001, $timeoutMs / 1000),
        ];
        if ($body !== null) {
            $http['content'] = $body;
        }
        $ctx = stream_context_create(['http' => $http, 'ssl' => ['verify_peer' => true]]);
        $deadline = microtime(true) + $timeoutMs / 1000;
        $stream = @fopen($this->base . $target, 'rb', false, $ctx);
        if ($stream === false) {
            $e = error_get_last();
            throw new UsherException("usher: $method $target: " . ($e['message'] ?? 'no answer'));
        }
        try {
            $meta = stream_get_meta_data($stream);
            $raw = $meta['wrapper_data'] ?? [];
            $got = '';
            while (!feof($stream)) {
                if (microtime(true) > $deadline) {
                    throw new UsherException("usher: $method $target: answer body too slow");
                }
                $chunk = fread($stream, 65536);
                if ($chunk === false) {
                    break;
                }
                $got .= $chunk;
                if (strlen($got) > self::MAX_ANSWER_BYTES) {
                    throw new UsherException("usher: $method $target: answer over " . self::MAX_ANSWER_BYTES . ' bytes');
                }
                if (stream_get_meta_data($stream)['timed_out']) {
                    throw new UsherException("usher: $method $target: no answer within $timeoutMs ms");
                }
            }
        } finally {
            fclose($stream);
        }
        $status = 0;
        $pairs = [];
        foreach ($raw as $line) {
            if (preg_match('#^HTTP/\S+\s+(\d{3})#', $line, $m) === 1) {
                $status = (int) $m[1];
                $pairs = []; // the last answer's (a 100 Continue comes first)
                continue;
            }
            $colon = strpos($line, ':');
            if ($colon !== false) {
                $pairs[] = [substr($line, 0, $colon), trim(substr($line, $colon + 1))];
            }
        }
        if ($status === 0) {
            throw new UsherException("usher: $method $target: no status line");
        }
        return ['status' => $status, 'headers' => $pairs, 'body' => $got];
    }

    /**
     * header returns the first value of name (any case) in pairs, or null.
     *
     * @param list<array{0: string, 1: string}> $pairs
     */
    public static function header(array $pairs, string $name): ?string
    {
        foreach ($pairs as [$k, $v]) {
            if (strcasecmp($k, $name) === 0) {
                return $v;
            }
        }
        return null;
    }
}
