<?php

declare(strict_types=1);

// The site the live tests put behind the connector, as a router for
// `php -S`: the PSR-15 middleware in front of a PSR-15 handler (Nyholm's
// PSR-7, as Debian packages it), or with the request header
// X-Site-Mode: plain, the plain-PHP gate ($gate->handle()). Every answer
// says how often this request asked usher (X-Test-Asked) and fetched the
// JWKS (X-Test-Fetches); the site's own hits are counted in
// USHER_TEST_HITS, one line each.

use Nyholm\Psr7\Factory\Psr17Factory;
use Nyholm\Psr7\ServerRequest;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\RequestHandlerInterface;
use Usher\Connector\Gate;
use Usher\Connector\Middleware;

require __DIR__ . '/../autoload.php';

ob_start();
$gate = new Gate([
    'url' => getenv('USHER_TEST_URL'),
    'room' => fn (array $rq) => str_starts_with($rq['target'], '/brief/') ? 'brief' : 'sale',
    'refetchAfterMs' => 0,
    'logger' => null,
    'cacheFile' => getenv('USHER_TEST_JWKS_CACHE'),
]);
$path = explode('?', $_SERVER['REQUEST_URI'], 2)[0];
$hit = fn () => file_put_contents(getenv('USHER_TEST_HITS'), $path . "\n", FILE_APPEND | LOCK_EX);
$report = fn () => [['X-Test-Asked', (string) $gate->stats['asked']], ['X-Test-Fetches', (string) $gate->keys()->fetches]];

if (($_SERVER['HTTP_X_SITE_MODE'] ?? '') === 'plain') {
    $pass = $gate->handle();
    foreach ($report() as [$k, $v]) {
        header("$k: $v");
    }
    if (!$pass) {
        return true;
    }
    $hit();
    if ($path === '/shop/checkout') {
        $gate->releaseNow();
        echo 'thanks';
        return true;
    }
    if ($path === '/shop/done') {
        header('Usher-Release: 1'); // as behind usher proxy
    }
    header('Content-Type: application/json');
    echo json_encode(['path' => $path, 'visitor' => $gate->admission['visitor'] ?? null, 'room' => $gate->admission['room'] ?? null,
        'header' => $_SERVER['HTTP_USHER_VISITOR'] ?? null, 'mode' => 'plain']);
    return true;
}

require '/usr/share/php/Nyholm/Psr7/autoload.php';
$factory = new Psr17Factory();
$headers = function_exists('getallheaders') ? getallheaders() : [];
$request = new ServerRequest($_SERVER['REQUEST_METHOD'], 'http://' . ($_SERVER['HTTP_HOST'] ?? 'localhost') . $_SERVER['REQUEST_URI'],
    $headers, file_get_contents('php://input'), '1.1', $_SERVER);
$mw = new Middleware($gate, $factory, $factory);
$handler = new class ($mw, $factory, $hit) implements RequestHandlerInterface {
    public function __construct(private Middleware $mw, private Psr17Factory $f, private Closure $hit)
    {
    }

    public function handle(ServerRequestInterface $request): ResponseInterface
    {
        ($this->hit)();
        $path = $request->getUri()->getPath();
        if ($path === '/shop/checkout') {
            return $this->mw->release($request, $this->f->createResponse(200)->withBody($this->f->createStream('thanks')));
        }
        $a = $request->getAttribute(Middleware::ATTRIBUTE);
        $r = $this->f->createResponse(200)->withHeader('Content-Type', 'application/json')->withBody($this->f->createStream(json_encode([
            'path' => $path, 'visitor' => $a['visitor'] ?? null, 'room' => $a['room'] ?? null,
            'header' => $request->getHeaderLine('Usher-Visitor') ?: null, 'mode' => 'psr15',
        ])));
        return $path === '/shop/done' ? $r->withHeader('Usher-Release', '1') : $r; // as behind usher proxy
    }
};
$response = $mw->process($request, $handler);
foreach ($report() as [$k, $v]) {
    $response = $response->withHeader($k, $v);
}
http_response_code($response->getStatusCode());
foreach ($response->getHeaders() as $k => $vs) {
    foreach ($vs as $v) {
        header("$k: $v", false);
    }
}
echo $response->getBody();
return true;
