package mysqlbooking

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"usher/internal/booking"
	"usher/internal/mysqldb"
)

// How Decide works. One call is one transaction on one connection:
//
//  1. one SELECT of the batch's reservations already stored (redeliveries,
//     answered from storage);
//  2. one SELECT … FOR UPDATE of the batch's seats in seat id order (and
//     one of its stock rows in schedule order), so that concurrent calls
//     take their row locks in one global order: overlapping batches wait
//     for each other but do not deadlock;
//  3. per reservation, the contract's conditional UPDATE of all its seats
//     in one statement (clientFoundRows: the row count is the rows it
//     matched). A reservation of several seats runs inside a SAVEPOINT,
//     rolled back when the count falls short, so a partial sale never
//     stays. The count alone decides: confirmed if it is the number of
//     seats, else rejected (seat_unknown if a seat is not the schedule's,
//     else seat_taken);
//  4. one multi-row INSERT of the decisions, whose row trigger writes the
//     outbox.
//
// A reservation id twice in a batch: the second is a redelivery of the
// first. Two calls deciding the same new id at once: the second's INSERT
// hits the primary key (1062) and its whole transaction is rolled back and
// run again, when step 1 finds the first's decision. A deadlock (1213, or
// 1467 from InnoDB's AUTO-INC lock; possible only with writers other than
// Decide) is retried the same way.

// maxAttempts bounds the runs of one Decide call.
const maxAttempts = 3

const selectReservation = `
	SELECT reservation_id, visitor, schedule_id, seat_ids, quantity, status, reason, created_at, decided_at
	  FROM reservation`

// errDecidedConcurrently: another call stored one of the batch's ids first.
var errDecidedConcurrently = errors.New("decided concurrently")

// Decide decides rs in order in one transaction; see the comment above.
func (s *Store) Decide(ctx context.Context, rs []booking.Reservation) ([]booking.Reservation, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	decidedAt := now()
	reqs := make([]booking.Reservation, len(rs))
	for i, r := range rs {
		if r.ID == "" {
			return nil, fmt.Errorf("mysqlbooking: decide: reservation %d has no id: %w", i, booking.ErrInvalid)
		}
		if r.CreatedAt.IsZero() {
			r.CreatedAt = decidedAt
		}
		r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Microsecond)
		r.DecidedAt = decidedAt
		if len(r.SeatIDs) == 0 {
			r.SeatIDs = nil
		}
		reqs[i] = r
	}
	op := fmt.Sprintf("decide %d reservations", len(rs))
	for attempt := 1; ; attempt++ {
		var out []booking.Reservation
		err := s.inTx(ctx, func(tx *sql.Tx) (err error) {
			out, err = decide(ctx, tx, reqs)
			return err
		})
		switch {
		case err == nil:
			return out, nil
		case retryable(err) && attempt < maxAttempts:
		default:
			return nil, wrap(op, err)
		}
	}
}

func retryable(err error) bool {
	return errors.Is(err, errDecidedConcurrently) || mysqldb.Code(err) == mysqldb.ErDeadlock ||
		mysqldb.Code(err) == mysqldb.ErAutoIncRead
}

// decide runs one attempt in tx.
func decide(ctx context.Context, tx *sql.Tx, reqs []booking.Reservation) ([]booking.Reservation, error) {
	stored, err := storedReservations(ctx, tx, reqs)
	if err != nil {
		return nil, err
	}
	var seats, stocks []any
	for _, r := range reqs {
		if _, ok := stored[r.ID]; ok {
			continue
		}
		if r.Quantity != 0 {
			stocks = append(stocks, r.ScheduleID)
		}
		for _, id := range r.SeatIDs {
			seats = append(seats, id)
		}
	}
	if err := lock(ctx, tx, `SELECT seat_id FROM seat WHERE seat_id IN (%s) ORDER BY seat_id FOR UPDATE`, seats); err != nil {
		return nil, err
	}
	if err := lock(ctx, tx, `SELECT schedule_id FROM stock WHERE schedule_id IN (%s) ORDER BY schedule_id FOR UPDATE`, stocks); err != nil {
		return nil, err
	}
	out := make([]booking.Reservation, len(reqs))
	first := make(map[string]int, len(reqs))
	var decided []booking.Reservation
	for i, r := range reqs {
		if d, ok := stored[r.ID]; ok {
			out[i] = d
			continue
		}
		if j, ok := first[r.ID]; ok { // a redelivery within the batch
			out[i] = out[j]
			continue
		}
		first[r.ID] = i
		if r.Quantity != 0 {
			r.Status, r.Reason, err = sellStock(ctx, tx, r)
		} else {
			r.Status, r.Reason, err = sellSeats(ctx, tx, r)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.ID, err)
		}
		out[i] = r
		decided = append(decided, r)
	}
	return out, insertDecisions(ctx, tx, decided)
}

// storedReservations returns the reservations of reqs already decided, by
// id.
func storedReservations(ctx context.Context, tx *sql.Tx, reqs []booking.Reservation) (map[string]booking.Reservation, error) {
	ids := make([]any, len(reqs))
	for i, r := range reqs {
		ids[i] = []byte(r.ID)
	}
	rows, err := tx.QueryContext(ctx, selectReservation+` WHERE reservation_id IN (`+placeholders(len(ids), "?")+`)`, ids...)
	found, err := collect(rows, err, "stored reservations", scanReservation)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]booking.Reservation, len(found))
	for _, r := range found {
		byID[r.ID] = r
	}
	return byID, nil
}

