// Package pgbooking is the booking.Store on PostgreSQL (pgx v5, pgxpool): the
// backend for several usher instances sharing one catalog.
//
// Decide sells every seat with the contract's conditional UPDATE (status IN
// ('AVAILABLE','HELD')), one transaction per call, never by reading a status
// and writing it back: two instances, or a hold layer that was wrong, never
// sell a seat twice. A failure to reach the server, or the caller's context
// ending while it waits for a connection, wraps booking.ErrUnavailable.
//
// Limits: at most the poolSize given to Open connections, callers beyond it
// waiting in this process; times come back in UTC with microsecond
// resolution. How Decide batches and locks:
// docs/architecture.md#three-lines-of-defence.
package pgbooking

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"usher/internal/booking"
	"usher/internal/sqlmigrate"
)

var (
	_ booking.Store      = (*Store)(nil)
	_ booking.SeatStater = (*Store)(nil)
)

//go:embed migrations/*.sql
var migrations embed.FS

const (
	defaultConnectTimeout = 5 * time.Second
	// migrationLock is the advisory lock key taken while migrating
	// (database-wide: instances using different schemas also take turns).
	migrationLock = int64(0x75736865725f626b) // "usher_bk"
)

// Store is a booking.Store on a PostgreSQL connection pool.
type Store struct {
	pool *pgxpool.Pool
	// pipelineOnly turns the set path off (tests only: export_test.go).
	pipelineOnly bool
}

// Open connects to the database at url (a postgres:// URL or key=value
// DSN) with at most poolSize connections and applies the embedded
// migrations once, under an advisory lock, in the URL's search_path
// (schema_migrations records them). Without connect_timeout in the URL a
// connection waits at most defaultConnectTimeout to open.
func Open(ctx context.Context, url string, poolSize int) (*Store, error) {
	if poolSize < 1 {
		return nil, fmt.Errorf("pgbooking: open: pool size %d: %w", poolSize, booking.ErrInvalid)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil { // the error does not repeat the password
		return nil, fmt.Errorf("pgbooking: open: %w: %w", booking.ErrInvalid, err)
	}
	cfg.MaxConns = int32(poolSize)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrap("open", err)
	}
	if err := checkSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, wrap("open: migrate", err)
	}
	return &Store{pool: pool}, nil
}

// checkSchema refuses a search_path none of whose schemas exists, which
// PostgreSQL reports only at the first CREATE TABLE as "no schema has been
// selected to create in". usher does not create the schema: a misspelt
// search_path would then start an empty catalog beside the real one.
func checkSchema(ctx context.Context, pool *pgxpool.Pool) error {
	var schema *string
	var path string
	if err := pool.QueryRow(ctx, `SELECT current_schema(), current_setting('search_path')`).Scan(&schema, &path); err != nil {
		return wrap("open", err)
	}
	if schema == nil {
		return fmt.Errorf("pgbooking: open: no schema of search_path %q exists: create it first (CREATE SCHEMA …): %w", path, booking.ErrInvalid)
	}
	return nil
}

// Close closes the pool's connections.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// migrate applies every embedded migration not yet recorded, in one
// transaction holding the migration advisory lock.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return sqlmigrate.Postgres(ctx, pool, migrations, "migrations", "schema_migrations", migrationLock)
}

// now is the store's clock: UTC, microsecond resolution (what timestamptz
// keeps).
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// CreateConcert creates a concert.
func (s *Store) CreateConcert(ctx context.Context, title string) (booking.Concert, error) {
	c := booking.Concert{Title: title, CreatedAt: now()}
	err := s.pool.QueryRow(ctx, `INSERT INTO concert (title, created_at) VALUES ($1, $2) RETURNING concert_id`,
		title, c.CreatedAt).Scan(&c.ID)
	if err != nil {
		return booking.Concert{}, wrap("create concert", err)
	}
	return c, nil
}

