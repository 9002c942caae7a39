package mysqlbooking

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
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
//  3. the sale, by the contract's conditional UPDATE, on one of two paths:
//     - set path, for the usual batch (no seat wanted twice, no id twice,
//       no stock, every seat list well formed): one UPDATE … JOIN of the
//       wanted seats for the whole batch (up to insertChunk seats a
//       statement), then one SELECT of those seats: a reservation is
//       confirmed if every one of its seats now carries its id. One that
//       got some of its seats but not all rolls the transaction back, and
//       the batch runs again on the other path;
//     - pipeline path: per reservation, one conditional UPDATE of all its
//       seats (clientFoundRows: the row count is the rows it matched),
//       inside a SAVEPOINT when it has several, rolled back when the count
//       falls short, so a partial sale never stays;
//     a rejection says seat_unknown if a seat is not the schedule's, else
//     seat_taken;
//  4. one multi-row INSERT of the decisions, then one INSERT … SELECT of
//     their events into the outbox (outboxStmt) in the same transaction.
//
// Reservations with a buyer limit count their tickets to their buyer
// first, after step 1 (countBuyers: a conditional UPDATE each); one over
// the limit takes the pipeline path, rejected there, and the counts of
// those not confirmed are taken back before step 4 (uncount).
//
// A reservation id twice in a batch: the second is a redelivery of the
// first. Two calls deciding the same new id at once: the second's INSERT
// hits the primary key (1062) and its whole transaction is rolled back and
// run again, when step 1 finds the first's decision. A deadlock (1213, or
// 1467 from InnoDB's AUTO-INC lock, which MariaDB reports so) is retried
// the same way.

// outboxStmt writes the events of the decisions just inserted (the ids in
// the IN list, which the caller appends): what pgbooking's and
// sqlitebooking's triggers write, as one statement per batch (MySQL has
// no statement-level trigger). CONCAT_WS skips the NULL (zero) fields.
// The amount reads the seats by their primary key only, through
// JSON_TABLE (MySQL 8.0, MariaDB 10.6 and later). In READ COMMITTED the
// SELECT locks nothing, so the statement waits for no other transaction.
const outboxStmt = `
	INSERT INTO outbox (event_id, type, room, at, visitor, data)
	SELECT CONCAT(r.reservation_id, '.', r.status),
	       CONCAT('reservation_', r.status),
	       COALESCE(s.room, CONCAT('schedule-', r.schedule_id)),
	       r.decided_at,
	       r.visitor,
	       CONCAT('{', CONCAT_WS(',',
	           CONCAT('"reservation":', JSON_QUOTE(CONVERT(r.reservation_id USING utf8mb4))),
	           CONCAT('"schedule":', NULLIF(r.schedule_id, 0)),
	           CONCAT('"units":', NULLIF(IF(r.quantity <> 0, r.quantity, JSON_LENGTH(r.seat_ids)), 0)),
	           CONCAT('"amount":', IF(r.status = 'confirmed' AND r.quantity = 0, NULLIF((
	               SELECT SUM(p.price) FROM JSON_TABLE(r.seat_ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
	                 JOIN seat p ON p.seat_id = j.id), 0), NULL))
	       ), '}')
	  FROM reservation r LEFT JOIN schedule s ON s.schedule_id = r.schedule_id
	 WHERE r.reservation_id IN `

// maxAttempts bounds the runs of one Decide call.
const maxAttempts = 3

const selectReservation = `
	SELECT reservation_id, visitor, schedule_id, seat_ids, quantity, status, reason, created_at, decided_at
	  FROM reservation`

// errDecidedConcurrently: another call stored one of the batch's ids first.
var errDecidedConcurrently = errors.New("decided concurrently")

// errPartial: the set path sold part of a reservation; the batch runs
// again on the pipeline path.
var errPartial = errors.New("partial sale")

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
	set := !s.pipelineOnly
	for attempt := 1; ; attempt++ {
		var out []booking.Reservation
		err := s.inTx(ctx, func(tx *sql.Tx) (err error) {
			out, err = decide(ctx, tx, reqs, set)
			return err
		})
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, errPartial) && set:
			set = false
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

