// Package mq carries reservations from the API to the database at a pace the
// database can take (seed 002's second line of defence, seed 003 §5): the
// API submits pending reservations, consumers decide them in batches with
// bounded concurrency, and every reservation's latest state can be read or
// watched. Backend: natsmq (JetStream, embedded in-process or external).
//
// Delivery is at least once; the effect is exactly once because the
// reservation id is the message id (broker de-duplication) and
// booking.Store.Decide is idempotent.
package mq

import (
	"context"
	"time"

	"usher/internal/booking"
	"usher/internal/fault"
)

// Errors a Broker returns (wrapped with operation context).
var (
	ErrNotFound = fault.New(fault.ReservationNotFound, "reservation not found")
	// ErrUnavailable wraps any failure to reach the broker.
	ErrUnavailable = fault.New(fault.Unavailable, "broker unavailable")
)

// Handler decides a batch of pending reservations (booking.Store.Decide)
// and returns them decided, in order. An error means none was decided: the
// batch is delivered again later.
type Handler func(ctx context.Context, batch []booking.Reservation) ([]booking.Reservation, error)

// ConsumeOptions bound a consumer.
type ConsumeOptions struct {
	// Workers is how many batches are handled at once: the database pool
	// size. The broker never has more than Workers×MaxBatch unacknowledged.
	Workers int
	// MaxBatch is the most reservations per Handler call.
	MaxBatch int
	// RetryAfter is how long a failed batch waits before redelivery.
	RetryAfter time.Duration
}

// Broker submits, consumes and tracks reservations.
type Broker interface {
	// Submit records r (Status pending) as the reservation for (r.Visitor,
	// idempotencyKey) and publishes it, atomically with respect to retries:
	// a second Submit with the same visitor and key returns the first
	// reservation (its latest state) and created=false, whatever r says. An
	// error may leave the reservation recorded but not yet published: the
	// caller retries with the same key.
	Submit(ctx context.Context, r booking.Reservation, idempotencyKey string) (res booking.Reservation, created bool, err error)
	// Lookup returns the latest state of the reservation that a Submit with
	// the same visitor and idempotency key recorded, or ErrNotFound. Like a
	// duplicate Submit, it finishes that Submit's publication if it was cut
	// short.
	Lookup(ctx context.Context, visitor, idempotencyKey string) (booking.Reservation, error)
	// Get returns the reservation's latest state: pending until a consumer
	// decided it, then confirmed or rejected.
	Get(ctx context.Context, id string) (booking.Reservation, error)
	// Watch sends the reservation's current state and then every change
	// until it is decided or ctx ends; the channel is closed then.
	Watch(ctx context.Context, id string) (<-chan booking.Reservation, error)
	// Consume runs until ctx ends, calling h with batches of pending
	// reservations. After h returns, it records every decision (so Get and
	// Watch see it) and then acknowledges the messages; a crash in between
	// redelivers them and Decide's idempotence keeps the effect single.
	Consume(ctx context.Context, o ConsumeOptions, h Handler) error
	// Backlog reports the reservations submitted and not yet decided and
	// acknowledged: the consumer's lag. It is the same for every instance
	// of a deployment (one stream, one consumer).
	Backlog(ctx context.Context) (Backlog, error)
}

// Backlog is what the broker holds undecided.
type Backlog struct {
	// Waiting: submitted, not yet handed to a consumer.
	Waiting int64
	// InFlight: handed to a consumer, not yet decided and acknowledged
	// (Decide running, or a failed batch waiting for RetryAfter).
	InFlight int64
	// Oldest is when the oldest undecided reservation was published; zero
	// when there is none.
	Oldest time.Time
}
