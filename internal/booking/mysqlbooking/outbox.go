package mysqlbooking

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"usher/internal/booking"
)

// Outbox implements booking.Store: the oldest unsent events.
func (s *Store) Outbox(ctx context.Context, limit int) ([]booking.OutboxEvent, error) {
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("mysqlbooking: outbox: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, event_id, type, room, at, visitor, data FROM outbox ORDER BY seq LIMIT ?`,
		min(limit, booking.MaxOutboxBatch))
	return collect(rows, err, "outbox", func(rows *sql.Rows) (booking.OutboxEvent, error) {
		var e booking.OutboxEvent
		var data string
		err := rows.Scan(&e.Seq, &e.ID, &e.Type, &e.Room, &e.At, &e.Visitor, &data)
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
	args := make([]any, len(seqs))
	for i, seq := range seqs {
		args[i] = seq
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM outbox WHERE seq IN (`+placeholders(len(seqs), "?")+`)`, args...); err != nil {
		return wrap(fmt.Sprintf("mark %d events sent", len(seqs)), err)
	}
	return nil
}
