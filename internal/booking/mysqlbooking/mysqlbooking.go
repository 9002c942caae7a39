// Package mysqlbooking is the booking.Store on MySQL 8.0 or MariaDB 10.6
// and later (InnoDB, github.com/go-sql-driver/mysql): the backend for
// several usher instances sharing one catalog on the database most
// ticketing sites already run.
//
// Decide sells every seat with the contract's conditional UPDATE (status IN
// ('AVAILABLE','HELD')), one transaction per call after locking the batch's
// seats in id order (SELECT … FOR UPDATE), never by reading a status and
// writing it back: two instances, or a hold layer that was wrong, never
// sell a seat twice. A failure to reach the server wraps
// booking.ErrUnavailable.
//
// Limits: at most the poolSize given to Open connections; times in UTC with
// microsecond resolution; reservation ids up to 255 bytes; migrations are
// not transactional (MySQL commits DDL at once) but each may run again.
package mysqlbooking

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"usher/internal/booking"
	"usher/internal/mysqldb"
	"usher/internal/sqlmigrate"
)

var (
	_ booking.Store      = (*Store)(nil)
	_ booking.SeatStater = (*Store)(nil)
)

//go:embed migrations/*.sql
var migrations embed.FS

const (
	// migrationLock is the GET_LOCK name taken while migrating
	// (server-wide: stores in other databases also take turns).
	migrationLock = "usher_booking_migrate"
	// insertChunk is how many rows one multi-row INSERT carries (far below
	// the 65,535 placeholders of a prepared statement).
	insertChunk = 500
)

// Store is a booking.Store on a MySQL connection pool.
type Store struct {
	db *sql.DB
	// pipelineOnly turns the set path off (tests only: export_test.go).
	pipelineOnly bool
}

// Open connects to the database at url (mysql://user:pass@host:port/db,
// with the driver's parameters in the query) with at most poolSize
// connections and applies the embedded migrations once, under a named
// lock (schema_migrations records them). Without timeout in the URL a
// connection waits at most mysqldb.DefaultConnectTimeout to open.
func Open(ctx context.Context, url string, poolSize int) (*Store, error) {
	if poolSize < 1 {
		return nil, fmt.Errorf("mysqlbooking: open: pool size %d: %w", poolSize, booking.ErrInvalid)
	}
	mig, err := mysqldb.Open(ctx, url, 1, true, booking.ErrInvalid, booking.ErrUnavailable)
	if err != nil {
		return nil, fmt.Errorf("mysqlbooking: open: %w", err)
	}
	err = sqlmigrate.MySQL(ctx, mig, migrations, "migrations", "schema_migrations", migrationLock)
	mig.Close()
	if err != nil {
		return nil, wrap("open: migrate", err)
	}
	db, err := mysqldb.Open(ctx, url, poolSize, false, booking.ErrInvalid, booking.ErrUnavailable)
	if err != nil {
		return nil, fmt.Errorf("mysqlbooking: open: %w", err)
	}
	return &Store{db: db}, nil
}

// Close closes the pool's connections.
func (s *Store) Close() error { return s.db.Close() }

// now is the store's clock: UTC, microsecond resolution (what DATETIME(6)
// keeps).
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// CreateConcert creates a concert.
func (s *Store) CreateConcert(ctx context.Context, title string) (booking.Concert, error) {
	c := booking.Concert{Title: title, CreatedAt: now()}
	res, err := s.db.ExecContext(ctx, `INSERT INTO concert (title, created_at) VALUES (?, ?)`, title, c.CreatedAt)
	if err == nil {
		c.ID, err = res.LastInsertId()
	}
	if err != nil {
		return booking.Concert{}, wrap("create concert", err)
	}
	return c, nil
}

