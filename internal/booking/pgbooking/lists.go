package pgbooking

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"usher/internal/booking"
)

// Concert implements booking.Store.
func (s *Store) Concert(ctx context.Context, id int64) (booking.Concert, error) {
	c := booking.Concert{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT title, created_at FROM concert WHERE concert_id = $1`, id).Scan(&c.Title, &c.CreatedAt)
	if err != nil {
		return booking.Concert{}, wrap(fmt.Sprintf("concert %d", id), err)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return c, nil
}

// ListConcerts implements booking.Store.
func (s *Store) ListConcerts(ctx context.Context, after int64, limit int) ([]booking.Concert, error) {
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("pgbooking: list concerts: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT concert_id, title, created_at FROM concert
		WHERE concert_id > $1 ORDER BY concert_id LIMIT $2`, after, limit)
	return collect(rows, err, "list concerts", func(row pgx.CollectableRow) (booking.Concert, error) {
		var c booking.Concert
		err := row.Scan(&c.ID, &c.Title, &c.CreatedAt)
		c.CreatedAt = c.CreatedAt.UTC()
		return c, err
	})
}

// ListSchedules implements booking.Store (by concert: the index
// schedule_concert_id).
func (s *Store) ListSchedules(ctx context.Context, concertID, after int64, limit int) ([]booking.Schedule, error) {
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("pgbooking: list schedules: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT schedule_id, concert_id, starts_at, room FROM schedule
		WHERE ($3::bigint = 0 OR concert_id = $3) AND schedule_id > $1 ORDER BY schedule_id LIMIT $2`, after, limit, concertID)
	return collect(rows, err, "list schedules", func(row pgx.CollectableRow) (booking.Schedule, error) {
		var sch booking.Schedule
		err := row.Scan(&sch.ID, &sch.ConcertID, &sch.StartsAt, &sch.Room)
		sch.StartsAt = sch.StartsAt.UTC()
		return sch, err
	})
}

// ListReservations implements booking.Store. Ids compare with COLLATE "C"
// (byte order), as the indexes of migration 0003 are built.
func (s *Store) ListReservations(ctx context.Context, scheduleID int64, status booking.ReservationStatus, after string, limit int) ([]booking.Reservation, error) {
	op := fmt.Sprintf("list reservations of schedule %d", scheduleID)
	if err := booking.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("pgbooking: %s: %w", op, err)
	}
	cols := `SELECT reservation_id, visitor, schedule_id, seat_ids, quantity, status, reason, created_at, decided_at FROM reservation`
	q := cols + ` WHERE schedule_id = $1 AND reservation_id COLLATE "C" > $2
		ORDER BY reservation_id COLLATE "C" LIMIT $3`
	args := []any{scheduleID, after, limit}
	if status != "" {
		q = cols + ` WHERE schedule_id = $1 AND status = $4 AND reservation_id COLLATE "C" > $2
			ORDER BY reservation_id COLLATE "C" LIMIT $3`
		args = append(args, string(status))
	}
	rows, err := s.pool.Query(ctx, q, args...)
	return collect(rows, err, op, scanReservation)
}

// collect reads every row of a query with scan.
func collect[T any](rows pgx.Rows, err error, op string, scan pgx.RowToFunc[T]) ([]T, error) {
	if err != nil {
		return nil, wrap(op, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}
