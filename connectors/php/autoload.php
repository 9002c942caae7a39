<?php

// The connector's autoloader, for a site without Composer:
// require '/path/to/usher/connectors/php/autoload.php';

spl_autoload_register(function (string $class): void {
    $prefix = 'Usher\\Connector\\';
    if (str_starts_with($class, $prefix)) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
