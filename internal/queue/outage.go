package queue

import (
	"log/slog"
	"slices"
	"time"
)

// OutageLog logs a loop's failures once per outage: a warning at the first
// failure, nothing while the failures go on, and a summary (how long, how
// many failures, the last error) at the first success after them. A loop
// that retries ten times a second during a store outage then writes two
// lines, not ten a second. The zero value is not usable; use NewOutageLog.
// It is not safe for concurrent use: each loop keeps its own.
type OutageLog struct {
	log   *slog.Logger
	msg   string
	attrs []any
	since time.Time // the outage's first failure; zero when none
	n     int       // failures in this outage
	last  error
}

// NewOutageLog returns an OutageLog writing msg and attrs to log.
func NewOutageLog(log *slog.Logger, msg string, attrs ...any) *OutageLog {
	return &OutageLog{log: log, msg: msg, attrs: attrs}
}

// Observe records one attempt's outcome at now: err nil is a success.
func (o *OutageLog) Observe(err error, now time.Time) {
	switch {
	case err != nil && o.n == 0:
		o.since, o.n, o.last = now, 1, err
		o.log.Warn(o.msg+" failing (retried quietly until it recovers)", slices.Concat(o.attrs, []any{"err", err})...)
	case err != nil:
		o.n++
		o.last = err
	case o.n > 0:
		o.log.Info(o.msg+" recovered", slices.Concat(o.attrs, []any{"failures", o.n,
			"outage", now.Sub(o.since).Round(time.Millisecond).String(), "last_err", o.last})...)
		o.since, o.n, o.last = time.Time{}, 0, nil
	}
}
