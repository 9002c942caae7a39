// Package sqlitebooking is the booking.Store in one SQLite file: the embedded
// default, for a single usher instance. It is pure Go (modernc.org/sqlite),
// so the binary needs no C toolchain or server.
//
// Every write queues in process for the one writer connection; each Decide
// call is one BEGIN IMMEDIATE transaction that sells seats with the
// contract's conditional UPDATE, and one fsync (synchronous=FULL: a confirmed
// sale survives power loss). Reads use a small pool of read-only connections
// and never wait for the writer.
//
// Limits: another process may open the file, but contends through the busy
// timeout, and a write that cannot get the lock in time fails with
// booking.ErrUnavailable. Times come back in UTC with microsecond resolution.
// See docs/architecture.md#three-lines-of-defence.
package sqlitebooking

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"usher/internal/booking"
	"usher/internal/sqlitedb"
	"usher/internal/sqlmigrate"
)

var (
	_ booking.Store      = (*Store)(nil)
	_ booking.SeatStater = (*Store)(nil)
)

//go:embed migrations/*.sql
var migrations embed.FS

const (
	readers = 4
	// insertChunk is how many seats one INSERT statement carries (6
	// parameters each, far below SQLite's 32,766-parameter limit).
	insertChunk = 500
)

// Store is a booking.Store on one SQLite file.
type Store struct {
	w *sql.DB // exactly one connection: the writer
	r *sql.DB // read-only connections
}

// Open opens (creating if needed) the database file at path, creating its
// directory if needed, in WAL mode, and applies the embedded migrations
// (schema_migrations records them). The path cannot be ":memory:" (the
// readers would see another database).
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || path == ":memory:" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlitebooking: open %q: want a file path without '?' or '#': %w", path, booking.ErrInvalid)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("sqlitebooking: open %s: %w: %w", path, booking.ErrUnavailable, err)
	}
	w, r, err := sqlitedb.Open(ctx, path, readers, migrate, "foreign_keys(1)")
	if err != nil {
		return nil, wrap("open "+path, err)
	}
	return &Store{w: w, r: r}, nil
}

// Close closes both pools.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// migrate applies every embedded migration not yet recorded, in one
// immediate transaction, so concurrent Opens of one file apply each once.
func migrate(ctx context.Context, db *sql.DB) error {
	return sqlmigrate.SQLite(ctx, db, migrations, "migrations", "schema_migrations")
}

// now is the store's clock: UTC, microsecond resolution (what is stored).
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// CreateConcert creates a concert.
func (s *Store) CreateConcert(ctx context.Context, title string) (booking.Concert, error) {
	c := booking.Concert{Title: title, CreatedAt: now()}
	err := s.w.QueryRowContext(ctx, `INSERT INTO concert (title, created_at) VALUES (?, ?) RETURNING concert_id`,
		title, micros(c.CreatedAt)).Scan(&c.ID)
	if err != nil {
		return booking.Concert{}, wrap("create concert", err)
	}
	return c, nil
}

// CreateSchedule creates a schedule of an existing concert; an empty Room
// becomes "schedule-<id>".
func (s *Store) CreateSchedule(ctx context.Context, sch booking.Schedule) (booking.Schedule, error) {
	op := fmt.Sprintf("create schedule of concert %d", sch.ConcertID)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return booking.Schedule{}, wrap(op, err)
	}
	defer tx.Rollback()
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM concert WHERE concert_id = ?)`, sch.ConcertID).Scan(&exists); err != nil {
		return booking.Schedule{}, wrap(op, err)
	}
	if !exists {
		return booking.Schedule{}, fmt.Errorf("sqlitebooking: %s: concert: %w", op, booking.ErrNotFound)
	}
	sch.StartsAt = sch.StartsAt.UTC().Truncate(time.Microsecond)
	// The writer is the only one, so MAX+1 inside its transaction is the
	// next id, and the default room can name it in the same statement.
	err = tx.QueryRowContext(ctx, `
		INSERT INTO schedule (schedule_id, concert_id, starts_at, room)
		SELECT next, ?, ?, COALESCE(NULLIF(?, ''), 'schedule-' || next)
		  FROM (SELECT COALESCE(MAX(schedule_id), 0) + 1 AS next FROM schedule)
		RETURNING schedule_id, room`,
		sch.ConcertID, micros(sch.StartsAt), sch.Room).Scan(&sch.ID, &sch.Room)
	if err != nil {
		return booking.Schedule{}, wrap(op, err)
	}
	if err := tx.Commit(); err != nil {
		return booking.Schedule{}, wrap(op, err)
	}
	return sch, nil
}

// Schedule returns a schedule.
func (s *Store) Schedule(ctx context.Context, id int64) (booking.Schedule, error) {
	sch := booking.Schedule{ID: id}
	var startsAt int64
	err := s.r.QueryRowContext(ctx, `SELECT concert_id, starts_at, room FROM schedule WHERE schedule_id = ?`, id).
		Scan(&sch.ConcertID, &startsAt, &sch.Room)
	if err != nil {
		return booking.Schedule{}, wrap(fmt.Sprintf("schedule %d", id), err)
	}
	sch.StartsAt = fromMicros(startsAt)
	return sch, nil
}

// Schedules implements booking.Store.
func (s *Store) Schedules(ctx context.Context) ([]booking.Schedule, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT schedule_id, concert_id, starts_at, room FROM schedule ORDER BY schedule_id`)
	if err != nil {
		return nil, wrap("schedules", err)
	}
	defer rows.Close()
	var out []booking.Schedule
	for rows.Next() {
		var sch booking.Schedule
		var startsAt int64
		if err := rows.Scan(&sch.ID, &sch.ConcertID, &startsAt, &sch.Room); err != nil {
			return nil, wrap("schedules", err)
		}
		sch.StartsAt = fromMicros(startsAt)
		out = append(out, sch)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("schedules", err)
	}
	return out, nil
}