// lock runs a locking SELECT (query has one %s for the list) over ids
// sorted and without duplicates; none, nothing.
func lock(ctx context.Context, tx *sql.Tx, query string, ids []any) error {
	if len(ids) == 0 {
		return nil
	}
	slices.SortFunc(ids, func(a, b any) int { return cmp.Compare(a.(int64), b.(int64)) })
	ids = slices.Compact(ids)
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(query, placeholders(len(ids), "?")), ids...)
	if err != nil {
		return err
	}
	return rows.Close()
}

// sellSeats sells every seat of r with one conditional UPDATE, or none.
func sellSeats(ctx context.Context, tx *sql.Tx, r booking.Reservation) (booking.ReservationStatus, string, error) {
	if reason := booking.Malformed(r.SeatIDs); reason != "" {
		return booking.Rejected, reason, nil
	}
	args := []any{[]byte(r.ID), r.ScheduleID}
	for _, id := range r.SeatIDs {
		args = append(args, id)
	}
	many := len(r.SeatIDs) > 1
	if many {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT sell`); err != nil {
			return "", "", err
		}
	}
	res, err := tx.ExecContext(ctx, `UPDATE seat SET status = 'SOLD', reservation_id = ?
		WHERE schedule_id = ? AND seat_id IN (`+placeholders(len(r.SeatIDs), "?")+`) AND status IN ('AVAILABLE', 'HELD')`, args...)
	if err != nil {
		return "", "", err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return "", "", err
	}
	if n == int64(len(r.SeatIDs)) {
		if many {
			_, err = tx.ExecContext(ctx, `RELEASE SAVEPOINT sell`)
		}
		return booking.Confirmed, "", err
	}
	if many && n > 0 {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT sell`); err != nil {
			return "", "", err
		}
	}
	var known int
	err = tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM seat WHERE schedule_id = ? AND seat_id IN (`+
		placeholders(len(r.SeatIDs), "?")+`)`, args[1:]...).Scan(&known)
	if err != nil {
		return "", "", err
	}
	if known < len(r.SeatIDs) {
		return booking.Rejected, booking.ReasonSeatUnknown, nil
	}
	return booking.Rejected, booking.ReasonSeatTaken, nil
}

// sellStock sells r's quantity of its schedule's stock with the
// contract's conditional UPDATE, or nothing.
func sellStock(ctx context.Context, tx *sql.Tx, r booking.Reservation) (booking.ReservationStatus, string, error) {
	if r.Quantity < 0 || len(r.SeatIDs) > 0 {
		return booking.Rejected, booking.ReasonSoldOut, nil
	}
	res, err := tx.ExecContext(ctx, `UPDATE stock SET sold = sold + ? WHERE schedule_id = ? AND sold + ? <= total`,
		r.Quantity, r.ScheduleID, r.Quantity)
	if err != nil {
		return "", "", err
	}
	if n, err := res.RowsAffected(); err != nil {
		return "", "", err
	} else if n == 0 {
		return booking.Rejected, booking.ReasonSoldOut, nil
	}
	return booking.Confirmed, "", nil
}

// insertDecisions stores the decisions in chunks of multi-row INSERTs; a
// primary key already taken means another call decided one of them first.
func insertDecisions(ctx context.Context, tx *sql.Tx, rs []booking.Reservation) error {
	const cols = 9
	for start := 0; start < len(rs); start += insertChunk {
		chunk := rs[start:min(start+insertChunk, len(rs))]
		args := make([]any, 0, cols*len(chunk))
		for _, r := range chunk {
			args = append(args, []byte(r.ID), r.Visitor, r.ScheduleID, encodeSeats(r.SeatIDs), r.Quantity,
				string(r.Status), r.Reason, r.CreatedAt, r.DecidedAt)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO reservation
			(reservation_id, visitor, schedule_id, seat_ids, quantity, status, reason, created_at, decided_at) VALUES `+
			placeholders(len(chunk), "(?, ?, ?, ?, ?, ?, ?, ?, ?)"), args...)
		if mysqldb.Code(err) == mysqldb.ErDupEntry {
			return fmt.Errorf("%w: %w", errDecidedConcurrently, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Reservation returns a decided reservation.
func (s *Store) Reservation(ctx context.Context, id string) (booking.Reservation, error) {
	rows, err := s.db.QueryContext(ctx, selectReservation+` WHERE reservation_id = ?`, []byte(id))
	found, err := collect(rows, err, "reservation "+id, scanReservation)
	if err != nil {
		return booking.Reservation{}, err
	}
	if len(found) == 0 {
		return booking.Reservation{}, fmt.Errorf("mysqlbooking: reservation %s: %w", id, booking.ErrNotFound)
	}
	return found[0], nil
}

func scanReservation(rows *sql.Rows) (booking.Reservation, error) {
	var r booking.Reservation
	var id []byte
	var seats string
	if err := rows.Scan(&id, &r.Visitor, &r.ScheduleID, &seats, &r.Quantity, &r.Status, &r.Reason, &r.CreatedAt, &r.DecidedAt); err != nil {
		return r, err
	}
	r.ID = string(id)
	var err error
	r.SeatIDs, err = decodeSeats(seats)
	return r, err
}