// CreateSchedule creates a schedule of an existing concert; an empty Room
// becomes "schedule-<id>". MySQL has no RETURNING and no sequence to draw
// from first: the row is inserted, then its default room set from the id,
// in one transaction.
func (s *Store) CreateSchedule(ctx context.Context, sch booking.Schedule) (booking.Schedule, error) {
	op := fmt.Sprintf("create schedule of concert %d", sch.ConcertID)
	sch.StartsAt = sch.StartsAt.UTC().Truncate(time.Microsecond)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		room := sch.Room
		if room == "" {
			room = "schedule-" // completed below, once the id is known
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO schedule (concert_id, starts_at, room) VALUES (?, ?, ?)`,
			sch.ConcertID, sch.StartsAt, room)
		if err != nil {
			return err
		}
		if sch.ID, err = res.LastInsertId(); err != nil {
			return err
		}
		if sch.Room == "" {
			sch.Room = fmt.Sprintf("schedule-%d", sch.ID)
			_, err = tx.ExecContext(ctx, `UPDATE schedule SET room = ? WHERE schedule_id = ?`, sch.Room, sch.ID)
		}
		return err
	})
	if err != nil {
		// A foreign key violation (unknown concert) becomes ErrNotFound.
		return booking.Schedule{}, wrap(op, err)
	}
	return sch, nil
}

// Schedule returns a schedule.
func (s *Store) Schedule(ctx context.Context, id int64) (booking.Schedule, error) {
	sch := booking.Schedule{ID: id}
	err := s.db.QueryRowContext(ctx, `SELECT concert_id, starts_at, room FROM schedule WHERE schedule_id = ?`, id).
		Scan(&sch.ConcertID, &sch.StartsAt, &sch.Room)
	if err != nil {
		return booking.Schedule{}, wrap(fmt.Sprintf("schedule %d", id), err)
	}
	return sch, nil
}

// Schedules implements booking.Store.
func (s *Store) Schedules(ctx context.Context) ([]booking.Schedule, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT schedule_id, concert_id, starts_at, room FROM schedule ORDER BY schedule_id`)
	return collect(rows, err, "schedules", scanSchedule)
}

func scanSchedule(rows *sql.Rows) (booking.Schedule, error) {
	var sch booking.Schedule
	err := rows.Scan(&sch.ID, &sch.ConcertID, &sch.StartsAt, &sch.Room)
	return sch, err
}

// SetStock creates a schedule's stock or sets its total. An unknown
// schedule (foreign key) is ErrNotFound; a total below the units sold (the
// CHECK) is ErrInvalid.
func (s *Store) SetStock(ctx context.Context, scheduleID, total int64) error {
	op := fmt.Sprintf("set stock of schedule %d to %d", scheduleID, total)
	if total < 0 {
		return fmt.Errorf("mysqlbooking: %s: %w", op, booking.ErrInvalid)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO stock (schedule_id, total) VALUES (?, ?)
		ON DUPLICATE KEY UPDATE total = VALUES(total)`, scheduleID, total)
	if err != nil {
		return booking.Refused(wrap(op, err), booking.ErrBelowSold)
	}
	return nil
}

// Stock returns a schedule's stock.
func (s *Store) Stock(ctx context.Context, scheduleID int64) (booking.Stock, error) {
	var st booking.Stock
	err := s.db.QueryRowContext(ctx, `SELECT total, sold FROM stock WHERE schedule_id = ?`, scheduleID).Scan(&st.Total, &st.Sold)
	if err != nil {
		return booking.Stock{}, wrap(fmt.Sprintf("stock of schedule %d", scheduleID), err)
	}
	return st, nil
}

// AddSeats creates seats in bulk: one transaction of multi-row INSERTs of
// insertChunk seats, then one SELECT of the ids by place (the unique key),
// since AUTO_INCREMENT does not promise consecutive ids to a statement
// under innodb_autoinc_lock_mode=2. The ids increase in the order of seats.
func (s *Store) AddSeats(ctx context.Context, scheduleID int64, seats []booking.SeatSpec) ([]int64, error) {
	op := fmt.Sprintf("add %d seats to schedule %d", len(seats), scheduleID)
	var ids []int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schedule WHERE schedule_id = ?`, scheduleID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("schedule: %w", booking.ErrNotFound)
		}
		if err := booking.CheckSeatSpecs(seats); err != nil {
			return err
		}
		if len(seats) == 0 {
			return nil
		}
		first := int64(-1)
		args := make([]any, 0, 6*insertChunk)
		for start := 0; start < len(seats); start += insertChunk {
			chunk := seats[start:min(start+insertChunk, len(seats))]
			args = args[:0]
			for _, seat := range chunk {
				args = append(args, scheduleID, seat.Section, seat.Row, seat.Number, seat.Price)
			}
			res, err := tx.ExecContext(ctx, `INSERT INTO seat (schedule_id, section, seat_row, seat_number, price) VALUES `+
				placeholders(len(chunk), "(?, ?, ?, ?, ?)"), args...)
			if err != nil {
				return err
			}
			if first < 0 {
				if first, err = res.LastInsertId(); err != nil {
					return err
				}
			}
		}
		type place struct {
			section, row string
			number       int
		}
		byPlace := make(map[place]int64, len(seats))
		rows, err := tx.QueryContext(ctx, `SELECT seat_id, section, seat_row, seat_number FROM seat
			WHERE schedule_id = ? AND seat_id >= ?`, scheduleID, first)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var p place
			if err := rows.Scan(&id, &p.section, &p.row, &p.number); err != nil {
				return err
			}
			byPlace[p] = id
		}
		if err := rows.Err(); err != nil {
			return err
		}
		ids = make([]int64, len(seats))
		for i, seat := range seats {
			id, ok := byPlace[place{seat.Section, seat.Row, seat.Number}]
			if !ok {
				return fmt.Errorf("seat %d: inserted but not found", i)
			}
			ids[i] = id
		}
		return nil
	})
	if err != nil {
		return nil, booking.Refused(wrap(op, err), booking.ErrSeatExists)
	}
	return ids, nil
}