// decide runs one attempt in tx, on the set path if set and the batch
// allows it.
func decide(ctx context.Context, tx *sql.Tx, reqs []booking.Reservation, set bool) ([]booking.Reservation, error) {
	stored, err := storedReservations(ctx, tx, reqs)
	if err != nil {
		return nil, err
	}
	buyers, err := countBuyers(ctx, tx, reqs, stored)
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
	seats, stocks = sortedSet(seats), sortedSet(stocks)
	if err := lock(ctx, tx, `SELECT seat_id FROM seat WHERE seat_id IN (%s) ORDER BY seat_id FOR UPDATE`, seats); err != nil {
		return nil, err
	}
	if err := lock(ctx, tx, `SELECT schedule_id FROM stock WHERE schedule_id IN (%s) ORDER BY schedule_id FOR UPDATE`, stocks); err != nil {
		return nil, err
	}
	var fresh []booking.Reservation
	for _, r := range reqs {
		if _, ok := stored[r.ID]; !ok {
			fresh = append(fresh, r)
		}
	}
	if set && len(fresh) > 1 && len(buyers.over) == 0 && setEligible(fresh, len(seats)) {
		if err := sellSet(ctx, tx, fresh, seats); err != nil {
			return nil, err
		}
		if err := buyers.uncount(ctx, tx, fresh); err != nil {
			return nil, err
		}
		out := make([]booking.Reservation, len(reqs))
		next := fresh
		for i, r := range reqs {
			if d, ok := stored[r.ID]; ok {
				out[i] = d
			} else {
				out[i], next = next[0], next[1:]
			}
		}
		return out, insertDecisions(ctx, tx, fresh)
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
		switch {
		case buyers.over[r.ID]:
			r.Status, r.Reason = booking.Rejected, booking.ReasonBuyerLimit
		case r.Quantity != 0:
			r.Status, r.Reason, err = sellStock(ctx, tx, r)
		default:
			r.Status, r.Reason, err = sellSeats(ctx, tx, r)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.ID, err)
		}
		out[i] = r
		decided = append(decided, r)
	}
	if err := buyers.uncount(ctx, tx, decided); err != nil {
		return nil, err
	}
	return out, insertDecisions(ctx, tx, decided)
}

// buyers is what countBuyers did: the reservations (by id) whose tickets
// it counted, and those over their buyer's limit.
type buyers struct{ counted, over map[string]bool }

// countBuyers counts the tickets of reqs' new reservations that carry a
// buyer limit, each once, with the contract's conditional UPDATE of the
// buyer's row (made first if missing), buyers in (schedule, buyer) order
// so that concurrent calls lock the rows in one order, before any seat.
func countBuyers(ctx context.Context, tx *sql.Tx, reqs []booking.Reservation, stored map[string]booking.Reservation) (buyers, error) {
	bs := buyers{counted: map[string]bool{}, over: map[string]bool{}}
	var limited []booking.Reservation
	seen := map[string]bool{}
	for _, r := range reqs {
		if _, ok := stored[r.ID]; !ok && r.BuyerLimit > 0 && booking.Tickets(r) > 0 && !seen[r.ID] {
			limited = append(limited, r)
		}
		seen[r.ID] = true
	}
	slices.SortStableFunc(limited, func(a, b booking.Reservation) int {
		return cmp.Or(cmp.Compare(a.ScheduleID, b.ScheduleID), cmp.Compare(a.Visitor, b.Visitor))
	})
	for _, r := range limited {
		if _, err := tx.ExecContext(ctx, `INSERT INTO buyer_tickets (schedule_id, buyer, tickets) VALUES (?, ?, 0)
			ON DUPLICATE KEY UPDATE tickets = tickets`, r.ScheduleID, r.Visitor); err != nil {
			return bs, err
		}
		n := booking.Tickets(r)
		res, err := tx.ExecContext(ctx, `UPDATE buyer_tickets SET tickets = tickets + ?
			WHERE schedule_id = ? AND buyer = ? AND tickets + ? <= ?`, n, r.ScheduleID, r.Visitor, n, r.BuyerLimit)
		if err != nil {
			return bs, err
		}
		if matched, err := res.RowsAffected(); err != nil {
			return bs, err
		} else if matched == 1 {
			bs.counted[r.ID] = true
		} else {
			bs.over[r.ID] = true
		}
	}
	return bs, nil
}

