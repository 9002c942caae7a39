<?php

declare(strict_types=1);

// A minimal test runner: named cases, each passing or failing alone, and
// the closing line "N passed, N failed, N skipped".

final class T
{
    public static int $passed = 0;
    public static int $failed = 0;
    public static int $skipped = 0;

    public static function test(string $name, callable $body): void
    {
        try {
            $body();
            self::$passed++;
            echo "ok - $name\n";
        } catch (\Throwable $e) {
            self::$failed++;
            echo "not ok - $name: " . $e->getMessage() . "\n  at " . $e->getFile() . ':' . $e->getLine() . "\n";
        }
    }

    public static function skip(string $name, string $why): void
    {
        self::$skipped++;
        echo "ok - $name # SKIP $why\n";
    }

    public static function eq(mixed $got, mixed $want, string $what): void
    {
        if ($got !== $want) {
            throw new \AssertionError("$what: got " . var_export($got, true) . ', want ' . var_export($want, true));
        }
    }

    public static function check(bool $cond, string $what): void
    {
        if (!$cond) {
            throw new \AssertionError($what);
        }
    }

    public static function summary(): never
    {
        echo self::$passed . ' passed, ' . self::$failed . ' failed, ' . self::$skipped . " skipped\n";
        exit(self::$failed === 0 ? 0 : 1);
    }
}
