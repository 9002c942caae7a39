<?php

declare(strict_types=1);

namespace Usher\Connector;

use Psr\Http\Message\ResponseFactoryInterface;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Message\StreamFactoryInterface;
use Psr\Http\Server\MiddlewareInterface;
use Psr\Http\Server\RequestHandlerInterface;

/**
 * PSR-15 middleware: it relays usher's own routes under /_usher/, lets a
 * request with a valid pass through to the handler (the request attribute
 * "usher" holds ['room', 'visitor', 'expiresAt', 'pass', 'renewed'], and
 * the headers Usher-Visitor and Usher-Room name the visitor), and answers
 * every other request with usher's answer, made with the PSR-17 factories
 * given. A handler's Usher-Release: 1 response header ends the slot and
 * clears the pass; so does release().
 */
final class Middleware implements MiddlewareInterface
{
    public const ATTRIBUTE = 'usher';

    public function __construct(
        public readonly Gate $gate,
        private ResponseFactoryInterface $responses,
        private StreamFactoryInterface $streams,
    ) {
    }

    public function process(ServerRequestInterface $request, RequestHandlerInterface $handler): ResponseInterface
    {
        $rq = self::describe($request);
        if (Gate::isOwn($rq['target'])) {
            $body = (string) $request->getBody();
            return $this->answer($this->gate->relay($rq, $body === '' && in_array($rq['method'], ['GET', 'HEAD'], true) ? null : $body));
        }
        $d = $this->gate->check($rq);
        if (!$d['allowed']) {
            return $this->answer($d);
        }
        $request = $request->withAttribute(self::ATTRIBUTE, [
            'room' => $d['room'] ?? null, 'visitor' => $d['visitor'] ?? null, 'expiresAt' => $d['expiresAt'] ?? null,
            'pass' => $d['pass'] ?? null, 'renewed' => $d['renewed'] ?? false,
        ])->withoutHeader(Gate::VISITOR_HEADER)->withoutHeader(Gate::ROOM_HEADER);
        if (($d['visitor'] ?? null) !== null) {
            $request = $request->withHeader(Gate::VISITOR_HEADER, $d['visitor'])->withHeader(Gate::ROOM_HEADER, $d['room']);
        }
        $response = $handler->handle($request);
        foreach ($d['headers'] as [$k, $v]) {
            $response = $response->withAddedHeader($k, $v);
        }
        $release = $response->getHeaderLine(Gate::RELEASE_HEADER);
        $response = $response->withoutHeader(Gate::RELEASE_HEADER);
        if (preg_match('/^(1|true)$/i', $release) === 1) {
            try {
                return $this->release($request, $response);
            } catch (UsherException $e) {
                // The slot lapses after the room's active_ttl by itself; the pass is cleared all the same.
                error_log('usher: Usher-Release: ' . $e->getMessage());
                return self::withoutPass($response)
                    ->withAddedHeader('Set-Cookie', Gate::PASS_COOKIE . '=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax')
                    ->withHeader('Cache-Control', Gate::CREDENTIAL_CACHE);
            }
        }
        $cache = $d['cacheControl'];
        if ($cache === Gate::CREDENTIAL_CACHE || ($cache !== null && !$response->hasHeader('Cache-Control'))) {
            $response = $response->withHeader('Cache-Control', $cache);
        }
        return $response;
    }

    /**
     * release ends the slot of the visitor whose pass request carries, after
     * a purchase, and returns response with the pass cleared. It throws an
     * UsherException when usher did not end the slot (which then lapses
     * after the room's active_ttl by itself).
     */
    public function release(ServerRequestInterface $request, ResponseInterface $response): ResponseInterface
    {
        $headers = $this->gate->release(self::describe($request));
        $response = self::withoutPass($response);
        foreach ($headers as [$k, $v]) {
            $response = strcasecmp($k, 'Cache-Control') === 0 ? $response->withHeader($k, $v) : $response->withAddedHeader($k, $v);
        }
        return $response;
    }

    /**
     * describe is what the gate needs of a PSR-7 server request.
     *
     * @return array<string, mixed>
     */
    public static function describe(ServerRequestInterface $request): array
    {
        $headers = [];
        foreach ($request->getHeaders() as $k => $vs) {
            foreach ($vs as $v) {
                $headers[] = [(string) $k, $v];
            }
        }
        $server = $request->getServerParams();
        $uri = $request->getUri();
        if (Client::header($headers, 'Host') === null && $uri->getHost() !== '') {
            $headers[] = ['Host', $uri->getHost() . ($uri->getPort() !== null ? ':' . $uri->getPort() : '')];
        }
        $target = $server['REQUEST_URI'] ?? $request->getRequestTarget();
        return Gate::normalize([
            'method' => $request->getMethod(),
            'target' => $target,
            'headers' => $headers,
            'ip' => $server['REMOTE_ADDR'] ?? null,
            'scheme' => $uri->getScheme() !== '' ? $uri->getScheme() : 'http',
        ]);
    }

    private function answer(array $a): ResponseInterface
    {
        $r = $this->responses->createResponse($a['status']);
        foreach ($a['headers'] as [$k, $v]) {
            $r = $r->withAddedHeader($k, $v);
        }
        return $r->withBody($this->streams->createStream($a['body']));
    }

    private static function withoutPass(ResponseInterface $response): ResponseInterface
    {
        $keep = array_filter($response->getHeader('Set-Cookie'), fn ($c) => !str_starts_with($c, Gate::PASS_COOKIE . '='));
        $response = $response->withoutHeader(Gate::PASS_HEADER)->withoutHeader('Set-Cookie');
        foreach ($keep as $c) {
            $response = $response->withAddedHeader('Set-Cookie', $c);
        }
        return $response;
    }
}