// uncount takes back the tickets of the counted reservations of decided
// that were not confirmed.
func (bs buyers) uncount(ctx context.Context, tx *sql.Tx, decided []booking.Reservation) error {
	for _, r := range decided {
		if bs.counted[r.ID] && r.Status != booking.Confirmed {
			if _, err := tx.ExecContext(ctx, `UPDATE buyer_tickets SET tickets = tickets - ? WHERE schedule_id = ? AND buyer = ?`,
				booking.Tickets(r), r.ScheduleID, r.Visitor); err != nil {
				return err
			}
		}
	}
	return nil
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

// setEligible reports whether sellSet may decide rs: seat reservations
// only, every one well formed, no id twice, no seat wanted twice (seats
// lists every seat wanted). Otherwise the order of the batch matters
// between its reservations and the pipeline path keeps it.
func setEligible(rs []booking.Reservation, seats int) bool {
	n := 0
	ids := make(map[string]bool, len(rs))
	for _, r := range rs {
		if r.Quantity != 0 || ids[r.ID] || booking.Malformed(r.SeatIDs) != "" {
			return false
		}
		ids[r.ID] = true
		n += len(r.SeatIDs)
	}
	return n == seats
}

// sellSet sells the seats of rs with the contract's conditional UPDATE
// joined to the wanted seats, then reads those seats back (they are
// locked: nothing else changed them) and sets each reservation's status in
// rs. errPartial if one got some of its seats but not all.
func sellSet(ctx context.Context, tx *sql.Tx, rs []booking.Reservation, seats []any) error {
	type want struct {
		seat, schedule int64
		id             []byte
	}
	var wants []want
	for _, r := range rs {
		for _, seat := range r.SeatIDs {
			wants = append(wants, want{seat, r.ScheduleID, []byte(r.ID)})
		}
	}
	for start := 0; start < len(wants); start += insertChunk {
		part := wants[start:min(start+insertChunk, len(wants))]
		args := make([]any, 0, 3*len(part))
		for _, w := range part {
			args = append(args, w.seat, w.schedule, w.id)
		}
		rows := `SELECT ? AS seat_id, ? AS schedule_id, ? AS reservation_id` +
			strings.Repeat(` UNION ALL SELECT ?, ?, ?`, len(part)-1)
		if _, err := tx.ExecContext(ctx, `UPDATE seat JOIN (`+rows+`) AS want
			ON seat.seat_id = want.seat_id AND seat.schedule_id = want.schedule_id
			SET seat.status = 'SOLD', seat.reservation_id = want.reservation_id
			WHERE seat.status IN ('AVAILABLE', 'HELD')`, args...); err != nil {
			return err
		}
	}
	type seatNow struct {
		schedule int64
		owner    string
	}
	after := make(map[int64]seatNow, len(seats))
	q, err := tx.QueryContext(ctx, `SELECT seat_id, schedule_id, reservation_id FROM seat WHERE seat_id IN (`+
		placeholders(len(seats), "?")+`)`, seats...)
	if err != nil {
		return err
	}
	defer q.Close()
	for q.Next() {
		var id int64
		var sn seatNow
		var owner []byte
		if err := q.Scan(&id, &sn.schedule, &owner); err != nil {
			return err
		}
		sn.owner = string(owner)
		after[id] = sn
	}
	if err := q.Err(); err != nil {
		return err
	}
	for i, r := range rs {
		known, sold := 0, 0
		for _, seat := range r.SeatIDs {
			if sn, ok := after[seat]; ok && sn.schedule == r.ScheduleID {
				known++
				if sn.owner == r.ID {
					sold++
				}
			}
		}
		switch {
		case sold == len(r.SeatIDs):
			r.Status, r.Reason = booking.Confirmed, ""
		case sold > 0:
			return fmt.Errorf("%s: %w", r.ID, errPartial)
		case known < len(r.SeatIDs):
			r.Status, r.Reason = booking.Rejected, booking.ReasonSeatUnknown
		default:
			r.Status, r.Reason = booking.Rejected, booking.ReasonSeatTaken
		}
		rs[i] = r
	}
	return nil
}

// sortedSet sorts ids (int64s) and removes duplicates.
func sortedSet(ids []any) []any {
	slices.SortFunc(ids, func(a, b any) int { return cmp.Compare(a.(int64), b.(int64)) })
	return slices.Compact(ids)
}

// lock runs a locking SELECT (query has one %s for the list) over ids,
// sorted and without duplicates; none, nothing.
func lock(ctx context.Context, tx *sql.Tx, query string, ids []any) error {
	if len(ids) == 0 {
		return nil
	}
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

// insertDecisions stores the decisions in chunks of multi-row INSERTs,
// each followed by the outbox events of its rows; a primary key already
// taken means another call decided one of them first.
func insertDecisions(ctx context.Context, tx *sql.Tx, rs []booking.Reservation) error {
	const cols = 9
	for start := 0; start < len(rs); start += insertChunk {
		chunk := rs[start:min(start+insertChunk, len(rs))]
		args := make([]any, 0, cols*len(chunk))
		ids := make([]any, len(chunk))
		for i, r := range chunk {
			args = append(args, []byte(r.ID), r.Visitor, r.ScheduleID, booking.EncodeSeatIDs(r.SeatIDs), r.Quantity,
				string(r.Status), r.Reason, r.CreatedAt, r.DecidedAt)
			ids[i] = []byte(r.ID)
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
		if _, err := tx.ExecContext(ctx, outboxStmt+`(`+placeholders(len(ids), "?")+`)`, ids...); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
	}
	return nil
}

// BuyerTickets returns the tickets counted to visitor for the schedule.
func (s *Store) BuyerTickets(ctx context.Context, scheduleID int64, visitor string) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT tickets FROM buyer_tickets WHERE schedule_id = ? AND buyer = ?`, scheduleID, visitor).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, wrap(fmt.Sprintf("tickets of %s in schedule %d", visitor, scheduleID), err)
	}
	return n, nil
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
	r.SeatIDs, err = booking.DecodeSeatIDs(seats)
	return r, err
}
