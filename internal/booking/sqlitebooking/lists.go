package sqlitebooking

import (
	"context"
	"database/sql"
	"fmt"

	"usher/internal/booking"
)

// Concert implements booking.Store.
func (s *Store) Concert(ctx context.Context, id int64) (booking.Concert, error) {
	c := booking.Concert{ID: id}
	var createdAt int64
	err := s.r.QueryRowContext(ctx, `SELECT title, created_at FROM concert WHERE concert_id = ?`, id).Scan(&c.Title, &createdAt)
	if err != nil {
		return booking.Concert{}, wrap(fmt.Sprintf("concert %d", id), err)
	}
	c.CreatedAt = fromMicros(createdAt)
	return c, nil
}

// ListConcerts implements booking.Store.
func (s *Store) ListConcerts(ctx context.Context, after int64, limit int) ([]booking.Concert, error) {
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("sqlitebooking: list concerts: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT concert_id, title, created_at FROM concert
		WHERE concert_id > ? ORDER BY concert_id LIMIT ?`, after, limit)
	return collect(rows, err, "list concerts", func(rows *sql.Rows) (booking.Concert, error) {
		var c booking.Concert
		var createdAt int64
		err := rows.Scan(&c.ID, &c.Title, &createdAt)
		c.CreatedAt = fromMicros(createdAt)
		return c, err
	})
}

// ListSchedules implements booking.Store. By concert it reads the
// schedule_concert index, whose rows come in schedule_id order.
func (s *Store) ListSchedules(ctx context.Context, concertID, after int64, limit int) ([]booking.Schedule, error) {
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("sqlitebooking: list schedules: %w", err)
	}
	q := `SELECT schedule_id, concert_id, starts_at, room FROM schedule WHERE schedule_id > ?1 ORDER BY schedule_id LIMIT ?2`
	if concertID > 0 {
		q = `SELECT schedule_id, concert_id, starts_at, room FROM schedule
			WHERE concert_id = ?3 AND schedule_id > ?1 ORDER BY schedule_id LIMIT ?2`
	}
	rows, err := s.r.QueryContext(ctx, q, after, limit, concertID)
	return collect(rows, err, "list schedules", func(rows *sql.Rows) (booking.Schedule, error) {
		var sch booking.Schedule
		var startsAt int64
		err := rows.Scan(&sch.ID, &sch.ConcertID, &startsAt, &sch.Room)
		sch.StartsAt = fromMicros(startsAt)
		return sch, err
	})
}

// ListReservations implements booking.Store: SQLite compares TEXT in byte
// order (BINARY), the contract's order.
func (s *Store) ListReservations(ctx context.Context, scheduleID int64, status booking.ReservationStatus, after string, limit int) ([]booking.Reservation, error) {
	op := fmt.Sprintf("list reservations of schedule %d", scheduleID)
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("sqlitebooking: %s: %w", op, err)
	}
	cols := `SELECT reservation_id, visitor, schedule_id, seat_ids, quantity, status, reason, created_at, decided_at FROM reservation`
	q := cols + ` WHERE schedule_id = ?1 AND reservation_id > ?2 ORDER BY reservation_id LIMIT ?3`
	if status != "" {
		q = cols + ` WHERE schedule_id = ?1 AND status = ?4 AND reservation_id > ?2 ORDER BY reservation_id LIMIT ?3`
	}
	rows, err := s.r.QueryContext(ctx, q, scheduleID, after, limit, string(status))
	return collect(rows, err, op, func(rows *sql.Rows) (booking.Reservation, error) {
		var r booking.Reservation
		var seats string
		var createdAt, decidedAt int64
		if err := rows.Scan(&r.ID, &r.Visitor, &r.ScheduleID, &seats, &r.Quantity, &r.Status, &r.Reason, &createdAt, &decidedAt); err != nil {
			return r, err
		}
		r.CreatedAt, r.DecidedAt = fromMicros(createdAt), fromMicros(decidedAt)
		var err error
		r.SeatIDs, err = booking.DecodeSeatIDs(seats)
		return r, err
	})
}

// collect scans every row of a query with scan.
func collect[T any](rows *sql.Rows, err error, op string, scan func(*sql.Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, wrap(op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, wrap(op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}
