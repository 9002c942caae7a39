package booking

import "usher/internal/event"

// OutboxEvent is an event in the outbox: written by the database in the
// transaction that made the change (a trigger on the reservation table in
// SQLite and PostgreSQL; in MySQL, one statement per decided batch, since
// its triggers run per row), published by the relay (event.Relay), then removed
// with MarkSent. Seq orders the outbox (the order of the writes).
//
// A decision's event: ID "<reservation id>.<status>", Type
// reservation_confirmed or reservation_rejected, Room the schedule's room
// ("schedule-<id>" for a schedule the catalog does not have), At the
// decision time, Visitor the reservation's, Data {reservation, schedule,
// units, amount}: units are the seats asked for (or the quantity), amount
// the sum of the seats' prices of a confirmed seat reservation (absent
// otherwise: stock has no price).
type OutboxEvent = event.OutboxEvent

// MaxOutboxBatch is the most events one Outbox call returns, whatever the
// limit asked for.
const MaxOutboxBatch = 1000
