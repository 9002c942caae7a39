<?php

declare(strict_types=1);

namespace Usher\Connector;

/** UsherException is a call to usher that got no usable answer. */
class UsherException extends \RuntimeException
{
    /**
     * @param int $status usher's answer's status, 0 when there was none.
     * @param string|null $errorCode usher's error code, if its answer gave one.
     */
    public function __construct(string $message, public readonly int $status = 0, public readonly ?string $errorCode = null, ?\Throwable $previous = null)
    {
        parent::__construct($message, 0, $previous);
    }
}