// Seats lists a schedule's seats ordered by id.
func (s *Store) Seats(ctx context.Context, scheduleID int64) ([]booking.Seat, error) {
	op := fmt.Sprintf("seats of schedule %d", scheduleID)
	rows, err := s.db.QueryContext(ctx, `
		SELECT seat_id, section, seat_row, seat_number, price, status, COALESCE(reservation_id, '')
		  FROM seat WHERE schedule_id = ? ORDER BY seat_id`, scheduleID)
	out, err := collect(rows, err, op, func(rows *sql.Rows) (booking.Seat, error) {
		seat := booking.Seat{ScheduleID: scheduleID}
		err := rows.Scan(&seat.ID, &seat.Section, &seat.Row, &seat.Number, &seat.Price, &seat.Status, &seat.ReservationID)
		return seat, err
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 { // none, or no such schedule
		if _, err := s.Schedule(ctx, scheduleID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SeatStates implements booking.SeatStater.
func (s *Store) SeatStates(ctx context.Context, scheduleID int64) (int, []booking.SeatState, error) {
	op := fmt.Sprintf("seat states of schedule %d", scheduleID)
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM seat WHERE schedule_id = ?`, scheduleID).Scan(&total); err != nil {
		return 0, nil, wrap(op, err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seat_id, status FROM seat WHERE schedule_id = ? AND status <> 'AVAILABLE' ORDER BY seat_id`, scheduleID)
	taken, err := collect(rows, err, op, func(rows *sql.Rows) (booking.SeatState, error) {
		var st booking.SeatState
		err := rows.Scan(&st.ID, &st.Status)
		return st, err
	})
	if err != nil {
		return 0, nil, err
	}
	if total == 0 { // none, or no such schedule
		if _, err := s.Schedule(ctx, scheduleID); err != nil {
			return 0, nil, err
		}
	}
	return total, taken, nil
}

// inTx runs f in a transaction, committed if f returns nil.
func (s *Store) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		return errors.Join(err, rollback(tx))
	}
	return tx.Commit()
}

// rollback rolls tx back; a transaction already done is no error.
func rollback(tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// placeholders returns n copies of group joined by commas.
func placeholders(n int, group string) string {
	return strings.TrimSuffix(strings.Repeat(group+",", n), ",")
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

// wrap adds the operation to err and classifies it: no rows and foreign
// key violations become booking.ErrNotFound, other constraint violations
// and bad values booking.ErrInvalid, failures to reach the server
// booking.ErrUnavailable.
func wrap(op string, err error) error {
	switch {
	case errors.Is(err, booking.ErrNotFound), errors.Is(err, booking.ErrInvalid), errors.Is(err, booking.ErrUnavailable):
		return fmt.Errorf("mysqlbooking: %s: %w", op, err)
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("mysqlbooking: %s: %w", op, booking.ErrNotFound)
	case mysqldb.Unavailable(err):
		return fmt.Errorf("mysqlbooking: %s: %w: %w", op, booking.ErrUnavailable, err)
	case mysqldb.Code(err) == mysqldb.ErNoReferenced:
		return fmt.Errorf("mysqlbooking: %s: %w: %w", op, booking.ErrNotFound, err)
	case mysqldb.Invalid(err):
		return fmt.Errorf("mysqlbooking: %s: %w: %w", op, booking.ErrInvalid, err)
	}
	return fmt.Errorf("mysqlbooking: %s: %w", op, err)
}
