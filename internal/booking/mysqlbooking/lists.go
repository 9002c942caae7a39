package mysqlbooking

import (
	"context"
	"database/sql"
	"fmt"

	"usher/internal/booking"
)

// Concert implements booking.Store.
func (s *Store) Concert(ctx context.Context, id int64) (booking.Concert, error) {
	c := booking.Concert{ID: id}
	err := s.db.QueryRowContext(ctx, `SELECT title, created_at FROM concert WHERE concert_id = ?`, id).Scan(&c.Title, &c.CreatedAt)
	if err != nil {
		return booking.Concert{}, wrap(fmt.Sprintf("concert %d", id), err)
	}
	return c, nil
}

// ListConcerts implements booking.Store.
func (s *Store) ListConcerts(ctx context.Context, after int64, limit int) ([]booking.Concert, error) {
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("mysqlbooking: list concerts: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT concert_id, title, created_at FROM concert
		WHERE concert_id > ? ORDER BY concert_id LIMIT ?`, after, limit)
	return collect(rows, err, "list concerts", func(rows *sql.Rows) (booking.Concert, error) {
		var c booking.Concert
		err := rows.Scan(&c.ID, &c.Title, &c.CreatedAt)
		return c, err
	})
}

// ListSchedules implements booking.Store (by concert: the index
// schedule_concert_id).
func (s *Store) ListSchedules(ctx context.Context, concertID, after int64, limit int) ([]booking.Schedule, error) {
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("mysqlbooking: list schedules: %w", err)
	}
	q := `SELECT schedule_id, concert_id, starts_at, room FROM schedule WHERE schedule_id > ? ORDER BY schedule_id LIMIT ?`
	args := []any{after, limit}
	if concertID > 0 {
		q = `SELECT schedule_id, concert_id, starts_at, room FROM schedule
			WHERE concert_id = ? AND schedule_id > ? ORDER BY schedule_id LIMIT ?`
		args = []any{concertID, after, limit}
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	return collect(rows, err, "list schedules", scanSchedule)
}

// ListReservations implements booking.Store. reservation_id is VARBINARY:
// it compares in byte order, as the indexes are built.
func (s *Store) ListReservations(ctx context.Context, scheduleID int64, status booking.ReservationStatus, after string, limit int) ([]booking.Reservation, error) {
	op := fmt.Sprintf("list reservations of schedule %d", scheduleID)
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("mysqlbooking: %s: %w", op, err)
	}
	q := selectReservation + ` WHERE schedule_id = ? AND reservation_id > ? ORDER BY reservation_id LIMIT ?`
	args := []any{scheduleID, []byte(after), limit}
	if status != "" {
		q = selectReservation + ` WHERE schedule_id = ? AND status = ? AND reservation_id > ? ORDER BY reservation_id LIMIT ?`
		args = []any{scheduleID, string(status), []byte(after), limit}
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	return collect(rows, err, op, scanReservation)
}