// CreateSchedule creates a schedule of an existing concert; an empty Room
// becomes "schedule-<id>".
func (s *Store) CreateSchedule(ctx context.Context, sch booking.Schedule) (booking.Schedule, error) {
	sch.StartsAt = sch.StartsAt.UTC().Truncate(time.Microsecond)
	err := s.pool.QueryRow(ctx, `
		INSERT INTO schedule (schedule_id, concert_id, starts_at, room)
		SELECT id, $1, $2, COALESCE(NULLIF($3::text, ''), 'schedule-' || id)
		  FROM (SELECT nextval(pg_get_serial_sequence('schedule', 'schedule_id')) AS id) next
		RETURNING schedule_id, room`,
		sch.ConcertID, sch.StartsAt, sch.Room).Scan(&sch.ID, &sch.Room)
	if err != nil {
		// A foreign key violation (unknown concert) becomes ErrNotFound.
		return booking.Schedule{}, wrap(fmt.Sprintf("create schedule of concert %d", sch.ConcertID), err)
	}
	return sch, nil
}

// Schedule returns a schedule.
func (s *Store) Schedule(ctx context.Context, id int64) (booking.Schedule, error) {
	sch := booking.Schedule{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT concert_id, starts_at, room FROM schedule WHERE schedule_id = $1`, id).
		Scan(&sch.ConcertID, &sch.StartsAt, &sch.Room)
	if err != nil {
		return booking.Schedule{}, wrap(fmt.Sprintf("schedule %d", id), err)
	}
	sch.StartsAt = sch.StartsAt.UTC()
	return sch, nil
}

// Schedules implements booking.Store.
func (s *Store) Schedules(ctx context.Context) ([]booking.Schedule, error) {
	rows, err := s.pool.Query(ctx, `SELECT schedule_id, concert_id, starts_at, room FROM schedule ORDER BY schedule_id`)
	if err != nil {
		return nil, wrap("schedules", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (booking.Schedule, error) {
		var sch booking.Schedule
		err := row.Scan(&sch.ID, &sch.ConcertID, &sch.StartsAt, &sch.Room)
		sch.StartsAt = sch.StartsAt.UTC()
		return sch, err
	})
	if err != nil {
		return nil, wrap("schedules", err)
	}
	return out, nil
}

// SetStock creates a schedule's stock or sets its total. An unknown
// schedule (foreign key) is ErrNotFound; a total below the units sold (the
// CHECK) is ErrInvalid.
func (s *Store) SetStock(ctx context.Context, scheduleID, total int64) error {
	op := fmt.Sprintf("set stock of schedule %d to %d", scheduleID, total)
	if total < 0 {
		return fmt.Errorf("pgbooking: %s: %w", op, booking.ErrInvalid)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO stock (schedule_id, total) VALUES ($1, $2)
		ON CONFLICT (schedule_id) DO UPDATE SET total = EXCLUDED.total`, scheduleID, total)
	if err != nil {
		return booking.Refused(wrap(op, err), booking.ErrBelowSold)
	}
	return nil
}

// Stock returns a schedule's stock.
func (s *Store) Stock(ctx context.Context, scheduleID int64) (booking.Stock, error) {
	var st booking.Stock
	err := s.pool.QueryRow(ctx, `SELECT total, sold FROM stock WHERE schedule_id = $1`, scheduleID).Scan(&st.Total, &st.Sold)
	if err != nil {
		return booking.Stock{}, wrap(fmt.Sprintf("stock of schedule %d", scheduleID), err)
	}
	return st, nil
}

// AddSeats creates seats in bulk and returns their ids in order: one
// transaction that draws the ids from the seat sequence in one statement
// and loads the rows with COPY. The ids increase in the order of seats.
func (s *Store) AddSeats(ctx context.Context, scheduleID int64, seats []booking.SeatSpec) ([]int64, error) {
	op := fmt.Sprintf("add %d seats to schedule %d", len(seats), scheduleID)
	var ids []int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schedule WHERE schedule_id = $1)`, scheduleID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("schedule: %w", booking.ErrNotFound)
		}
		if err := booking.CheckSeatSpecs(seats); err != nil {
			return err
		}
		if len(seats) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT nextval(pg_get_serial_sequence('seat', 'seat_id')) FROM generate_series(1, $1)`, len(seats))
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		slices.Sort(ids)
		_, err = tx.CopyFrom(ctx, pgx.Identifier{"seat"},
			[]string{"seat_id", "schedule_id", "section", "seat_row", "seat_number", "price"},
			pgx.CopyFromSlice(len(seats), func(i int) ([]any, error) {
				seat := seats[i]
				return []any{ids[i], scheduleID, seat.Section, seat.Row, seat.Number, seat.Price}, nil
			}))
		return err
	})
	if err != nil {
		return nil, booking.Refused(wrap(op, err), booking.ErrSeatExists)
	}
	return ids, nil
}