// AddSeats creates seats in bulk (one transaction, multi-row INSERTs of
// insertChunk seats) and returns their ids in order; the ids increase in
// the order of seats.
func (s *Store) AddSeats(ctx context.Context, scheduleID int64, seats []booking.SeatSpec) ([]int64, error) {
	op := fmt.Sprintf("add %d seats to schedule %d", len(seats), scheduleID)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, wrap(op, err)
	}
	defer tx.Rollback()
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schedule WHERE schedule_id = ?)`, scheduleID).Scan(&exists); err != nil {
		return nil, wrap(op, err)
	}
	if !exists {
		return nil, fmt.Errorf("sqlitebooking: %s: schedule: %w", op, booking.ErrNotFound)
	}
	if err := booking.CheckSeatSpecs(seats); err != nil {
		return nil, fmt.Errorf("sqlitebooking: %s: %w", op, err)
	}
	if len(seats) == 0 {
		return nil, nil
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seat_id), 0) FROM seat`).Scan(&last); err != nil {
		return nil, wrap(op, err)
	}
	ids := make([]int64, len(seats))
	var stmt *sql.Stmt
	args := make([]any, 0, 6*insertChunk)
	for start := 0; start < len(seats); start += insertChunk {
		chunk := seats[start:min(start+insertChunk, len(seats))]
		if stmt == nil || len(chunk) < insertChunk {
			if stmt != nil {
				stmt.Close()
			}
			q := `INSERT INTO seat (seat_id, schedule_id, section, seat_row, seat_number, price) VALUES ` +
				strings.Repeat("(?, ?, ?, ?, ?, ?), ", len(chunk)-1) + "(?, ?, ?, ?, ?, ?)"
			if stmt, err = tx.PrepareContext(ctx, q); err != nil {
				return nil, wrap(op, err)
			}
		}
		args = args[:0]
		for i, seat := range chunk {
			ids[start+i] = last + int64(start+i) + 1
			args = append(args, ids[start+i], scheduleID, seat.Section, seat.Row, seat.Number, seat.Price)
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			stmt.Close()
			return nil, booking.Refused(wrap(op, err), booking.ErrSeatExists)
		}
	}
	stmt.Close()
	if err := tx.Commit(); err != nil {
		return nil, wrap(op, err)
	}
	return ids, nil
}

