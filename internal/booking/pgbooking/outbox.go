package pgbooking

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"usher/internal/booking"
)

// Outbox implements booking.Store: the oldest unsent events.
func (s *Store) Outbox(ctx context.Context, limit int) ([]booking.OutboxEvent, error) {
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("pgbooking: outbox: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, event_id, type, room, at, visitor, data FROM outbox ORDER BY seq LIMIT $1`,
		min(limit, booking.MaxOutboxBatch))
	return collect(rows, err, "outbox", func(row pgx.CollectableRow) (booking.OutboxEvent, error) {
		var e booking.OutboxEvent
		var data string
		err := row.Scan(&e.Seq, &e.ID, &e.Type, &e.Room, &e.At, &e.Visitor, &data)
		e.At = e.At.UTC()
		if data != "{}" && data != "" {
			e.Data = json.RawMessage(data)
		}
		return e, err
	})
}

// MarkSent implements booking.Store: one DELETE.
func (s *Store) MarkSent(ctx context.Context, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM outbox WHERE seq = ANY ($1::bigint[])`, seqs); err != nil {
		return wrap(fmt.Sprintf("mark %d events sent", len(seqs)), err)
	}
	return nil
}