// Seats lists a schedule's seats ordered by id.
func (s *Store) Seats(ctx context.Context, scheduleID int64) ([]booking.Seat, error) {
	op := fmt.Sprintf("seats of schedule %d", scheduleID)
	rows, err := s.pool.Query(ctx, `
		SELECT seat_id, section, seat_row, seat_number, price, status, COALESCE(reservation_id, '')
		  FROM seat WHERE schedule_id = $1 ORDER BY seat_id`, scheduleID)
	if err != nil {
		return nil, wrap(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (booking.Seat, error) {
		seat := booking.Seat{ScheduleID: scheduleID}
		err := row.Scan(&seat.ID, &seat.Section, &seat.Row, &seat.Number, &seat.Price, &seat.Status, &seat.ReservationID)
		return seat, err
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	if len(out) == 0 { // none, or no such schedule
		if _, err := s.Schedule(ctx, scheduleID); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return out, nil
}

// SeatStates implements booking.SeatStater: one round trip.
func (s *Store) SeatStates(ctx context.Context, scheduleID int64) (int, []booking.SeatState, error) {
	op := fmt.Sprintf("seat states of schedule %d", scheduleID)
	b := &pgx.Batch{}
	b.Queue(`SELECT count(*) FROM seat WHERE schedule_id = $1`, scheduleID)
	b.Queue(`SELECT seat_id, status FROM seat WHERE schedule_id = $1 AND status <> 'AVAILABLE' ORDER BY seat_id`, scheduleID)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	var total int
	if err := br.QueryRow().Scan(&total); err != nil {
		return 0, nil, wrap(op, err)
	}
	rows, err := br.Query()
	if err != nil {
		return 0, nil, wrap(op, err)
	}
	taken, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (booking.SeatState, error) {
		var st booking.SeatState
		err := row.Scan(&st.ID, &st.Status)
		return st, err
	})
	if err != nil {
		return 0, nil, wrap(op, err)
	}
	if total == 0 { // none, or no such schedule
		if err := br.Close(); err != nil {
			return 0, nil, wrap(op, err)
		}
		if _, err := s.Schedule(ctx, scheduleID); err != nil {
			return 0, nil, err
		}
	}
	return total, taken, nil
}

// wrap adds the operation to err and classifies it: no rows and foreign
// key violations become booking.ErrNotFound, other constraint violations
// and bad values booking.ErrInvalid, failures to reach the server
// booking.ErrUnavailable.
func wrap(op string, err error) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, booking.ErrNotFound), errors.Is(err, booking.ErrInvalid), errors.Is(err, booking.ErrUnavailable):
		return fmt.Errorf("pgbooking: %s: %w", op, err)
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgbooking: %s: %w", op, booking.ErrNotFound)
	case unavailable(err):
		return fmt.Errorf("pgbooking: %s: %w: %w", op, booking.ErrUnavailable, err)
	case errors.As(err, &pgErr) && pgErr.Code == "23503": // foreign_key_violation
		return fmt.Errorf("pgbooking: %s: %w: %w", op, booking.ErrNotFound, err)
	case errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "23") || strings.HasPrefix(pgErr.Code, "22")):
		// integrity constraint violation, data exception
		return fmt.Errorf("pgbooking: %s: %w: %w", op, booking.ErrInvalid, err)
	}
	return fmt.Errorf("pgbooking: %s: %w", op, err)
}

// unavailable reports whether err means the server could not be reached or
// could not serve: a connection that failed to open or broke, a timeout,
// the caller's context ending, or a server-side connection exception,
// resource shortage or shutdown.
func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection_exception
			strings.HasPrefix(pgErr.Code, "53"),          // insufficient_resources (too_many_connections, disk_full)
			strings.HasPrefix(pgErr.Code, "57P"),         // admin/crash shutdown, cannot_connect_now
			pgErr.Code == "58000", pgErr.Code == "58030": // system_error, io_error
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err)
}
