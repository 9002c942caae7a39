package sqlitebooking

import (
	"context"
	"encoding/json"
	"fmt"

	"usher/internal/booking"
)

// Outbox implements booking.Store: the oldest unsent events, from a reader.
func (s *Store) Outbox(ctx context.Context, limit int) ([]booking.OutboxEvent, error) {
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("sqlitebooking: outbox: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, event_id, type, room, at, visitor, data FROM outbox ORDER BY seq LIMIT ?`,
		min(limit, booking.MaxOutboxBatch))
	if err != nil {
		return nil, wrap("outbox", err)
	}
	defer rows.Close()
	var out []booking.OutboxEvent
	for rows.Next() {
		var e booking.OutboxEvent
		var at int64
		var data string
		if err := rows.Scan(&e.Seq, &e.ID, &e.Type, &e.Room, &at, &e.Visitor, &data); err != nil {
			return nil, wrap("outbox", err)
		}
		e.At = fromMicros(at)
		if data != "{}" && data != "" {
			e.Data = json.RawMessage(data)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("outbox", err)
	}
	return out, nil
}

// MarkSent implements booking.Store: one DELETE on the writer.
func (s *Store) MarkSent(ctx context.Context, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM outbox WHERE seq IN (SELECT value FROM json_each(?))`, booking.EncodeSeatIDs(seqs)); err != nil {
		return wrap(fmt.Sprintf("mark %d events sent", len(seqs)), err)
	}
	return nil
}