// Seats lists a schedule's seats ordered by id.
func (s *Store) Seats(ctx context.Context, scheduleID int64) ([]booking.Seat, error) {
	op := fmt.Sprintf("seats of schedule %d", scheduleID)
	// One read transaction: the existence check and the list see one
	// snapshot.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, wrap(op, err)
	}
	defer tx.Rollback()
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schedule WHERE schedule_id = ?)`, scheduleID).Scan(&exists); err != nil {
		return nil, wrap(op, err)
	}
	if !exists {
		return nil, fmt.Errorf("sqlitebooking: %s: %w", op, booking.ErrNotFound)
	}
	rows, err := tx.QueryContext(ctx, `
		SELECT seat_id, section, seat_row, seat_number, price, status, COALESCE(reservation_id, '')
		  FROM seat WHERE schedule_id = ? ORDER BY seat_id`, scheduleID)
	if err != nil {
		return nil, wrap(op, err)
	}
	defer rows.Close()
	var out []booking.Seat
	for rows.Next() {
		seat := booking.Seat{ScheduleID: scheduleID}
		if err := rows.Scan(&seat.ID, &seat.Section, &seat.Row, &seat.Number, &seat.Price, &seat.Status, &seat.ReservationID); err != nil {
			return nil, wrap(op, err)
		}
		out = append(out, seat)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}

// SeatStates implements booking.SeatStater, in one read transaction.
func (s *Store) SeatStates(ctx context.Context, scheduleID int64) (int, []booking.SeatState, error) {
	op := fmt.Sprintf("seat states of schedule %d", scheduleID)
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, nil, wrap(op, err)
	}
	defer tx.Rollback()
	var total int
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schedule WHERE schedule_id = ?),
		(SELECT count(*) FROM seat WHERE schedule_id = ?)`, scheduleID, scheduleID).Scan(&exists, &total); err != nil {
		return 0, nil, wrap(op, err)
	}
	if !exists {
		return 0, nil, fmt.Errorf("sqlitebooking: %s: %w", op, booking.ErrNotFound)
	}
	rows, err := tx.QueryContext(ctx, `SELECT seat_id, status FROM seat WHERE schedule_id = ? AND status <> 'AVAILABLE' ORDER BY seat_id`, scheduleID)
	if err != nil {
		return 0, nil, wrap(op, err)
	}
	defer rows.Close()
	var taken []booking.SeatState
	for rows.Next() {
		var st booking.SeatState
		if err := rows.Scan(&st.ID, &st.Status); err != nil {
			return 0, nil, wrap(op, err)
		}
		taken = append(taken, st)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, wrap(op, err)
	}
	return total, taken, nil
}

// SetStock creates a schedule's stock or sets its total.
func (s *Store) SetStock(ctx context.Context, scheduleID, total int64) error {
	op := fmt.Sprintf("set stock of schedule %d to %d", scheduleID, total)
	if total < 0 {
		return fmt.Errorf("sqlitebooking: %s: %w", op, booking.ErrInvalid)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return wrap(op, err)
	}
	defer tx.Rollback()
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schedule WHERE schedule_id = ?)`, scheduleID).Scan(&exists); err != nil {
		return wrap(op, err)
	}
	if !exists {
		return fmt.Errorf("sqlitebooking: %s: schedule: %w", op, booking.ErrNotFound)
	}
	// The CHECK (sold <= total) refuses a total below the units sold:
	// ErrInvalid.
	if _, err := tx.ExecContext(ctx, `INSERT INTO stock (schedule_id, total) VALUES (?1, ?2)
		ON CONFLICT (schedule_id) DO UPDATE SET total = ?2`, scheduleID, total); err != nil {
		return booking.Refused(wrap(op, err), booking.ErrBelowSold)
	}
	if err := tx.Commit(); err != nil {
		return wrap(op, err)
	}
	return nil
}

// Stock returns a schedule's stock.
func (s *Store) Stock(ctx context.Context, scheduleID int64) (booking.Stock, error) {
	var st booking.Stock
	err := s.r.QueryRowContext(ctx, `SELECT total, sold FROM stock WHERE schedule_id = ?`, scheduleID).Scan(&st.Total, &st.Sold)
	if err != nil {
		return booking.Stock{}, wrap(fmt.Sprintf("stock of schedule %d", scheduleID), err)
	}
	return st, nil
}

// wrap adds the operation to err and classifies it: sql.ErrNoRows becomes
// booking.ErrNotFound, a constraint violation booking.ErrInvalid, and a
// failure to reach the file (locked past the busy timeout, I/O error,
// cancelled or timed-out context) booking.ErrUnavailable.
func wrap(op string, err error) error {
	var sqErr *sqlite.Error
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlitebooking: %s: %w", op, booking.ErrNotFound)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, sql.ErrConnDone):
		return fmt.Errorf("sqlitebooking: %s: %w: %w", op, booking.ErrUnavailable, err)
	case errors.As(err, &sqErr):
		switch sqErr.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT:
			return fmt.Errorf("sqlitebooking: %s: %w: %w", op, booking.ErrInvalid, err)
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_NOTADB,
			sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_INTERRUPT:
			return fmt.Errorf("sqlitebooking: %s: %w: %w", op, booking.ErrUnavailable, err)
		}
	}
	return fmt.Errorf("sqlitebooking: %s: %w", op, err)
}
